package engine

import (
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/streaming"
)

// Prepare renders and tokenizes each prompt, and checks it fits.
func (b *Backend) Prepare(req *loop.Request) ([]loop.Prepared, error) {
	// The request's sampling fields were parsed, checked and made
	// canonical once (loop.Request.Sampling); New adds what needs the
	// vocabulary (a top_k of at least its size is off).
	p := req.Sampling
	smp, err := sample.New(p, b.tok.Size())
	if err != nil {
		return nil, status.Errorf(status.InvalidRequest, "request: %v", err)
	}
	// The parameters as the sampler canonicalised them for this vocabulary
	// (the temperature was already: below sample.MinTemperature it is 0,
	// so the slot decodes and speculates as the greedy request it is).
	p = smp.Params()
	it, err := b.specItem(req, p)
	if err != nil {
		return nil, err
	}
	it.logprobs, it.topLogprobs = req.Logprobs, req.TopLogprobs
	if req.Grammar != nil {
		// As this vocabulary can write it, or refused now: never a
		// stream that no token can continue (grammar.Trie.Fit).
		if it.grammar, err = b.vocabTrie().Fit(req.Grammar); err != nil {
			return nil, status.Errorf(status.InvalidRequest, "request: the grammar cannot be written with this model's tokens: %v", err)
		}
	}
	var texts []string
	var parser streaming.ReplyParser
	if len(req.Messages) > 0 {
		t, err := b.prepareChat(req)
		if err != nil {
			return nil, err
		}
		texts, parser = []string{t.prompt}, t.reply
		if t.grammar != nil {
			it.grammar = t.grammar
		}
		it.lazy = t.lazy
	} else {
		texts = req.Prompts
	}
	out := make([]loop.Prepared, len(texts))
	for i, text := range texts {
		if err := b.cannotFit(i, text); err != nil {
			return nil, err
		}
		// Control tokens written in a prompt (<|im_start|>) are honoured,
		// as raw prompts are how callers bypass the chat template.
		b.tokenized.Add(int64(len(text)))
		ids := b.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
		switch {
		case len(ids) == 0:
			return nil, status.Errorf(status.InvalidRequest, "request: prompt %d is empty", i)
		case len(ids) >= b.context:
			return nil, status.Errorf(status.PromptTooLong, "request: prompt %d has %d tokens; the context holds %d (with room for at least one generated token)", i, len(ids), b.context)
		}
		out[i] = loop.Prepared{Prompt: ids, Data: seeded(it, i), Reply: parser}
	}
	return out, nil
}

// cannotFit refuses, before tokenizing it, a prompt whose bytes alone prove
// it has too many tokens for the context: no token stands for more than
// maxTokenBytes of them. Prepare runs on the submitting thread, and
// tokenizing costs ~0.3 µs a byte (a 10 MB prompt blocked lms_submit for
// 2.8 s), so this bounds submit's tokenizing to context × maxTokenBytes
// bytes whatever the prompt's size.
func (b *Backend) cannotFit(i int, text string) error {
	if b.maxTokenBytes <= 0 || int64(len(text)) <= int64(b.context-1)*int64(b.maxTokenBytes) {
		return nil
	}
	least := (int64(len(text)) + int64(b.maxTokenBytes) - 1) / int64(b.maxTokenBytes)
	return status.Errorf(status.PromptTooLong, "request: prompt %d has %d bytes, so at least %d tokens (a token covers at most %d bytes); the context holds %d (with room for at least one generated token)",
		i, len(text), least, b.maxTokenBytes, b.context)
}
