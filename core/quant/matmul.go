package quant

import (
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// ActType is the type activations must be quantized to before MatMul with
// weights of type wt: the integer dot kernels pair each weight type with the
// int8 activation block whose extra fields they need (Q8_1 carries d·Σq for
// the +m term of Q4_1/Q5_1, Q8_K carries 16-element sums for the K-quant
// mins and offsets). Float weights take float32 activations. ActType panics
// for types that are not weight types of this package (Q8_1, Q8_K).
func ActType(wt Type) Type {
	switch wt {
	case Q4_1, Q5_1:
		return Q8_1
	case Q4_0, Q5_0, Q8_0:
		return Q8_0
	case Q4_K, Q5_K, Q6_K:
		return Q8_K
	case Q2_K, Q3_K, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S:
		return Q8_K
	case IQ4_NL, MXFP4:
		return Q8_0
	case F32, F16, BF16:
		return F32
	}
	panic(fmt.Sprintf("quant: %s is not a weight type", wt))
}

// QuantizeActs quantizes n rows of cols float32s (x, row-major) into dst as
// n rows of type at (RowBytes(cols) each). For at == F32 the rows are copied
// as little-endian float32 bytes.
func QuantizeActs(at Type, x []float32, n, cols int, dst []byte) {
	rb, err := at.RowBytes(cols)
	if err != nil {
		panic("quant: " + err.Error())
	}
	if len(x) < n*cols || len(dst) < n*rb {
		panic(fmt.Sprintf("quant: QuantizeActs %s: %d floats / %d bytes for %d×%d", at, len(x), len(dst), n, cols))
	}
	for i := 0; i < n; i++ {
		src, d := x[i*cols:(i+1)*cols], dst[i*rb:(i+1)*rb]
		switch at {
		case Q8_0:
			QuantizeQ8_0(src, d)
		case Q8_1:
			QuantizeQ8_1(src, d)
		case Q8_K:
			QuantizeQ8_K(src, d)
		case F32:
			for j, v := range src {
				put32(d[4*j:], math.Float32bits(v))
			}
		default:
			if err := Quantize(at, src, d); err != nil {
				panic(err)
			}
		}
	}
}

// f32s views little-endian float32 bytes as []float32 (amd64 and the other
// little-endian targets Go supports for this project), copying when the
// bytes are not 4-aligned.
func f32s(b []byte, n int) []float32 {
	if n == 0 {
		return nil
	}
	b = b[:4*n]
	if uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
	}
	f := make([]float32, n)
	for i := range f {
		f[i] = math.Float32frombits(le32(b[4*i:]))
	}
	return f
}

// Tiling. For N = 1 a matmul is a stream over the weights: each row is read
// once and dotted with the (cache-resident) activation row, so the kernel is
// bound by memory bandwidth and the only job is to keep both cores streaming.
// For N > 1 the weights must still be read from memory once, not N times:
// the rows of a thread's chunk are processed in tiles small enough to stay in
// L1 (tileBytes), and all N activation rows (L2-resident: 64 rows of 1536
// Q8 values are ~110 KB) pass over a tile before the next one is loaded.
// Where a multi-activation kernel exists, 4 activation rows are taken per
// weight-row visit so the weight nibbles are decoded once per 4 tokens. For
// Q4_1 the activations are first repacked (repackQ81) so that the
// per-activation work is a handful of vector ops per block pair.
//
// For Q4_1 and Q8_0 none of that is used when the packed kernels exist, for
// any N (packMinN is 1): MatMul packs
// each 16-row group on the fly into the transposed layout of packed.go
// (one L1-resident group buffer per chunk) and runs the outer-product
// kernels, up to 8 activation rows per pass over a group. Callers that
// keep weights for many calls should Prepack them once and use
// MatMulPacked, which skips the packing and is also the fastest N = 1 path
// (see packed.go). N = 1 takes the packed path too, although the older
// single-row kernels are faster for unpacked weights, because every N must
// give every row bit-identical results (TestBatchInvariance): speculative
// verification and continuous batching must not change a greedy output.
//
// Work split: about 4 chunks per thread (whole tiles when N > 1, at least
// minChunkRows rows), handed out dynamically by the Pool so a thread that
// loses its core on a shared machine delays only its current chunk.
const (
	packMinN       = 1 // from this N on, MatMul packs Q4_1/Q8_0 weights on the fly (packed.go)
	tileBytes      = 16 << 10
	floatTileBytes = 192 << 10 // the float kernels' tiles: see MatMul
	minChunkRows   = 16
)

