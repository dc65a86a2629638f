package engine

import (
	"time"

	"github.com/lmstream/lmstream/core/loop"
)

// passCharge splits what an iteration cost among its decoding sequences
// for their speculation judges (spec.Payoff). The pass is shared: when one
// request speculates, every request of the pass waits for its draft work
// and its draft nodes' share of the forward pass. Judged by its own
// iteration time alone, a request on the Qwen pair with two streams
// drafted 17 nodes, emitted 9 tokens in 128 ms and counted 14 ms a token
// against plain decoding's 24, while the other request, backed off, took
// the same 128 ms for its one token: 10 tokens where plain decoding gives
// 2 in 25 ms, a loss both judges missed (0.90–0.95× plain). So a
// speculating request is charged the pass without any draft nodes, as
// plain decoding would have run it, plus n times its share (by draft
// nodes) of what speculation added, n the decoding sequences that waited
// for it; a request that did not speculate is charged the plain pass. With
// one stream the charge is the iteration's duration, as before.
type passCharge struct {
	base, extra time.Duration // the pass without draft nodes; what speculation added, times n
	nodes       int           // draft nodes in the pass
}

// plainPassDecay is the weight the recent plain passes of a size keep per
// new one: a horizon of about five passes.
const plainPassDecay = 0.8

// speculationCharge prices this iteration's speculation (newCharge) from
// its slots' trees, and keeps the plain passes' durations: zero where
// nothing speculated, with one decoding sequence (its duration is its
// own), or without a curve.
func (b *Backend) speculationCharge(slots []*loop.Slot, tokens int, t0, t1, t2 time.Time) passCharge {
	nodes, n := 0, 0
	for i, s := range slots {
		q := s.State.(*sequence)
		if q.decoding && b.buf.rows[i] >= 0 && q.tree != nil {
			nodes += q.tree.Len() - 1
			n++
		}
	}
	fwd := t2.Sub(t1)
	if nodes == 0 && n > 0 && tokens == n {
		for len(b.price.plainPass) <= n {
			b.price.plainPass = append(b.price.plainPass, 0)
		}
		recent := fwd
		if p := b.price.plainPass[n]; p > 0 {
			recent = time.Duration(plainPassDecay*float64(p) + (1-plainPassDecay)*float64(fwd))
		}
		b.price.plainPass[n] = recent
	}
	if nodes == 0 || n < 2 || b.price.curve == nil {
		return passCharge{}
	}
	var plain time.Duration
	if n < len(b.price.plainPass) && tokens == n+nodes {
		plain = b.price.plainPass[n]
	}
	return newCharge(b.price.curve.at, tokens, nodes, n, plain, t1.Sub(t0), fwd)
}

// newCharge prices a pass over tokens tokens, nodes of them draft nodes of
// n decoding sequences, that drafted for plan and ran its forward pass in
// fwd. The base is the pass without the draft nodes: plain, the measured
// duration of recent plain passes over the same sequences, where known
// (the machine's costs drift: on a 2-core VM whose memory bandwidth
// other guests share, the 1.5B's pass over 2 tokens moved between 17 and
// 27 ms while its pass over 8 stayed at 29, so a curve measured in one
// state prices the draft nodes of the other wrongly), else the forward
// pass scaled by the cost curve at; the rest of plan+fwd is what
// speculation added.
func newCharge(at func(int) time.Duration, tokens, nodes, n int, plain, plan, fwd time.Duration) passCharge {
	full := at(tokens)
	if full <= 0 || nodes <= 0 || nodes >= tokens {
		return passCharge{}
	}
	base := plain
	if base <= 0 {
		base = time.Duration(float64(fwd) * float64(at(tokens-nodes)) / float64(full))
	}
	base = min(base, fwd)
	return passCharge{base: base, extra: time.Duration(n) * (plan + fwd - base), nodes: nodes}
}

// of is what q's iteration is charged, took the time since the iteration
// began (the verification of the sequences before q included).
func (c passCharge) of(q *sequence, took time.Duration) time.Duration {
	return c.charge(q.tree.Len()-1, took)
}

// charge is what a sequence that put nodes draft nodes in the pass pays:
// took where the pass was not priced.
func (c passCharge) charge(nodes int, took time.Duration) time.Duration {
	if c.nodes == 0 {
		return took
	}
	return c.base + c.extra*time.Duration(nodes)/time.Duration(c.nodes)
}
