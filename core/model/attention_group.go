package model

import (
	"cmp"
	"math"
	"slices"

	"github.com/lmstream/lmstream/core/kv"
)

// Grouped attention: the query heads that share a KV head are computed
// together, so each key and value is read
// (and widened from the cache, attnChunk positions at a time) once for all
// of them; scores come with keys on lanes (scoresT), value sums with
// dimensions on lanes (attnWsumG).
//
// Keys are taken in tiles of attnTile positions from position 0 (one KV
// page each). Each (token, head) gets a partial softmax per tile it sees
// (the tile's largest score m, l = Σ e^(s−m), o = Σ e^(s−m)·v), and the
// partials are folded in tile order (softState.fold). A tile's partial is
// the same arithmetic whichever item, pass or thread computes it, and the
// fold is always the same left fold, so a token's attention is the same
// bits whether its tiles ran one after another inside its item (prefill,
// where items are many) or side by side on every thread (decode at depth,
// where one item per KV head would leave threads idle), and whether it was
// decoded alone, in a chain or as a tree node. Scores of a tile stay in L1
// instead of a whole row per query.

// maxGroupHeads is the most query heads of one KV head an item takes, the
// most attnWsumG sums at once (larger groups are split into near-equal
// parts).
const maxGroupHeads = 4

// attnTile is how many key positions one partial softmax covers: a KV
// page, so a tile's cached rows are contiguous.
const attnTile = kv.PageSize

// attnBuf is one pool chunk's attention scratch.
type attnBuf struct {
	sc     []float32   // scores of one tile, one padded row per query
	qg     []float32   // gathered queries, itemQueries each of a run's items
	qs     [][]float32 // a run's items' queries (attendRun)
	views  []itemView  // a run's items' views
	states []softState // a run's items' softmax states, itemQueries each
	kf     []float32   // a chunk of keys widened to float32, transposed (scoresT's kt)
	vf     []float32   // a chunk of values widened to float32, a row each
	vt     []float32   // a tile's values widened for a run of items (attendRun)
	ot     []float32   // a tile's value sums, hd floats per query
	pm, pl []float32   // a tile's largest score and Σ e^(s−m) per query
	krow   []uint16    // one scratch key as the cache holds it
	kcol   []float32   // the same key widened
}

// attnChunk is how many values are widened from the float16 cache at a
// time: 64 rows of 64 dims, 16 KiB of float32, stay in L1 while every query
// of the item reads them.
const attnChunk = 64

// ktStride is the row stride of a tile's keys widened and transposed: the
// tile and 16 more, so that the rows of one 16-key block, read one after
// another by the score kernel, fall in different L1 sets (a stride of a
// power of two would put them all in a few).
const ktStride = attnTile + 16

// attnTokens is the most tokens one grouped-attention item takes. Tokens of
// one sequence that form a chain (prefill, or a speculative chain) read the
// same keys and values; an item of several of them streams each block of
// keys and values from L2 once for all their query heads instead of once per
// token. 4 tokens × 3 heads of the default model fill the score kernel's
// query loop and still leave N/4 × KVHeads items to spread over the
// threads.
const attnTokens = 4

// itemQueries is the most queries one item holds; they are bits of a
// uint64 (attendTile's seen).
const itemQueries = attnTokens * maxGroupHeads

var _ [64 - itemQueries]struct{}

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
	// The items that read one KV head of one sequence side by side, so
	// that attendItems runs them a tile at a time (the order of items
	// changes nothing else).
	slices.SortStableFunc(s.attItems, func(a, b attnItem) int {
		if sa, sb := s.tok[a.i0].seq, s.tok[b.i0].seq; sa != sb {
			return cmp.Compare(sa, sb)
		}
		return cmp.Compare(a.h0/int32(group), b.h0/int32(group))
	})
}

// itemView is what an item's tokens see in one layer: token t sees the
// visible entries [lo[t], nv[t]) (entry i holds position i). Entries below
// run are the cache's rows Len()+… in order; those from run on are the
// scratch entries extra (a single-token item's tree branch; chain tokens
// have none).
type itemView struct {
	cache  *kv.Cache
	g, nt  int // KV head, tokens
	lo, nv [attnTokens]int
	run    int
	extra  []int32
}

