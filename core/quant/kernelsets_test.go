package quant

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSelectKernels: every kernel set this CPU runs can be selected and is
// the one that then runs (a matmul through it agrees with the reference
// within the kernels' tolerance); a set it cannot run is refused and
// leaves the active set alone.
func TestSelectKernels(t *testing.T) {
	was := Kernels()
	defer func() { require.NoError(t, SelectKernels("")) }()
	rng := rand.New(rand.NewPCG(61, 62))
	const rows, cols = 24, 512
	w := make([]byte, rows*288)
	require.NoError(t, Quantize(Q4_K, randFloats(rng, rows*cols, 0.05), w))
	xq := make([]byte, 292*2)
	QuantizeActs(Q8_K, randFloats(rng, cols, 1), 1, cols, xq)
	ref, mag := matmulRef(t, Q4_K, w, rows, cols, xq, 1)
	for _, set := range KernelSets() {
		require.NoError(t, SelectKernels(set), set)
		name := Kernels()
		require.Contains(t, []string{set, "avx512vnni+amx"}, name, "selected %s", set)
		out := make([]float32, rows)
		MatMulPacked(Prepack(Q4_K, w, rows, cols), xq, 1, out, nil)
		for r := range out {
			require.InDelta(t, ref[r], out[r], 2e-5*mag[r]+1e-30, "%s row %d", set, r)
		}
	}
	require.NoError(t, SelectKernels(""))
	require.Equal(t, was, Kernels(), "the default set after selecting others")
	for _, set := range KernelSetNames {
		if !canRun(set) {
			before := Kernels()
			require.Error(t, SelectKernels(set), set)
			require.Equal(t, before, Kernels(), "a refused set leaves the active one")
		}
	}
	require.Error(t, SelectKernels("sse9"))
}
