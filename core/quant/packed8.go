package quant

import "sync"

// The 8-row packed layout: the AVX2 counterpart of packed.go's 16-row
// groups, for CPUs without AVX-512 VNNI (AMD Zen 1–3, Intel client cores).
//
// Why: the row-at-a-time AVX2 kernels (gen_avx2.go) spend, per 32-weight
// block and weight row, a scale conversion, an int-to-float conversion and
// two FMAs next to two integer multiplies, and for Q5_0 a dozen more ops to
// rebuild the fifth bits. With eight weight rows in the eight lanes of a
// YMM, that work is done once per block for all eight rows, and what is
// left per row and block is the integer multiply-adds themselves. The
// Qwen2.5 0.5B and Gemma 3 files are mostly Q5_0 (their 896- and 640-wide
// rows are not a multiple of the K-quants' 256) with a Q8_0 head.
//
// A matrix's rows are taken in groups of 8 (the last padded with zero
// rows); a group is nb records, one per 32-element block, each exactly 8
// blocks' bytes, so decode reads no more memory than the stored matrix:
//
//	Q4_0 (144 B)  [0:128)  4 parts × 32 B: part k, dword lane r = bytes
//	                       qs[4k:4k+4] of row r (low nibbles: elements
//	                       4k…4k+3, high nibbles: 16+4k…16+4k+3)
//	              [128:144) d of rows 0..7, f16
//	Q4_1 (160 B)  [0:128)  as Q4_0
//	              [128:144) d, [144:160) m of rows 0..7, f16
//	Q5_0 (176 B)  [0:128)  as Q4_0
//	              [128:160) qh' of rows 0..7, u32: byte i bit k = element
//	                       4k+i's fifth bit, bit 4+k = element 16+4k+i's,
//	                       so one shift and mask puts a part's fifth bits
//	                       at bit 4 of its bytes
//	              [160:176) d of rows 0..7, f16
//	IQ4_NL (144 B) as Q4_0, a nibble being an index into iq4Levels
//	Q8_0 (272 B)  [0:256)  8 parts × 32 B: part k, lane r = qs[4k:4k+4]
//	              [256:272) d of rows 0..7, f16
//	Q4_K (1152 B, a 256-element super-block)
//	              [0:1024) 32 parts × 32 B: part 8g+k, lane r = bytes
//	                       qs[32g+4k:32g+4k+4] of row r (low nibbles: sub-
//	                       block 2g, high nibbles: sub-block 2g+1)
//	              [1024:1120) the 12 packed scale bytes as three parts: A
//	                       (bytes 0–3 of rows 0..7), B (4–7), C (8–11)
//	              [1120:1136) d, [1136:1152) dmin of rows 0..7, f16
//	Q6_K (1680 B)
//	              [0:1024) 32 parts of ql (part p, lane r: ql[4p:4p+4])
//	              [1024:1536) 16 parts of qh (part p: qh[4p:4p+4])
//	              [1536:1664) 4 parts of the int8 scales
//	              [1664:1680) d of rows 0..7, f16
//	IQ4_XS (1088 B)
//	              [0:1024) 32 parts: part 4s+k, lane r = bytes
//	                       qs[16s+4k:16s+4k+4] of row r (sub-block s's
//	                       elements 4k… in the low nibbles, 16+4k… in
//	                       the high ones)
//	              [1024:1056) scales_l of rows 0..7, 4 bytes each
//	              [1056:1072) scales_h, [1072:1088) d of rows 0..7
//
// The legacy kernels take the activation scales as float32 pairs per block
// (p8Scales): d_x, and −o·d_x·Σx for the offset o of Q4_0 (8) and Q5_0
// (16; 0 for Q8_0 and IQ4_NL), whose quants the kernels multiply as the unsigned values stored;
// for Q4_1, d_x and the Q8_1 block's s_x = d_x·Σx for the minimum term.
// The K-quant kernels read everything they need from the Q8_K blocks.
const (
	p8Rows    = 8
	p8MaxActs = 8 // the most activation rows any kernel call takes
)

