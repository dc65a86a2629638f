package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/streaming"
)

func needModel(t *testing.T) {
	t.Helper()
	testmodel.Need(t, modelPath)
}

// TestConfigSizesAreBounded is issue 10 row 5: every size a config sets is
// refused past its bound with INVALID_REQUEST naming the field, before
// anything is allocated (context_length 1e7 used to abort in kv.New, 2^40
// to fail with "makeslice", 2^60 to overflow into a runtime whose every
// request failed).
func TestConfigSizesAreBounded(t *testing.T) {
	needModel(t)
	for _, c := range []struct{ extra, field string }{
		{`"context_length":10000000`, "context_length"},
		{`"context_length":100000000`, "context_length"},
		{`"context_length":1099511627776`, "context_length"},       // 2^40
		{`"context_length":1152921504606846976`, "context_length"}, // 2^60
		{`"context_length":9000`, "context_length"},                // past the model's 8192
		{`"context_length":1`, "context_length"},
		{`"context_length":-5`, "context_length"},
		{`"max_slots":0`, "max_slots"},
		{`"max_slots":4097`, "max_slots"},
		{`"max_queue":0`, "max_queue"},
		{`"max_queue":1099511627776`, "max_queue"},
		{`"prefill_chunk":0`, "prefill_chunk"},
		{`"prefill_chunk":1048576`, "prefill_chunk"},
		{`"threads":0`, "threads"},
		{`"threads":100000`, "threads"},
		{`"spec_budget":-1`, "spec_budget"},
		{`"spec_budget":1073741824`, "spec_budget"},
		{`"spec_max_depth":1000`, "spec_max_depth"},
		{`"spec_max_width":0`, "spec_max_width"},
		{`"memory_budget_bytes":-1`, "memory_budget_bytes"},
	} {
		_, err := loop.New([]byte(`{"model_path":"` + modelPath + `",` + c.extra + `}`))
		require.Error(t, err, c.extra)
		require.Equal(t, status.InvalidRequest, status.CodeOf(err), "%s: %v", c.extra, err)
		require.Contains(t, err.Error(), `"`+c.field+`"`, c.extra)
	}
}

// TestMemoryBudgetRefusesWithNumbers is issue 10 item 3 with issue 48's
// pages: a configuration in which one sequence at the whole context cannot
// fit its KV cache beside the model is refused at creation with CAPACITY
// and the numbers; the slots' caches are a ceiling, taken as sequences
// grow, so many slots are no longer a reservation.
func TestMemoryBudgetRefusesWithNumbers(t *testing.T) {
	needModel(t)
	// The largest context the model allows under a 300 MB budget: the
	// model's file and packed weights leave less than one sequence's KV
	// cache (30 layers × 3 kv heads × 8192 positions × 64 dims, 189 MB).
	_, err := loop.New([]byte(`{"model_path":"` + modelPath + `","context_length":8192,"memory_budget_bytes":300000000}`))
	require.Equal(t, status.Capacity, status.CodeOf(err), "%v", err)
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{
		`budget is 300.0 MB (300000000 B) (config field "memory_budget_bytes"`,
		"KV cache of one sequence at the whole context (1 slot × 30 layers × 3 kv heads × 8192 positions × 64 dims × 2 (K, V) × 2 B, keys padded 264/256)",
		fmt.Sprintf("%d B", 30*3*8192*64*2*(kv.KStride+kv.PageSize)/kv.PageSize), "model file (mapped)", "packed weights",
	} {
		require.Contains(t, msg, want)
	}

	// The reproducer, 4096 slots of 2048 positions (~193 GB of KV
	// were they reserved), on this machine: created, holding no page.
	cfg, err := loop.ParseConfig([]byte(`{"model_path":"` + modelPath + `","max_slots":4096,"context_length":2048,"spec_budget":8}`))
	require.NoError(t, err)
	be, err := engine.NewCPU(cfg)
	require.NoError(t, err)
	inUse, limit := be.(*engine.Backend).KVPages()
	require.Zero(t, inUse)
	require.Positive(t, limit)
	require.LessOrEqual(t, be.(*engine.Backend).Reserved(), cfg.MemoryBudget().Bytes)
	require.NoError(t, be.Close())

	// A sane configuration under a 1 GB budget passes and serves.
	rt, err := loop.New([]byte(`{"model_path":"` + modelPath + `","max_slots":2,"context_length":256,"spec_budget":8,"memory_budget_bytes":1000000000}`))
	require.NoError(t, err)
	defer rt.Close()
	ch := streaming.NewChannel()
	defer ch.Release()
	require.NoError(t, rt.Submit([]byte(`{"prompt":"Hello","max_tokens":1}`), []*streaming.Channel{ch}))
	for {
		c, err := ch.WaitPop(60e9)
		require.NoError(t, err)
		if c.Finished {
			require.Equal(t, streaming.Length, c.Reason, c.ErrMessage)
			break
		}
	}
}

// TestDefaultBudgetAdmitsDefaultConfig: the default configuration fits the
// default budget of any machine that can hold the model at all, at the
// model's trained context (SmolLM2: 8192), and holds no KV page until a
// request comes.
func TestDefaultBudgetAdmitsDefaultConfig(t *testing.T) {
	needModel(t)
	b := loop.DefaultBudget()
	t.Logf("default budget: %s (%s)", loop.FormatBytes(b.Bytes), b.Source)
	require.Greater(t, b.Bytes, int64(1<<30), "a CI machine with less than 1.4 GB of memory?")
	cfg, err := loop.ParseConfig([]byte(`{"model_path":"` + modelPath + `","spec_budget":8}`))
	require.NoError(t, err)
	be, err := engine.NewCPU(cfg)
	require.NoError(t, err)
	defer be.Close()
	t.Logf("the default config is checked for %s", loop.FormatBytes(be.(*engine.Backend).Reserved()))
	require.Less(t, be.(*engine.Backend).Reserved(), b.Bytes)
	require.Equal(t, 8192, be.(*engine.Backend).ModelInfo().RuntimeContext)
	inUse, _ := be.(*engine.Backend).KVPages()
	require.Zero(t, inUse)
	require.True(t, strings.HasPrefix(b.Source, "75% of"), b.Source)
}