func (m *Model) viewOf(li int, it attnItem) itemView {
	c, s := &m.cfg, &m.s
	v := itemView{cache: s.seqs[s.tok[it.i0].seq].cache, g: int(it.h0) / (c.Heads / c.KVHeads), nt: int(it.i1 - it.i0)}
	for t := range v.nt {
		lo, run, extra := m.visible(li, s.tok[int(it.i0)+t], v.cache.Len())
		if v.nt > 1 && len(extra) > 0 { // unreachable: planAttnItems groups chain tokens only
			panic("model: a chain attention item given a token with extra entries")
		}
		v.lo[t], v.nv[t] = lo, run+len(extra)
		v.run, v.extra = max(v.run, run), extra
	}
	return v
}

// tiles returns the tiles [first, last] that some token of the item sees.
func (v *itemView) tiles() (first, last int) {
	lo, nv := math.MaxInt, 0
	for t := range v.nt {
		lo, nv = min(lo, v.lo[t]), max(nv, v.nv[t])
	}
	return lo / attnTile, (nv - 1) / attnTile
}

// gatherKeysT widens the keys of visible entries [from, to) into the
// transposed block dst (stride ds): entry e in column e−from.
func (v *itemView) gatherKeysT(dst []float32, ds, li, hd, from, to int, ab *attnBuf) {
	if from < v.run {
		widenKeysT(dst, ds, v.cache, li, v.g, from, min(to, v.run), hd)
	}
	for e := max(from, v.run); e < to; e++ {
		j := v.cache.Len() + int(v.extra[e-v.run])
		ab.krow, ab.kcol = grow(ab.krow, v.cache.RowLen()), grow(ab.kcol, hd)
		widenKeyT(dst, ds, e-from, v.cache.KRow(li, v.g, j, ab.krow), v.cache.Type(), ab.kcol)
	}
}

// gatherValues widens the values of visible entries [from, to) into dst,
// hd floats an entry.
func (v *itemView) gatherValues(dst []float32, li, hd, from, to int) {
	if from < v.run {
		widenValues(dst[:(min(to, v.run)-from)*hd], v.cache, li, v.g, from, min(to, v.run))
	}
	for e := max(from, v.run); e < to; e++ {
		j := v.cache.Len() + int(v.extra[e-v.run])
		widenKV(dst[(e-from)*hd:(e-from+1)*hd], v.cache.V(li, v.g, j), v.cache.Type())
	}
}

// queriesOf returns the item's queries, nt·nh rows of hd: query t·nh+h is
// head h0+h of token i0+t (gathered into buf for several tokens).
func (m *Model) queriesOf(it attnItem, buf []float32) []float32 {
	c, s := &m.cfg, &m.s
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	i0, h0, nh := int(it.i0), int(it.h0), int(it.nh)
	if it.i1-it.i0 == 1 {
		return s.q[i0*qDim+h0*hd : i0*qDim+(h0+nh)*hd]
	}
	nt := int(it.i1 - it.i0)
	buf = buf[:nt*nh*hd]
	for t := range nt {
		copy(buf[t*nh*hd:(t+1)*nh*hd], s.q[(i0+t)*qDim+h0*hd:(i0+t)*qDim+(h0+nh)*hd])
	}
	return buf
}

