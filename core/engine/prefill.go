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
	"cmp"
	"slices"
	"time"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
)

// preempting reports whether decoding waits this iteration: under
// serving.Preempt ("vllm") a prompt still to prefill runs first, alone.
func (b *Backend) preempting(slots []*loop.Slot) bool {
	if b.spec.prefill != serving.Preempt {
		return false
	}
	for _, s := range slots {
		if !s.State.(*sequence).decoding {
			return true
		}
	}
	return false
}

// sitOut takes out of b.seqs, into b.idle, the decoding sequences that
// sit this iteration out under AdaServe (specConfig.sloBatch,
// spec.SitOut): they get no tokens from it, so that the requests short of
// their TPOT SLO get theirs sooner. b.seqs must hold every decoding
// sequence of slots, in order.
func (b *Backend) sitOut(slots []*loop.Slot, now time.Time) {
	b.idle = b.idle[:0]
	if !b.spec.sloBatch || b.curve == nil || len(b.seqs) < 2 {
		return
	}
	b.queue.Holds = b.queue.Holds[:0]
	if len(b.queue.Waiting) > 0 {
		for _, s := range slots {
			b.queue.Holds = append(b.queue.Holds, b.holds(s, s.State.(*sequence)))
		}
	}
	b.queue.Chunk = b.prefillChunk
	var k int
	b.sat, k = spec.SitOut(b.cost, b.seqs, b.floor, now, b.sched.Timing.Estimate(), &b.queue, b.sat)
	if k == 0 {
		return
	}
	j := 0
	for _, s := range slots {
		if q := s.State.(*sequence); q.decoding {
			q.idle = b.sat[j]
			j++
		}
	}
	kept := b.seqs[:0]
	for i, s := range b.seqs {
		if b.sat[i] {
			b.idle = append(b.idle, s)
		} else {
			kept = append(kept, s)
		}
	}
	b.seqs = kept
}

// holds is how many iterations at most slot s keeps its sequence q if it
// runs every iteration and emits a token each (spec.Queue.Holds): its
// prompt's chunks left, then its tokens to max_tokens, or to a full cache
// without one.
func (b *Backend) holds(s *loop.Slot, q *sequence) int {
	n := 0
	if !q.decoding {
		n = (len(s.Prompt) - q.prefill + b.prefillChunk - 1) / b.prefillChunk
	}
	out := q.seq.Generated()
	left := b.context - len(s.Prompt) - out
	if m := s.Request.MaxTokens; m > 0 {
		left = min(left, m-out)
	}
	return n + max(0, left)
}

// WatchesQueue implements loop.QueueWatcher: only sitting out
// (AdaServe) weighs the queue.
func (b *Backend) WatchesQueue() bool { return b.spec.sloBatch }

// WatchQueue implements loop.QueueWatcher, keeping the waiting
// requests for sitOut.
func (b *Backend) WatchQueue(waiting []loop.Queued) {
	b.queue.Waiting = b.queue.Waiting[:0]
	for _, w := range waiting {
		b.queue.Waiting = append(b.queue.Waiting, spec.Waiting{Deadline: time.Unix(0, w.Deadline), Prompt: w.Prompt})
	}
}

// prefillWhole is the prompt tokens of an iteration that gives every
// prefilling slot a whole prefill_chunk.
func (b *Backend) prefillWhole(slots []*loop.Slot) int {
	n := 0
	for _, s := range slots {
		if !s.State.(*sequence).decoding {
			n++
		}
	}
	return n * b.prefillChunk
}

// prefillBudget is how many prompt tokens this iteration may take over all
// prefilling slots: a whole prefill_chunk each, or under AdaServe
// (specConfig.sloChunk) what keeps the decoding streams on their TPOT SLOs,
// those sitting out included (spec.PrefillChunkBeside, priced from the
// forward pass's measured curve; at least spec.ChunkFloor of the whole).
// b.seqs and b.idle must hold this iteration's decoding sequences.
func (b *Backend) prefillBudget(slots []*loop.Slot, now time.Time) int {
	whole := b.prefillWhole(slots)
	if !b.spec.sloChunk || b.curve == nil || whole == 0 {
		return whole
	}
	return spec.PrefillChunkBeside(b.cost, b.seqs, b.idle, b.sched.Timing.Estimate(), now, whole, b.floor)
}

// promptFloor sets b.floor, the least prompt chunk of this iteration
// (spec.ChunkFloor; under AdaServe spec.PromptFloor: what the prompts
// being prefilled need for their TTFT deadlines). b.seqs must hold this
// iteration's decoding sequences.
func (b *Backend) promptFloor(slots []*loop.Slot, now time.Time) {
	whole := b.prefillWhole(slots)
	b.floor = spec.ChunkFloor(whole)
	if !b.spec.sloChunk || b.curve == nil || whole == 0 {
		return
	}
	b.prompts = b.prompts[:0]
	for _, s := range slots {
		q := s.State.(*sequence)
		if q.decoding {
			continue
		}
		var deadline time.Time
		if slo := s.Request.TTFTSLOMs; slo > 0 {
			deadline = time.Unix(0, serving.TTFTDeadline(s.Submitted(), slo))
		}
		b.prompts = append(b.prompts, spec.Prompt{Left: len(s.Prompt) - q.prefill, Deadline: deadline})
	}
	t := max(b.cost.Pass(len(b.seqs), b.cost.BeyondAll(b.seqs), 0, 1), b.sched.Timing.Estimate())
	b.floor = spec.PromptFloor(whole, b.prompts, t, now)
}

// allotPrefill shares this iteration's budget of prompt tokens among the
// prefilling slots, earliest TTFT deadline first, as the runtime admits
// them, at most prefill_chunk each (sequence.chunk). Under AdaServe the
// budget can be a few tokens (spec.PromptFloor), and those belong to the
// prompt whose first token is due soonest.
func (b *Backend) allotPrefill(slots []*loop.Slot, budget int) {
	b.prefilling = b.prefilling[:0]
	for _, s := range slots {
		if q := s.State.(*sequence); !q.decoding {
			b.prefilling = append(b.prefilling, s)
		}
	}
	deadline := func(s *loop.Slot) int64 { return serving.TTFTDeadline(s.Submitted(), s.Request.TTFTSLOMs) }
	slices.SortStableFunc(b.prefilling, func(x, y *loop.Slot) int { return cmp.Compare(deadline(x), deadline(y)) })
	for _, s := range b.prefilling {
		q := s.State.(*sequence)
		q.chunk = min(b.prefillChunk, budget, len(s.Prompt)-q.prefill)
		budget -= q.chunk
	}
}
