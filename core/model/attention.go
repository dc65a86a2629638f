package model

import "github.com/lmstream/lmstream/core/kv"

// attention computes s.att for layer li: for every token i and query head
// h, softmax(q·Kᵀ/√d)·V over the keys token i may see: every committed entry
// of its cache, then its visible scratch entries (the run [0, span) and the
// extra list; see tokInfo), or of a local layer (window > 0) only the
// last window of those (see visible). Query head h reads kv head h/(Heads/KVHeads)
// (grouped-query attention). The items of the pass's plan (planAttnItems)
// are spread over the pool (attentionGrouped); each chunk borrows an
// attnBuf.
func (m *Model) attention(b *Batch, li int) {
	s := &m.s
	threads := m.pool.Threads()
	if s.attBufs == nil || s.attBufsThreads != threads {
		s.attBufs = make(chan *attnBuf, threads)
		for range threads {
			s.attBufs <- new(attnBuf)
		}
		s.attBufsThreads = threads
	}
	m.attentionGrouped(b, li)
}

// visible returns what token t may see in layer li of a cache holding
// committed entries: the contiguous entries [lo, run) and the scratch
// entries extra (cache entries committed+k). The i-th visible entry holds
// position i (a token's visible entries are its path from position 0), so
// a local layer's window of w keeps the last w: lo = max(0, nv-w), where
// the window cuts into extra only when a tree branch is longer than w.
func (m *Model) visible(li int, t tokInfo, committed int) (lo, run int, extra []int32) {
	run = committed + t.span
	extra = m.s.extra[t.extraLo:t.extraHi]
	w := m.layers[li].window
	if nv := run + len(extra); w > 0 && nv > w {
		lo = nv - w
		if lo > run {
			extra = extra[lo-run:]
			lo = run
		}
	}
	return lo, run, extra
}

// softmaxWeights replaces x by e^(x-mx) (the unnormalised softmax weights)
// and returns their sum: whole 16-lane blocks with simdExp, the tail in Go.
// Every attention path uses it, so a score gets the same weight whichever
// path computed it.
func softmaxWeights(x []float32, mx float32) float32 {
	var sum float32
	j := 0
	if haveSIMD && len(x) >= 16 {
		j = len(x) &^ 15
		sum = simdExp(&x[0], j, mx)
	}
	for ; j < len(x); j++ {
		p := expf(x[j] - mx)
		x[j] = p
		sum += p
	}
	return sum
}

// ExpSum replaces x by e^(x−mx) and returns their sum, the normaliser of
// a softmax whose largest argument is mx, with attention's kernels
// (softmaxWeights). A draft model's top-k probabilities need it over a
// whole vocabulary row every step: with math.Exp that took 1.1 ms a row
// of SmolLM2's 49,152 ids on an AVX-512 Xeon, more than the 10-layer
// early-exit pass it followed.
func ExpSum(x []float32, mx float32) float32 { return softmaxWeights(x, mx) }

// scaleRow multiplies o by f.
func scaleRow(o []float32, f float32) {
	for d := range o {
		o[d] *= f
	}
}

// widenValues widens the values of positions [from, to) of kv head h in
// layer li of cache c into dst, HeadDim floats a position, one page at a
// time (widenKV: float16 or Q8_0 rows).
func widenValues(dst []float32, c *kv.Cache, li, h, from, to int) {
	hd := len(dst) / max(1, to-from)
	for pos := from; pos < to; {
		end := min(to, kv.PageEnd(pos))
		widenKV(dst[(pos-from)*hd:(end-from)*hd], c.V(li, h, pos), c.Type())
		pos = end
	}
}
