package model

import "math"

// Grouped attention (AVX-512): the query heads that share a KV head are
// computed together, so each key and value row is read once for all of them,
// and scores come 16 keys at a time (attnScores16 reduces 16 keys' lane sums
// in one shuffle tree instead of one horizontal sum per key).

// maxGroupHeads is the most query heads attnScores16/attnWsumG take at once
// (larger groups are split into near-equal parts).
const maxGroupHeads = 4

// attnBuf is one pool chunk's attention scratch.
type attnBuf struct {
	sc     []float32 // scores, one padded row per head
	kg, vg []float32 // gathered key rows (run tail + extras, padded) and value rows (extras)
}

func (m *Model) groupedAttention() bool {
	return haveAVX512 && m.cfg.HeadDim%64 == 0
}

// attentionGrouped spreads (token, part of a KV head's query group) items
// over the pool. The parts are fixed by the model's shape, never by the
// batch; a head's arithmetic does not depend on them anyway. Whole groups
// are faster than single heads even when they balance worse over the
// threads (decode: 3 groups on 2 threads): a single head's value sum is
// bound by its 4 accumulators' FMA latency, a group of 3 by FMA throughput.
func (m *Model) attentionGrouped(b *Batch, li int) {
	c, s := &m.cfg, &m.s
	n := len(b.Tokens)
	threads := m.pool.Threads()
	group := c.Heads / c.KVHeads
	parts := (group + maxGroupHeads - 1) / maxGroupHeads
	units := c.KVHeads * parts
	items := n * units
	grain := max(1, items/(4*threads))
	m.pool.Run(items, grain, func(lo, hi int) {
		ab := <-s.attBufs
		for it := lo; it < hi; it++ {
			u := it % units
			g, p := u/parts, u%parts
			h0, h1 := g*group+p*group/parts, g*group+(p+1)*group/parts
			m.attendGroup(b, li, it/units, h0, h1-h0, ab)
		}
		s.attBufs <- ab
	})
}

// attendGroup computes query heads [h0, h0+nh) of token i (nh ≤
// maxGroupHeads), which share one KV head. Scores come in blocks of 16 keys: the whole blocks of the
// contiguous run straight from the cache, the rest of the run and the extra
// entries gathered into kg (zero-padded). Every score, the softmax and the
// value sum of a (token, head) are the same arithmetic whatever nh, the rest
// of the batch, or how its visible entries split into run and extra (a tree
// branch gives what the committed chain gives).
func (m *Model) attendGroup(b *Batch, li, i, h0, nh int, ab *attnBuf) {
	c, s := &m.cfg, &m.s
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	t := s.tok[i]
	cache := b.Cache[i]
	g := h0 / (c.Heads / c.KVHeads)
	keys, vals := cache.K(li, g), cache.V(li, g)
	run := cache.Len() + t.span
	extra := s.extra[t.extraLo:t.extraHi]
	nv := run + len(extra)
	nfull := run / 16
	ng := nv - 16*nfull // gathered keys
	gblk := (ng + 15) / 16
	sst := 16 * (nfull + gblk) // score row stride

	ab.sc = grow(ab.sc, nh*sst)
	sc := ab.sc
	ab.kg = grow(ab.kg, gblk*16*hd)
	kg := ab.kg
	nk := copy(kg, keys[16*nfull*hd:run*hd])
	for _, k := range extra {
		j := cache.Len() + int(k)
		nk += copy(kg[nk:], keys[j*hd:(j+1)*hd])
	}
	clear(kg[nk:])

	scale := float32(1 / math.Sqrt(float64(hd)))
	var mx [maxGroupHeads]float32
	for h := range nh {
		mx[h] = float32(math.Inf(-1))
	}
	q := &s.q[i*qDim+h0*hd]
	if nfull > 0 {
		attnScores16(q, nh, hd, &keys[0], nfull, hd, scale, &sc[0], sst, &mx[0], 0xffff)
	}
	if gblk > 0 {
		last := uint16(1<<(ng-16*(gblk-1)) - 1)
		attnScores16(q, nh, hd, &kg[0], gblk, hd, scale, &sc[16*nfull], sst, &mx[0], last)
	}

	// Softmax weights (unnormalised) per head.
	var sums [maxGroupHeads]float32
	for h := range nh {
		x := sc[h*sst : h*sst+nv]
		j := nv &^ 15
		var sum float32
		if j > 0 {
			sum = attnExp(&x[0], j, mx[h])
		}
		for ; j < nv; j++ {
			p := expf(x[j] - mx[h])
			x[j] = p
			sum += p
		}
		sums[h] = sum
	}

	// Weighted value sums: the run from the cache, then the extra rows
	// gathered, continuing the same accumulation.
	out := s.att[i*qDim+h0*hd : i*qDim+(h0+nh)*hd]
	if run > 0 {
		attnWsumG(&sc[0], sst, nh, &vals[0], run, hd, &out[0], hd, false)
	}
	if len(extra) > 0 {
		ab.vg = grow(ab.vg, len(extra)*hd)
		vg := ab.vg
		for e, k := range extra {
			j := cache.Len() + int(k)
			copy(vg[e*hd:(e+1)*hd], vals[j*hd:(j+1)*hd])
		}
		attnWsumG(&sc[run], sst, nh, &vg[0], len(extra), hd, &out[0], hd, run > 0)
	}
	for h := range nh {
		inv := 1 / sums[h]
		o := out[h*hd : (h+1)*hd]
		for d := range o {
			o[d] *= inv
		}
	}
}
