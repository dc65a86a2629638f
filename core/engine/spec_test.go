package engine_test

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lmstream/lmstream/core/quant"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

// prompts reads a committed prompt set (testdata/*.jsonl: one user message
// per line).
func prompts(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct{ Content string }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
		out = append(out, line.Content)
	}
	require.NoError(t, sc.Err())
	return out
}

// chatRequest is a request JSON for one user message plus extra fields.
func chatRequest(content string, maxTokens int, extra map[string]any) []byte {
	r := map[string]any{"messages": []map[string]string{{"role": "user", "content": content}}, "max_tokens": maxTokens}
	for k, v := range extra {
		r[k] = v
	}
	b, _ := json.Marshal(r)
	return b
}

// collect reads a channel to its end and returns the ids and the last chunk.
func collect(t testing.TB, ch *streaming.Channel) ([]int32, streaming.Chunk) {
	var ids []int32
	for {
		c, err := ch.WaitPop(120 * time.Second)
		require.NoError(t, err)
		ids = append(ids, c.TokenIDs...)
		if c.Finished {
			return ids, c
		}
	}
}

// runAll submits every request, the first `upfront` at once and the rest
// each at a random later iteration of the engine, and returns the token ids
// and terminal chunk of each.
func runAll(t testing.TB, rt *loop.Runtime, reqs [][]byte, upfront int, seed uint64) ([][]int32, []streaming.Chunk) {
	ids := make([][]int32, len(reqs))
	last := make([]streaming.Chunk, len(reqs))
	r := rand.New(rand.NewPCG(seed, 7))
	var wg sync.WaitGroup
	start := rt.Stats().Iterations
	for i, req := range reqs {
		if i >= upfront {
			target := start + int64(r.IntN(40*(i-upfront+1)))
			for rt.Stats().Iterations < target && rt.Stats().ActiveSlots > 0 {
				time.Sleep(200 * time.Microsecond)
			}
		}
		ch := streaming.NewChannel()
		require.NoError(t, rt.Submit(req, []*streaming.Channel{ch}))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer ch.Release()
			ids[i], last[i] = collect(t, ch)
		}(i)
	}
	wg.Wait()
	return ids, last
}

func specRuntime(t testing.TB, extra string) *loop.Runtime {
	t.Helper()
	testmodel.Need(t, modelPath)
	// Not adaptive: these tests check what speculation emits, so every
	// request speculates throughout, paying or not.
	rt, err := loop.New([]byte(engine.MergeConfig(`{"model_path":"`+modelPath+`","max_slots":8,"context_length":512,"spec_budget":8,"spec_adaptive":false,"spec_min_prob":0.25}`, extra)))
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	return rt
}

// TestSpeculativeGreedyEqualsPlain: greedy decoding with speculation emits
// exactly the tokens of plain greedy decoding, for every drafter, alone and
// with requests joining at random iterations (some with speculation off).
func TestSpeculativeGreedyEqualsPlain(t *testing.T) {
	if race.Enabled {
		t.Skip("real-model decoding of 20 prompts is too slow under -race")
	}
	rt := specRuntime(t, `,"draft_model_path":"`+modelPath+`"`)
	all := append(prompts(t, "grounded.jsonl"), prompts(t, "chat.jsonl")...)
	maxTokens := 128
	if !strings.HasPrefix(quant.Kernels(), "avx512") {
		// Without AVX-512 the kernels decode several times slower (the
		// portable ones by far the most): 7 × 20 prompts × 128 tokens
		// passed half an hour on a 2-core machine. A third of the prompts,
		// both kinds, and 48 tokens still cover every drafter alone and
		// concurrently.
		g, c := prompts(t, "grounded.jsonl"), prompts(t, "chat.jsonl")
		all = append(g[:min(4, len(g))], c[:min(3, len(c))]...)
		maxTokens = 48
		t.Logf("%s kernels: %d prompts, %d tokens each", quant.Kernels(), len(all), maxTokens)
	}
	var plain [][]byte
	for _, p := range all {
		plain = append(plain, chatRequest(p, maxTokens, map[string]any{"speculate": false}))
	}
	want, _ := runAll(t, rt, plain, len(plain), 1)

	for _, tc := range []struct {
		drafter string
		alone   int // prompts run alone (the rest only run concurrently)
		conc    int // prompts run concurrently
	}{
		{"ngram", len(all), len(all)},
		{"early_exit", len(all), len(all)},
		{"draft_model", len(all), len(all)},
	} {
		t.Run(tc.drafter, func(t *testing.T) {
			if quant.Kernels() == "generic" && tc.drafter != "ngram" {
				// A model drafter runs several draft passes per token: even
				// 7 prompts passed ten minutes on the portable kernels.
				// The tiny-model tests cover its exactness everywhere.
				t.Skip("model drafters on the portable kernels are too slow here; AVX-512 machines run them")
			}
			var proposed, accepted int
			for i := 0; i < tc.alone; i++ {
				p := all[i*len(all)/tc.alone]
				idx := i * len(all) / tc.alone
				got, last := runAll(t, rt, [][]byte{chatRequest(p, maxTokens, map[string]any{"drafter": tc.drafter})}, 1, 0)
				require.Equal(t, want[idx], got[0], "prompt %d alone", idx)
				proposed += last[0].Usage.DraftProposed
				accepted += last[0].Usage.DraftAccepted
				require.Greater(t, last[0].Usage.VerifyPasses, 0)
			}
			// Concurrent: every other request has speculation off.
			var reqs [][]byte
			var idxs []int
			for i := 0; i < tc.conc; i++ {
				idx := (i * 7) % len(all)
				extra := map[string]any{"drafter": tc.drafter}
				if i%3 == 2 {
					extra = map[string]any{"speculate": false}
				}
				reqs = append(reqs, chatRequest(all[idx], maxTokens, extra))
				idxs = append(idxs, idx)
			}
			got, last := runAll(t, rt, reqs, 3, 2)
			for i := range reqs {
				require.Equal(t, want[idxs[i]], got[i], "prompt %d concurrent", idxs[i])
				if i%3 == 2 {
					require.Zero(t, last[i].Usage.VerifyPasses)
				}
			}
			t.Logf("%s: %d proposed, %d accepted alone", tc.drafter, proposed, accepted)
			if tc.drafter == "ngram" {
				require.Greater(t, accepted, 0)
			}
		})
	}
}

