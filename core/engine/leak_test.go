package engine_test

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/streaming"
)

// rssBytes reads the process's resident set from /proc/self/statm (its
// second field, in pages).
func rssBytes(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	f := bytes.Fields(b)
	require.GreaterOrEqual(t, len(f), 2, "statm: %q", b)
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

// settledRSS returns the RSS once the garbage is collected and handed back
// to the OS, so that only memory something still holds is counted.
func settledRSS(t testing.TB) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return rssBytes(t)
}

// leakCycles is how many create/generate/destroy cycles the leak check
// runs; LMSTREAM_LEAK_CYCLES raises it for `make fuzz`.
func leakCycles(t testing.TB) int {
	n := 40
	if s := os.Getenv("LMSTREAM_LEAK_CYCLES"); s != "" {
		v, err := strconv.Atoi(s)
		require.NoError(t, err, "LMSTREAM_LEAK_CYCLES")
		n = max(v, 3)
	}
	return n
}

// TestRuntimeCyclesDoNotLeak is issue 10 row 4: create a runtime on the
// default model, generate, destroy, many times. Every runtime used to keep
// its packed weights (~90 MB) alive through the quant pool's worker
// goroutine, which nothing stopped and whose last job referenced the model.
// The RSS after the last cycle must come back to within a few MB of the RSS
// after the second (the first warms process-wide state: the calibration
// cache, the tokenizer tables' first use, the Go heap's own metadata).
func TestRuntimeCyclesDoNotLeak(t *testing.T) {
	testmodel.Need(t, modelPath)
	if race.Enabled {
		t.Skip("RSS under the race detector measures its shadow memory; `go test ./core/engine` runs this")
	}
	cycles := leakCycles(t)
	// Two slots and a short context: the cycle still reserves KV caches and
	// packs every weight, and 40 cycles stay a few seconds of CI. A given
	// spec_budget skips the start-up calibration (seconds without SIMD).
	cfg := []byte(`{"model_path":"` + modelPath + `","max_slots":2,"context_length":256,"spec_budget":8}`)
	cycle := func(i int) {
		rt, err := loop.New(cfg)
		require.NoError(t, err)
		ch := streaming.NewChannel()
		require.NoError(t, rt.Submit([]byte(`{"prompt":"Hello","max_tokens":2}`), []*streaming.Channel{ch}))
		var got int
		for {
			c, err := ch.WaitPop(60e9)
			require.NoError(t, err)
			got += len(c.TokenIDs)
			if c.Finished {
				require.NotEqual(t, streaming.Error, c.Reason, c.ErrMessage)
				break
			}
		}
		require.GreaterOrEqual(t, got, 1, "cycle %d generated nothing", i)
		ch.Release()
		rt.Close()
	}
	goroutines := runtime.NumGoroutine()
	var base int64
	for i := 1; i <= cycles; i++ {
		cycle(i)
		if i == 2 {
			base = settledRSS(t)
		}
		if i%10 == 0 || i == cycles {
			t.Logf("after cycle %d: RSS %.1f MB (cycle 2: %.1f MB)", i, float64(settledRSS(t))/1e6, float64(base)/1e6)
		}
	}
	end := settledRSS(t)
	const bound = 16 << 20
	require.LessOrEqualf(t, end-base, int64(bound),
		"RSS grew by %.1f MB over %d cycles (%.1f MB after cycle 2, %.1f MB after cycle %d)",
		float64(end-base)/1e6, cycles-2, float64(base)/1e6, float64(end)/1e6, cycles)
	// The engine and pool goroutines of every runtime have ended.
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines, fmt.Sprintf("goroutines: %d before the cycles", goroutines))
}
