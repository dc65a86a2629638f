package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/streaming"
)

// A cancel that arrives while a long prompt is being prefilled in chunks is
// observed between chunks: the stream ends Cancelled without waiting for the
// rest of the prompt, and the slot is free again.
func TestCancelDuringChunkedPrefill(t *testing.T) {
	rt := newRuntime(t, `,"prefill_chunk":8,"context_length":2048`)
	prompt := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 150) // ~1,500 tokens: ~190 chunks
	ch := streaming.NewChannel()
	defer ch.Release()
	start := time.Now()
	require.NoError(t, rt.Submit([]byte(`{"prompt":"`+prompt+`","max_tokens":4}`), []*streaming.Channel{ch}))
	time.Sleep(20 * time.Millisecond)
	ch.Cancel()
	c, err := ch.WaitPop(60 * time.Second)
	require.NoError(t, err)
	require.True(t, c.Finished)
	require.Equal(t, streaming.Cancelled, c.Reason)
	require.Empty(t, c.TokenIDs, "no token was generated: the prompt never finished")
	require.Greater(t, c.Usage.PromptTokens, 1000)
	took := time.Since(start)
	t.Logf("cancelled after %v", took)
	waitIdle(t, rt)
}

func waitIdle(t *testing.T, rt *loop.Runtime) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rt.Stats().ActiveSlots != 0 {
		require.True(t, time.Now().Before(deadline), "slot not freed")
		time.Sleep(time.Millisecond)
	}
}
