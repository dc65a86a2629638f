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
	lazy    *trigger         // strict tools' calls under tool_choice "auto" (lazy.go); nil: none
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
	starved  error       // set when no slot could get KV pages and this one is ended (Backend.starve)
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
