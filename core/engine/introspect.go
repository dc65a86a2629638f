package engine

import (
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// The Backend answers loop.Introspector from what it read at load (the
// tokenizer holds its own copy of the vocabulary), so none of this touches
// the model file or the engine goroutine's state.
var _ loop.Introspector = (*Backend)(nil)

// tokenText is the text of a special token for a chat template's
// bos_token/eos_token ("" for an absent id).
func tokenText(tok *tokenizer.Tokenizer, id int32) string {
	if id < 0 {
		return ""
	}
	return string(tok.Decode([]int32{id}, false))
}

// modelInfo gathers the metadata once, at load.
func modelInfo(f *gguf.File, cfg model.Config, tok *tokenizer.Tokenizer, ctx int) loop.ModelInfo {
	info := loop.ModelInfo{Architecture: cfg.Arch, ContextLength: cfg.ContextTrain,
		RuntimeContext: ctx, VocabSize: tok.Size(), SpecialTokens: []loop.SpecialToken{}}
	if name, err := f.String("general.name"); err == nil {
		info.Name = name
	}
	special := func(id int32) loop.SpecialToken {
		return loop.SpecialToken{ID: id, Text: tokenText(tok, id), EndOfGeneration: tok.EOG(id)}
	}
	if id := tok.BOS(); id >= 0 {
		t := special(id)
		info.BOS = &t
	}
	if id := tok.EOS(); id >= 0 {
		t := special(id)
		info.EOS = &t
	}
	for id := range int32(tok.Size()) {
		if tok.IsSpecial(id) || tok.EOG(id) {
			info.SpecialTokens = append(info.SpecialTokens, special(id))
		}
	}
	return info
}

// Tokenize is Prepare's tokenization of a prompt, without its length
// checks: counting a text too long for the context is a fair question.
func (b *Backend) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	ids := b.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial})
	if ids == nil {
		ids = []int32{}
	}
	return ids, nil
}

func (b *Backend) Detokenize(ids []int32, skipSpecial bool) ([]byte, error) {
	for i, id := range ids {
		if id < 0 || int(id) >= b.tok.Size() {
			return nil, status.Errorf(status.InvalidArgument, "token %d (at index %d) is not in the vocabulary of %d tokens", id, i, b.tok.Size())
		}
	}
	return b.tok.Decode(ids, skipSpecial), nil
}

func (b *Backend) ModelInfo() loop.ModelInfo { return b.info }

// RenderChat renders messages as a request's "messages" are, with its
// chat options: the same text lms_submit tokenizes, down to the special
// token that opens a forced call in some syntaxes (Mistral's
// [TOOL_CALLS]), and the same errors.
func (b *Backend) RenderChat(msgs []loop.Message, addGenerationPrompt bool, opts *loop.ChatOptions) (string, error) {
	if opts == nil {
		opts = &loop.ChatOptions{}
	}
	text, _, err := b.renderChat(msgs, addGenerationPrompt, opts)
	if err != nil {
		return "", err
	}
	if addGenerationPrompt && forcesCalls(opts) {
		_, prefix, err := b.forcedSyntax(opts)
		if err != nil {
			return "", err
		}
		text += prefix
	}
	return text, nil
}
