package cpu_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/runtime"
)

// TestGemmaThroughTheEngine runs Gemma 3 270M (`make model
// MODEL=gemma3-270m`; skipped without it) through the runtime: its file
// ships no chat template, so "messages" render in the Gemma family's
// format; and with a prompt longer than the 512-token sliding window,
// greedy decoding with each drafter (whose verification passes are trees
// at positions past the window) emits exactly the tokens of plain greedy
// decoding.
func TestGemmaThroughTheEngine(t *testing.T) {
	path := filepath.Join("..", "..", "models", "gemma-3-270m-q4_k_m.gguf")
	if _, err := os.Stat(path); err != nil || raceEnabled {
		t.Skipf("Gemma 3 270M absent (make model MODEL=gemma3-270m) or -race: %v", err)
	}
	rt, err := runtime.New([]byte(`{"model_path":"` + path + `","max_slots":2,"context_length":1024,` +
		`"spec_budget":8,"spec_adaptive":false,"spec_min_prob":0.25}`))
	require.NoError(t, err)
	defer rt.Close()
	in := introspector(t, rt)
	info := in.ModelInfo()
	require.Equal(t, "gemma3", info.Architecture)
	require.Equal(t, 262144, info.VocabSize)
	require.Equal(t, "gemma", info.ChatRenderer)
	text, err := in.RenderChat([]runtime.Message{{Role: "user", Content: "Hi"}}, true)
	require.NoError(t, err)
	require.Equal(t, "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", text)

	passage, err := os.ReadFile(filepath.Join("..", "model", "testdata", "passage.txt"))
	require.NoError(t, err)
	long := strings.Repeat(string(passage)+"\n\n", 2) + "Repeat the first paragraph above."
	const maxTokens = 32
	want, plain := runAll(t, rt, [][]byte{chatRequest(long, maxTokens, map[string]any{"speculate": false})}, 1, 0)
	require.NotEmpty(t, want[0])
	require.Greater(t, plain[0].Usage.PromptTokens, 600)
	for _, drafter := range []string{"ngram", "early_exit"} {
		got, last := runAll(t, rt, [][]byte{chatRequest(long, maxTokens, map[string]any{"drafter": drafter})}, 1, 0)
		require.Equal(t, want[0], got[0], drafter)
		require.Greater(t, last[0].Usage.VerifyPasses, 0, drafter)
		t.Logf("%s: %d proposed, %d accepted", drafter, last[0].Usage.DraftProposed, last[0].Usage.DraftAccepted)
	}
}
