package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFloatMatMulOddCols: float weights whose rows are not a whole number
// of the kernels' 8-element chunks or 32-element loop steps (and shorter
// than one), in row counts that leave the AVX2 kernels' 3-row tiles one
// or two rows over, give the float64 reference within float32 rounding,
// and the same bits for a row whatever the batch and whatever rows share
// its tile, on the SIMD and the pure-Go kernels.
func TestFloatMatMulOddCols(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	defer UseSIMD(true)
	const nmax = 6
	for _, wt := range []Type{F32, F16, BF16} {
		for _, shape := range [][2]int{{7, 1}, {7, 15}, {8, 17}, {7, 100}, {8, 8}, {4, 31}, {5, 32}, {7, 33}, {8, 583}} {
			rows, cols := shape[0], shape[1]
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
				for r := 0; r < rows; r++ { // row r alone: a tile of one
					one := make([]float32, nmax)
					MatMul(wt, w[r*wrb:(r+1)*wrb], 1, cols, xq, nmax, one, nil)
					for i := 0; i < nmax; i++ {
						require.Equal(t, math.Float32bits(all[i*rows+r]), math.Float32bits(one[i]), "%s cols=%d simd=%v row %d alone", wt, cols, simd, r)
					}
				}
			}
		}
	}
}