// TestBurstEnds: a stop string, max_tokens and cancellation that fall in
// the middle of a speculative burst cut it exactly as plain decoding would;
// the KV entries the burst accepted beyond the end are released with the
// slot (the next request on the same cache decodes as if fresh).
func TestBurstEnds(t *testing.T) {
	if race.Enabled {
		t.Skip("real-model decoding is slow under -race")
	}
	rt := specRuntime(t, `,"max_slots":1`)
	p := prompts(t, "grounded.jsonl")[9] // rewrite in the past tense: long copied runs
	full, lastFull := runAll(t, rt, [][]byte{chatRequest(p, 64, map[string]any{"speculate": false})}, 1, 0)
	spec, lastSpec := runAll(t, rt, [][]byte{chatRequest(p, 64, map[string]any{"drafter": "ngram"})}, 1, 0)
	require.Equal(t, full[0], spec[0])
	require.Greater(t, lastSpec[0].Usage.DraftAccepted, 0, "the grounded prompt should accept drafts")
	_ = lastFull

	// max_tokens cutting bursts at many lengths: a prefix of the full output.
	for _, n := range []int{1, 2, 3, 5, 8, 13, 21, 34} {
		if n >= len(full[0]) {
			break
		}
		got, last := runAll(t, rt, [][]byte{chatRequest(p, n, map[string]any{"drafter": "ngram"})}, 1, 0)
		require.Equal(t, full[0][:n], got[0], "max_tokens %d", n)
		require.Equal(t, streaming.Length, last[0].Reason)
		require.Equal(t, n, last[0].Usage.GeneratedTokens)
	}

	// A stop string completed inside a burst: find, in the plain output,
	// a word that starts late enough to sit inside a burst.
	res, err := rt.Complete(chatRequest(p, 64, map[string]any{"speculate": false}))
	require.NoError(t, err)
	text := res[0].Text
	stop := text[len(text)/2 : len(text)/2+6]
	for _, sp := range []bool{false, true} {
		r, err := rt.Complete(chatRequest(p, 64, map[string]any{"speculate": sp, "stop": stop}))
		require.NoError(t, err)
		require.Equal(t, streaming.StopWords, r[0].Reason)
		require.Equal(t, text[:len(text)/2], r[0].Text, "speculate=%v", sp)
	}
	// After all those cut bursts, the same slot still decodes exactly.
	again, _ := runAll(t, rt, [][]byte{chatRequest(p, 64, map[string]any{"drafter": "ngram"})}, 1, 0)
	require.Equal(t, full[0], again[0])

	// Cancellation during speculation: the stream ends with Cancelled.
	ch := streaming.NewChannel()
	defer ch.Release()
	require.NoError(t, rt.Submit(chatRequest(p, 1024, map[string]any{"drafter": "ngram"}), []*streaming.Channel{ch}))
	var got []int32
	for {
		c, err := ch.WaitPop(60 * time.Second)
		require.NoError(t, err)
		got = append(got, c.TokenIDs...)
		if len(got) >= 10 {
			ch.Cancel()
		}
		if c.Finished {
			require.Equal(t, streaming.Cancelled, c.Reason)
			break
		}
	}
	require.Equal(t, full[0][:len(got)], got, "tokens before the cancellation are the plain ones")
}

// TestSpecErrors: unknown drafter names and a draft model that cannot draft
// are clear errors at runtime creation or submit.
func TestSpecErrors(t *testing.T) {
	testmodel.Need(t, modelPath)
	_, err := loop.New([]byte(`{"model_path":"` + modelPath + `","drafter":"magic"}`))
	require.Equal(t, status.InvalidRequest, status.CodeOf(err))
	require.ErrorContains(t, err, `unknown drafter "magic"`)
	_, err = loop.New([]byte(`{"model_path":"` + modelPath + `","spec_policy":"fastest"}`))
	require.ErrorContains(t, err, `unknown policy "fastest"`)
	_, err = loop.New([]byte(`{"model_path":"` + modelPath + `","draft_model_path":"/nonexistent.gguf"}`))
	require.Equal(t, status.Model, status.CodeOf(err))

	rt := specRuntime(t, "")
	ch := streaming.NewChannel()
	defer ch.Release()
	err = rt.Submit([]byte(`{"prompt":"hi","drafter":"magic"}`), []*streaming.Channel{ch})
	require.Equal(t, status.InvalidRequest, status.CodeOf(err))
	require.ErrorContains(t, err, `request field "drafter" must be "ngram", "draft_model", "early_exit" or "none", got "magic"`)
	err = rt.Submit([]byte(`{"prompt":"hi","drafter":"draft_model"}`), []*streaming.Channel{ch})
	require.Equal(t, status.InvalidRequest, status.CodeOf(err))
	require.ErrorContains(t, err, "draft_model_path")
	err = rt.Submit([]byte(`{"prompt":"hi","speculate":"yes"}`), []*streaming.Channel{ch})
	require.Equal(t, status.InvalidRequest, status.CodeOf(err), "%v", err)

}
