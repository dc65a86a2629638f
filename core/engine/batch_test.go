package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/streaming"
)

func TestConcurrentRequestsMatchAlone(t *testing.T) {
	rt := newRuntime(t, `,"prefill_chunk":16`)
	prompts := []string{"The sun is", "My favourite food is", "Water boils at", "The quick brown fox"}
	alone := make([]string, len(prompts))
	for i, p := range prompts {
		_, alone[i] = stream(t, rt, `{"prompt":"`+p+`","max_tokens":24}`)
	}
	chans := make([]*streaming.Channel, len(prompts))
	for i, p := range prompts {
		chans[i] = streaming.NewChannel()
		defer chans[i].Release()
		require.NoError(t, rt.Submit([]byte(`{"prompt":"`+p+`","max_tokens":24}`), chans[i:i+1]))
	}
	for i, ch := range chans {
		var text strings.Builder
		for {
			c, err := ch.WaitPop(60 * time.Second)
			require.NoError(t, err)
			text.WriteString(c.Text)
			if c.Finished {
				break
			}
		}
		require.Equal(t, alone[i], text.String(), "greedy output must not depend on batching (prompt %q)", prompts[i])
	}
}
