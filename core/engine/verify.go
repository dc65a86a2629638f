package engine

import (
	"time"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/spec"
)

// limit caps a decoding sequence's tree to what its cache and max_tokens
// leave: d accepted nodes emit d+1 tokens and leave the cache d+1 entries
// longer, with the bonus token still to feed.
func (b *Backend) limit(s *loop.Slot, q *sequence) {
	room := q.cache.Cap() - q.cache.Len()
	d := room - 2
	if mt := s.Request.MaxTokens; mt > 0 {
		d = min(d, mt-q.seq.Generated()-1)
	}
	q.seq.MaxNodes, q.seq.MaxDepth = room, 0
	if d <= 0 {
		q.seq.MaxNodes = 1
	} else {
		q.seq.MaxDepth = d
	}
}

// plan drafts and selects the trees of this iteration's decoding
// sequences; root-only trees when nothing speculates.
func (b *Backend) plan(now time.Time) []*spec.Tree {
	if len(b.seqs) == 0 {
		return nil
	}
	speculating := false
	for _, s := range b.seqs {
		speculating = speculating || !s.NoSpec
	}
	if speculating && b.spec.sched.Policy != spec.Incremental {
		// The cost model's prices at this load (spec.Prices), from the
		// forward pass's curve measured at start-up.
		n := len(b.seqs)
		plain, worth, marginal := spec.Prices(b.price.curve.at, n)
		if !b.spec.budgetGiven && b.price.curve != nil {
			// No node can pay once the next token of the pass costs more
			// than a token is worth: the budget is the largest pass
			// before that (on a GPU, the knee of the flat curve; on a CPU
			// usually more than the trees hold, the cut below binding
			// first). Within it the SLO phase has room to serve requests
			// that are behind.
			b.sched.Config.Budget = b.price.curve.budget(n, worth)
		}
		switch m := b.spec.sched.MinProb; {
		case !b.spec.minProbGiven && b.price.curve != nil && plain > 0:
			// A node pays for its verification when its path probability
			// times a token's worth exceeds its marginal cost.
			b.sched.Config.MinProb = spec.MinProb(worth, marginal)
		case m > 0:
			// With n sequences a node must be about n times as likely to
			// pay off: the cut's complement shrinks as 1/n.
			b.sched.Config.MinProb = 1 - (1-m)/float64(n)
		}
		b.sched.Config.Floor = nil
		if !b.spec.minProbGiven && b.price.curve != nil && len(b.price.curve.ns) > 0 && worth > 0 {
			// Past the first few extra tokens a CPU's pass grows dearer
			// per token: each position is priced on its own slope.
			// Past the curve's last size its slope is extrapolated, one
			// price: the last entry serves every larger pass.
			upTo := min(b.sched.Config.Budget, b.price.curve.ns[len(b.price.curve.ns)-1]+8)
			b.floors = spec.Floors(b.price.curve.at, n, worth, upTo, b.floors)
			b.sched.Config.Floor = b.floors
		}
		// What the prices are compared with is measured now (a draft
		// step, a request's iterations): the prices follow the engine's
		// own recent plain passes (livePace).
		live := b.livePace(n)
		for _, s := range b.seqs {
			s.Payoff.PlainPrior = scaleDuration(plain, live)
		}
		if b.price.curve != nil {
			b.drafts.at = b.price.curve.at
		}
		b.drafts.streams = n
		for _, d := range []*modelDrafter{b.drafts.model, b.drafts.early} {
			if d != nil {
				d.plain, d.marginal = scaleDuration(worth, live), scaleDuration(marginal, live)
				if b.price.curve != nil {
					d.at = b.price.curve.at
				}
			}
		}
		if trees, err := b.sched.Plan(b.seqs, now); err == nil {
			return trees
		}
		b.drafts.errs++
	}
	for len(b.root) < len(b.seqs) {
		b.root = append(b.root, spec.Tree{})
	}
	b.rootP = b.rootP[:0]
	for i, s := range b.seqs {
		b.root[i].Reset(s.Tokens[len(s.Tokens)-1])
		b.rootP = append(b.rootP, &b.root[i])
	}
	return b.rootP
}

// verify walks a decoding sequence's tree against the target's logits (one
// row per node) and leaves the accepted path and tokens in q.res. The
// sampler's penalty window follows the walk: a node's distribution is
// computed after accepting the tokens of its path, exactly as plain
// decoding would have, and the bonus token is accepted last. A
// constrained sequence's rows are masked by the grammar state of each
// node's path (pruneTrees left only nodes the grammar allows), so every
// emitted token is what plain constrained decoding would emit. It
// reports false when the grammar leaves no token to emit.
func (b *Backend) verify(q *sequence, rows []float32) bool {
	vocab := b.model.Config().Vocab
	ok := true
	row := func(node int) []float32 {
		raw := rows[node*vocab : (node+1)*vocab]
		r := raw
		if q.con != nil {
			var live bool
			if r, live = q.con.logits(q.con.nodes[node], r); !live {
				ok = false
			}
		}
		if q.logprobs {
			// Called where the node's token is about to be chosen, with
			// the penalty window of the path to it.
			q.measure(node, r, raw)
		}
		return r
	}
	if q.tree.Len() == 1 {
		// Plain decoding: the sampler's own fast path and random stream
		// (a constrained one masks only when its draw is refused).
		var tok int32
		switch {
		case q.logprobs:
			// The logprobs need the (masked) row whole.
			tok = q.sampler.Sample(row(0))
		case q.con == nil:
			tok = q.sampler.Sample(rows[:vocab])
		default:
			tok, ok = q.con.sample(q.con.nodes[0], rows[:vocab], q.sampler)
		}
		q.sampler.Accept(tok)
		q.res.Path = append(q.res.Path[:0], 0)
		q.res.Tokens = append(q.res.Tokens[:0], tok)
		return ok
	}
	target := func(node int) spec.Dist {
		if node > 0 {
			q.sampler.Accept(q.tree.Nodes[node].Token)
		}
		d := q.sampler.Distribution(row(node))
		b.dist.IDs = d.IDs
		b.dist.P = b.dist.P[:0]
		for _, p := range d.Probs {
			b.dist.P = append(b.dist.P, float32(p))
		}
		return b.dist
	}
	if q.greedy {
		spec.VerifyGreedy(q.tree, target, &q.res)
	} else {
		spec.VerifySample(q.tree, target, q.sampler, &q.res)
	}
	q.sampler.Accept(q.res.Bonus())
	return ok
}

// verifyArgmax is verify for a greedy sequence from each tree node's
// argmax alone (ids, one per node): the target distribution of a node is
// the point mass on its argmax, as Sampler.Distribution gives for a
// sampler whose RawArgmax holds.
func (b *Backend) verifyArgmax(q *sequence, ids []int32) {
	if q.tree.Len() == 1 {
		q.sampler.Accept(ids[0])
		q.res.Path = append(q.res.Path[:0], 0)
		q.res.Tokens = append(q.res.Tokens[:0], ids[0])
		return
	}
	target := func(node int) spec.Dist {
		if node > 0 {
			q.sampler.Accept(q.tree.Nodes[node].Token)
		}
		b.buf.argID[0], b.buf.argP[0] = ids[node], 1
		return spec.Dist{IDs: b.buf.argID[:], P: b.buf.argP[:]}
	}
	spec.VerifyGreedy(q.tree, target, &q.res)
	q.sampler.Accept(q.res.Bonus())
}
