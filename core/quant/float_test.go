package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFloatMatMulOddCols: float weights whose rows are not a whole number
// of the kernels' 16-element chunks (and shorter than one) give the
// float64 reference within float32 rounding, and the same bits for a row
// whatever the batch, on the SIMD and the pure-Go kernels.
func TestFloatMatMulOddCols(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	defer UseSIMD(true)
	const rows, nmax = 7, 6
	for _, wt := range []Type{F32, F16, BF16} {
		for _, cols := range []int{1, 15, 17, 100} {
			wrb, _ := wt.RowBytes(cols)
			w := make([]byte, rows*wrb)
			require.NoError(t, Quantize(wt, randFloats(rng, rows*cols, 1), w))
			wf := dequant(t, wt, w, rows*cols)
			xf := randFloats(rng, nmax*cols, 1)
			xq := make([]byte, nmax*cols*4)
			QuantizeActs(F32, xf, nmax, cols, xq)
			for _, simd := range []bool{true, false} {
				UseSIMD(simd)
				all := make([]float32, nmax*rows)
				MatMul(wt, w, rows, cols, xq, nmax, all, nil)
				for i := 0; i < nmax; i++ {
					for r := 0; r < rows; r++ {
						var ref, mag float64
						for c := 0; c < cols; c++ {
							p := float64(wf[r*cols+c]) * float64(xf[i*cols+c])
							ref += p
							mag += math.Abs(p)
						}
						require.InDelta(t, ref, all[i*rows+r], 1e-5*mag+1e-30, "%s cols=%d simd=%v", wt, cols, simd)
					}
				}
				for n := 1; n < nmax; n++ {
					part := make([]float32, n*rows)
					MatMul(wt, w, rows, cols, xq, n, part, nil)
					require.True(t, equalBits(all[:n*rows], part), "%s cols=%d simd=%v N=%d", wt, cols, simd, n)
				}
			}
		}
	}
}
