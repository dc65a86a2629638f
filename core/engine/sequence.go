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
	"time"

	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/streaming"
)

// item is one prepared batch item.
type item struct {
	grammar *grammar.Grammar // nil: unconstrained
	params  sample.Params
	drafter drafterKind // draftNone: no speculation
	slo     time.Duration
	// logprobs: report each token's logprob and top alternatives
	// (logprobs.go); topLogprobs of them.
	logprobs    bool
	topLogprobs int
}

// sequence is a slot's state.
type sequence struct {
	cache    model.Cache
	sampler  *sample.Sampler
	greedy   bool
	kind     drafterKind
	prefill  int   // prompt tokens already in the cache
	chunk    int   // prompt tokens this iteration prefills (allotPrefill)
	next     int32 // the token to feed next, once the prompt is in
	decoding bool
	idle     bool        // sitting this iteration out (Backend.sitOut)
	batched  int         // tokens this sequence has in the current batch
	tree     *spec.Tree  // the tree verified this iteration (decoding)
	planned  int         // its index among the scheduler's sequences (spec.Scheduler.ObserveEmitted)
	seq      spec.Seq    // prompt and output, for the drafters and the scheduler
	con      *constraint // the request's grammar; nil: unconstrained
	res      spec.Result
	out      []int32 // this iteration's tokens, handed to the runtime

	// For a request with logprobs: its top-k, each tree node's row
	// statistics and penalised-row copies (by node), and this iteration's
	// entries, handed to the runtime.
	logprobs bool
	topK     int
	stats    []rowStats
	owns     [][]float32
	lp       []streaming.TokenLogprob
}

// measure records the distribution at tree node (or the prefill's last
// position, node 0) for the logprobs of the token chosen there: row is
// what the sampler draws from (masked when constrained), raw the logits
// buffer's row. Call it with the sampler's penalty window as that
// position's token will be sampled under.
func (q *sequence) measure(node int, row, raw []float32) {
	for len(q.stats) <= node {
		q.stats = append(q.stats, rowStats{})
		q.owns = append(q.owns, nil)
	}
	q.stats[node].measure(q.sampler.Penalised(row), raw, &q.owns[node], q.topK)
}

// logprobsOf builds the entries of the tokens emitted along path (token k
// chosen at node path[k]), or nil for a request without logprobs.
func (q *sequence) logprobsOf(path []int, tokens []int32) []streaming.TokenLogprob {
	if !q.logprobs {
		return nil
	}
	q.lp = q.lp[:0]
	for k, node := range path {
		q.lp = append(q.lp, q.stats[node].entry(tokens[k]))
	}
	return q.lp
}

// seeded is batch item i's settings: with a seed, item i samples with
// seed+i (modulo 2^64), so a request with one prompt repeated (OpenAI's
// "n") gets distinct choices that are still reproducible, and item 0 is
// the same as that prompt sent alone with the same seed.
func seeded(it *item, i int) *item {
	if i == 0 || !it.params.HasSeed {
		return it
	}
	c := *it
	c.params.Seed += uint64(i)
	return &c
}