// attendTile computes the partial softmax of each of the item's queries
// over tile k: ab.pm[q], ab.pl[q] and ab.ot[q·hd:(q+1)·hd], for the queries
// whose bit is set in the result (a token that sees no key of the tile has
// no partial). Scores come in 16-key blocks from base, the first seen key
// rounded down to a block: score j of a query's row is key base+j, and
// keys a query does not see are scored with their block but never used.
//
// vt, when not nil, holds the values of entries vbase on, widened (a run
// of items widens a tile's values once for all of them, attendRun);
// otherwise the values are widened attnChunk entries at a time.
func (m *Model) attendTile(li int, it attnItem, v *itemView, k int, q []float32, ab *attnBuf, vt []float32, vbase int) (seen uint64) {
	c := &m.cfg
	hd, nh := c.HeadDim, int(it.nh)
	nq := v.nt * nh
	var from, to [attnTokens]int
	a, b := math.MaxInt, 0
	for t := range v.nt {
		from[t], to[t] = max(v.lo[t], k*attnTile), min(v.nv[t], (k+1)*attnTile)
		if from[t] < to[t] {
			a, b = min(a, from[t]), max(b, to[t])
		}
	}
	if a >= b {
		return 0
	}
	base := a &^ 15
	sst := (b - base + 15) &^ 15
	ab.sc = grow(ab.sc, nq*sst)
	ab.kf, ab.vf = grow(ab.kf, hd*ktStride), grow(ab.vf, attnChunk*hd)
	ab.ot = grow(ab.ot, nq*hd)
	ab.pm, ab.pl = grow(ab.pm, nq), grow(ab.pl, nq)
	sc, kf, vf := ab.sc, ab.kf, ab.vf

	if v.cache.Type() == kv.F16 && canAVX2 && b <= v.run {
		// The tile's keys as the page holds them (the keys past b in
		// the page are scored too, and never used).
		blk, col := v.cache.KBlock(li, v.g, base)
		scoresTF16(q, nq, hd, blk[col:], kv.KStride, sst, hd, m.attnScale(), sc, sst)
	} else {
		v.gatherKeysT(kf, ktStride, li, hd, base, b, ab)
		for d := range hd {
			clear(kf[d*ktStride+b-base : d*ktStride+sst])
		}
		scoresT(q, nq, hd, kf, ktStride, sst, hd, m.attnScale(), sc, sst)
	}
	for qi := range nq {
		t := qi / nh
		if from[t] >= to[t] {
			continue
		}
		x := sc[qi*sst+from[t]-base : qi*sst+to[t]-base]
		if cp := c.AttnSoftcap; cp > 0 {
			softcap(x, cp)
		}
		mx := maxOf(x)
		ab.pm[qi], ab.pl[qi] = mx, softmaxWeights(x, mx)
		seen |= 1 << qi
	}
	if vt != nil {
		for t := range v.nt {
			if from[t] < to[t] {
				wsumG(sc[t*nh*sst+from[t]-base:], sst, nh, vt[(from[t]-vbase)*hd:], to[t]-from[t], hd, ab.ot[t*nh*hd:], hd, false)
			}
		}
		return seen
	}
	for c0 := base; c0 < b; c0 += attnChunk {
		c1 := min(b, c0+attnChunk)
		v.gatherValues(vf, li, hd, c0, c1)
		for t := range v.nt {
			f, e := max(c0, from[t]), min(c1, to[t])
			if f < e {
				wsumG(sc[t*nh*sst+f-base:], sst, nh, vf[(f-c0)*hd:], e-f, hd, ab.ot[t*nh*hd:], hd, f > from[t])
			}
		}
	}
	return seen
}

// softState is one query's softmax over the tiles folded so far: the
// largest score m and l = Σ e^(s−m); the value sum Σ e^(s−m)·v is in the
// query's output row.
type softState struct {
	m, l float32
	seen bool
}

// fold adds a tile's partial (m, l, o) to the state and out. Every path
// folds a query's tiles in order with this one function.
func (st *softState) fold(out []float32, m, l float32, o []float32) {
	if !st.seen {
		copy(out, o)
		st.m, st.l, st.seen = m, l, true
		return
	}
	nm := max(st.m, m)
	a, b := expf(st.m-nm), expf(m-nm)
	foldRow(out, o, a, b)
	st.l = st.l*a + l*b
	st.m = nm
}

// finish normalises out for query head h of layer li. A layer with
// attention sinks (gpt-oss) folds the head's sink logit s as one more key
// whose value is zero: the maximum becomes max(m, s) and the sum gains
// e^(s−max).
func (m *Model) finish(out []float32, st softState, li, h int) {
	if sinks := m.layers[li].sinks; sinks != nil {
		s := sinks[h]
		nm := max(st.m, s)
		a := expf(st.m - nm)
		scaleRow(out, a)
		st.l = st.l*a + expf(s-nm)
	}
	scaleRow(out, 1/st.l)
}

// outRow is query qi's output row of an item.
func (m *Model) outRow(it attnItem, qi int) []float32 {
	c := &m.cfg
	hd, qDim, nh := c.HeadDim, c.Heads*c.HeadDim, int(it.nh)
	o := (int(it.i0)+qi/nh)*qDim + (int(it.h0)+qi%nh)*hd
	return m.s.att[o : o+hd]
}

// attendItems computes items whole, each run of items that read one KV
// head of one sequence (planAttnItems puts them side by side) a tile at a
// time (attendRun).
func (m *Model) attendItems(li int, items []attnItem, ab *attnBuf) {
	group := int32(m.cfg.Heads / m.cfg.KVHeads)
	for len(items) > 0 {
		n := 1
		for n < len(items) && m.s.tok[items[n].i0].seq == m.s.tok[items[0].i0].seq && items[n].h0/group == items[0].h0/group {
			n++
		}
		m.attendRun(li, items[:n], ab)
		items = items[n:]
	}
}

