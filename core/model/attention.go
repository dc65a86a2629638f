package model

import "math"

// attention computes s.att for layer li: for every token i and query head
// h, softmax(q·Kᵀ/√d)·V over the keys token i may see: every committed entry
// of its cache, then its visible scratch entries (the run [0, span) and the
// extra list; see tokInfo). Query head h reads kv head h/(Heads/KVHeads)
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
			ab.sc = m.attendOne(b, li, it/c.Heads, it%c.Heads, ab.sc)
		}
		s.attBufs <- ab
	})
}

// attendOne is one (token i, head h) item; buf is scratch for the scores,
// grown if needed and returned.
func (m *Model) attendOne(b *Batch, li, i, h int, buf []float32) []float32 {
	c, s := &m.cfg, &m.s
	hd, qDim := c.HeadDim, c.Heads*c.HeadDim
	t := s.tok[i]
	cache := b.Cache[i]
	g := h / (c.Heads / c.KVHeads)
	keys, vals := cache.K(li, g), cache.V(li, g)
	q := s.q[i*qDim+h*hd : i*qDim+(h+1)*hd]
	out := s.att[i*qDim+h*hd : i*qDim+(h+1)*hd]

	run := cache.Len() + t.span // contiguous entries [0, run)
	extra := s.extra[t.extraLo:t.extraHi]
	nv := run + len(extra)
	if cap(buf) < nv {
		buf = make([]float32, nv+nv/2)
	}
	sc := buf[:nv]

	// Scores and their maximum.
	scale := float32(1 / math.Sqrt(float64(hd)))
	mx := float32(math.Inf(-1))
	if haveAVX512 && hd%16 == 0 && run > 0 {
		mx = attnScores(&q[0], &keys[0], run, hd, scale, &sc[0])
	} else {
		for j := 0; j < run; j++ {
			v := dot(q, keys[j*hd:(j+1)*hd]) * scale
			sc[j] = v
			mx = max(mx, v)
		}
	}
	for e, k := range extra {
		j := cache.Len() + int(k)
		v := dot(q, keys[j*hd:(j+1)*hd]) * scale
		sc[run+e] = v
		mx = max(mx, v)
	}
	// Softmax weights (unnormalised) and the weighted sum of values.
	var sum float32
	j := 0
	if haveAVX512 && nv >= 16 {
		j = nv &^ 15
		sum = attnExp(&sc[0], j, mx)
	}
	for ; j < nv; j++ {
		p := expf(sc[j] - mx)
		sc[j] = p
		sum += p
	}
	if haveAVX512 && hd%64 == 0 && run > 0 {
		attnWsum(&sc[0], &vals[0], run, hd, &out[0])
	} else {
		clear(out)
		for j := 0; j < run; j++ {
			axpy(out, sc[j], vals[j*hd:(j+1)*hd])
		}
	}
	for e, k := range extra {
		j := cache.Len() + int(k)
		axpy(out, sc[run+e], vals[j*hd:(j+1)*hd])
	}
	inv := 1 / sum
	for d := range out {
		out[d] *= inv
	}
	return buf
}