// MatMul computes out[n][r] = dot(W row r, x row n) for all r in [0,rows)
// and n in [0,N). W is rows×cols of type wt (row-major, RowBytes(cols) each);
// xq holds N activation rows already quantized to ActType(wt) (see
// QuantizeActs); out is N×rows row-major float32. pool may be nil (runs on
// the caller).
func MatMul(wt Type, w []byte, rows, cols int, xq []byte, n int, out []float32, pool *Pool) {
	at := ActType(wt)
	wrb, xrb := checkMatMul(wt, w, rows, cols, xq, n, out)
	if rows == 0 || n == 0 {
		return
	}
	k := active.Load()
	tile := max(1, min(rows, tileBytes/wrb))
	threads := pool.Threads()
	// Chunks: about 4 per thread for balance, whole tiles, at least
	// minChunkRows rows.
	chunk := (rows + 4*threads - 1) / (4 * threads)
	chunk = max(chunk, minChunkRows)
	if at == F32 && k.multi[wt] != nil {
		// The float tiles (gen_float.go) read each activation chunk
		// once per three weight rows, so what they must not do is
		// stream a big batch's activations (1.2 MB of float32 at
		// N = 512 by 576) from L3 again for every 16 KB of weights:
		// their tiles are L2-sized, each group of four activation
		// rows staying in L1 while a whole tile of weights passes.
		// A chunk is split into equal tiles, so that rounding the
		// chunk up to whole tiles below does not unbalance the threads.
		maxTile := max(1, floatTileBytes/wrb)
		parts := (chunk + maxTile - 1) / maxTile
		tile = max(1, min(rows, (chunk+parts-1)/parts))
	}
	if n > 1 {
		chunk = (chunk + tile - 1) / tile * tile
	}
	var f32x []float32
	if at == F32 {
		f32x = f32s(xq, n*cols)
	}
	if (wt == Q4_1 || wt == Q8_0) && k.q41p != nil && n >= packMinN && cols >= 32 {
		matmulPacked(k, wt, nil, w, wrb, rows, cols, xq, n, out, pool)
		return
	}
	if wt == Q4_1 && k.q4_1r != nil && cols >= 64 {
		bufp := repackPool.Get().(*[]byte)
		xr := repackQ81(xq, n, cols, bufp)
		pool.Run(rows, chunk, func(lo, hi int) {
			matmulQ41R(k, w, wrb, xq, xrb, xr, cols, n, out, rows, lo, hi, tile)
		})
		repackPool.Put(bufp)
		return
	}
	// The multi-row kernels of the legacy types read the activation
	// scales as float32, converted here once per call.
	var sc []float32
	var scp *[]float32
	if sk := actScaleWords(wt); sk > 0 && k.multi[wt] != nil {
		nb := cols / 32
		scp = scalePool.Get().(*[]float32)
		sc = growFloats(scp, n*nb*sk)
		actScales(wt, xq, n, nb, sc)
	}
	pool.Run(rows, chunk, func(lo, hi int) {
		if at == F32 && k.multi[wt] == nil { // else the float multi-row kernels
			matmulFloat(k, wt, w, wrb, cols, f32x, n, out, rows, lo, hi)
			return
		}
		matmulQuant(k, wt, w, wrb, xq, xrb, sc, n, out, rows, lo, hi, tile)
	})
	if scp != nil {
		scalePool.Put(scp)
	}
}

// actScaleWords is the float32 values per activation block that
// actScales writes for weights of type wt: d for Q8_0 weights; d and s for
// Q4_1/Q5_1; for Q4_0/Q5_0 a 32-byte correction vector [−o·d·Σq, 0 ×7]
// (o = 8 or 16, the weights' offset) then d, so that their kernels can
// take the stored quants as unsigned and subtract o·Σx with one FMA; none
// for the others.
func actScaleWords(wt Type) int {
	switch wt {
	case Q8_0:
		return 1
	case Q4_1, Q5_1:
		return 2
	case Q4_0, Q5_0:
		return 9
	case IQ4_NL, MXFP4:
		return 1
	}
	return 0
}

