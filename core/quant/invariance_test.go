package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBatchInvariance: a row's result must not depend on which other rows
// share its matmul. Greedy speculative decoding verifies a tree in one
// batched pass and must reproduce plain decoding, which multiplies one row
// at a time, token for token; continuous batching must not change a
// request's output either. So every N must give every row bit-identical
// results, not merely close ones: with every kernel set the CPU runs (the
// pure-Go reference included), each packing its own layout.
func TestBatchInvariance(t *testing.T) {
	defer func() { _ = SelectKernels("") }()
	for _, set := range KernelSets() {
		if err := SelectKernels(set); err != nil {
			t.Fatal(err)
		}
		t.Run(set, testBatchInvariance)
	}
}

func testBatchInvariance(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	pool := NewPool(2)
	defer pool.Close()
	const rows, n = 40, 11
	for _, wt := range append([]Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K}, lowBitTypes...) {
		cols := 512
		w := randBlocks(rng, wt, rows*cols/wt.BlockElems())
		at := ActType(wt)
		xrb, _ := at.RowBytes(cols)
		x := randFloats(rng, n*cols, 1)
		xq := make([]byte, n*xrb)
		QuantizeActs(at, x, n, cols, xq)
		p := Prepack(wt, w, rows, cols)
		for _, packed := range []bool{false, true} {
			mm := func(xq []byte, k int, out []float32) {
				if packed {
					MatMulPacked(p, xq, k, out, pool)
				} else {
					MatMul(wt, w, rows, cols, xq, k, out, pool)
				}
			}
			all := make([]float32, n*rows)
			mm(xq, n, all)
			var bad []int
			for k := 1; k <= n; k++ {
				part := make([]float32, k*rows)
				mm(xq, k, part)
				if !equalBits(all[:k*rows], part) {
					bad = append(bad, k)
				}
			}
			assert.Empty(t, bad, "%s packed=%v: a batch of N rows gives other results for its first rows than a batch of %d, for N in %v", wt, packed, n, bad)
		}
	}
}

func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
