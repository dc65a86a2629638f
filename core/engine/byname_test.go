package engine_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/internal/testmodel"
)

// "model_path" and "draft_model_path" take a known model's name: its file
// in the model cache ($LMSTREAM_MODELS here).
func TestModelByName(t *testing.T) {
	abs, err := filepath.Abs(modelPath)
	require.NoError(t, err)
	testmodel.Need(t, abs)
	cache := t.TempDir()
	t.Setenv("LMSTREAM_MODELS", cache)

	// Not in the cache: LMS_ERR_MODEL, telling a pip user what to run.
	_, err = loop.New([]byte(`{"model_path":"smollm2-135m"}`))
	require.Equal(t, status.Model, status.CodeOf(err))
	require.ErrorContains(t, err, "run `lmstream pull smollm2-135m`")
	require.NotContains(t, err.Error(), "make")

	require.NoError(t, os.Symlink(abs, filepath.Join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")))
	rt, err := loop.New([]byte(`{"model_path":"smollm2-135m","draft_model_path":"smollm2-135m","max_slots":1,"context_length":64,"spec_budget":4}`))
	require.NoError(t, err)
	rt.Close()

	_, err = loop.New([]byte(`{"model_path":"smollm2-135m","draft_model_path":"qwen2.5-coder-0.5b","max_slots":1,"context_length":64}`))
	require.Equal(t, status.Model, status.CodeOf(err))
	require.ErrorContains(t, err, "lmstream pull qwen2.5-coder-0.5b")
}
