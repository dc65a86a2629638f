package quant

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// matmulRef is the float64 reference of MatMul built from Dequantize, with
// the per-output tolerance scale Σ|w·x| (+ the Q8_1 slack).
func matmulRef(t testing.TB, wt Type, w []byte, rows, cols int, xq []byte, n int) (ref, mag []float64) {
	at := ActType(wt)
	wrb, _ := wt.RowBytes(cols)
	xrb, _ := at.RowBytes(cols)
	wf := dequant(t, wt, w, rows*cols)
	xf := dequant(t, at, xq, n*cols)
	ref = make([]float64, n*rows)
	mag = make([]float64, n*rows)
	for i := 0; i < n; i++ {
		for r := 0; r < rows; r++ {
			var s, m float64
			for c := 0; c < cols; c++ {
				p := float64(wf[r*cols+c]) * float64(xf[i*cols+c])
				s += p
				m += math.Abs(p)
			}
			ref[i*rows+r] = s
			mag[i*rows+r] = m + q81Slack(wt, w[r*wrb:(r+1)*wrb], xq[i*xrb:(i+1)*xrb], cols)
		}
	}
	return ref, mag
}

// TestPackers: the assembly packers match the Go definitions byte for byte.
func TestPackers(t *testing.T) {
	k := &simdKernels
	if k.q41pack == nil {
		t.Skip("no packed kernels in this build")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, wt := range []Type{Q4_1, Q8_0} {
		for _, cols := range []int{32, 64, 96, 576, 1536} {
			rows := 16
			wrb, _ := wt.RowBytes(cols)
			w := randBlocks(rng, wt, rows*cols/32)
			nb := cols / 32
			rec := packedRecord(wt)
			want := make([]byte, nb*rec)
			got := make([]byte, nb*rec)
			if wt == Q4_1 {
				packQ41Go(w, wrb, rows, cols, 0, want)
				k.q41pack(w, wrb, nb, got)
			} else {
				packQ80Go(w, wrb, rows, cols, 0, want)
				k.q80pack(w, wrb, nb, got)
			}
			require.Equal(t, want, got, "%s cols=%d", wt, cols)
		}
	}
}

// TestMatMulPacked: for the types with a packed layout (Q4_1 and Q8_0 in
// 16-row groups with VNNI; Q4_0, Q5_0, Q4_K, Q6_K in 8-row groups with VNNI or
// AVX2, Q4_1, Q8_0, IQ4_NL and IQ4_XS with AVX2),
// MatMul and MatMulPacked (every N) against the float64 reference, for
// N = 1..70, row counts that leave partial groups, odd block counts, 1–3
// threads, SIMD and generic kernels.
func TestMatMulPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	defer UseSIMD(true)
	pools := map[int]*Pool{1: nil, 2: NewPool(2), 3: NewPool(3)}
	defer pools[2].Close()
	defer pools[3].Close()
	shapes := [][2]int{{1, 32}, {15, 96}, {16, 64}, {17, 160}, {37, 576}, {64, 1536}, {100, 32}}
	nmax := 70
	if raceEnabled {
		shapes, nmax = [][2]int{{17, 96}, {37, 64}}, 20
	}
	for _, c := range shapes {
		for _, wt := range []Type{Q4_1, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, IQ4_NL, IQ4_XS} {
			rows, cols := c[0], c[1]
			be := wt.BlockElems()
			cols = (cols + be - 1) / be * be // the K-quants: whole super-blocks
			at := ActType(wt)
			wrb, _ := wt.RowBytes(cols)
			xrb, _ := at.RowBytes(cols)
			w := make([]byte, rows*wrb)
			require.NoError(t, Quantize(wt, randFloats(rng, rows*cols, 0.05), w))
			if rows == 100 { // raw random blocks: every bit pattern, ±scales
				w = randBlocks(rng, wt, rows*cols/be)
			}
			xq := make([]byte, nmax*xrb)
			QuantizeActs(at, randFloats(rng, nmax*cols, 1), nmax, cols, xq)
			if rows == 15 { // activations at the ±127 extremes
				xf := make([]float32, nmax*cols)
				for i := range xf {
					xf[i] = float32([]int{-1, 1, 0}[rng.IntN(3)])
				}
				QuantizeActs(at, xf, nmax, cols, xq)
			}
			ref, mag := matmulRef(t, wt, w, rows, cols, xq, nmax)
			pk := Prepack(wt, w, rows, cols)
			if (packedRecord(wt) == 0 || simdKernels.q41p == nil) && simdKernels.packed8(wt) != nil {
				require.Equal(t, p8Rows, pk.group, "%s: packed in 8-row groups", wt)
			}
			if g := pk.group; g > 0 {
				require.Equal(t, (rows+g-1)/g*g*wrb, pk.PackedBytes(), "packed size: the stored bytes, rows padded to whole groups")
			}
			for n := 1; n <= nmax; n++ {
				if rows*cols > 20000 && n > 20 && n%8 != 1 && n != nmax {
					continue // the big shapes: a sample of N past 20
				}
				for th, pool := range pools {
					if raceEnabled && th == 3 {
						continue
					}
					for _, simd := range []bool{true, false} {
						UseSIMD(simd)
						for _, packed := range []bool{false, true} {
							out := make([]float32, n*rows+1)
							out[n*rows] = 42 // sentinel
							if packed {
								MatMulPacked(pk, xq, n, out, pool)
							} else {
								MatMul(wt, w, rows, cols, xq, n, out, pool)
							}
							require.Equal(t, float32(42), out[n*rows])
							for i := 0; i < n*rows; i++ {
								if math.Abs(ref[i]-float64(out[i])) > 2e-5*mag[i]+1e-30 {
									t.Fatalf("%s %dx%d N=%d threads=%d simd=%v packed=%v: out[%d][%d] = %g, want %g (tol %g)",
										wt, rows, cols, n, th, simd, packed, i/rows, i%rows, out[i], ref[i], 2e-5*mag[i])
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestPrepackOtherTypes: Prepack of a type without a packed layout on
// this CPU wraps the matrix, and MatMulPacked equals MatMul.
func TestPrepackOtherTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, wt := range []Type{Q4_0, Q5_1, Q4_K, F32} {
		rows, cols := 21, 256
		if PackedSize(wt, rows, cols) > 0 {
			continue // packed here: TestMatMulPacked
		}
		wrb, _ := wt.RowBytes(cols)
		at := ActType(wt)
		xrb, _ := at.RowBytes(cols)
		w := make([]byte, rows*wrb)
		require.NoError(t, Quantize(wt, randFloats(rng, rows*cols, 0.05), w))
		xq := make([]byte, 5*xrb)
		QuantizeActs(at, randFloats(rng, 5*cols, 1), 5, cols, xq)
		pk := Prepack(wt, w, rows, cols)
		require.Zero(t, pk.PackedBytes())
		a, b := make([]float32, 5*rows), make([]float32, 5*rows)
		MatMul(wt, w, rows, cols, xq, 5, a, nil)
		MatMulPacked(pk, xq, 5, b, nil)
		require.Equal(t, a, b, "%s", wt)
	}
	require.Panics(t, func() { Prepack(Q8_1, nil, 1, 32) })
	require.Panics(t, func() { Prepack(Q4_1, make([]byte, 19), 1, 32) })
	require.NotPanics(t, func() { MatMulPacked(Prepack(Q4_1, nil, 0, 32), make([]byte, 3*36), 3, nil, nil) })
}

// TestPrepackInArena: matrices packed into one arena (sized by PackedSize)
// give bit-identical results to matrices packed on their own, sit inside
// the arena without overlapping, and an arena too small for the next one
// falls back to a fresh allocation instead of failing.
func TestPrepackInArena(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	type shape struct {
		wt         Type
		rows, cols int
	}
	shapes := []shape{{Q4_1, 48, 576}, {Q8_0, 40, 64}, {Q4_1, 7, 32}, {Q4_0, 16, 64}}
	// Room for the first two: the third (320 B packed) must fall back.
	arena := NewArena(PackedSize(shapes[0].wt, shapes[0].rows, shapes[0].cols) +
		PackedSize(shapes[1].wt, shapes[1].rows, shapes[1].cols))
	pool := NewPool(2)
	defer pool.Close()
	var inArena int
	for i, s := range shapes {
		w := randBlocks(rng, s.wt, s.rows*s.cols/32)
		at := ActType(s.wt)
		xrb, _ := at.RowBytes(s.cols)
		const n = 5
		xq := make([]byte, n*xrb)
		x := make([]float32, n*s.cols)
		for j := range x {
			x[j] = float32(rng.NormFloat64())
		}
		QuantizeActs(at, x, n, s.cols, xq)
		alone, packedIn := Prepack(s.wt, w, s.rows, s.cols), PrepackIn(arena, s.wt, w, s.rows, s.cols)
		want, got := make([]float32, n*s.rows), make([]float32, n*s.rows)
		MatMulPacked(alone, xq, n, want, pool)
		MatMulPacked(packedIn, xq, n, got, pool)
		require.Equal(t, want, got, "shape %d", i)
		if packedIn.PackedBytes() == 0 {
			require.Zero(t, PackedSize(s.wt, s.rows, s.cols), "shape %d has a packed layout but was not packed", i)
			continue
		}
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(arena.buf)))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(packedIn.data)))
		inside := p >= lo && p+uintptr(len(packedIn.data)) <= lo+uintptr(len(arena.buf))
		if inside {
			inArena++
			require.LessOrEqual(t, cap(packedIn.data), len(arena.buf))
		}
	}
	if simdKernels.q41p != nil {
		require.Equal(t, 2, inArena, "the first two packed matrices fit; the third does not")
	}
}

// TestTopRows: a view of a matrix's first rows multiplies exactly like
// those rows of the whole matrix, packed or not.
func TestTopRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, wt := range []Type{Q4_1, Q8_0, Q4_K, Q6_K, Q5_0} {
		const rows, cols, n = 80, 256, 3
		w, xq, full := benchMatrix(rng, wt, rows, cols, n)
		p := Prepack(wt, w, rows, cols)
		MatMulPacked(p, xq, n, full, nil)
		for _, top := range []int{16, 64, rows} {
			v, err := p.TopRows(top)
			require.NoError(t, err)
			got := make([]float32, n*top)
			MatMulPacked(v, xq, n, got, nil)
			for i := range n {
				require.Equal(t, full[i*rows:i*rows+top], got[i*top:(i+1)*top], "%s top %d row %d", wt, top, i)
			}
		}
		_, err := p.TopRows(0)
		require.Error(t, err)
		_, err = p.TopRows(rows + 1)
		require.Error(t, err)
	}
}

// TestSpreadQh: the table-driven spreadQh against its definition, bit by
// bit, on every single-bit word and random ones.
func TestSpreadQh(t *testing.T) {
	def := func(qh uint32) uint32 {
		var out uint32
		for i := 0; i < 4; i++ {
			for k := 0; k < 4; k++ {
				out |= (qh >> (4*k + i) & 1) << (8*i + k)
				out |= (qh >> (16 + 4*k + i) & 1) << (8*i + 4 + k)
			}
		}
		return out
	}
	rng := rand.New(rand.NewPCG(31, 32))
	words := []uint32{0, ^uint32(0)}
	for b := 0; b < 32; b++ {
		words = append(words, 1<<b)
	}
	for i := 0; i < 1000; i++ {
		words = append(words, rng.Uint32())
	}
	for _, w := range words {
		require.Equal(t, def(w), spreadQh(w), "qh %#08x", w)
	}
}
