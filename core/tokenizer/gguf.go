package tokenizer

import (
	"errors"
	"fmt"
	"math"

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
	sep := int32(-1)
	if cfg.Model == "bert" {
		bertDefaults(&cfg, &sep, len(tokens))
	}
	if cfg.EOG, err = specialIDs(f, &cfg, &sep, len(tokens)); err != nil {
		return cfg, err
	}
	if cfg.Model == "bert" {
		return cfg, bertOptions(f, &cfg, sep)
	}
	spm := cfg.Model == "llama"
	// llama.cpp adds BOS by default for SentencePiece and for the
	// byte-level vocabularies of a few pre-tokenizers (Llama-3's, tekken).
	addBOS := spm || (cfg.Model == "gpt2" && defaultAddBOS(cfg.Pre))
	for key, p := range map[string]struct {
		dst *bool
		def bool
	}{
		"tokenizer.ggml.add_bos_token":    {&cfg.AddBOS, addBOS},
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

// specialIDs reads the special token ids into cfg and returns the extra
// end-of-generation ids (end of turn, end of message). Each id is read at
// its full width and must name a token of the vocabulary: a uint32
// 0xFFFFFFFF, a uint64 2^32+2 or an int64 -2^40 is an error naming the key,
// not the token -1, 2 or 0 that a cut to 32 bits would make of it. A
// signed -1 is the one "no such token" a file may state explicitly (what
// Config uses for an absent id); llama.cpp's writers leave the key out.
func specialIDs(f *gguf.File, cfg *Config, sep *int32, vocab int) ([]int32, error) {
	var eog []int32
	for _, k := range []struct {
		key string
		dst *int32 // nil: checked, and for eog kept, but not otherwise used
		eog bool
	}{
		{"tokenizer.ggml.bos_token_id", &cfg.BOS, false},
		{"tokenizer.ggml.eos_token_id", &cfg.EOS, false},
		{"tokenizer.ggml.unknown_token_id", &cfg.UNK, false},
		{"tokenizer.ggml.padding_token_id", &cfg.PAD, false},
		{"tokenizer.ggml.eot_token_id", nil, true},
		{"tokenizer.ggml.eom_token_id", nil, true},
		{"tokenizer.ggml.seperator_token_id", sep, false}, // sic: the GGUF spec's spelling
		{"tokenizer.ggml.separator_token_id", nil, false},
		{"tokenizer.ggml.cls_token_id", nil, false},
		{"tokenizer.ggml.mask_token_id", nil, false},
	} {
		// min: a vocabulary past int32 ids is New's error to give.
		v, err := f.IntRange(k.key, -1, min(vocab, math.MaxInt32)-1)
		switch {
		case errors.Is(err, gguf.ErrKeyNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("tokenizer: special token id: %w (the vocabulary has %d tokens)", err, vocab)
		}
		if k.dst != nil {
			*k.dst = int32(v) // in [-1, vocab), and vocab fits an int32
		}
		if k.eog && v >= 0 {
			eog = append(eog, int32(v))
		}
	}
	return eog, nil
}

// bertDefaults sets the special ids a WordPiece file need not state, as
// llama.cpp assumes them for BERT's vocabulary ([PAD] 0, [UNK] 100, [CLS]
// 101, [SEP] 102), each only where the vocabulary is large enough.
func bertDefaults(cfg *Config, sep *int32, vocab int) {
	for _, d := range []struct {
		dst *int32
		id  int32
	}{{&cfg.PAD, 0}, {&cfg.UNK, 100}, {&cfg.BOS, 101}, {sep, 102}} {
		if int(d.id) < vocab {
			*d.dst = d.id
		}
	}
}

// bertOptions reads what a WordPiece vocabulary adds. Encoding with
// specials gives [CLS] text [SEP], as llama.cpp does whatever the file's
// add_* flags say; Config's BOS is CLS (llama.cpp reads the BOS key, not
// the CLS key, for it) and its EOS is SEP, the token that ends an input.
// An EOS the file names besides still ends generation. The normaliser
// lower-cases unless told not to, and strips accents exactly when it
// lower-cases unless that is stated separately.
func bertOptions(f *gguf.File, cfg *Config, sep int32) error {
	if cfg.EOS >= 0 && cfg.EOS != sep {
		cfg.EOG = append(cfg.EOG, cfg.EOS)
	}
	cfg.EOS = sep
	cfg.AddBOS, cfg.AddEOS = cfg.BOS >= 0, sep >= 0
	var err error
	if cfg.Lowercase, err = boolOr(f, "tokenizer.ggml.normalizer.lowercase", true); err != nil {
		return err
	}
	cfg.StripAccents, err = boolOr(f, "tokenizer.ggml.normalizer.strip_accents", cfg.Lowercase)
	return err
}

func boolOr(f *gguf.File, key string, def bool) (bool, error) {
	v, err := f.Bool(key)
	switch {
	case errors.Is(err, gguf.ErrKeyNotFound):
		return def, nil
	case err != nil:
		return false, fmt.Errorf("tokenizer: %w", err)
	}
	return v, nil
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
