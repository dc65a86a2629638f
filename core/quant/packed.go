package quant

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// Packed weights and the outer-product (batched) kernels.
//
// The single-row kernels (dot_q4_amd64.s, dot_q41r_amd64.s) lay one weight
// row along a ZMM and spend their shuffle-port work (nibble reordering,
// scale gathering) once per weight row *per activation row*. For N
// activation rows that work is repeated N times. The packed layout turns
// the matmul around: the 16 lanes of a ZMM are 16 different weight rows, so
// one VPDPBUSD with a 4-byte activation broadcast (embedded {1to16} memory
// operand, no shuffle) advances 16 dot products by 4 elements, and the
// decoded weights of a block stay in registers while up to 8 activation
// rows pass over them.
//
// Layout (packQ41Go is the definition): rows are taken in groups of 16 (the
// last group padded with zero rows); a group is nb records of 320 bytes, one
// per 32-element block:
//
//	[  0:256)  4 × 64 B: in record part k, dword lane r holds bytes
//	           qs[4k:4k+4] of row r's block, i.e. elements 4k..4k+3 in the
//	           low nibbles and 16+4k..16+4k+3 in the high nibbles
//	[256:288)  d of rows 0..15, f16
//	[288:320)  m of rows 0..15, f16
//
// That is exactly as many bytes as Q4_1 (20 per row-block), so a packed
// matrix costs no more memory bandwidth than the original for decode.
//
// Per block and activation row n the kernel computes the exact integer
// Σ q·x over 32 elements for 16 rows (8 VPDPBUSD), then
// acc += (d_w·d_x)·Σ + m_w·s_x, the same math as DotQ4_1Q8_1Generic.
//
// Q8_0 (the tied embedding / output head) uses the same scheme with 544-byte
// records: 8 × 64 B of qs (part k, lane r = bytes qs[4k:4k+4] of row r, each
// stored +128 so VPDPBUSD can take them as its unsigned operand), then the 16
// d values (f16). The +128 is taken back exactly in the integer domain: the
// activation side carries -128·Σq_x per block, the kernel's starting value
// of each block's integer sum (see q80ScalesGeneric).
const (
	packGroup      = 16
	q41PackedBlock = 256 + 32 + 32
	q80PackedBlock = 512 + 32
	packActs       = 8 // activation rows per kernel call (register budget)
)

// packedRecord is the bytes of one packed 16-row block record of wt, or 0
// when wt has no packed layout.
func packedRecord(wt Type) int {
	switch wt {
	case Q4_1:
		return q41PackedBlock
	case Q8_0:
		return q80PackedBlock
	}
	return 0
}

// Packed is a weight matrix prepared once (at model load) for MatMulPacked.
// For Q4_1 and Q8_0 on CPUs with AVX-512 VNNI (16-row groups), for Q4_0,
// Q5_0, Q4_K and Q6_K there too and for Q4_0, Q4_1, Q5_0, Q8_0, Q4_K and
// Q6_K on AVX2 CPUs (packed8.go's 8-row groups), it holds the weights in a transposed
// layout (same size as the original) that the batched kernels read
// directly; for other types and CPUs it only wraps the original matrix and
// MatMulPacked is MatMul. The original slice w is kept by reference (it is
// the fallback for the pure-Go kernels) and must not change afterwards.
type Packed struct {
	Type       Type
	Rows, Cols int
	w          []byte
	data       []byte // the packed groups; nil: not packed
	group      int    // rows per packed group: 16 (packed.go) or 8 (packed8.go)
}

// Prepack prepares the rows×cols matrix w of type wt for MatMulPacked.
// It panics on the same inputs MatMul panics on.
//
// Intended use (core/model): at load, for every weight matrix used with
// MatMul, keep p := quant.Prepack(wt, w, rows, cols) next to it and call
// quant.MatMulPacked(p, xq, n, out, pool) where MatMul(wt, w, rows, cols,
// xq, n, out, pool) is called today; activations are quantized exactly as
// before (QuantizeActs(ActType(wt), ...)). Packing the default model takes
// ~0.1 s (1 thread) and 91 MB (PackedBytes: the Q4_1 layers and the Q8_0
// head, exactly the size of the originals, which then are no longer read).
func Prepack(wt Type, w []byte, rows, cols int) *Packed {
	return PrepackIn(nil, wt, w, rows, cols)
}

