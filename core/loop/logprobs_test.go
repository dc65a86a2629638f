package loop_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

// Logprobs travel with their token ids: one entry per id in every chunk,
// bursts included; cut with them by a stop string (the discarded tail of
// a burst takes its entries along) and by max_tokens; the same through
// Complete; absent when not asked for.
func TestLogprobsTravelWithTokens(t *testing.T) {
	rt := byteRuntime(t, 2, "")
	script := `[[104,101],[108,108,111,32],[119,111],[114]]` // "he" "llo " "wo" "r"
	for _, c := range []struct {
		req   string
		ids   int
		top   bool
		asked bool
	}{
		{`{"prompt":"x","logprobs":true,"top_logprobs":2,"stop":["lo w"],"script":` + script + `}`, 7, true, true},
		{`{"prompt":"x","logprobs":true,"max_tokens":3,"script":` + script + `}`, 3, false, true},
		{`{"prompt":"x","script":` + script + `}`, 10, false, false}, // and the end token
	} {
		chunks := drain(t, submit(t, rt, c.req))
		res, err := rt.Complete([]byte(c.req))
		require.NoError(t, err)
		var ids []int32
		var lps []streaming.TokenLogprob
		for _, ch := range chunks {
			if c.asked {
				require.Len(t, ch.Logprobs, len(ch.TokenIDs), c.req)
			} else {
				require.Nil(t, ch.Logprobs)
			}
			ids = append(ids, ch.TokenIDs...)
			lps = append(lps, ch.Logprobs...)
		}
		require.Len(t, ids, c.ids, c.req)
		require.Equal(t, ids, res[0].TokenIDs)
		require.Equal(t, lps, res[0].Logprobs)
		for i, lp := range lps {
			// The replay backend's tokens are certain.
			require.Equal(t, ids[i], lp.ID)
			require.Equal(t, 0.0, lp.Logprob)
			require.Equal(t, []byte{byte(ids[i])}, lp.Bytes)
			if c.top {
				require.Equal(t, []streaming.Logprob{{ID: ids[i], Bytes: []byte{byte(ids[i])}}}, lp.Top)
			} else {
				require.Empty(t, lp.Top)
			}
		}
	}
}

func TestLogprobsRequestErrors(t *testing.T) {
	rt := byteRuntime(t, 1, "")
	for req, want := range map[string]string{
		`{"prompt":"x","script":[],"logprobs":1}`:                      `"logprobs" must be a boolean`,
		`{"prompt":"x","script":[],"logprobs":true,"top_logprobs":21}`: `"top_logprobs" must be in [0, 20], got 21`,
		`{"prompt":"x","script":[],"logprobs":true,"top_logprobs":-1}`: `"top_logprobs" must be in [0, 20], got -1`,
		`{"prompt":"x","script":[],"top_logprobs":3}`:                  `"top_logprobs" needs "logprobs": true`,
	} {
		err := rt.Submit([]byte(req), []*streaming.Channel{streaming.NewChannel()})
		require.Error(t, err, req)
		require.Contains(t, err.Error(), want, req)
	}
}

// A request may not ask for more log-probabilities than
// MaxLogprobEntries: batch items × max_tokens × (1 + top_logprobs). 128
// items of 97 tokens with 21 each fit; of 98 they do not, and the error is
// an invalid request naming the fields, before anything is queued.
func TestLogprobsResponseBudget(t *testing.T) {
	rt := byteRuntime(t, 4, "")
	prompts, _ := json.Marshal(make([]string, 128))
	req := func(maxTokens int) string {
		return fmt.Sprintf(`{"prompts":%s,"script":[],"logprobs":true,"top_logprobs":20,"max_tokens":%d}`, prompts, maxTokens)
	}
	require.LessOrEqual(t, 128*97*21, loop.MaxLogprobEntries)
	require.Greater(t, 128*98*21, loop.MaxLogprobEntries)
	_, err := rt.Complete([]byte(req(98)))
	require.Equal(t, status.InvalidRequest, status.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), `"max_tokens", "top_logprobs" and the batch size ask for too many log-probabilities`)
	require.Equal(t, int64(0), rt.Stats().Submitted)
	res, err := rt.Complete([]byte(req(97)))
	require.NoError(t, err)
	require.Len(t, res, 128)
	// Without logprobs the same batch is no concern of this budget.
	_, err = rt.Complete([]byte(fmt.Sprintf(`{"prompts":%s,"script":[],"max_tokens":100000}`, prompts)))
	require.NoError(t, err)
}
