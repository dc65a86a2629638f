package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// forKernelSets runs f once per kernel set of kernelSets, with that set
// selected, or skips when there are none.
func forKernelSets(t *testing.T, f func(t *testing.T)) {
	sets := kernelSets()
	if len(sets) == 0 {
		t.Skip("no assembly kernels on this machine")
	}
	for _, s := range sets {
		t.Run(s, func(t *testing.T) {
			useKernels(t, s)
			f(t)
		})
	}
}

// The assembly attention kernels (each set this machine has) against plain
// Go loops, and bit for bit against the model of their arithmetic
// (emu_test.go).
func TestAttentionKernels(t *testing.T) {
	forKernelSets(t, testAttentionKernels)
}

func testAttentionKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, hd := range []int{64, 128, 16, 48} {
		for _, n := range []int{1, 2, 3, 16, 17, 40, 48} {
			q := make([]float32, hd)
			k, v := make([]float32, n*hd), make([]float32, n*hd)
			for i := range q {
				q[i] = float32(r.NormFloat64())
			}
			for i := range k {
				k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			// Scores (TestScoresT tests their kernel) and their maximum.
			got := make([]float32, n)
			mx := float32(math.Inf(-1))
			for j := 0; j < n; j++ {
				got[j] = dot(q, k[j*hd:(j+1)*hd]) * 0.125
				mx = max(mx, got[j])
			}
			if n%16 == 0 {
				x := append([]float32(nil), got...)
				sum := simdExp(&x[0], n, mx)
				var ws float64
				for j := range x {
					e := math.Exp(float64(got[j] - mx))
					ws += e
					require.InEpsilon(t, e, x[j], 3e-7)
				}
				require.InEpsilon(t, ws, sum, 1e-6)
				emu := append([]float32(nil), got...)
				emuSum := emuSoftmax(emu, mx)
				require.Equal(t, -1, sameBits(emu, x), "attnExp, hd %d n %d", hd, n)
				require.Equal(t, math.Float32bits(emuSum), math.Float32bits(sum), "attnExp sum")
			}
		}
	}
	// attnExp's clamp at -87 (e^-87 is still normal), and scores far below
	// the maximum.
	x := make([]float32, 32)
	for i := range x {
		x[i] = -float32(i) * 4
	}
	x[3], x[5] = float32(math.Inf(-1)), -86.99
	emu := append([]float32(nil), x...)
	require.Equal(t, math.Float32bits(emuSoftmax(emu, 0)), math.Float32bits(simdExp(&x[0], 32, 0)))
	require.Equal(t, -1, sameBits(emu, x))

	// SwiGLU against float64, and bit for bit against the model.
	n := 16*37 + 5
	g, u := make([]float32, n), make([]float32, n)
	for i := range g {
		g[i], u[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64())
	}
	g[0], g[1], g[2], g[3] = 100, -100, 87.5, -86.9
	got := append([]float32(nil), g...)
	swiglu(got, u, n)
	for i := range g {
		want := float64(g[i]) / (1 + math.Exp(-float64(g[i]))) * float64(u[i])
		require.InDelta(t, want, float64(got[i]), 1e-6*(1+math.Abs(want)), "i=%d g=%g", i, g[i])
		if i < n&^15 {
			require.Equal(t, math.Float32bits(emuSwiglu(g[i], u[i])), math.Float32bits(got[i]), "swiglu i=%d g=%g", i, g[i])
		}
	}
	// expf (the Go fallback) over the range softmax and SiLU use.
	for x := -86.9; x < 30; x += 0.37 {
		require.InEpsilon(t, math.Exp(float64(float32(x))), float64(expf(float32(x))), 3e-7, "x=%g", x)
	}
}

// RMSNorm, the residual add and attnMax against float64 and plain loops
// (and the RMSNorm bit for bit against the model), at widths that exercise
// the two-chunk loop's odd chunk and attnMax's tail.
func TestRowKernels(t *testing.T) {
	forKernelSets(t, testRowKernels)
}

func testRowKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{16, 32, 48, 576, 1536} {
		x, w := make([]float32, d), make([]float32, d)
		for i := range x {
			x[i], w[i] = float32(r.NormFloat64()*3), float32(r.NormFloat64())
		}
		got := make([]float32, d)
		simdRMSNorm(&got[0], &x[0], &w[0], d, 1e-5)
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		rs := 1 / math.Sqrt(ss/float64(d)+1e-5)
		for i := range x {
			want := float64(x[i]) * rs * float64(w[i])
			require.InDelta(t, want, float64(got[i]), 2e-6*(1+math.Abs(want)), "d=%d i=%d", d, i)
		}
		emu := make([]float32, d)
		emuRMSNorm(emu, x, w, 1e-5)
		require.Equal(t, -1, sameBits(emu, got), "rmsNorm d=%d", d)
		y := append([]float32(nil), x...)
		simdAdd(&y[0], &w[0], d)
		for i := range y {
			require.Equal(t, x[i]+w[i], y[i])
		}
	}
	for _, n := range []int{1, 5, 8, 9, 15, 16, 17, 24, 33, 272} {
		x := make([]float32, n+16)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		x[n] = 1e9 // past the end: never read
		want := float32(math.Inf(-1))
		for _, v := range x[:n] {
			want = max(want, v)
		}
		require.Equal(t, want, simdMax(&x[0], n), "n=%d", n)
		// The maximum in every lane position, tail included.
		for j := 0; j < n; j++ {
			y := append([]float32(nil), x...)
			y[j] = 1e8
			require.Equal(t, float32(1e8), simdMax(&y[0], n), "n=%d j=%d", n, j)
		}
	}
	require.Equal(t, float32(math.Inf(-1)), simdMax(nil, 0))
}

// narrow/widen (VCVTPS2PH/VCVTPH2PS) against quant's Go conversions, bit
// for bit: the cache must hold the same float16 whichever path stored it.
// Covers normals, subnormals, overflow to ±Inf, ±0, rounding ties and
// every float16 bit pattern back to float32 (NaNs compared as NaN).
func TestF16Conversions(t *testing.T) {
	forKernelSets(t, testF16Conversions)
}

func testF16Conversions(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	src := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65520, -65520, 1e9, 6e-8, 3e-8, 2.9e-8,
		1.0009765625, 1.00048828125, 1.00146484375, 5.960464477539063e-08, float32(math.Inf(1))}
	for len(src)%16 != 0 || len(src) < 4096 {
		e := r.IntN(40) - 28 // 2^-28 .. 2^11: subnormal to large
		src = append(src, float32(r.NormFloat64()*math.Ldexp(1, e)))
	}
	got := make([]uint16, len(src))
	narrow(got, src)
	for i, f := range src {
		require.Equal(t, quant.F32ToF16(f), got[i], "narrow %g (%#x)", f, math.Float32bits(f))
	}
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	wide := make([]float32, len(all))
	widen(wide, all)
	for i, h := range all {
		want := quant.F16ToF32(h)
		if want != want {
			require.True(t, wide[i] != wide[i], "widen %#x", h)
			continue
		}
		require.Equal(t, math.Float32bits(want), math.Float32bits(wide[i]), "widen %#x", h)
	}
}