// p8Record is the bytes of one 8-row block record of wt in the 8-row
// layout, or 0 when wt has none.
func p8Record(wt Type) int {
	switch wt {
	case Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K, IQ4_NL, IQ4_XS:
		return p8Rows * wt.BlockBytes()
	}
	return 0
}

// p8Legacy reports whether wt's 8-row kernels take p8Scales.
func p8Legacy(wt Type) bool {
	return wt == Q4_0 || wt == Q4_1 || wt == Q5_0 || wt == Q8_0 || wt == IQ4_NL
}

// p8Kernel runs na ≤ p8Acts[wt] activation rows (stride xs bytes) over ng
// consecutive 8-row groups of nb records each, writing 8·ng floats per
// activation row to out[j·os:].
type p8Kernel func(wp []byte, nb, ng int, x []byte, xs int, sc, out []float32, os, na int)

// packed8 is k's 8-row kernel for wt, or nil.
func (k *kernelSet) packed8(wt Type) p8Kernel {
	if int(wt) >= len(k.p8) {
		return nil
	}
	return k.p8[wt]
}

// pack8Go packs rows [8g, min(8g+8, rows)) of the wt matrix w into dst
// (nb records, see the layout above), zero-padding missing rows.
func pack8Go(wt Type, w []byte, wrb, rows, cols, g int, dst []byte) {
	nb, bb, rec := cols/wt.BlockElems(), wt.BlockBytes(), p8Record(wt)
	dst = dst[:nb*rec]
	r0 := g * p8Rows
	if r0+p8Rows > rows {
		clear(dst) // the padding rows
	}
	if wt == Q4_K {
		for r := 0; r < p8Rows && r0+r < rows; r++ {
			row := w[(r0+r)*wrb : (r0+r+1)*wrb]
			for b := 0; b < nb; b++ {
				src, rec := row[bb*b:bb*(b+1)], dst[b*rec:(b+1)*rec]
				for p := 0; p < 32; p++ {
					put32(rec[32*p+4*r:], le32(src[16+4*p:]))
				}
				for i := 0; i < 3; i++ {
					put32(rec[1024+32*i+4*r:], le32(src[4+4*i:]))
				}
				copy(rec[1120+2*r:1122+2*r], src[0:2])
				copy(rec[1136+2*r:1138+2*r], src[2:4])
			}
		}
		return
	}
	if wt == IQ4_XS {
		for r := 0; r < p8Rows && r0+r < rows; r++ {
			row := w[(r0+r)*wrb : (r0+r+1)*wrb]
			for b := 0; b < nb; b++ {
				src, rec := row[bb*b:bb*(b+1)], dst[b*rec:(b+1)*rec]
				for p := 0; p < 32; p++ {
					put32(rec[32*p+4*r:], le32(src[8+4*p:]))
				}
				put32(rec[1024+4*r:], le32(src[4:8]))
				copy(rec[1056+2*r:1058+2*r], src[2:4])
				copy(rec[1072+2*r:1074+2*r], src[0:2])
			}
		}
		return
	}
	if wt == Q6_K {
		for r := 0; r < p8Rows && r0+r < rows; r++ {
			row := w[(r0+r)*wrb : (r0+r+1)*wrb]
			for b := 0; b < nb; b++ {
				src, rec := row[bb*b:bb*(b+1)], dst[b*rec:(b+1)*rec]
				for p := 0; p < 32; p++ { // ql
					put32(rec[32*p+4*r:], le32(src[4*p:]))
				}
				for p := 0; p < 16; p++ { // qh
					put32(rec[1024+32*p+4*r:], le32(src[128+4*p:]))
				}
				for p := 0; p < 4; p++ { // scales
					put32(rec[1536+32*p+4*r:], le32(src[192+4*p:]))
				}
				copy(rec[1664+2*r:1666+2*r], src[208:210])
			}
		}
		return
	}
	parts := 4 // 32-byte parts of quants per record
	if wt == Q8_0 {
		parts = 8
	}
	qsOff := 2 // where a stored block's quants start
	switch wt {
	case Q5_0:
		qsOff = 6
	case Q4_1:
		qsOff = 4
	}
	dOff := 32 * parts
	if wt == Q5_0 {
		dOff += 32
	}
	for r := 0; r < p8Rows && r0+r < rows; r++ {
		row := w[(r0+r)*wrb : (r0+r+1)*wrb]
		for b := 0; b < nb; b++ {
			src, rec := row[bb*b:bb*(b+1)], dst[b*rec:(b+1)*rec]
			for k := 0; k < parts; k++ {
				put32(rec[32*k+4*r:], le32(src[qsOff+4*k:]))
			}
			copy(rec[dOff+2*r:dOff+2*r+2], src[0:2])
			if wt == Q4_1 {
				copy(rec[dOff+16+2*r:dOff+18+2*r], src[2:4])
			}
			if wt == Q5_0 {
				put32(rec[128+4*r:], spreadQh(le32(src[2:6])))
			}
		}
	}
}

