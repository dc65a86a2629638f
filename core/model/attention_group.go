package model

import (
	"math"

	"github.com/lmstream/lmstream/core/kv"
)

// Grouped attention (the AVX-512 or AVX2 kernels): the query heads that
// share a KV head are computed together, so each key and value row is read
// (and widened from the float16 cache, attnChunk rows at a time) once for
// all of them, and scores come 16 keys at a time (attnScores16 and
// attnScores16AVX2 reduce 16 keys' lane sums in one shuffle tree instead of
// one horizontal sum per key).

// maxGroupHeads is the most query heads attnScores16/attnWsumG take at once
// (larger groups are split into near-equal parts).
const maxGroupHeads = 4

// attnBuf is one pool chunk's attention scratch.
type attnBuf struct {
	sc     []float32 // scores, one padded row per head
	kg, vg []float32 // gathered key rows (run tail + extras, padded) and value rows (extras)
	qg, mx []float32 // attendTokens: gathered queries, the kernel's running maxima
	kf, vf []float32 // a chunk of the cache's keys or values, widened to float32
}

// attnChunk is how many keys (or values) are widened from the float16 cache
// at a time: 64 rows of 64 dims, 16 KiB of float32, stay in L1 while every
// query of the item reads them.
const attnChunk = 64

func (m *Model) groupedAttention() bool {
	return haveSIMD && m.cfg.HeadDim%64 == 0
}

// attnTokens is the most tokens one grouped-attention item takes. Tokens of
// one sequence that form a chain (prefill, or a speculative chain) read the
// same keys and values; an item of several of them streams each block of
// keys and values from L2 once for all their query heads instead of once per
// token. 4 tokens × 3 heads of the default model fill the score kernel's
// query loop and still leave N/4 × KVHeads items to spread over the
// threads.
const attnTokens = 4

// attnItem is one pool item: query heads [h0, h0+nh) (one KV head's group,
// or part of it) of tokens [i0, i1).
type attnItem struct{ i0, i1, h0, nh int32 }

// planAttnItems cuts the batch into attention items, once per pass (every
// layer uses the same items). An item is one (token, part of a KV head's
// query group), or up to attnTokens consecutive chain tokens of one
// sequence for that part. The parts are fixed by the model's shape, never
// by the batch, and an item's arithmetic for each (token, head) is the same
// whatever else the item holds.
func (m *Model) planAttnItems(b *Batch) {
	c, s := &m.cfg, &m.s
	n := len(b.Tokens)
	group := c.Heads / c.KVHeads
	parts := (group + maxGroupHeads - 1) / maxGroupHeads
	s.attItems = s.attItems[:0]
	for i := 0; i < n; {
		j := i + 1
		if s.tok[i].extraHi == s.tok[i].extraLo {
			for j < n && s.tok[j].seq == s.tok[i].seq && s.tok[j].extraHi == s.tok[j].extraLo {
				j++
			}
		}
		// [i, j): one token with extras, or a run of chain tokens of one
		// sequence, cut into near-equal items of at most attnTokens.
		cuts := (j - i + attnTokens - 1) / attnTokens
		for k := 0; k < cuts; k++ {
			lo, hi := i+(j-i)*k/cuts, i+(j-i)*(k+1)/cuts
			for g := 0; g < c.KVHeads; g++ {
				for p := 0; p < parts; p++ {
					h0, h1 := g*group+p*group/parts, g*group+(p+1)*group/parts
					s.attItems = append(s.attItems, attnItem{int32(lo), int32(hi), int32(h0), int32(h1 - h0)})
				}
			}
		}
		i = j
	}
}

// attentionGrouped spreads the pass's attention items (planAttnItems) over
// the pool. Whole groups are faster than single heads even when they
// balance worse over the threads (decode: 3 groups on 2 threads): a single
// head's value sum is bound by its 4 accumulators' FMA latency, a group of
// 3 by FMA throughput.
func (m *Model) attentionGrouped(b *Batch, li int) {
	s := &m.s
	threads := m.pool.Threads()
	items := s.attItems
	grain := max(1, len(items)/(4*threads))
	m.pool.Run(len(items), grain, func(lo, hi int) {
		ab := <-s.attBufs
		for _, it := range items[lo:hi] {
			if it.i1-it.i0 == 1 {
				m.attendGroup(b, li, int(it.i0), int(it.h0), int(it.nh), ab)
			} else {
				m.attendTokens(b, li, int(it.i0), int(it.i1), int(it.h0), int(it.nh), ab)
			}
		}
		s.attBufs <- ab
	})
}

