package cuda

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPrefixReuseOnGPU: the engine's prompt-prefix reuse on the device's
// caches (Truncate keeps the entries before the cut; a device cache cannot
// copy from another, so only a cache's own prefix is reused): a repeated
// prompt and a prompt that extends an earlier one and its answer reuse
// their prefix and emit the tokens of a fresh prefill ("prefix_cache":
// false), as the passes are batch-invariant.
func TestPrefixReuseOnGPU(t *testing.T) {
	on := newRuntime(t, "cuda", "")
	off := newRuntime(t, "cuda", `,"prefix_cache":false`)
	base := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	q, _ := jsonString(base)
	req := `{"prompt":` + q + `,"max_tokens":32,"temperature":0}`
	want, text, _ := collect(t, off, req)
	first, _, _ := collect(t, on, req)
	require.Equal(t, want, first)
	again, _, last := collect(t, on, req)
	require.Equal(t, want, again)
	require.Equal(t, last.Usage.PromptTokens-1, last.Usage.CachedTokens)

	q2, _ := jsonString(base + text + " And then")
	req2 := `{"prompt":` + q2 + `,"max_tokens":32,"temperature":0}`
	want2, _, _ := collect(t, off, req2)
	got2, _, last2 := collect(t, on, req2)
	require.Equal(t, want2, got2)
	require.Greater(t, last2.Usage.CachedTokens, last.Usage.PromptTokens/2)
	t.Logf("reused %d of %d prompt tokens", last2.Usage.CachedTokens, last2.Usage.PromptTokens)
}
