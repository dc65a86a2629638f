package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMatMulPackedSet: one pool job over several matrices that share
// their activations gives each matrix's MatMulPacked bits exactly, with
// every kernel set this CPU runs, for sets as the models have them (q, k,
// v; gate, up; mixed types of one activation type, as Qwen2.5's Q5_0 and
// Q8_0 or Q4_K and Q6_K), row counts that leave partial groups and pairs,
// N = 1…9 (the kernels' activation splits) and 1–3 threads; and a set
// whose activation types differ is refused.
func TestMatMulPackedSet(t *testing.T) {
	defer func() { _ = SelectKernels("") }()
	rng := rand.New(rand.NewPCG(21, 22))
	pools := []*Pool{nil, NewPool(2), NewPool(3)}
	defer pools[1].Close()
	defer pools[2].Close()
	type mat struct {
		wt   Type
		rows int
	}
	sets := []struct {
		cols int
		ms   []mat
	}{
		{576, []mat{{Q4_1, 576}, {Q4_1, 192}, {Q4_1, 192}}},
		{512, []mat{{Q5_0, 200}, {Q5_0, 40}, {Q8_0, 24}}},
		{512, []mat{{Q4_K, 136}, {Q4_K, 8}, {Q6_K, 17}}},
		{256, []mat{{Q4_0, 48}, {IQ4_NL, 33}}},
		{256, []mat{{Q4_K, 100}, {IQ4_XS, 64}}},
		{96, []mat{{Q4_1, 1}, {Q4_1, 15}}},
	}
	for _, set := range KernelSets() {
		require.NoError(t, SelectKernels(set))
		for _, s := range sets {
			at := ActType(s.ms[0].wt)
			xrb, _ := at.RowBytes(s.cols)
			const nmax = 9
			xq := make([]byte, nmax*xrb)
			QuantizeActs(at, randFloats(rng, nmax*s.cols, 1), nmax, s.cols, xq)
			var ps []*Packed
			for _, m := range s.ms {
				w := randBlocks(rng, m.wt, m.rows*s.cols/m.wt.BlockElems())
				ps = append(ps, Prepack(m.wt, w, m.rows, s.cols))
			}
			for n := 1; n <= nmax; n++ {
				for th, pool := range pools {
					name := fmt.Sprintf("%s %v cols=%d N=%d threads=%d", set, s.ms, s.cols, n, th+1)
					outs := make([][]float32, len(ps))
					for i, p := range ps {
						outs[i] = make([]float32, n*p.Rows+1)
						outs[i][n*p.Rows] = 42 // sentinel
					}
					views := make([][]float32, len(ps))
					for i, p := range ps {
						views[i] = outs[i][:n*p.Rows]
					}
					MatMulPackedSet(ps, xq, n, views, pool)
					for i, p := range ps {
						want := make([]float32, n*p.Rows)
						MatMulPacked(p, xq, n, want, pool)
						assert.True(t, equalBits(want, views[i]), "%s: matrix %d differs from its MatMulPacked", name, i)
						assert.Equal(t, float32(42), outs[i][n*p.Rows], "%s: matrix %d wrote past its output", name, i)
					}
				}
			}
		}
	}
	q8 := Prepack(Q8_0, randBlocks(rng, Q8_0, 16), 16, 32)
	q4k := Prepack(Q4_K, randBlocks(rng, Q4_K, 16), 16, 256)
	assert.Panics(t, func() {
		MatMulPackedSet([]*Packed{q8, q4k}, make([]byte, 300), 1, [][]float32{make([]float32, 16), make([]float32, 16)}, pools[1])
	}, "matrices of different activation types or widths")
}
