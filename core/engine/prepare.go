// Package engine is the device-independent engine behind every runtime
// backend: over a device's runner (core/cpu, core/cuda: the forward pass,
// its caches and heads, registered with Register) it tokenizes prompts
// (rendering chat messages with the model's template), gives each sequence
// a KV cache reserved up front, and advances every active sequence in one
// batched forward pass per iteration: prompt chunks of new requests and the
// next token of running ones travel together, so a long prompt never
// starves the streams already running. Speculation, sampling and
// verification are the same on every device.
//
// Runtime config fields (besides the runtime's own):
//
//	"model_path":     the GGUF file, or a model's name (core/registry:
//	                  "smollm2-135m" is its file in the model cache) (required)
//	"context_length": tokens per sequence, in [2, the model's trained context]
//	                  and at most MaxContext (default: the model's, at most 2048)
//	"prefill_chunk":  prompt tokens a sequence may prefill per iteration
//	                  (128; at most MaxPrefillChunk, and the context)
//	"threads":        engine threads (default: GOMAXPROCS; at most MaxThreads)
//	"chat_template":  Jinja text that renders "messages" instead of the
//	                  model's tokenizer.chat_template (at most MaxChatTemplate bytes)
//	"drafter":        default drafter: "ngram" (default), "draft_model", "early_exit", "none"
//	                  (a model drafter's requests verify the n-gram index's tree
//	                  instead on steps where it is expected to be faster)
//	"draft_model_path": a GGUF (or a model's name) sharing the target's
//	                  vocabulary (checked at load)
//	"draft_vocab":    token ids the draft model proposes from, the lowest ones
//	                  (DefaultDraftVocab; 0: all): only those head rows are computed
//	"draft_window":   tokens of context a draft model starts a request from: the
//	                  first few and the latest draft_window (DefaultDraftWindow;
//	                  0: the whole prompt, a draft prefill before the first draft)
//	"early_exit_layers": layers of the early-exit self-draft (a third of the model's)
//	"spec_budget":    tokens per verify pass, roots included (default: from the
//	                  forward pass's cost measured at start-up, the largest pass
//	                  whose next token still costs less than a token is worth)
//	"spec_max_depth", "spec_max_width": candidate tree shape limits (8, 2; the
//	                  n-gram index drafts to depth 12 unless spec_max_depth is given)
//	"spec_min_prob":  least path probability worth verifying for one stream, scaled
//	                  for n streams (default: priced from the measured cost, the
//	                  marginal token's cost over a token's worth)
//	"spec_adaptive":  false: requests speculate even where it is measured not to pay
//	                  (default true: spec.Payoff decodes them plainly for a while;
//	                  a model-drafted request's n-gram stand-ins go on: Standby)
//	"spec_policy":    "adaserve" (default), "equal_greedy", "global_greedy",
//	                  "specinfer" (a fixed tree), or a baseline without
//	                  speculation: "incremental" (prompt chunks beside the
//	                  decoding streams, admission by TTFT deadline),
//	                  "sarathi" or "fcfs" (the same, admitted first come,
//	                  first served), "vllm" (first come, first served, and
//	                  an iteration with a prompt to prefill runs only prompt
//	                  chunks: decoding waits); spec/sim models the same ones
//	"spec_order":     AdaServe SLO-phase order, "descending" (default) or "ascending"
//
// # Memory
//
// New refuses, before allocating anything, a configuration that would
// reserve more than the runtime's memory budget (loop.Config.MemoryBudget:
// "memory_budget_bytes", or 75% of physical memory or of the cgroup limit).
// It counts the model file (mapped: every pass reads all of it), the packed
// weights, one KV cache per slot (layers × kv heads × context × head dim ×
// 2 × 2 bytes), the early-exit self-draft's caches, a draft model's file,
// weights and caches, and the scratch of the largest forward pass; the
// error is status.Capacity with the total, the budget and that breakdown.
// Close returns all of it: the KV caches, the models' worker goroutines
// and their packed weights (unmapped at once), and the file mappings.
//
// Prompts. Prepare tokenizes on the submitting goroutine, but first
// refuses a prompt whose byte count alone proves it cannot fit (more than
// (context-1) × tokenizer.MaxInputBytesPerToken bytes), so that submitting
// never tokenizes more than that, whatever the prompt's size.
//
// Request fields it adds:
//
//	"repetition_penalty": 0 or 1 (off), or in [0.01, 100]
//	"presence_penalty", "frequency_penalty": in [-100, 100] (0: off)
//	"repeat_last_n":      the penalty window, in [0, 1048576] (0: 64)
//	"drafter", "speculate": greedy requests speculate with the default
//	                      drafter unless they say "speculate": false;
//	                      sampling requests only when they ask
//
// Structured output ("response_format", "grammar"; see core/grammar): every
// sampled row is masked to the tokens that keep the output inside the
// grammar, end tokens only where it is complete; drafted tokens the grammar
// refuses are pruned before verification, and verification masks each node
// by its path's grammar state, so constrained speculation is exact too.
//
// Temperature: 0 is greedy, and so is any temperature below 1e-5
// (sample.MinTemperature): 1/T would overflow for subnormal values, and
// long before that sampling is greedy in all but cost. Such a request
// decodes and speculates exactly as a greedy one. Speculation is exact:
// greedy output is token-identical to plain decoding and sampling keeps the
// target distribution (spec.VerifySample).
package engine

import (
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
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
		it.grammar = req.Grammar
		b.vocabTrie() // built once, on the first constrained request
	}
	var texts []string
	if len(req.Messages) > 0 {
		text, err := b.RenderChat(req.Messages, true)
		if err != nil {
			return nil, err
		}
		texts = []string{text}
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
		out[i] = loop.Prepared{Prompt: ids, Data: seeded(it, i)}
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