// spreadQh rearranges a Q5_0 block's fifth bits (bit e for element e)
// into the layout's qh' word: byte i bit k = bit 4k+i, bit 4+k = bit
// 16+4k+i. Byte m of qh holds bits 8m+i and 8m+4+i, which land at bits 2m
// and 2m+1 of byte i: one table lookup a byte (spreadPairs).
func spreadQh(qh uint32) uint32 {
	return spreadPairs[qh&255] | spreadPairs[qh>>8&255]<<2 | spreadPairs[qh>>16&255]<<4 | spreadPairs[qh>>24]<<6
}

// spreadPairs[v] has bit i of v at bit 0 of byte i and bit 4+i at bit 1
// (i < 4).
var spreadPairs = func() (t [256]uint32) {
	for v := range t {
		for i := 0; i < 4; i++ {
			t[v] |= uint32(v>>i&1)<<(8*i) | uint32(v>>(4+i)&1)<<(8*i+1)
		}
	}
	return t
}()

// p8Scales writes the kernels' float32 pairs for nb activation blocks
// (Q8_0, or Q8_1 for Q4_1) against weights of type wt: d_x, and
// −o·d_x·Σq_x (o = 8 for Q4_0, 16 for Q5_0, 0 for Q8_0 and IQ4_NL), or
// s_x for Q4_1.
func p8Scales(wt Type, x []byte, nb int, dst []float32) {
	off := int32(0)
	switch wt {
	case Q4_0:
		off = 8
	case Q5_0:
		off = 16
	}
	if wt == Q4_1 { // Q8_1 blocks: d_x and s_x as stored
		for b := 0; b < nb; b++ {
			dst[2*b], dst[2*b+1] = f16at(x[36*b:]), f16at(x[36*b+2:])
		}
		return
	}
	for b := 0; b < nb; b++ {
		blk := x[34*b : 34*b+34]
		dx := f16at(blk)
		dst[2*b] = dx
		if off == 0 {
			dst[2*b+1] = 0
			continue
		}
		s := int32(0)
		for _, q := range blk[2:] {
			s += int32(int8(q))
		}
		dst[2*b+1] = float32(-off*s) * dx
	}
}

// p8RowScales is p8Scales for n activation rows into the pooled buffer
// *scp, or nil for the types that take none.
func p8RowScales(wt Type, xq []byte, xrb, n, nb int, scp *[]float32) []float32 {
	if !p8Legacy(wt) {
		return nil
	}
	sc := growFloats(scp, n*nb*2)
	for i := 0; i < n; i++ {
		p8Scales(wt, xq[i*xrb:(i+1)*xrb], nb, sc[i*nb*2:(i+1)*nb*2])
	}
	return sc
}