// PrepackIn is Prepack with the packed copy placed in a (a nil or full
// arena: a fresh allocation of its own).
func PrepackIn(a *Arena, wt Type, w []byte, rows, cols int) *Packed {
	ActType(wt) // panics for non-weight types
	wrb, err := wt.RowBytes(cols)
	if err != nil {
		panic("quant: Prepack: " + err.Error())
	}
	if len(w) < rows*wrb {
		panic(fmt.Sprintf("quant: Prepack %s %d×%d: w %d B", wt, rows, cols, len(w)))
	}
	p := &Packed{Type: wt, Rows: rows, Cols: cols, w: w[:rows*wrb]}
	if groups, gb := packedShape(wt, rows, cols); groups > 0 {
		if p.data = a.alloc(groups * gb); p.data == nil {
			p.data = make([]byte, groups*gb)
		}
		p.group = packGroup
		pack := func(g int, dst []byte) { packGroupOf(&simdKernels, wt, w, wrb, rows, cols, g, dst) }
		if packedRecord(wt) == 0 || simdKernels.q41p == nil { // the 8-row layout (packed8.go)
			p.group = p8Rows
			pack = func(g int, dst []byte) { pack8(wt, w, wrb, rows, cols, g, dst) }
		}
		packGroups(groups, func(g int) { pack(g, p.data[g*gb:(g+1)*gb]) })
	}
	return p
}

