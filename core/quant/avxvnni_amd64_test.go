//go:build amd64 && !noasm

package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPacked8AVXVNNIEqualsAVX2: where the CPU has AVX-VNNI, its 8-row
// kernels give the AVX2 kernels' bits for every type and na, on raw random
// blocks (every bit pattern) over several groups. Elsewhere
// TestEmulatedAVXVNNI runs them on the emulator.
func TestPacked8AVXVNNIEqualsAVX2(t *testing.T) {
	if !hasAVXVNNI() {
		t.Skip("the CPU lacks AVX-VNNI (TestEmulatedAVXVNNI covers its kernels)")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	var avx2, vex kernelSet
	installPacked8(&avx2, p8Asm)
	installPacked8(&vex, p8AsmAVXVNNI)
	for wt := range p8AsmAVXVNNI {
		for _, nb := range []int{1, 3, 8} {
			const ng, acts = 3, 4
			cols := nb * wt.BlockElems()
			w := randBlocks(rng, wt, ng*p8Rows*nb)
			wrb, _ := wt.RowBytes(cols)
			gb := nb * p8Record(wt)
			wp := make([]byte, ng*gb)
			for g := 0; g < ng; g++ {
				pack8Go(wt, w, wrb, ng*p8Rows, cols, g, wp[g*gb:])
			}
			at := ActType(wt)
			xrb, _ := at.RowBytes(cols)
			xq := make([]byte, acts*xrb)
			QuantizeActs(at, randFloats(rng, acts*cols, 1), acts, cols, xq)
			sc := make([]float32, acts*nb*2)
			if p8Legacy(wt) {
				for j := 0; j < acts; j++ {
					p8Scales(wt, xq[j*xrb:], nb, sc[j*nb*2:])
				}
			}
			for na := 1; na <= acts; na++ {
				a, v := make([]float32, na*8*ng), make([]float32, na*8*ng)
				avx2.p8[wt](wp, nb, ng, xq, xrb, sc, a, 8*ng, na)
				vex.p8[wt](wp, nb, ng, xq, xrb, sc, v, 8*ng, na)
				for i := range a {
					require.Equal(t, math.Float32bits(a[i]), math.Float32bits(v[i]),
						fmt.Sprintf("%s nb=%d na=%d lane %d: %g vs %g", wt, nb, na, i, a[i], v[i]))
				}
			}
		}
	}
}