// matmulPacked8 runs the 8-row kernels of wt over all row groups of the
// packed matrix wp.
func matmulPacked8(k *kernelSet, wt Type, wp []byte, rows, cols int, xq []byte, n int, out []float32, pool *Pool) {
	t := p8Tasks.Get().(*p8Task)
	j := &t.jobs[0]
	j.init(k, wt, wp, rows, cols, xq, n, out)
	pool.Run(j.units, j.chunk(pool.Threads()), t.runOne)
	j.release()
	t.put()
}

// p8Task holds the jobs of one matmul call (one matrix, or a set's up to
// three) with its pool functions bound once: a decode step makes about
// two hundred calls, and a fresh p8Job and method value each was two
// allocations a call, most of a step's garbage. A task goes back to
// p8Tasks when its Pool.Run has returned, after which no thread calls its
// functions (a late worker finds no chunk left).
type p8Task struct {
	jobs           [maxSetJobs]p8Job
	set            int // jobs in use by runSet
	runOne, runSet func(lo, hi int)
}

// maxSetJobs is the most matrices a pooled set task takes (q, k and v);
// a larger set allocates its own.
const maxSetJobs = 3

var p8Tasks = sync.Pool{New: func() any {
	t := new(p8Task)
	t.runOne = t.jobs[0].run
	t.runSet = func(lo, hi int) { runSet(t.jobs[:t.set], lo, hi) }
	return t
}}

// put clears t's references to the caller's slices and pools it.
func (t *p8Task) put() {
	for i := range t.jobs {
		t.jobs[i] = p8Job{}
	}
	t.set = 0
	p8Tasks.Put(t)
}

// runSet runs units [lo, hi) of the jobs taken in order, as one range of
// units.
func runSet(jobs []p8Job, lo, hi int) {
	for i := range jobs {
		j := &jobs[i]
		if lo < j.units && hi > 0 {
			j.run(max(lo, 0), min(hi, j.units))
		}
		lo, hi = lo-j.units, hi-j.units
	}
}

// p8Job is one matrix's share of a pool job over the 8-row kernels: its
// work comes in units of two groups, so that a pair kernel (k.p16) can
// take both at once.
type p8Job struct {
	wt                 Type
	wp, xq             []byte
	out                []float32
	rows, n            int
	nb, gb, groups     int
	xrb                int
	units              int
	kern               p8Kernel
	pair               func(wp []byte, gb, nb int, x []byte, xs int, sc, out []float32, os, na int)
	acts, calls        int
	scp                *[]float32
	sc                 []float32
	amx                func(wp []byte, gb, nb int, x, xa []byte, xs int, out []float32, os, na, pairs int)
	amxCalls, xaStride int
	xa                 *[]byte
}

// init prepares j for wp · xq into out (n activation rows); release
// gives back what it took from the pools.
func (j *p8Job) init(k *kernelSet, wt Type, wp []byte, rows, cols int, xq []byte, n int, out []float32) {
	nb := cols / wt.BlockElems()
	*j = p8Job{wt: wt, wp: wp, xq: xq, out: out, rows: rows, n: n, nb: nb,
		gb: nb * p8Record(wt), groups: (rows + p8Rows - 1) / p8Rows,
		xrb: nb * ActType(wt).BlockBytes(), kern: k.packed8(wt), pair: k.p16[wt]}
	j.units = (j.groups + 1) / 2
	j.scp = scalePool.Get().(*[]float32)
	j.sc = p8RowScales(wt, xq, j.xrb, n, nb, j.scp)
	// Activation rows in near-equal calls of at most the kernel's rows
	// (its register budget).
	j.acts = k.p8Acts[wt]
	j.calls = (n + j.acts - 1) / j.acts
	// The tile unit takes a chunk's whole pairs at once, up to 16
	// activation rows a call, where the calls get amxMinActs rows or more.
	if c := (n + amxMaxActs - 1) / amxMaxActs; k.amx[wt] != nil && n/c >= amxMinActs {
		j.amx, j.amxCalls = k.amx[wt], c
		j.xa = amxActsPool.Get().(*[]byte)
		*j.xa = amxActs(wt, xq, n, nb, j.xrb, c, *j.xa)
		j.xaStride = nb * amxActStride(wt)
	}
}

