package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
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