// attendRun computes the attention of items that read the same KV head of
// the same sequence: tile by tile, every item that sees a tile taking its
// partial and folding it, so that a tile's keys and values come from memory
// once for all of them (a long context's tiles of one KV head outgrow the
// core's cache, and each item would stream them all again), and, when no
// item has tree entries of its own, the tile's values are widened once for
// all of them. Each query still folds its tiles in order, one after
// another, and its value sums take the same keys in the same order, so its
// bits do not depend on the run it came in.
func (m *Model) attendRun(li int, items []attnItem, ab *attnBuf) {
	hd, n := m.cfg.HeadDim, len(items)
	ab.views, ab.qs = grow(ab.views, n), grow(ab.qs, n)
	ab.states = grow(ab.states, n*itemQueries)
	ab.qg = grow(ab.qg, n*itemQueries*hd)
	clear(ab.states)
	first, last := math.MaxInt, -1
	share := n > 1
	for i, it := range items {
		ab.views[i] = m.viewOf(li, it)
		ab.qs[i] = m.queriesOf(it, ab.qg[i*itemQueries*hd:(i+1)*itemQueries*hd])
		f, l := ab.views[i].tiles()
		first, last = min(first, f), max(last, l)
		share = share && len(ab.views[i].extra) == 0
	}
	for k := first; k <= last; k++ {
		var vt []float32
		vbase := 0
		if share {
			// The entries some item sees in tile k: cache rows, as no
			// item has entries of its own.
			lo, hi := math.MaxInt, 0
			for i := range items {
				v := &ab.views[i]
				for t := range v.nt {
					if a, b := max(v.lo[t], k*attnTile), min(v.nv[t], (k+1)*attnTile); a < b {
						lo, hi = min(lo, a), max(hi, b)
					}
				}
			}
			if lo < hi {
				ab.vt = grow(ab.vt, (hi-lo)*hd)
				widenValues(ab.vt, ab.views[0].cache, li, ab.views[0].g, lo, hi)
				vt, vbase = ab.vt, lo
			}
		}
		for i, it := range items {
			v := &ab.views[i]
			if f, l := v.tiles(); k < f || k > l {
				continue
			}
			seen := m.attendTile(li, it, v, k, ab.qs[i], ab, vt, vbase)
			st := ab.states[i*itemQueries : (i+1)*itemQueries]
			for qi := range v.nt * int(it.nh) {
				if seen&(1<<qi) != 0 {
					st[qi].fold(m.outRow(it, qi), ab.pm[qi], ab.pl[qi], ab.ot[qi*hd:(qi+1)*hd])
				}
			}
		}
	}
	for i, it := range items {
		st := ab.states[i*itemQueries : (i+1)*itemQueries]
		for qi := range ab.views[i].nt * int(it.nh) {
			m.finish(m.outRow(it, qi), st[qi], li, int(it.h0)+qi%int(it.nh))
		}
	}
}

// attnSplit is one tile of one item when a layer's tiles run side by side:
// its partials go to s.attParts from off (per query: m, l, then hd value
// sums), seen says whose.
type attnSplit struct {
	item, tile int32
	off        int
	seen       uint64
}

// maxSplitFloats bounds the partials a layer keeps when it runs its tiles
// side by side (64 MiB); a pass that would need more runs them item by
// item, with the same result.
const maxSplitFloats = 16 << 20

// attentionGrouped spreads the pass's attention items (planAttnItems) over
// the pool: whole items when there are enough of them to fill the threads,
// else every tile of every item, folded afterwards (decode at depth: one
// item per KV head, 3 for the default model, would leave most threads of a
// large machine idle for the longest part of a long-context step). Whole
// groups are faster than single heads even when they balance worse over
// the threads: a single head's value sum is bound by its 4 accumulators'
// FMA latency, a group of 3 by FMA throughput.
func (m *Model) attentionGrouped(b *Batch, li int) {
	s := &m.s
	threads := m.pool.Threads()
	items := s.attItems
	if threads > 1 && len(items) < 4*threads && m.splitTiles(li) {
		m.attendSplit(li)
		return
	}
	grain := max(1, len(items)/(4*threads))
	m.pool.Run(len(items), grain, func(lo, hi int) {
		ab := <-s.attBufs
		m.attendItems(li, items[lo:hi], ab)
		s.attBufs <- ab
	})
}

