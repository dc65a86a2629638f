package model

// Scores with keys on lanes. A tile's keys are widened into a transposed
// block kt (dimension d of key j at kt[d·ks+j]: the cache keeps keys
// unit-major, so each dimension of a page's keys is one contiguous run),
// and a query's score against key j is one fused multiply-add per
// dimension, d = 0 first, from zero, then times the scale. Every key is
// its own chain, so the score is the same bits whichever keys and queries
// share a call, a pass or a thread (decode, chains, tree nodes, split
// tiles); and there is no horizontal sum: the FMAs of one dimension for 16
// keys and 6 queries share one load of the keys, which is what lets the
// kernel run near the FMA units' rate.

// scoresT sets out[i·os+j] = scale·Σ_d q[i·qs+d]·kt[d·ks+j] for i < nq and
// j < nk (a multiple of 16), as described above: the AVX2 kernel (also on
// AVX-512 machines: the lanes' arithmetic is the same at either width)
// where the machine has it, else scoresTGo.
func scoresT(q []float32, nq, qs int, kt []float32, ks, nk, hd int, scale float32, out []float32, os int) {
	if !scoresFit(len(q), nq, qs, len(kt), ks, nk, hd, len(out), os) {
		return
	}
	if !canAVX2 || nk%16 != 0 {
		scoresTGo(q, nq, qs, kt, ks, nk, hd, scale, out, os)
		return
	}
	queryGroups(nq, func(i, g int) {
		attnScoresTAVX2(&q[i*qs], g, qs, &kt[0], ks, nk, hd, scale, &out[i*os], os)
	})
}

// scoresTF16 is scoresT for float16 keys read in place (the transposed
// keys of a KV page, kv.Cache.KBlock, from a position on), with the bits
// scoresT gives for the same keys widened. Only where canAVX2, nk a
// multiple of 16.
func scoresTF16(q []float32, nq, qs int, kt []uint16, ks, nk, hd int, scale float32, out []float32, os int) {
	if !scoresFit(len(q), nq, qs, len(kt), ks, nk, hd, len(out), os) {
		return
	}
	if !canAVX2 || nk%16 != 0 {
		panic("model: scoresTF16 without its kernel")
	}
	queryGroups(nq, func(i, g int) {
		attnScoresTF16AVX2(&q[i*qs], g, qs, &kt[0], ks, nk, hd, scale, &out[i*os], os)
	})
}

// scoresFit says whether there is anything to score, and panics when the
// rows scoresT would read or write do not lie within their slices (the
// kernels check nothing).
func scoresFit(qLen, nq, qs, ktLen, ks, nk, hd, outLen, os int) bool {
	if nq == 0 || nk == 0 {
		return false
	}
	if (nq-1)*qs+hd > qLen || (hd-1)*ks+nk > ktLen || (nq-1)*os+nk > outLen {
		panic("model: scoresT's rows run past their slices")
	}
	return true
}

// queryGroups calls kernel(i, g) for groups of g = 6 query rows from row
// i; what is left goes as a group of 6 or 3 that overlaps the rows before
// it (a row computed twice gets the same bits both times), and only fewer
// than 3 rows in all go one at a time.
func queryGroups(nq int, kernel func(i, g int)) {
	i := 0
	for ; i+6 <= nq; i += 6 {
		kernel(i, 6)
	}
	switch left := nq - i; {
	case left == 0:
	case left > 3 && nq >= 6:
		kernel(nq-6, 6)
	case left > 3:
		kernel(0, 3)
		kernel(nq-3, 3)
	case nq >= 3:
		kernel(nq-3, 3)
	default:
		for ; i < nq; i++ {
			kernel(i, 1)
		}
	}
}

// scoresTGo is scoresT in Go (machines without the kernel). Go may or may
// not fuse the multiply-add, so only the kernel's bits are pinned by tests.
func scoresTGo(q []float32, nq, qs int, kt []float32, ks, nk, hd int, scale float32, out []float32, os int) {
	for i := range nq {
		o := out[i*os : i*os+nk]
		clear(o)
		for d := range hd {
			qd, row := q[i*qs+d], kt[d*ks:d*ks+nk]
			for j, k := range row {
				o[j] += qd * k
			}
		}
		for j := range o {
			o[j] *= scale
		}
	}
}