func (j *p8Job) release() {
	scalePool.Put(j.scp)
	if j.xa != nil {
		amxActsPool.Put(j.xa)
	}
}

// chunk is the units a pool hand-out takes: about 16 chunks per thread,
// handed out dynamically by the pool.
func (j *p8Job) chunk(threads int) int {
	return max(1, (j.units+16*threads-1)/(16*threads))
}

// run computes units [lo, hi) of j.
func (j *p8Job) run(lo, hi int) {
	wp, xq, out, sc := j.wp, j.xq, j.out, j.sc
	rows, n, nb, gb, xrb := j.rows, j.n, j.nb, j.gb, j.xrb
	var tail []float32 // the last group's 8 lanes, when rows%8 != 0
	if j.amxCalls > 0 {
		full := min(hi, rows/(2*p8Rows)) // units lo…full−1 are whole pairs
		if full > lo {
			n0 := 0
			for c := 0; c < j.amxCalls; c++ {
				na := (n - n0) / (j.amxCalls - c)
				j.amx(wp[2*lo*gb:2*full*gb], gb, nb, xq[n0*xrb:(n0+na)*xrb], (*j.xa)[n0*j.xaStride:(n0+na)*j.xaStride], xrb, out[n0*rows+2*lo*p8Rows:], rows, na, full-lo)
				n0 += na
			}
			lo = full
		}
	}
	// eight runs groups [g0, g1) through the 8-row kernel: the whole
	// ones in one call per activation split, a partial last group
	// into tail, of which it keeps the valid rows.
	eight := func(g0, g1 int) {
		whole := min(g1, rows/p8Rows)
		n0 := 0
		for c := 0; c < j.calls; c++ {
			na := (n - n0) / (j.calls - c)
			x := xq[n0*xrb : (n0+na)*xrb]
			var s []float32
			if sc != nil {
				s = sc[n0*nb*2 : (n0+na)*nb*2]
			}
			if whole > g0 {
				j.kern(wp[g0*gb:whole*gb], nb, whole-g0, x, xrb, s, out[n0*rows+g0*p8Rows:], rows, na)
			}
			if g1 > whole { // the last, partial group: 8 lanes out, valid kept
				if tail == nil {
					tail = make([]float32, j.acts*p8Rows)
				}
				r0 := whole * p8Rows
				j.kern(wp[whole*gb:g1*gb], nb, 1, x, xrb, s, tail, p8Rows, na)
				for i := 0; i < na; i++ {
					copy(out[(n0+i)*rows+r0:(n0+i+1)*rows], tail[i*p8Rows:])
				}
			}
			n0 += na
		}
	}
	if j.pair == nil {
		eight(2*lo, min(2*hi, j.groups))
		return
	}
	for u := lo; u < hi; u++ {
		if (2*u+2)*p8Rows > rows {
			eight(2*u, min(2*u+2, j.groups))
			continue
		}
		r0 := 2 * u * p8Rows
		n0 := 0
		for c := 0; c < j.calls; c++ {
			na := (n - n0) / (j.calls - c)
			var s []float32
			if sc != nil {
				s = sc[n0*nb*2 : (n0+na)*nb*2]
			}
			j.pair(wp[2*u*gb:(2*u+2)*gb], gb, nb, xq[n0*xrb:(n0+na)*xrb], xrb, s, out[n0*rows+r0:], rows, na)
			n0 += na
		}
	}
}
