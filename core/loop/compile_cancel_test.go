package loop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

// A submitter whose context is done while the request's grammar compiles
// (a server's client that left) gets a Closed error and nothing is queued:
// the compile stops at its next look at the context instead of running to
// the end. The context reaches no further: a request without a grammar is
// queued, and cancelled through its channels.
func TestSubmitStopsCompilingWhenItsContextIsDone(t *testing.T) {
	rt := byteRuntime(t, 2, "")
	var props, required strings.Builder
	for i := range 800 {
		if i > 0 {
			props.WriteString(", ")
			required.WriteString(", ")
		}
		fmt.Fprintf(&props, `"p%d": {"type": "string", "pattern": "[a-z]+(-[0-9]{2})?"}`, i)
		fmt.Fprintf(&required, `"p%d"`, i)
	}
	requests := []string{
		`{"prompt": "x", "script": [[65]], "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object", "properties": {` + props.String() + `}, "required": [` + required.String() + `]}}}}`,
		`{"prompt": "x", "script": [[65]], "grammar": "root ::= ` + strings.Repeat(`(\"ab\" [c-x]){1000} `, 20) + `"}`,
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, req := range requests {
		ch := streaming.NewChannel()
		err := rt.SubmitContext(gone, []byte(req), []*streaming.Channel{ch})
		require.Error(t, err, "%.60s", req)
		require.Equal(t, status.Closed, status.CodeOf(err), "%v", err)
		require.Contains(t, err.Error(), "cancelled while its grammar compiled")
		// With a live context the grammar compiles, and the replay
		// backend (which plays scripts) refuses to follow it: the refusal
		// comes from past the compile.
		err = rt.SubmitContext(context.Background(), []byte(req), []*streaming.Channel{ch})
		require.Equal(t, status.InvalidRequest, status.CodeOf(err), "%v", err)
		require.Contains(t, err.Error(), "cannot follow")
		// Nothing was attached: the channel takes the next request.
		require.NoError(t, rt.SubmitContext(gone, []byte(`{"prompt": "x", "script": [[65]]}`), []*streaming.Channel{ch}))
		got := drain(t, ch)
		require.Equal(t, "A", got[0].Text)
		ch.Release()
	}
}
