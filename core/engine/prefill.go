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

// sitOut takes out of b.seqs, into b.iter.idle, the decoding sequences that
// sit this iteration out under AdaServe (specConfig.sloBatch,
// spec.SitOut): they get no tokens from it, so that the requests short of
// their TPOT SLO get theirs sooner. b.seqs must hold every decoding
// sequence of slots, in order.
func (b *Backend) sitOut(slots []*loop.Slot, now time.Time) {
	b.iter.idle = b.iter.idle[:0]
	if !b.spec.sloBatch || b.price.curve == nil || len(b.seqs) < 2 {
		return
	}
	b.iter.queue.Holds = b.iter.queue.Holds[:0]
	if len(b.iter.queue.Waiting) > 0 {
		for _, s := range slots {
			b.iter.queue.Holds = append(b.iter.queue.Holds, b.holds(s, s.State.(*sequence)))
		}
	}
	b.iter.queue.Chunk = b.prefillChunk
	var k int
	b.iter.sat, k = spec.SitOut(b.price.cost, b.seqs, b.iter.floor, now, b.sched.Timing.Estimate(), &b.iter.queue, b.iter.sat)
	if k == 0 {
		return
	}
	j := 0
	for _, s := range slots {
		if q := s.State.(*sequence); q.decoding {
			q.idle = b.iter.sat[j]
			j++
		}
	}
	kept := b.seqs[:0]
	for i, s := range b.seqs {
		if b.iter.sat[i] {
			b.iter.idle = append(b.iter.idle, s)
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
	b.iter.queue.Waiting = b.iter.queue.Waiting[:0]
	for _, w := range waiting {
		b.iter.queue.Waiting = append(b.iter.queue.Waiting, spec.Waiting{Deadline: time.Unix(0, w.Deadline), Prompt: w.Prompt})
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
// b.seqs and b.iter.idle must hold this iteration's decoding sequences.
func (b *Backend) prefillBudget(slots []*loop.Slot, now time.Time) int {
	whole := b.prefillWhole(slots)
	if !b.spec.sloChunk || b.price.curve == nil || whole == 0 {
		return whole
	}
	return spec.PrefillChunkBeside(b.price.cost, b.seqs, b.iter.idle, b.sched.Timing.Estimate(), now, whole, b.iter.floor)
}

// promptFloor sets b.iter.floor, the least prompt chunk of this iteration
// (spec.ChunkFloor; under AdaServe spec.PromptFloor: what the prompts
// being prefilled need for their TTFT deadlines). b.seqs must hold this
// iteration's decoding sequences.
func (b *Backend) promptFloor(slots []*loop.Slot, now time.Time) {
	whole := b.prefillWhole(slots)
	b.iter.floor = spec.ChunkFloor(whole)
	if !b.spec.sloChunk || b.price.curve == nil || whole == 0 {
		return
	}
	b.iter.prompts = b.iter.prompts[:0]
	for _, s := range slots {
		q := s.State.(*sequence)
		if q.decoding {
			continue
		}
		var deadline time.Time
		if slo := s.Request.TTFTSLOMs; slo > 0 {
			deadline = time.Unix(0, serving.TTFTDeadline(s.Submitted(), slo))
		}
		b.iter.prompts = append(b.iter.prompts, spec.Prompt{Left: len(s.Prompt) - q.prefill, Deadline: deadline})
	}
	t := max(b.price.cost.Pass(len(b.seqs), b.price.cost.BeyondAll(b.seqs), 0, 1), b.sched.Timing.Estimate())
	b.iter.floor = spec.PromptFloor(whole, b.iter.prompts, t, now)
}

// allotPrefill shares this iteration's budget of prompt tokens among the
// prefilling slots, earliest TTFT deadline first, as the runtime admits
// them, at most prefill_chunk each (sequence.chunk). Under AdaServe the
// budget can be a few tokens (spec.PromptFloor), and those belong to the
// prompt whose first token is due soonest.
func (b *Backend) allotPrefill(slots []*loop.Slot, budget int) {
	b.iter.prefilling = b.iter.prefilling[:0]
	for _, s := range slots {
		if q := s.State.(*sequence); !q.decoding {
			b.iter.prefilling = append(b.iter.prefilling, s)
		}
	}
	deadline := func(s *loop.Slot) int64 { return serving.TTFTDeadline(s.Submitted(), s.Request.TTFTSLOMs) }
	slices.SortStableFunc(b.iter.prefilling, func(x, y *loop.Slot) int { return cmp.Compare(deadline(x), deadline(y)) })
	for i, s := range b.iter.prefilling {
		q := s.State.(*sequence)
		if b.caches.reuse {
			b.catchUp(s, q)
		}
		q.chunk = min(b.prefillChunk, budget, len(s.Prompt)-q.prefill)
		if b.caches.reuse && q.chunk > 0 && b.prefixComing(s, q, b.iter.prefilling[:i]) {
			q.chunk = 0
		}
		budget -= q.chunk
	}
}

// catchUp extends a prefilling sequence's cache with what another cache
// has computed since of its prompt (a sequence prefilling the same system
// prompt ahead of it): those tokens are shared, not prefilled again.
func (b *Backend) catchUp(s *loop.Slot, q *sequence) {
	want := s.Prompt[:max(0, len(s.Prompt)-1)]
	if n := b.caches.copyPrefix(q.cache, q.prefill, want); n > q.prefill {
		s.CachedTokens += n - q.prefill
		q.prefill = n
	}
}

// prefixComing reports whether one of the sequences ahead of s in this
// iteration's prefill order (ahead) shares more of s's prompt than s's
// cache holds and is still prefilling it: s then waits for those tokens
// (catchUp takes them when they are in) instead of computing them a second
// time. Agents sharing a long system prompt, sent at once, prefill it once.
// The first sequence in the order never waits, so some prefill always
// runs.
func (b *Backend) prefixComing(s *loop.Slot, q *sequence, ahead []*loop.Slot) bool {
	want := s.Prompt[:max(0, len(s.Prompt)-1)]
	for _, a := range ahead {
		p := a.State.(*sequence)
		if p.chunk == 0 {
			continue // waiting itself, or out of budget: nothing comes from it now
		}
		if common := commonPrefix(a.Prompt, want); common > q.prefill && p.prefill < common {
			return true
		}
	}
	return false
}
