package model

import (
	"math"

	"github.com/lmstream/lmstream/core/kv"
)

// attention computes s.att for layer li: for every token i and query head
// h, softmax(q·Kᵀ/√d)·V over the keys token i may see: every committed entry
// of its cache, then its visible scratch entries (the run [0, span) and the
// extra list; see tokInfo), or of a local layer (window > 0) only the
// last window of those (see visible). Query head h reads kv head h/(Heads/KVHeads)
// (grouped-query attention). The (token, head) items are spread over the
// pool; each chunk borrows a scores buffer.
func (m *Model) attention(b *Batch, li int) {
	c, s := &m.cfg, &m.s
	n := len(b.Tokens)
	threads := m.pool.Threads()
	if s.attBufs == nil || s.attBufsThreads != threads {
		s.attBufs = make(chan *attnBuf, threads)
		for range threads {
			s.attBufs <- new(attnBuf)
		}
		s.attBufsThreads = threads
	}
	if m.groupedAttention() {
		m.attentionGrouped(b, li)
		return
	}
	items := n * c.Heads
	grain := max(1, items/(4*threads))
	m.pool.Run(items, grain, func(lo, hi int) {
		ab := <-s.attBufs
		for it := lo; it < hi; it++ {
			m.attendOne(b, li, it/c.Heads, it%c.Heads, ab)
		}
		s.attBufs <- ab
	})
}

// attendOne is one (token i, head h) item (the path without the grouped
// kernels); ab is the chunk's scratch.
func (m *Model) attendOne(b *Batch, li, i, h int, ab *attnBuf) {
	c, s := &m.cfg, &m.s
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	t := s.tok[i]
	cache := s.seqs[t.seq].cache
	g := h / (c.Heads / c.KVHeads)
	q := s.q[i*qDim+h*hd : i*qDim+(h+1)*hd]
	out := s.att[i*qDim+h*hd : i*qDim+(h+1)*hd]

	// The visible keys (transposed, ks columns) and values, widened: the
	// contiguous entries [lo, run), then the extra ones in order.
	lo, run, extra := m.visible(li, t, cache.Len())
	nr := run - lo
	nv := nr + len(extra)
	ks := (nv + 15) &^ 15
	ab.kf, ab.vf = grow(ab.kf, hd*ks), grow(ab.vf, nv*hd)
	keys, vals := ab.kf, ab.vf
	widenKeysT(keys, ks, cache, li, g, lo, run, hd)
	widenValues(vals[:nr*hd], cache, li, g, lo, run)
	for e, k := range extra {
		j := cache.Len() + int(k)
		ab.krow, ab.kcol = grow(ab.krow, cache.RowLen()), grow(ab.kcol, hd)
		widenKeyT(keys, ks, nr+e, cache.KRow(li, g, j, ab.krow), cache.Type(), ab.kcol)
		widenKV(vals[(nr+e)*hd:(nr+e+1)*hd], cache.V(li, g, j), cache.Type())
	}
	for d := range hd {
		clear(keys[d*ks+nv : (d+1)*ks])
	}
	ab.sc = grow(ab.sc, ks)
	sc := ab.sc

	// Scores and their maximum.
	scoresT(q, 1, hd, keys, ks, ks, hd, m.attnScale(), sc, ks)
	mx := float32(math.Inf(-1))
	for _, x := range sc[:nv] {
		mx = max(mx, x)
	}
	// Softmax weights (unnormalised) and the weighted sum of values.
	sum := m.softmaxWeights(sc[:nv], mx, li, h)
	if haveSIMD && hd%64 == 0 {
		simdWsum(&sc[0], &vals[0], nv, hd, &out[0])
	} else {
		clear(out)
		for j := 0; j < nv; j++ {
			axpy(out, sc[j], vals[j*hd:(j+1)*hd])
		}
	}
	scaleRow(out, 1/sum)
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

// softmaxWeights is softmaxWeights for query head h of layer li, after the
// model's soft-capping of the scores (Gemma 2), c·tanh(x/c), which keeps
// their order, so the largest capped score is the capped mx. A layer with
// attention sinks (gpt-oss) adds the head's sink logit s to the
// denominator, as if it were one more key whose value is zero: the
// maximum becomes max(mx, s) and the sum gains e^(s−max).
func (m *Model) softmaxWeights(x []float32, mx float32, li, h int) float32 {
	if c := m.cfg.AttnSoftcap; c > 0 {
		softcap(x, c)
		mx = c * float32(math.Tanh(float64(mx/c)))
	}
	if sinks := m.layers[li].sinks; sinks != nil {
		s := sinks[h]
		mx = max(mx, s)
		return softmaxWeights(x, mx) + expf(s-mx)
	}
	return softmaxWeights(x, mx)
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