// actScales writes the actScaleWords(wt) float32 values of every block of
// n activation rows (nb blocks each, of type ActType(wt)) into dst.
func actScales(wt Type, xq []byte, n, nb int, dst []float32) {
	at := ActType(wt)
	xb, sk := at.BlockBytes(), actScaleWords(wt)
	for i := 0; i < n*nb; i++ {
		blk, d := xq[i*xb:], dst[i*sk:(i+1)*sk]
		switch wt {
		case Q8_0:
			d[0] = f16at(blk)
		case IQ4_NL, MXFP4:
			d[0] = f16at(blk)
		case Q4_1, Q5_1:
			d[0], d[1] = f16at(blk), f16at(blk[2:])
		case Q4_0, Q5_0:
			off := int32(8)
			if wt == Q5_0 {
				off = 16
			}
			sum := int32(0)
			for _, q := range blk[2:34] {
				sum += int32(int8(q))
			}
			dx := f16at(blk)
			clear(d[1:8])
			d[0] = float32(-off*sum) * dx
			d[8] = dx
		}
	}
}

var scalePool = sync.Pool{New: func() any { return new([]float32) }}

// growFloats returns (*p)[:n], growing the buffer when it is short.
func growFloats(p *[]float32, n int) []float32 {
	if cap(*p) < n {
		*p = make([]float32, n)
	}
	return (*p)[:n]
}

func matmulFloat(k *kernelSet, wt Type, w []byte, wrb, cols int, x []float32, n int, out []float32, rows, lo, hi int) {
	for r := lo; r < hi; r++ {
		wr := w[r*wrb : (r+1)*wrb]
		for i := 0; i < n; i++ {
			xr := x[i*cols : (i+1)*cols]
			var v float32
			switch wt {
			case F32:
				v = k.f32(f32s(wr, cols), xr)
			case F16:
				v = k.f16(wr, xr)
			case BF16:
				v = k.bf16(wr, xr)
			}
			out[i*rows+r] = v
		}
	}
}

func matmulQuant(k *kernelSet, wt Type, w []byte, wrb int, xq []byte, xrb int, sc []float32, n int, out []float32, rows, lo, hi, tile int) {
	var dot quantDot
	var dot4 func(w, x []byte, xs int, out *[4]float32)
	switch wt {
	case Q4_0:
		dot, dot4 = k.q4_0, k.q4_0x4
	case Q4_1:
		dot, dot4 = k.q4_1, k.q4_1x4
	case Q5_0:
		dot = k.q5_0
	case Q5_1:
		dot = k.q5_1
	case Q8_0:
		dot, dot4 = k.q8_0, k.q8_0x4
	case Q4_K:
		dot = k.q4K
	case Q5_K:
		dot = k.q5K
	case Q6_K:
		dot = k.q6K
	case Q2_K:
		dot = k.q2K
	case Q3_K:
		dot = k.q3K
	case IQ4_NL:
		dot = k.iq4nl
	case IQ4_XS:
		dot = k.iq4xs
	case MXFP4:
		dot = k.mxfp4
	case IQ3_S:
		dot = k.iq3s
	case IQ3_XXS:
		dot = k.iq3xxs
	case IQ2_XXS:
		dot = k.iq2xxs
	case IQ2_XS:
		dot = k.iq2xs
	case IQ2_S:
		dot = k.iq2s
	}
	var o4 [4]float32
	if md := k.multi[wt]; md != nil {
		ss := len(sc) / n // one row's scales
		for t0 := lo; t0 < hi; t0 += tile {
			t1 := min(t0+tile, hi)
			for i := 0; i < n; i += 4 {
				na := min(4, n-i)
				md(w[t0*wrb:t1*wrb], t1-t0, xq[i*xrb:(i+na)*xrb], xrb, sc[i*ss:(i+na)*ss], na, out[i*rows+t0:], rows)
			}
		}
		return
	}
	if n == 1 {
		for r := lo; r < hi; r++ {
			out[r] = dot(w[r*wrb:(r+1)*wrb], xq[:xrb])
		}
		return
	}
	for t0 := lo; t0 < hi; t0 += tile {
		t1 := min(t0+tile, hi)
		i := 0
		if dot4 != nil {
			for ; i+4 <= n; i += 4 {
				xs := xq[i*xrb : (i+4)*xrb]
				for r := t0; r < t1; r++ {
					dot4(w[r*wrb:(r+1)*wrb], xs, xrb, &o4)
					out[i*rows+r] = o4[0]
					out[(i+1)*rows+r] = o4[1]
					out[(i+2)*rows+r] = o4[2]
					out[(i+3)*rows+r] = o4[3]
				}
			}
		}
		for ; i < n; i++ {
			xr := xq[i*xrb : (i+1)*xrb]
			for r := t0; r < t1; r++ {
				out[i*rows+r] = dot(w[r*wrb:(r+1)*wrb], xr)
			}
		}
	}
}

