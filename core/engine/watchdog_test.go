package engine_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/streaming"
)

// streamLog is what a consumer saw on one channel.
type streamLog struct {
	req       string
	chunks    int
	terminals int
	tokens    int
	reason    streaming.FinishReason
	errMsg    string
	after     error         // what a pop after the terminal chunk returned
	firstAt   time.Duration // first chunk, from submission
	doneAt    time.Duration // terminal chunk, from submission
	timedOut  bool
}

// consume pops every chunk of ch until the terminal one, or until deadline
// passes without one (a wedged engine).
func consume(ch *streaming.Channel, req string, start time.Time, deadline time.Duration) *streamLog {
	l := &streamLog{req: req}
	for {
		left := deadline - time.Since(start)
		if left <= 0 {
			l.timedOut = true
			return l
		}
		c, err := ch.WaitPop(left)
		if err != nil {
			// ErrEmpty: the deadline passed with nothing pending.
			l.timedOut, l.after = true, err
			return l
		}
		if l.chunks == 0 {
			l.firstAt = time.Since(start)
		}
		l.chunks++
		l.tokens += len(c.TokenIDs)
		if c.Finished {
			l.terminals++
			l.reason, l.errMsg = c.Reason, c.ErrMessage
			l.doneAt = time.Since(start)
			// Nothing follows the terminal chunk.
			_, l.after = ch.WaitPop(50 * time.Millisecond)
			return l
		}
	}
}

