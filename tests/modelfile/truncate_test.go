package modelfile

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	_ "github.com/lmstream/lmstream/core/cpu"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/streaming"
)

// defaultModel is the repository's default model (`make model`).
var defaultModel = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

// needDefaultModel returns the default model's path or skips the test.
func needDefaultModel(tb testing.TB) string {
	tb.Helper()
	testmodel.Need(tb, defaultModel)
	return defaultModel
}

// copyFile copies src to a fresh file in a test directory.
func copyFile(tb testing.TB, src string) string {
	tb.Helper()
	in, err := os.Open(src)
	require.NoError(tb, err)
	defer in.Close()
	dst := filepath.Join(tb.TempDir(), filepath.Base(src))
	out, err := os.Create(dst)
	require.NoError(tb, err)
	_, err = io.Copy(out, in)
	require.NoError(tb, err)
	require.NoError(tb, out.Close())
	return dst
}

// TestModelFileTruncatedUnderRuntime is issue 10's row 8: the model file is
// truncated (then emptied) while a runtime serves from it. The runtime
// holds its own copy of every weight it reads after loading, so it goes on
// answering, token for token as before; before the fix the next forward
// pass read a vanished page of the mapping and SIGBUS killed the process.
func TestModelFileTruncatedUnderRuntime(t *testing.T) {
	if race.Enabled {
		t.Skip("generating with the real model is too slow under -race")
	}
	path := copyFile(t, needDefaultModel(t))
	rt, err := loop.New([]byte(`{"model_path":"` + path + `","max_slots":1,"context_length":64,"threads":2,"spec_budget":4,"drafter":"none"}`))
	require.NoError(t, err)
	defer rt.Close()

	const req = `{"prompt":"The capital of France is","max_tokens":4,"temperature":0}`
	complete := func() streaming.Chunk {
		res, err := rt.Complete([]byte(req))
		require.NoError(t, err)
		require.Len(t, res, 1)
		return res[0]
	}
	before := complete()
	require.Equal(t, streaming.Length, before.Reason, before.ErrMessage)
	require.Len(t, before.TokenIDs, 4)

	st, err := os.Stat(path)
	require.NoError(t, err)
	for _, size := range []int64{st.Size() / 2, 4096, 0} {
		require.NoError(t, os.Truncate(path, size))
		after := complete()
		require.Equal(t, before.Reason, after.Reason, after.ErrMessage)
		require.Equal(t, before.TokenIDs, after.TokenIDs, "file truncated to %d bytes", size)
		require.Equal(t, before.Text, after.Text)
	}
	// A runtime created from the damaged file fails with a clear error.
	_, err = loop.New([]byte(`{"model_path":"` + path + `","max_slots":1}`))
	require.ErrorContains(t, err, path)
}
