package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// The assembly attention kernels against plain Go loops.
func TestAttentionKernels(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512 kernels on this machine")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, hd := range []int{64, 128, 16, 48} {
		for _, n := range []int{1, 2, 3, 16, 17, 40} {
			q := make([]float32, hd)
			k, v := make([]float32, n*hd), make([]float32, n*hd)
			for i := range q {
				q[i] = float32(r.NormFloat64())
			}
			for i := range k {
				k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			got := make([]float32, n)
			mx := attnScores(&q[0], &k[0], n, hd, 0.125, &got[0])
			wantMx := float32(math.Inf(-1))
			for j := 0; j < n; j++ {
				w := dot(q, k[j*hd:(j+1)*hd]) * 0.125
				require.InDelta(t, w, got[j], 1e-5)
				wantMx = max(wantMx, w)
			}
			require.InDelta(t, wantMx, mx, 1e-5)
			if n%16 == 0 {
				x := append([]float32(nil), got...)
				sum := attnExp(&x[0], n, mx)
				var ws float64
				for j := range x {
					e := math.Exp(float64(got[j] - mx))
					ws += e
					require.InEpsilon(t, e, x[j], 3e-7)
				}
				require.InEpsilon(t, ws, sum, 1e-6)
			}
			if hd%64 == 0 {
				out := make([]float32, hd)
				attnWsum(&got[0], &v[0], n, hd, &out[0])
				want := make([]float32, hd)
				for j := 0; j < n; j++ {
					axpy(want, got[j], v[j*hd:(j+1)*hd])
				}
				for d := range want {
					require.InDelta(t, want[d], out[d], 1e-5)
				}
			}
		}
	}
	// SwiGLU against float64.
	n := 16*37 + 5
	g, u := make([]float32, n), make([]float32, n)
	for i := range g {
		g[i], u[i] = float32(r.NormFloat64()*4), float32(r.NormFloat64())
	}
	g[0], g[1] = 100, -100
	got := append([]float32(nil), g...)
	swiglu(got, u, n)
	for i := range g {
		want := float64(g[i]) / (1 + math.Exp(-float64(g[i]))) * float64(u[i])
		require.InDelta(t, want, float64(got[i]), 1e-6*(1+math.Abs(want)), "i=%d g=%g", i, g[i])
	}
	// expf (the Go fallback) over the range softmax and SiLU use.
	for x := -86.9; x < 30; x += 0.37 {
		require.InEpsilon(t, math.Exp(float64(float32(x))), float64(expf(float32(x))), 3e-7, "x=%g", x)
	}
}

// rmsNormAVX512, addAVX512 and attnMax against float64 and plain loops, at
// widths that exercise the two-chunk loop's odd chunk and attnMax's tail.
func TestRowKernels(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512 kernels on this machine")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{16, 32, 48, 576, 1536} {
		x, w := make([]float32, d), make([]float32, d)
		for i := range x {
			x[i], w[i] = float32(r.NormFloat64()*3), float32(r.NormFloat64())
		}
		got := make([]float32, d)
		rmsNormAVX512(&got[0], &x[0], &w[0], d, 1e-5)
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		rs := 1 / math.Sqrt(ss/float64(d)+1e-5)
		for i := range x {
			want := float64(x[i]) * rs * float64(w[i])
			require.InDelta(t, want, float64(got[i]), 2e-6*(1+math.Abs(want)), "d=%d i=%d", d, i)
		}
		y := append([]float32(nil), x...)
		addAVX512(&y[0], &w[0], d)
		for i := range y {
			require.Equal(t, x[i]+w[i], y[i])
		}
	}
	for _, n := range []int{1, 5, 15, 16, 17, 33, 272} {
		x := make([]float32, n+16)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		x[n] = 1e9 // past the end: never read
		want := float32(math.Inf(-1))
		for _, v := range x[:n] {
			want = max(want, v)
		}
		require.Equal(t, want, attnMax(&x[0], n), "n=%d", n)
	}
	require.Equal(t, float32(math.Inf(-1)), attnMax(nil, 0))
}

// narrowF16/widenF16 (VCVTPS2PH/VCVTPH2PS) against quant's Go conversions,
// bit for bit: the cache must hold the same float16 whichever path stored
// it. Covers normals, subnormals, overflow to ±Inf, ±0, rounding ties and
// every float16 bit pattern back to float32 (NaNs compared as NaN).
func TestF16Conversions(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512 kernels on this machine")
	}
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