// TestEngineNeverWedges is issue 10's watchdog (item 4): pathological
// requests run beside normal ones on the real default model, and the
// normal ones must keep streaming and finish, every stream must get
// exactly one terminal chunk, and the runtime must serve afterwards.
// Before the fix the subnormal temperatures wedged the engine for good:
// no stream got another chunk and Close never returned.
func TestEngineNeverWedges(t *testing.T) {
	if race.Enabled {
		t.Skip("real-model generation is too slow under the race detector")
	}
	testmodel.Need(t, modelPath)
	// A fixed spec_budget skips the start-up calibration, which a machine
	// shared with other work can stretch to minutes.
	rt, err := loop.New([]byte(`{"model_path":"` + modelPath + `","max_slots":6,"context_length":256,"spec_budget":8}`))
	require.NoError(t, err)
	// A wedged engine never lets Close return: the test then reports the
	// wedge and leaves the runtime behind instead of hanging in a defer.
	closed, wedged := false, false
	defer func() {
		if !closed && !wedged {
			rt.Close()
		}
	}()

	neverStops := make([]string, 0, loop.MaxStops)
	for i := range loop.MaxStops {
		neverStops = append(neverStops, fmt.Sprintf(`"\u0001never %d \u00ff"`, i))
	}
	pathological := []string{
		`{"prompt":"Hello","max_tokens":4,"temperature":1e-320}`,
		`{"prompt":"Hello","max_tokens":4,"temperature":1e-310,"speculate":true}`,
		`{"prompt":"Hello","max_tokens":4,"temperature":2e-308,"top_k":3}`,
		`{"prompt":"Hello","max_tokens":4,"temperature":1e-5,"seed":18446744073709551615}`,
		`{"prompt":"Hello","max_tokens":4,"temperature":100,"top_k":2147483647}`,
		`{"prompt":"Hello","max_tokens":4,"temperature":1,"repetition_penalty":100,"presence_penalty":100,"frequency_penalty":100,"repeat_last_n":1048576}`,
		`{"prompt":"Hello","max_tokens":4,"repetition_penalty":0.01,"presence_penalty":-100,"frequency_penalty":-100,"repeat_last_n":1}`,
		`{"prompt":"Hello","max_tokens":4,"temperature":0.7,"min_p":1,"top_p":1e-300,"speculate":true,"drafter":"early_exit"}`,
		`{"prompt":"Hello","max_tokens":4,"temperature":5e-5,"top_p":0.5,"min_p":0.999,"speculate":true}`,
		`{"prompt":"Hello","max_tokens":4,"stop":[` + strings.Join(neverStops, ",") + `]}`,
		`{"prompt":"Hello","max_tokens":4,"stop":"` + strings.Repeat("\u00e9", loop.MaxStopBytes/2) + `"}`,
		`{"prompts":["a","b","c"],"max_tokens":3,"temperature":1e-300,"tpot_slo_ms":3600000,"ttft_slo_ms":0}`,
	}
	// Requests the parser must turn away cleanly before they reach the
	// engine (each once crashed, hung or was silently accepted).
	rejected := []struct{ req, msg string }{
		// Issue 10 row 2: this allocated 2^40 int32s in lms_submit.
		{`{"prompt":"Hello","repetition_penalty":1.1,"repeat_last_n":1099511627776}`, `"repeat_last_n" must be in [0, 1048576], got 1099511627776`},
		{`{"prompt":"Hello","repetition_penalty":1.1,"repeat_last_n":68719476736}`, `"repeat_last_n" must be in [0, 1048576]`},
		{`{"prompt":"Hello","repeat_last_n":-1}`, `"repeat_last_n" must be in [0, 1048576], got -1`},
		{`{"prompt":"Hello","repetition_penalty":1e300}`, `"repetition_penalty" must be in [0, 100]`},
		{`{"prompt":"Hello","repetition_penalty":0.001}`, `"repetition_penalty" must be 0 or 1 (off) or in [0.01, 100], got 0.001`},
		{`{"prompt":"Hello","presence_penalty":1e39}`, `"presence_penalty" must be in [-100, 100]`},
		{`{"prompt":"Hello","frequency_penalty":null}`, `"frequency_penalty" must be a number, got null`},
		{`{"prompt":"Hello","speculate":null}`, `"speculate" must be a boolean, got null`},
		{`{"prompt":"Hello","drafter":7}`, `"drafter" must be a string, got number 7`},
		{`{"prompt":"Hello","temperature":1e999}`, `"temperature" must be a finite number`},
		{`{"prompt":"Hello","max_tokens":0}`, `"max_tokens" must be in [1, `},
		{`{"prompt":"Hello","seed":null}`, `"seed" must be an integer, got null`},
		{`{"prompt":"Hello"}}`, `unexpected data after the top-level value`},
	}
	normal := `{"prompt":"The capital of France is","max_tokens":8}`

	start := time.Now()
	// Generous for a loaded machine: a wedged engine never finishes, a
	// slow one does; unloaded, the whole test takes a few seconds.
	const deadline = 150 * time.Second
	var (
		mu   sync.Mutex
		logs []*streamLog
		wg   sync.WaitGroup
	)
	launch := func(req string) {
		t.Helper()
		r, err := loop.ParseRequest([]byte(req))
		require.NoError(t, err, req)
		chs := make([]*streaming.Channel, r.Items())
		for i := range chs {
			chs[i] = streaming.NewChannel()
			t.Cleanup(chs[i].Release)
		}
		require.NoError(t, rt.Submit([]byte(req), chs), req)
		for _, ch := range chs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := consume(ch, req, start, deadline)
				mu.Lock()
				logs = append(logs, l)
				mu.Unlock()
			}()
		}
	}
	// Normal requests first and last, pathological ones in between, so
	// the normal ones share iterations with them.
	launch(normal)
	for _, req := range pathological {
		launch(req)
	}
	for _, c := range rejected {
		err := rt.Submit([]byte(c.req), []*streaming.Channel{streaming.NewChannel()})
		require.Error(t, err, c.req)
		assert.Contains(t, []status.Code{status.BadJSON, status.InvalidRequest}, status.CodeOf(err), "%s: %v", c.req, err)
		assert.Contains(t, err.Error(), c.msg, c.req)
	}
	launch(normal)
	wg.Wait()

	normals := 0
	for _, l := range logs {
		wedged = wedged || l.timedOut
	}
	for _, l := range logs {
		require.False(t, l.timedOut, "%s: no terminal chunk after %v (%d chunks, %v): the engine wedged", l.req, deadline, l.chunks, l.after)
		assert.Equal(t, 1, l.terminals, l.req)
		assert.Equal(t, streaming.ErrDone, l.after, "%s: something followed the terminal chunk", l.req)
		assert.Contains(t, []streaming.FinishReason{streaming.EndId, streaming.Length, streaming.StopWords}, l.reason, "%s: %s", l.req, l.errMsg)
		if l.req == normal {
			normals++
			assert.Positive(t, l.tokens, "a normal request streamed nothing")
		}
		t.Logf("%-60.60s %2d tokens in %2d chunks, done at %v (%v)", l.req, l.tokens, l.chunks, l.doneAt.Round(time.Millisecond), l.reason)
	}
	require.Equal(t, 2, normals)
	require.Len(t, logs, 2+len(pathological)+2) // the batch of three adds two

	// The runtime still serves, and a greedy request with a subnormal
	// temperature gives exactly the greedy answer.
	greedy, err := rt.Complete([]byte(`{"prompt":"Hello","max_tokens":4}`))
	require.NoError(t, err)
	tiny, err := rt.Complete([]byte(`{"prompt":"Hello","max_tokens":4,"temperature":1e-320}`))
	require.NoError(t, err)
	assert.Equal(t, greedy[0].TokenIDs, tiny[0].TokenIDs)

	// Cancellation reaches a pathological request, and Close returns.
	ch := streaming.NewChannel()
	defer ch.Release()
	require.NoError(t, rt.Submit([]byte(`{"prompt":"Hello","temperature":1e-320,"repetition_penalty":100}`), []*streaming.Channel{ch}))
	_, err = ch.WaitPop(20 * time.Second)
	require.NoError(t, err)
	ch.Cancel()
	l := consume(ch, "cancelled", time.Now(), 20*time.Second)
	require.False(t, l.timedOut)
	closedAt := make(chan struct{})
	go func() { rt.Close(); close(closedAt) }()
	select {
	case <-closedAt:
		closed = true
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
