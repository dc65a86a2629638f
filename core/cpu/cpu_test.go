package cpu_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/lmstream/lmstream/core/cpu"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/internal/testmodel"
)

var modelPath = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

// The "cpu" backend this package registers is the engine over the CPU
// runner: a runtime comes up on the default model (reporting the weights'
// packing as it goes) and answers greedily, the same text twice. The
// engine's own behaviour is tested in core/engine.
func TestCPUBackendServes(t *testing.T) {
	testmodel.Need(t, modelPath)
	weights := 0
	rt, err := loop.NewWithProgress([]byte(`{"backend":"cpu","model_path":"`+modelPath+`","max_slots":1,"context_length":256,"spec_budget":4}`),
		func(stage string, _ float64) {
			if stage == loop.StageWeights {
				weights++
			}
		})
	require.NoError(t, err)
	defer rt.Close()
	require.Greater(t, weights, 1, "the weights' packing is reported as it goes")
	const req = `{"prompt":"The capital of France is","max_tokens":8}`
	a, err := rt.Complete([]byte(req))
	require.NoError(t, err)
	b, err := rt.Complete([]byte(req))
	require.NoError(t, err)
	require.Len(t, a[0].TokenIDs, 8)
	require.Equal(t, a[0].TokenIDs, b[0].TokenIDs)
}
