package model

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// LoadWithProgress reports the packing tensor by tensor: many fractions,
// never decreasing, ending at 1, and the model is the one Load gives.
func TestLoadWithProgressMovesDuringPacking(t *testing.T) {
	for _, untied := range []bool{false, true} {
		spec := defaultTiny(quant.Q4_1)
		spec.untied = untied
		_, f := tinyFile(t, spec)
		var got []float64
		m, err := LoadWithProgress(f, 1, func(x float64) { got = append(got, x) })
		require.NoError(t, err)
		defer m.Close()
		// One report per matmul weight (7 a layer and the head), the
		// embedding, and the final 1.
		require.GreaterOrEqual(t, len(got), 7*spec.layers+2, "%v", got)
		require.IsNonDecreasing(t, got)
		require.Greater(t, got[0], 0.0)
		require.Less(t, got[len(got)/2], 1.0, "the middle of packing is not the end: %v", got)
		require.Equal(t, 1.0, got[len(got)-1])

		want, _ := tinyModel(t, spec, 1)
		prompt := []int32{1, 5, 9, 2}
		require.Equal(t, run(t, want, new(Batch).chain(want.NewCache(16), prompt, true)),
			run(t, m, new(Batch).chain(m.NewCache(16), prompt, true)))
	}
}