// q81PairBytes is the size of one repacked Q8_1 block pair (see
// dot_q41r_amd64.s): 64 int8 quants, 16 float32 spread scales, 4 float32
// [0, s0, 0, s1].
const q81PairBytes = 64 + 64 + 16

var repackPool = sync.Pool{New: func() any { return new([]byte) }}

// repackQ81 converts n Q8_1 rows into pair records (the odd last block of
// a row is left out; MatMul adds it from the original row).
func repackQ81(xq []byte, n, cols int, bufp *[]byte) []byte {
	nb := cols / 32
	np := nb / 2
	rs := np * q81PairBytes
	if cap(*bufp) < n*rs {
		*bufp = make([]byte, n*rs)
	}
	xr := (*bufp)[:n*rs]
	xrb := nb * 36
	for i := 0; i < n; i++ {
		x := xq[i*xrb : (i+1)*xrb]
		for p := 0; p < np; p++ {
			rec := xr[i*rs+p*q81PairBytes : i*rs+(p+1)*q81PairBytes]
			b0, b1 := x[72*p:72*p+36], x[72*p+36:72*p+72]
			copy(rec[0:32], b0[4:36])
			copy(rec[32:64], b1[4:36])
			d0, d1 := math.Float32bits(f16at(b0)), math.Float32bits(f16at(b1))
			for j := 0; j < 8; j++ {
				put32(rec[64+4*j:], d0)
				put32(rec[96+4*j:], d1)
			}
			put32(rec[128:], 0)
			put32(rec[132:], math.Float32bits(f16at(b0[2:])))
			put32(rec[136:], 0)
			put32(rec[140:], math.Float32bits(f16at(b1[2:])))
		}
	}
	return xr
}

func matmulQ41R(k *kernelSet, w []byte, wrb int, xq []byte, xrb int, xr []byte, cols, n int, out []float32, rows, lo, hi, tile int) {
	nb := cols / 32
	np := nb / 2
	rs := np * q81PairBytes
	odd := nb&1 != 0
	tail := func(r, i int) float32 {
		if !odd {
			return 0
		}
		return DotQ4_1Q8_1Generic(w[r*wrb+(nb-1)*20:(r+1)*wrb], xq[i*xrb+(nb-1)*36:(i+1)*xrb])
	}
	if n == 1 {
		for r := lo; r < hi; r++ {
			out[r] = k.q4_1r(w[r*wrb:(r+1)*wrb], xr, np) + tail(r, 0)
		}
		return
	}
	var o4 [4]float32
	for t0 := lo; t0 < hi; t0 += tile {
		t1 := min(t0+tile, hi)
		i := 0
		for ; i+4 <= n; i += 4 {
			x4 := xr[i*rs : (i+4)*rs]
			for r := t0; r < t1; r++ {
				k.q4_1rx4(w[r*wrb:(r+1)*wrb], x4, rs, np, &o4)
				for j := 0; j < 4; j++ {
					out[(i+j)*rows+r] = o4[j] + tail(r, i+j)
				}
			}
		}
		for ; i < n; i++ {
			x1 := xr[i*rs : (i+1)*rs]
			for r := t0; r < t1; r++ {
				out[i*rows+r] = k.q4_1r(w[r*wrb:(r+1)*wrb], x1, np) + tail(r, i)
			}
		}
	}
}
