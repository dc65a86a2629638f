package quant

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestPack8MatchesPack8Go: the packer the loader runs writes the same
// bytes as the layout's definition, for every type of the 8-row layout,
// whole groups and a partial last one, over arbitrary block bytes.
func TestPack8MatchesPack8Go(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, wt := range []Type{Q4_0, Q4_1, Q5_0, Q8_0, IQ4_NL, Q4_K, Q6_K, IQ4_XS} {
		for _, shape := range [][2]int{{8, 256}, {16, 512}, {21, 768}, {8, 2304}, {3, 256}} {
			rows, cols := shape[0], shape[1]
			wrb, err := wt.RowBytes(cols)
			if err != nil {
				t.Fatal(err)
			}
			w := make([]byte, rows*wrb)
			for i := range w {
				w[i] = byte(rng.Uint32())
			}
			gb := cols / wt.BlockElems() * p8Record(wt)
			for g := 0; g < (rows+p8Rows-1)/p8Rows; g++ {
				want, got := make([]byte, gb), make([]byte, gb)
				for i := range got { // stale bytes must be overwritten
					got[i] = 0xa5
				}
				pack8Go(wt, w, wrb, rows, cols, g, want)
				pack8(wt, w, wrb, rows, cols, g, got)
				if !bytes.Equal(want, got) {
					t.Fatalf("%s %d×%d group %d: pack8 differs from pack8Go", wt, rows, cols, g)
				}
			}
		}
	}
}
