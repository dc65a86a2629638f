package engine_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
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
	if race.Enabled {
		t.Skip("too slow under -race")
	}
	testmodel.Need(t, path)
	rt, err := loop.New([]byte(`{"model_path":"` + path + `","max_slots":2,"context_length":1024,` +
		`"spec_budget":8,"spec_adaptive":false,"spec_min_prob":0.25}`))
	require.NoError(t, err)
	defer rt.Close()
	in := introspector(t, rt)
	info := in.ModelInfo()
	require.Equal(t, "gemma3", info.Architecture)
	require.Equal(t, 262144, info.VocabSize)
	require.Equal(t, "gemma", info.ChatRenderer)
	text, err := in.RenderChat([]loop.Message{{Role: "user", Content: "Hi"}}, true, nil)
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

// TestGemmaBudgetCountsTheWindow: the memory budget prices Gemma 3's local
// (sliding-window) layers at their window and one pass, not the context:
// at 8192 positions one sequence's cache takes the 3 global layers' 8192
// positions and the 15 local layers' few pages (the window and a pass, in
// whole pages).
func TestGemmaBudgetCountsTheWindow(t *testing.T) {
	path := filepath.Join("..", "..", "models", "gemma-3-270m-q4_k_m.gguf")
	testmodel.Need(t, path)
	_, err := loop.New([]byte(`{"model_path":"` + path + `","max_slots":2,"context_length":8192,"memory_budget_bytes":1000}`))
	require.Equal(t, status.Capacity, status.CodeOf(err), "%v", err)
	t.Log(err)
	m := regexp.MustCompile(`KV cache of one sequence at the whole context \(1 slot × 18 layers × 1 kv heads × 8192 positions, 15 local layers holding (\d+) × 256 dims × 2 \(K, V\) × 2 B, keys padded 264/256\)[^\n]*?(\d+) B`).FindStringSubmatch(err.Error())
	require.NotNil(t, m, "%v", err)
	rows, _ := strconv.Atoi(m[1])
	require.Greater(t, rows, 512) // the window, and a pass
	require.LessOrEqual(t, rows, 1024)
	// 2 B a value; a page's keys take kv.KStride positions' room.
	require.Equal(t, strconv.Itoa((3*8192+15*rows)*256*2*(kv.KStride+kv.PageSize)/kv.PageSize), m[2])
}
