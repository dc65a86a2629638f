package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
)

// The weights stage moves while the weights are packed (it used to be one
// report, then nothing until speculation), and a draft model loaded during
// the speculation stage does not send the fraction back.
func TestProgressMovesDuringPacking(t *testing.T) {
	dir := t.TempDir()
	path, draft := tinyFile(t, dir, 64, 5, 4), tinyFile(t, dir, 64, 6, 4)
	type report struct {
		stage    string
		fraction float64
	}
	var got []report
	rt, err := loop.NewWithProgress([]byte(`{"model_path":"`+path+`","draft_model_path":"`+draft+`","max_slots":1,"threads":1,"context_length":64,"spec_budget":6}`),
		func(stage string, fraction float64) { got = append(got, report{stage, fraction}) })
	require.NoError(t, err)
	rt.Close()
	var fractions []float64
	weights := 0
	for _, r := range got {
		fractions = append(fractions, r.fraction)
		if r.stage == loop.StageWeights {
			weights++
			require.True(t, r.fraction >= weightsStart && r.fraction <= specStart, "%v", got)
		}
	}
	require.IsNonDecreasing(t, fractions, "%v", got)
	require.Greater(t, weights, 7*2, "a report per packed tensor: %v", got)
	require.Equal(t, report{loop.StageReady, 1}, got[len(got)-1])
}