// packGroups runs pack over the groups [0, groups), on as many goroutines
// as Go runs at once, each over a contiguous range. Packing is a copy
// whose time goes to page faults — the file's pages read in, the arena's
// fresh ones zeroed — which proceed in parallel: loading the
// Qwen2.5-Coder 1.5B (file in the page cache) took 0.83–1.3 s packing on
// one goroutine and 0.48–0.61 s on two (two cores).
func packGroups(groups int, pack func(g int)) {
	workers := min(runtime.GOMAXPROCS(0), groups/minGroupsPerPacker)
	if workers <= 1 {
		for g := range groups {
			pack(g)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := groups*w/workers, groups*(w+1)/workers
		wg.Go(func() {
			for g := lo; g < hi; g++ {
				pack(g)
			}
		})
	}
	wg.Wait()
}

// minGroupsPerPacker keeps small matrices on one goroutine, where starting
// more costs more than it saves.
const minGroupsPerPacker = 64

// packedShape is the number of row groups and the bytes of one group in
// wt's packed layout on this CPU (16-row groups where the VNNI kernels
// run, 8-row groups of packed8.go where the AVX2 ones do), or 0, 0 when a
// rows×cols matrix of wt keeps its stored layout.
func packedShape(wt Type, rows, cols int) (groups, groupBytes int) {
	if rows <= 0 || cols <= 0 {
		return 0, 0
	}
	if rec := packedRecord(wt); rec > 0 && simdKernels.q41p != nil {
		return (rows + packGroup - 1) / packGroup, cols / 32 * rec
	}
	if simdKernels.packed8(wt) != nil {
		return (rows + p8Rows - 1) / p8Rows, cols / wt.BlockElems() * p8Record(wt)
	}
	return 0, 0
}

// TopRows is a view of the first n rows (0 < n ≤ Rows) of p, sharing its
// memory: a matrix whose first rows are used alone, such as a draft
// model's output head restricted to the lower token ids. In the packed
// layout rows come in groups of 16, so n must then be a multiple of 16
// (or Rows).
func (p *Packed) TopRows(n int) (*Packed, error) {
	if n <= 0 || n > p.Rows {
		return nil, fmt.Errorf("quant: TopRows %d of %d rows", n, p.Rows)
	}
	wrb, _ := p.Type.RowBytes(p.Cols)
	v := &Packed{Type: p.Type, Rows: n, Cols: p.Cols, w: p.w[:n*wrb]}
	if p.data != nil {
		v.group = p.group
		if n%p.group != 0 && n != p.Rows {
			return nil, fmt.Errorf("quant: TopRows %d of a packed matrix: not a multiple of %d", n, p.group)
		}
		gb := len(p.data) / ((p.Rows + p.group - 1) / p.group)
		v.data = p.data[:(n+p.group-1)/p.group*gb]
	}
	return v, nil
}

// PackedBytes is the memory the packed copy takes (0 when Prepack only
// wrapped the original).
func (p *Packed) PackedBytes() int { return len(p.data) }

// MatMulPacked is MatMul(p.Type, w, p.Rows, p.Cols, xq, n, out, pool) for
// the w given to Prepack: same inputs, same results (within float32
// rounding order), faster for Q4_1 and Q8_0 at every N.
func MatMulPacked(p *Packed, xq []byte, n int, out []float32, pool *Pool) {
	k := active.Load()
	eight := p.group == p8Rows && k.packed8(p.Type) != nil
	if p.data == nil || (k.q41p == nil && !eight) {
		MatMul(p.Type, p.w, p.Rows, p.Cols, xq, n, out, pool)
		return
	}
	checkMatMul(p.Type, p.w, p.Rows, p.Cols, xq, n, out)
	if p.Rows == 0 || n == 0 {
		return
	}
	if eight {
		matmulPacked8(k, p.Type, p.data, p.Rows, p.Cols, xq, n, out, pool)
		return
	}
	matmulPacked(k, p.Type, p.data, nil, 0, p.Rows, p.Cols, xq, n, out, pool)
}

// MatMulPackedSet is MatMulPacked(ps[i], xq, n, outs[i], pool) for every
// i, with the same results, for matrices that read the same activations
// (equal Cols and ActType): as one pool job where every matrix takes the
// 8-row kernels. A decode step's q, k and v (and gate and up) are small
// matrices, and each pool job costs the threads a hand-out, a cold start
// of each one's weight stream and a wait for the slowest one's last
// chunk; one job over all of them pays that once.
func MatMulPackedSet(ps []*Packed, xq []byte, n int, outs [][]float32, pool *Pool) {
	if len(ps) != len(outs) {
		panic(fmt.Sprintf("quant: MatMulPackedSet: %d matrices, %d outputs", len(ps), len(outs)))
	}
	k := active.Load()
	fuse := pool.Threads() > 1 && n > 0
	for _, p := range ps {
		if p.Cols != ps[0].Cols || ActType(p.Type) != ActType(ps[0].Type) {
			panic(fmt.Sprintf("quant: MatMulPackedSet: %s %d×%d does not read %s %d×%d's activations", p.Type, p.Rows, p.Cols, ps[0].Type, ps[0].Rows, ps[0].Cols))
		}
		fuse = fuse && p.data != nil && p.group == p8Rows && k.packed8(p.Type) != nil && p.Rows > 0
	}
	if !fuse || len(ps) < 2 {
		for i, p := range ps {
			MatMulPacked(p, xq, n, outs[i], pool)
		}
		return
	}
	var t *p8Task
	var jobs []p8Job
	var run func(lo, hi int)
	if len(ps) <= maxSetJobs {
		t = p8Tasks.Get().(*p8Task)
		t.set, jobs, run = len(ps), t.jobs[:len(ps)], t.runSet
	} else {
		js := make([]p8Job, len(ps))
		jobs, run = js, func(lo, hi int) { runSet(js, lo, hi) }
	}
	units := 0
	for i, p := range ps {
		checkMatMul(p.Type, p.w, p.Rows, p.Cols, xq, n, outs[i])
		jobs[i].init(k, p.Type, p.data, p.Rows, p.Cols, xq, n, outs[i])
		units += jobs[i].units
	}
	threads := pool.Threads()
	pool.Run(units, max(1, (units+16*threads-1)/(16*threads)), run)
	for i := range jobs {
		jobs[i].release()
	}
	if t != nil {
		t.put()
	}
}

func checkMatMul(wt Type, w []byte, rows, cols int, xq []byte, n int, out []float32) (wrb, xrb int) {
	at := ActType(wt)
	wrb, err := wt.RowBytes(cols)
	if err != nil {
		panic("quant: MatMul: " + err.Error())
	}
	xrb, _ = at.RowBytes(cols)
	if len(w) < rows*wrb || len(xq) < n*xrb || len(out) < n*rows {
		panic(fmt.Sprintf("quant: MatMul %s %d×%d, N=%d: w %d B, x %d B, out %d", wt, rows, cols, n, len(w), len(xq), len(out)))
	}
	return wrb, xrb
}

// packQ41Go packs rows [16g, min(16g+16, rows)) of the Q4_1 matrix w into
// dst (nb records, see the layout above), zero-padding missing rows.
func packQ41Go(w []byte, wrb, rows, cols, g int, dst []byte) {
	nb := cols / 32
	dst = dst[:nb*q41PackedBlock]
	clear(dst)
	r0 := g * packGroup
	for r := 0; r < packGroup && r0+r < rows; r++ {
		row := w[(r0+r)*wrb : (r0+r+1)*wrb]
		for b := 0; b < nb; b++ {
			src, rec := row[20*b:20*b+20], dst[b*q41PackedBlock:(b+1)*q41PackedBlock]
			for k := 0; k < 4; k++ {
				copy(rec[64*k+4*r:64*k+4*r+4], src[4+4*k:8+4*k])
			}
			copy(rec[256+2*r:256+2*r+2], src[0:2])
			copy(rec[288+2*r:288+2*r+2], src[2:4])
		}
	}
}

// packQ80Go is packQ41Go for Q8_0 (544-byte records, qs stored +128).
func packQ80Go(w []byte, wrb, rows, cols, g int, dst []byte) {
	nb := cols / 32
	dst = dst[:nb*q80PackedBlock]
	clear(dst)
	r0 := g * packGroup
	for r := 0; r < packGroup && r0+r < rows; r++ {
		row := w[(r0+r)*wrb : (r0+r+1)*wrb]
		for b := 0; b < nb; b++ {
			src, rec := row[34*b:34*b+34], dst[b*q80PackedBlock:(b+1)*q80PackedBlock]
			for k := 0; k < 8; k++ {
				for i := 0; i < 4; i++ {
					rec[64*k+4*r+i] = src[2+4*k+i] ^ 0x80
				}
			}
			copy(rec[512+2*r:512+2*r+2], src[0:2])
		}
	}
}

// packGroupOf packs group g of a wt matrix with the kernel set's packer
// where the group is whole, with the Go definition otherwise.
func packGroupOf(k *kernelSet, wt Type, w []byte, wrb, rows, cols, g int, dst []byte) {
	whole := (g+1)*packGroup <= rows
	switch {
	case wt == Q4_1 && whole && k.q41pack != nil:
		k.q41pack(w[g*packGroup*wrb:(g+1)*packGroup*wrb], wrb, cols/32, dst)
	case wt == Q4_1:
		packQ41Go(w, wrb, rows, cols, g, dst)
	case wt == Q8_0 && whole && k.q80pack != nil:
		k.q80pack(w[g*packGroup*wrb:(g+1)*packGroup*wrb], wrb, cols/32, dst)
	case wt == Q8_0:
		packQ80Go(w, wrb, rows, cols, g, dst)
	default:
		panic("quant: no packed layout for " + wt.String())
	}
}

var packBufPool = sync.Pool{New: func() any { return new([]byte) }}

// matmulPacked runs the packed kernels of wt (Q4_1 or Q8_0) over all row
// groups. wp holds the packed groups, or is nil and the groups are packed
// on the fly from w (one group at a time into a per-chunk buffer that stays
// in L1).
func matmulPacked(k *kernelSet, wt Type, wp []byte, w []byte, wrb, rows, cols int, xq []byte, n int, out []float32, pool *Pool) {
	nb := cols / 32
	gb := nb * packedRecord(wt)
	groups := (rows + packGroup - 1) / packGroup
	xrb, kern := nb*36, k.q41p
	if wt == Q8_0 {
		xrb, kern = nb*34, k.q80p
	}

	// Activation scales per row and block: float32 pairs (d_x, s_x) for
	// Q8_1, (d_x, int32 -128·Σq_x) for Q8_0.
	scp := packBufPool.Get().(*[]byte)
	need := n * nb * 8
	if cap(*scp) < need+64 {
		*scp = make([]byte, need+64)
	}
	sc := f32s(alignUp((*scp)[:need+64]), n*nb*2)
	for i := 0; i < n; i++ {
		if wt == Q8_0 {
			q80ScalesGeneric(xq[i*xrb:(i+1)*xrb], nb, sc[i*nb*2:(i+1)*nb*2])
		} else {
			k.q81Scales(xq[i*xrb:(i+1)*xrb], nb, sc[i*nb*2:(i+1)*nb*2])
		}
	}

	// Split the activation rows into near-equal calls of at most packActs.
	calls := (n + packActs - 1) / packActs
	threads := pool.Threads()
	chunk := max(1, (groups+16*threads-1)/(16*threads))
	pool.Run(groups, chunk, func(lo, hi int) {
		var buf []byte
		var bufp *[]byte
		if wp == nil {
			bufp = packBufPool.Get().(*[]byte)
			if cap(*bufp) < gb+64 {
				*bufp = make([]byte, gb+64)
			}
			buf = alignUp((*bufp)[:gb+64])[:gb]
		}
		for g := lo; g < hi; g++ {
			var wg []byte
			if wp != nil {
				wg = wp[g*gb : (g+1)*gb]
			} else {
				packGroupOf(k, wt, w, wrb, rows, cols, g, buf)
				wg = buf
			}
			r0 := g * packGroup
			valid := min(packGroup, rows-r0)
			mask := uint16(1<<valid - 1)
			n0 := 0
			for c := 0; c < calls; c++ {
				na := (n - n0) / (calls - c)
				kern(wg, nb, xq[n0*xrb:(n0+na)*xrb], xrb, sc[n0*nb*2:(n0+na)*nb*2], out[n0*rows+r0:(n0+na-1)*rows+r0+valid], rows, mask, na)
				n0 += na
			}
		}
		if bufp != nil {
			packBufPool.Put(bufp)
		}
	})
	packBufPool.Put(scp)
}

// alignUp returns b from its first 64-byte-aligned byte (b must have 63
// bytes of slack).
func alignUp(b []byte) []byte {
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
	return b[off:]
}

// q81ScalesGeneric converts the (d, s) f16 pairs of nb Q8_1 blocks to
// float32 pairs.
func q81ScalesGeneric(x []byte, nb int, dst []float32) {
	for b := 0; b < nb; b++ {
		dst[2*b] = f16at(x[36*b:])
		dst[2*b+1] = f16at(x[36*b+2:])
	}
}

// q80ScalesGeneric: for nb Q8_0 blocks, the float32 d and, in the bits of
// the second float32, the int32 -128·Σq (the correction for weights stored
// +128, which the kernels add by starting each block's sum from it).
func q80ScalesGeneric(x []byte, nb int, dst []float32) {
	for b := 0; b < nb; b++ {
		blk := x[34*b : 34*b+34]
		s := int32(0)
		for _, q := range blk[2:] {
			s += int32(int8(q))
		}
		dst[2*b] = f16at(blk)
		dst[2*b+1] = math.Float32frombits(uint32(-128 * s))
	}
}