// attendTokens is attendGroup for the chain tokens [i0, i1) of one sequence
// (no extra entries: token i sees its cache's entries [0, Len+span_i)), all
// at once: one score-kernel call for every (token, head) query over the
// union of their keys, then per query the maximum, softmax and value sum
// over its own keys only. Each (token, head) gets exactly attendGroup's
// arithmetic: the same per-key scores, the same maximum, the same
// exponentials, and value sums taken in chunks of keys that continue one
// accumulation (see attnWsumG).
func (m *Model) attendTokens(b *Batch, li, i0, i1, h0, nh int, ab *attnBuf) {
	c, s := &m.cfg, &m.s
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	cache := s.seqs[s.tok[i0].seq].cache
	g := h0 / (c.Heads / c.KVHeads)
	nt := i1 - i0
	nq := nt * nh
	// Token t sees the entries [los[t], runs[t]) (a local layer's window
	// may start past 0; chain tokens have no extra entries). Scores start
	// at base, the smallest start rounded down to a 16-key block: score j
	// is key base+j.
	var runs, los [attnTokens]int
	runMax, loMin := 0, math.MaxInt
	for t := range nt {
		var extra []int32
		los[t], runs[t], extra = m.visible(li, s.tok[i0+t], cache.Len())
		if len(extra) > 0 { // unreachable: planAttnItems groups chain tokens only
			panic("model: attendTokens given a token with extra entries")
		}
		runMax = max(runMax, runs[t])
		loMin = min(loMin, los[t])
	}
	base := loMin &^ 15
	nfull := (runMax - base) / 16
	ng := runMax - base - 16*nfull
	gblk := (ng + 15) / 16
	sst := 16 * (nfull + gblk)

	// The queries, gathered: query t·nh+h is head h0+h of token i0+t.
	ab.qg = grow(ab.qg, nq*hd)
	qg := ab.qg
	for t := range nt {
		copy(qg[t*nh*hd:(t+1)*nh*hd], s.q[(i0+t)*qDim+h0*hd:(i0+t)*qDim+(h0+nh)*hd])
	}
	ab.kg = grow(ab.kg, gblk*16*hd)
	kg := ab.kg
	nk := ng * hd
	widenRows(kg[:nk], cache, false, li, g, base+16*nfull, runMax)
	clear(kg[nk:])
	ab.kf, ab.vf = grow(ab.kf, attnChunk*hd), grow(ab.vf, attnChunk*hd)
	kf, vf := ab.kf, ab.vf
	ab.sc = grow(ab.sc, nq*sst)
	sc := ab.sc
	// The kernel's running maxima span every query's keys up to runMax;
	// each query's own maximum is taken below over its keys only.
	ab.mx = grow(ab.mx, nq)
	for q := range ab.mx {
		ab.mx[q] = float32(math.Inf(-1))
	}
	scale := m.attnScale()
	scoreCached(&qg[0], nq, hd, cache, li, g, base, nfull, kf, scale, sc, sst, &ab.mx[0])
	if gblk > 0 {
		simdScores16(&qg[0], nq, hd, &kg[0], gblk, hd, scale, &sc[16*nfull], sst, &ab.mx[0], 0xffff)
	}

	// Softmax weights (unnormalised) per query over its own keys.
	var sums [attnTokens * maxGroupHeads]float32
	for q := range nq {
		t := q / nh
		x := sc[q*sst+los[t]-base : q*sst+runs[t]-base]
		sums[q] = m.softmaxWeights(x, simdMax(&x[0], len(x)), li, h0+q%nh)
	}

	// Value sums, attnChunk values at a time, widened once for every token;
	// each token's sum starts at its own first visible key.
	for k0, nn := base, 0; k0 < runMax; k0 += nn {
		nn = min(attnChunk, runMax-k0, kv.PageEnd(k0)-k0)
		widenRows(vf[:nn*hd], cache, true, li, g, k0, k0+nn)
		for t := range nt {
			from, to := max(k0, los[t]), min(k0+nn, runs[t])
			if from >= to {
				continue
			}
			out := s.att[(i0+t)*qDim+h0*hd : (i0+t)*qDim+(h0+nh)*hd]
			simdWsumG(&sc[t*nh*sst+from-base], sst, nh, &vf[(from-k0)*hd], to-from, hd, &out[0], hd, from > los[t])
		}
	}
	for t := range nt {
		for h := range nh {
			scaleRow(s.att[(i0+t)*qDim+(h0+h)*hd:(i0+t)*qDim+(h0+h+1)*hd], 1/sums[t*nh+h])
		}
	}
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
	cache := s.seqs[t.seq].cache
	g := h0 / (c.Heads / c.KVHeads)
	// The visible entries are [lo, run) and extra (a local layer's window
	// may start past 0). Scores start at base, lo rounded down to a 16-key
	// block: score j is key base+j, and the scores of keys [base, lo) are
	// computed with their block but never used.
	lo, run, extra := m.visible(li, t, cache.Len())
	base := lo &^ 15
	nv := run - base + len(extra)
	nfull := (run - base) / 16
	ng := nv - 16*nfull // gathered keys
	gblk := (ng + 15) / 16
	sst := 16 * (nfull + gblk) // score row stride

	ab.sc = grow(ab.sc, nh*sst)
	sc := ab.sc
	ab.kg = grow(ab.kg, gblk*16*hd)
	kg := ab.kg
	nk := (run - base - 16*nfull) * hd
	widenRows(kg[:nk], cache, false, li, g, base+16*nfull, run)
	for _, k := range extra {
		widenKV(kg[nk:nk+hd], cache.K(li, g, cache.Len()+int(k)), cache.Type())
		nk += hd
	}
	clear(kg[nk:])
	ab.kf = grow(ab.kf, attnChunk*hd)
	kf := ab.kf

	scale := m.attnScale()
	var mx [maxGroupHeads]float32
	for h := range nh {
		mx[h] = float32(math.Inf(-1))
	}
	q := &s.q[i*qDim+h0*hd]
	scoreCached(q, nh, hd, cache, li, g, base, nfull, kf, scale, sc, sst, &mx[0])
	if gblk > 0 {
		last := uint16(1<<(ng-16*(gblk-1)) - 1)
		simdScores16(q, nh, hd, &kg[0], gblk, hd, scale, &sc[16*nfull], sst, &mx[0], last)
	}

	// Softmax weights (unnormalised) per head over the visible scores; the
	// kernel's maxima include the unused keys [base, lo) when lo > base.
	var sums [maxGroupHeads]float32
	for h := range nh {
		x := sc[h*sst+lo-base : h*sst+nv]
		if lo > base {
			mx[h] = simdMax(&x[0], len(x))
		}
		sums[h] = m.softmaxWeights(x, mx[h], li, h0+h)
	}

	// Weighted value sums: the run from the cache, then the extra rows
	// gathered, continuing the same accumulation.
	out := s.att[i*qDim+h0*hd : i*qDim+(h0+nh)*hd]
	ab.vf = grow(ab.vf, attnChunk*hd)
	vf := ab.vf
	for k0, nn := lo, 0; k0 < run; k0 += nn {
		nn = min(attnChunk, run-k0, kv.PageEnd(k0)-k0)
		widenRows(vf[:nn*hd], cache, true, li, g, k0, k0+nn)
		simdWsumG(&sc[k0-base], sst, nh, &vf[0], nn, hd, &out[0], hd, k0 > lo)
	}
	if len(extra) > 0 {
		ab.vg = grow(ab.vg, len(extra)*hd)
		vg := ab.vg
		for e, k := range extra {
			widenKV(vg[e*hd:(e+1)*hd], cache.V(li, g, cache.Len()+int(k)), cache.Type())
		}
		simdWsumG(&sc[run-base], sst, nh, &vg[0], len(extra), hd, &out[0], hd, run > lo)
	}
	for h := range nh {
		scaleRow(out[h*hd:(h+1)*hd], 1/sums[h])
	}
}

// scoreCached scores nq queries (stride hd) against the nfull whole 16-key
// blocks of kv head g's keys in layer li from position base (a multiple of
// 16) on, widening up to attnChunk keys of one page at a time into kf:
// scores go to sc (row stride sst), running maxima to mx.
func scoreCached(q *float32, nq, hd int, cache *kv.Cache, li, g, base, nfull int, kf []float32, scale float32, sc []float32, sst int, mx *float32) {
	for b0, nb := 0, 0; b0 < nfull; b0 += nb {
		pos := base + 16*b0
		nb = min(attnChunk/16, nfull-b0, (kv.PageEnd(pos)-pos)/16)
		widenKV(kf[:nb*16*hd], cache.K(li, g, pos), cache.Type())
		simdScores16(q, nq, hd, &kf[0], nb, hd, scale, &sc[16*b0], sst, mx, 0xffff)
	}
}
