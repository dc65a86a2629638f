package tokenizer

import (
	"errors"
	"fmt"

	"github.com/lmstream/lmstream/core/gguf"
)

// ConfigFromGGUF reads the tokenizer.* metadata of a GGUF file. Missing
// optional keys take the defaults GGUF writers assume (SentencePiece models
// add BOS and a space prefix unless told otherwise).
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	cfg := Config{BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	var err error
	if cfg.Model, err = f.String("tokenizer.ggml.model"); err != nil {
		return cfg, fmt.Errorf("tokenizer: %w", err)
	}
	if cfg.Pre, err = optional(f.String("tokenizer.ggml.pre")); err != nil {
		return cfg, fmt.Errorf("tokenizer: %w", err)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return cfg, fmt.Errorf("tokenizer: %w", err)
	}
	cfg.Tokens = make([][]byte, len(tokens))
	for i, t := range tokens {
		cfg.Tokens[i] = []byte(t)
	}
	if cfg.Scores, err = optional(f.Float32s("tokenizer.ggml.scores")); err != nil {
		return cfg, fmt.Errorf("tokenizer: %w", err)
	}
	if cfg.Types, err = optional(f.Int32s("tokenizer.ggml.token_type")); err != nil {
		return cfg, fmt.Errorf("tokenizer: %w", err)
	}
	if cfg.Merges, err = optional(f.Strings("tokenizer.ggml.merges")); err != nil {
		return cfg, fmt.Errorf("tokenizer: %w", err)
	}
	for key, dst := range map[string]*int32{
		"tokenizer.ggml.bos_token_id":     &cfg.BOS,
		"tokenizer.ggml.eos_token_id":     &cfg.EOS,
		"tokenizer.ggml.unknown_token_id": &cfg.UNK,
		"tokenizer.ggml.padding_token_id": &cfg.PAD,
	} {
		v, err := f.Int(key)
		if errors.Is(err, gguf.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return cfg, fmt.Errorf("tokenizer: %w", err)
		}
		*dst = int32(v)
	}
	spm := cfg.Model == "llama"
	for key, p := range map[string]struct {
		dst *bool
		def bool
	}{
		"tokenizer.ggml.add_bos_token":    {&cfg.AddBOS, spm},
		"tokenizer.ggml.add_eos_token":    {&cfg.AddEOS, false},
		"tokenizer.ggml.add_space_prefix": {&cfg.AddSpacePrefix, spm},
	} {
		v, err := f.Bool(key)
		switch {
		case errors.Is(err, gguf.ErrKeyNotFound):
			*p.dst = p.def
		case err != nil:
			return cfg, fmt.Errorf("tokenizer: %w", err)
		default:
			*p.dst = v
		}
	}
	return cfg, nil
}

// FromGGUF builds the tokenizer a GGUF file describes.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	cfg, err := ConfigFromGGUF(f)
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// optional turns a missing key into the zero value.
func optional[T any](v T, err error) (T, error) {
	if errors.Is(err, gguf.ErrKeyNotFound) {
		var zero T
		return zero, nil
	}
	return v, err
}
