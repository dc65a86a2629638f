package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// gridTypes are the i-quants whose weights are grid entries: for each, how
// many indices a block holds, how many entries its grid has, and how to
// set index j of a block.
var gridTypes = []struct {
	t       Type
	indices int
	entries int
	set     func(b []byte, j, idx int)
}{
	{IQ3_S, 64, len(iq3sGrid), func(b []byte, j, idx int) {
		s, k := j/8, j%8
		b[2+j] = byte(idx)
		b[66+s] = b[66+s]&^(1<<k) | byte(idx>>8)<<k
	}},
	{IQ3_XXS, 64, len(iq3xxsGrid), func(b []byte, j, idx int) { b[2+j] = byte(idx) }},
	{IQ2_XXS, 32, len(iq2xxsGrid), func(b []byte, j, idx int) { b[2+8*(j/4)+j%4] = byte(idx) }},
	{IQ2_XS, 32, len(iq2xsGrid), func(b []byte, j, idx int) {
		put16(b[2+2*j:], le16(b[2+2*j:])&^511|uint16(idx))
	}},
	{IQ2_S, 32, len(iq2sGrid), func(b []byte, j, idx int) {
		s, l := j/4, j%4
		b[2+j] = byte(idx)
		b[66+s] = b[66+s]&^(3<<(2*l)) | byte(idx>>8)<<(2*l)
	}},
}

// TestIQuantEveryGridEntry: blocks that use every entry of their grid, one
// block at a time, give the same dot from the SIMD kernel as from the Go
// reference, and that the dequantized block's. A wrong entry in the
// kernels' copy of a grid moves one weight by a level or more, far outside
// the tolerance of a single block; random blocks would rarely meet it.
func TestIQuantEveryGridEntry(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 2))
	defer UseSIMD(true)
	for _, gt := range gridTypes {
		t.Run(gt.t.String(), func(t *testing.T) {
			nb := gt.entries / gt.indices
			w := randBlocks(rng, gt.t, nb)
			bb := gt.t.BlockBytes()
			for e := 0; e < gt.entries; e++ {
				gt.set(w[e/gt.indices*bb:], e%gt.indices, e)
			}
			x := make([]byte, 292)
			QuantizeQ8_K(randFloats(rng, QK, 1), x)
			for i := 0; i < nb; i++ {
				blk := w[i*bb : (i+1)*bb]
				ref, mag := dotRef(t, gt.t, blk, Q8_K, x, QK)
				for _, simd := range []bool{false, true} {
					UseSIMD(simd)
					got := dotOf(gt.t)(blk, x)
					require.InDelta(t, ref, float64(got), 2e-5*mag, "block %d simd=%v", i, simd)
				}
			}
		})
	}
}

// TestIQuantHostileBlocks: every byte pattern is a valid block (indices
// cannot leave their tables, scales are 4 bits): blocks of all-zero,
// all-one and random bytes under a finite scale dequantize to finite
// values, and the SIMD dot equals the reference's.
func TestIQuantHostileBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 4))
	defer UseSIMD(true)
	for _, gt := range gridTypes {
		bb := gt.t.BlockBytes()
		for _, fill := range []int{0x00, 0xff, -1} {
			const nb = 4
			w := make([]byte, nb*bb)
			for i := range w {
				if fill < 0 {
					w[i] = byte(rng.IntN(256))
				} else {
					w[i] = byte(fill)
				}
			}
			for i := 0; i < nb; i++ {
				put16(w[i*bb:], F32ToF16(65504)) // the largest finite f16
			}
			y := dequant(t, gt.t, w, nb*QK)
			for i, v := range y {
				require.False(t, math.IsInf(float64(v), 0) || math.IsNaN(float64(v)), "%s fill %#x elem %d", gt.t, fill, i)
			}
			x := make([]byte, nb*292)
			QuantizeQ8_K(randFloats(rng, nb*QK, 1), x)
			UseSIMD(false)
			want := dotOf(gt.t)(w, x)
			UseSIMD(true)
			got := dotOf(gt.t)(w, x)
			_, mag := dotRef(t, gt.t, w, Q8_K, x, nb*QK)
			require.InDelta(t, float64(want), float64(got), 2e-5*mag, "%s fill %#x", gt.t, fill)
		}
	}
}
