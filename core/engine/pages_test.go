package engine_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/streaming"
)

// TestPagesRunOutAndRecover: under a memory budget that leaves KV pages for
// about one and a half sequences at the whole context, three long
// requests at once each either finish with exactly the tokens they give
// alone, or (when no sequence can get a page) end with LMS_ERR_CAPACITY:
// never a crash, a wedge or a wrong token. At least one finishes, the
// pages held never pass the limit, and afterwards requests run as usual.
func TestPagesRunOutAndRecover(t *testing.T) {
	needModel(t)
	if race.Enabled {
		t.Skip("real-model runtime tests are too slow under -race")
	}
	base := `{"model_path":"` + modelPath + `","max_slots":3,"context_length":512,"spec_budget":8}`
	cfg, err := loop.ParseConfig([]byte(base))
	require.NoError(t, err)
	probe, err := engine.NewCPU(cfg)
	require.NoError(t, err)
	fixed, one := probe.(*engine.Backend).Memory()
	require.NoError(t, probe.Close())
	require.Positive(t, one)

	cfg, err = loop.ParseConfig([]byte(engine.MergeConfig(base, fmt.Sprintf(`,"memory_budget_bytes":%d`, fixed+one*3/2))))
	require.NoError(t, err)
	be, err := engine.NewCPU(cfg)
	require.NoError(t, err)
	limited := loop.Start(be, 3, 16)
	free, err := loop.New([]byte(base))
	require.NoError(t, err)
	defer free.Close()
	_, limit := be.(*engine.Backend).KVPages()
	require.Equal(t, one/2, limit-one, "the pool holds what the budget leaves")

	text := passage(t)
	reqs := make([][]byte, 3)
	for i := range reqs {
		reqs[i] = rawRequest(fmt.Sprintf("Part %d. %s", i+1, text[i*100:i*100+1200]), 160, nil)
	}
	// Alone, on a runtime without the limit.
	want := make([]streaming.Chunk, len(reqs))
	for i, req := range reqs {
		want[i] = completeOne(t, free, req)
		require.Greater(t, want[i].Usage.PromptTokens+len(want[i].TokenIDs), 256, "each sequence needs a second page")
	}

	got := make([]streaming.Chunk, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := limited.Complete(req)
			if err == nil && len(out) == 1 {
				got[i] = out[0]
			}
		}()
	}
	wg.Wait()
	finished := 0
	for i := range reqs {
		if got[i].Reason == streaming.Error {
			require.Equal(t, int32(status.Capacity), got[i].ErrCode, got[i].ErrMessage)
			require.Contains(t, got[i].ErrMessage, "KV cache memory")
			continue
		}
		require.Equal(t, want[i].TokenIDs, got[i].TokenIDs, "request %d", i)
		finished++
	}
	require.Positive(t, finished)
	inUse, _ := be.(*engine.Backend).KVPages()
	require.LessOrEqual(t, inUse, limit)
	st := limited.Stats()
	require.Positive(t, st.KVBytesInUse, "the finished requests' caches keep their prompts for reuse")
	require.Equal(t, limit, st.KVBytesLimit)

	// The pages the finished requests' caches keep for reuse give way to
	// new requests.
	for i, req := range reqs {
		got := completeOne(t, limited, req)
		require.Equal(t, want[i].TokenIDs, got.TokenIDs, "request %d again", i)
	}
	limited.Close()
	tm := be.(*engine.Backend).Timings()
	t.Logf("%d of %d requests finished at once; %d slot-iterations waited for pages, %d sequences ended for want of them", finished, len(reqs), tm.PageWaits, tm.PageEnds)
	require.Positive(t, tm.PageWaits, "the limit was never reached: the test tests nothing")
	require.Equal(t, len(reqs)-finished, tm.PageEnds)
}

// TestQ8KVCache: "kv_type": "q8_0" stores the caches in Q8_0 blocks (17/32
// of float16's memory for one sequence), and stays exact where the engine
// promises exactness: greedy decoding emits the same tokens with and
// without speculation, and a repeated prompt reused from the cache gives
// the tokens of a fresh prefill. A type the engine does not know is
// refused by name.
func TestQ8KVCache(t *testing.T) {
	needModel(t)
	if race.Enabled {
		t.Skip("real-model runtime tests are too slow under -race")
	}
	_, err := loop.New([]byte(`{"model_path":"` + modelPath + `","kv_type":"q4_0"}`))
	require.ErrorContains(t, err, `"kv_type" must be one of f16, q8_0, got "q4_0"`)

	base := `{"model_path":"` + modelPath + `","max_slots":2,"context_length":1024,"spec_budget":8`
	sizes := map[string]int64{}
	for _, typ := range []string{"f16", "q8_0"} {
		cfg, err := loop.ParseConfig([]byte(base + `,"kv_type":"` + typ + `"}`))
		require.NoError(t, err)
		be, err := engine.NewCPU(cfg)
		require.NoError(t, err)
		_, sizes[typ] = be.(*engine.Backend).Memory()
		require.NoError(t, be.Close())
	}
	require.Equal(t, sizes["f16"]*17/32, sizes["q8_0"])

	rt, err := loop.New([]byte(base + `,"kv_type":"q8_0"}`))
	require.NoError(t, err)
	defer rt.Close()
	text := passage(t)
	plain := completeOne(t, rt, rawRequest(text[:900], 48, map[string]any{"drafter": "none"}))
	spec := completeOne(t, rt, rawRequest(text[:900], 48, map[string]any{"drafter": "ngram"}))
	require.Equal(t, plain.TokenIDs, spec.TokenIDs)
	require.Positive(t, spec.Usage.CachedTokens, "the second request reused the first's prompt")
	require.Positive(t, spec.Usage.VerifyPasses)
}