// splitTiles lists every (item, tile) of layer li in s.attSplits with room
// for its partials, keeps each item's view in s.attViews, and says whether
// running them side by side is worth it (more tiles than items) and within
// maxSplitFloats.
func (m *Model) splitTiles(li int) bool {
	s := &m.s
	hd := m.cfg.HeadDim
	s.attSplits = s.attSplits[:0]
	s.attViews = grow(s.attViews, len(s.attItems))
	off := 0
	for i, it := range s.attItems {
		v := &s.attViews[i]
		*v = m.viewOf(li, it)
		first, last := v.tiles()
		for k := first; k <= last; k++ {
			s.attSplits = append(s.attSplits, attnSplit{item: int32(i), tile: int32(k), off: off})
			off += v.nt * int(it.nh) * (hd + 2)
		}
	}
	if len(s.attSplits) <= len(s.attItems) || off > maxSplitFloats {
		return false
	}
	s.attParts = grow(s.attParts, off)
	return true
}

// attendSplit runs layer li's tiles side by side (splitTiles), then folds
// each item's partials in tile order.
func (m *Model) attendSplit(li int) {
	s := &m.s
	hd := m.cfg.HeadDim
	splits, items := s.attSplits, s.attItems
	m.pool.Run(len(splits), 1, func(lo, hi int) {
		ab := <-s.attBufs
		for x := lo; x < hi; x++ {
			sp := &splits[x]
			it := items[sp.item]
			ab.qg = grow(ab.qg, itemQueries*m.cfg.HeadDim)
			sp.seen = m.attendTile(li, it, &s.attViews[sp.item], int(sp.tile), m.queriesOf(it, ab.qg), ab, nil, 0)
			nq := int(it.i1-it.i0) * int(it.nh)
			p := s.attParts[sp.off : sp.off+nq*(hd+2)]
			copy(p[:nq], ab.pm[:nq])
			copy(p[nq:2*nq], ab.pl[:nq])
			copy(p[2*nq:], ab.ot[:nq*hd])
		}
		s.attBufs <- ab
	})
	// Each item's tiles are consecutive in splits, in tile order.
	starts := s.attStarts[:0]
	for x := range splits {
		if x == 0 || splits[x].item != splits[x-1].item {
			starts = append(starts, x)
		}
	}
	starts = append(starts, len(splits))
	s.attStarts = starts
	m.pool.Run(len(starts)-1, 1, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			it := items[splits[starts[r]].item]
			nq := int(it.i1-it.i0) * int(it.nh)
			var st [itemQueries]softState
			for _, sp := range splits[starts[r]:starts[r+1]] {
				p := s.attParts[sp.off : sp.off+nq*(hd+2)]
				for qi := range nq {
					if sp.seen&(1<<qi) != 0 {
						st[qi].fold(m.outRow(it, qi), p[qi], p[nq+qi], p[2*nq+qi*hd:2*nq+(qi+1)*hd])
					}
				}
			}
			for qi := range nq {
				m.finish(m.outRow(it, qi), st[qi], li, int(it.h0)+qi%int(it.nh))
			}
		}
	})
}

// wsumG sets, for each head h < nh, out[h·os : h·os+hd] (zeroed first
// unless acc) += Σ_j p[h·ps+j]·v[j·hd : (j+1)·hd], key by key in order:
// the kernel where hd is a multiple of 64, else the same sums in Go (a
// model's head dimension picks one for every pass, so a token's sums never
// mix the two).
func wsumG(p []float32, ps, nh int, v []float32, n, hd int, out []float32, os int, acc bool) {
	if n == 0 {
		return
	}
	_ = p[(nh-1)*ps+n-1]
	_ = v[n*hd-1]
	_ = out[(nh-1)*os+hd-1]
	if haveSIMD && hd%64 == 0 {
		simdWsumG(&p[0], ps, nh, &v[0], n, hd, &out[0], os, acc)
		return
	}
	for h := range nh {
		o := out[h*os : h*os+hd]
		if !acc {
			clear(o)
		}
		for j, w := range p[h*ps : h*ps+n] {
			for d, x := range v[j*hd : (j+1)*hd] {
				o[d] += w * x
			}
		}
	}
}

// foldRow sets out[i] = out[i]·a + o[i]·b (one rounding less with the
// kernel, which needs a multiple of 16; the head dimension picks the same
// one for every fold of a model).
func foldRow(out, o []float32, a, b float32) {
	if haveSIMD && len(out)%16 == 0 {
		simdFold(&out[0], &o[0], len(out), a, b)
		return
	}
	for i := range out {
		out[i] = out[i]*a + o[i]*b
	}
}

// maxOf is the largest of x (-Inf when empty).
func maxOf(x []float32) float32 {
	if haveSIMD {
		if len(x) == 0 {
			return float32(math.Inf(-1))
		}
		return simdMax(&x[0], len(x))
	}
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	return mx
}
