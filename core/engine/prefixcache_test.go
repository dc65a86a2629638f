package engine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/streaming"
)

// prefixRuntimes are two runtimes of one model and config (extra members
// in MergeConfig's form), prompt-prefix
// reuse on and off: what the second emits is what a fresh prefill gives.
func prefixRuntimes(t *testing.T, path, config string) (on, off *loop.Runtime) {
	t.Helper()
	if race.Enabled {
		t.Skip("real-model runtime tests are too slow under -race")
	}
	testmodel.Need(t, path)
	base := `{"model_path":"` + path + `","context_length":1024,"spec_budget":8}`
	var err error
	on, err = loop.New([]byte(engine.MergeConfig(base, config)))
	require.NoError(t, err)
	t.Cleanup(on.Close)
	off, err = loop.New([]byte(engine.MergeConfig(engine.MergeConfig(base, config), `,"prefix_cache":false`)))
	require.NoError(t, err)
	t.Cleanup(off.Close)
	return on, off
}

// completeOne runs a one-item request to its end.
func completeOne(t *testing.T, rt *loop.Runtime, req []byte) streaming.Chunk {
	t.Helper()
	out, err := rt.Complete(req)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Contains(t, []streaming.FinishReason{streaming.EndId, streaming.Length}, out[0].Reason, out[0].ErrMessage)
	return out[0]
}

// sameAnswer runs req on both runtimes and checks that reuse changed no
// token; it returns the answer with reuse on.
func sameAnswer(t *testing.T, on, off *loop.Runtime, req []byte) streaming.Chunk {
	t.Helper()
	got := completeOne(t, on, req)
	want := completeOne(t, off, req)
	require.NotEmpty(t, want.TokenIDs)
	require.Equal(t, want.TokenIDs, got.TokenIDs, "tokens with prefix reuse against without (%d of %d prompt tokens reused)",
		got.Usage.CachedTokens, got.Usage.PromptTokens)
	require.Zero(t, want.Usage.CachedTokens, `"prefix_cache": false reuses nothing`)
	require.Equal(t, want.Usage.PromptTokens, got.Usage.PromptTokens)
	return got
}

func rawRequest(prompt string, maxTokens int, extra map[string]any) []byte {
	r := map[string]any{"prompt": prompt, "max_tokens": maxTokens, "temperature": 0}
	for k, v := range extra {
		r[k] = v
	}
	b, _ := json.Marshal(r)
	return b
}

// turns is a chat request of the given messages (alternating user and
// assistant, a user's last).
func turns(maxTokens int, extra map[string]any, msgs ...string) []byte {
	var m []map[string]string
	for i, c := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		m = append(m, map[string]string{"role": role, "content": c})
	}
	r := map[string]any{"messages": m, "max_tokens": maxTokens, "temperature": 0}
	for k, v := range extra {
		r[k] = v
	}
	b, _ := json.Marshal(r)
	return b
}

// commonTokens is how many leading tokens raw prompts a and b share.
func commonTokens(t *testing.T, rt *loop.Runtime, a, b string) int {
	t.Helper()
	in := introspector(t, rt)
	ta, err := in.Tokenize(a, true, true)
	require.NoError(t, err)
	tb, err := in.Tokenize(b, true, true)
	require.NoError(t, err)
	n := 0
	for n < len(ta) && n < len(tb) && ta[n] == tb[n] {
		n++
	}
	return n
}

func passage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "model", "testdata", "passage.txt"))
	require.NoError(t, err)
	return string(b)
}

// TestPrefixCacheIsExact: with prompt-prefix reuse (the default) greedy
// decoding emits exactly the tokens of a fresh prefill, and usage counts
// the prompt tokens reused: the same prompt again (all but its last
// token), a chat's second turn (at least the first turn's prompt), a
// prompt that leaves another midway (their common tokens), after a
// cancelled request (its prompt), and more distinct prompts than slots
// (the least recently used is evicted).
func TestPrefixCacheIsExact(t *testing.T) {
	on, off := prefixRuntimes(t, modelPath, `,"max_slots":2`)
	text := passage(t)
	question := text[:700] + "\n\nWhat did the first machines lack?"
	noSpec := map[string]any{"speculate": false}

	t.Run("same prompt twice", func(t *testing.T) {
		first := sameAnswer(t, on, off, turns(16, noSpec, question))
		again := sameAnswer(t, on, off, turns(16, noSpec, question))
		require.Equal(t, first.Usage.PromptTokens-1, again.Usage.CachedTokens, "all but the last prompt token reused")
	})

	t.Run("two-turn chat", func(t *testing.T) {
		one := sameAnswer(t, on, off, turns(24, noSpec, question))
		two := sameAnswer(t, on, off, turns(16, noSpec, question, one.Text, "And what came next?"))
		require.GreaterOrEqual(t, two.Usage.CachedTokens, one.Usage.PromptTokens, "turn 2 reuses turn 1's prompt")
		require.Less(t, two.Usage.CachedTokens, two.Usage.PromptTokens)
	})

	t.Run("diverging midway", func(t *testing.T) {
		a, b := text[:900]+" Summarise this.", text[:450]+" Translate the first sentence into French."
		common := commonTokens(t, on, a, b)
		require.Greater(t, common, 50)
		sameAnswer(t, on, off, rawRequest(a, 12, noSpec))
		got := sameAnswer(t, on, off, rawRequest(b, 12, noSpec))
		require.Equal(t, common, got.Usage.CachedTokens, "the common prefix is reused, nothing after it")
	})

	t.Run("shared with a running request", func(t *testing.T) {
		// The other slot's cache is still running: its prefix is copied.
		a, b := "System: answer briefly.\n\n"+text[:800]+" Who rode first?", "System: answer briefly.\n\n"+text[:800]+" When did pedals come?"
		common := commonTokens(t, on, a, b)
		ch := streaming.NewChannel()
		defer ch.Release()
		require.NoError(t, on.Submit(rawRequest(a, 40, noSpec), []*streaming.Channel{ch}))
		first, err := ch.WaitPop(120 * time.Second)
		require.NoError(t, err)
		require.False(t, first.Finished, first.ErrMessage)
		got := sameAnswer(t, on, off, rawRequest(b, 8, noSpec))
		require.Equal(t, common, got.Usage.CachedTokens, "copied from the running request's cache")
		rest, last := collect(t, ch)
		require.Equal(t, completeOne(t, off, rawRequest(a, 40, noSpec)).TokenIDs, append(first.TokenIDs, rest...))
		require.Zero(t, last.Usage.CachedTokens)
	})

	t.Run("after a cancelled request", func(t *testing.T) {
		prompt := text[:600] + " Continue the story."
		ch := streaming.NewChannel()
		defer ch.Release()
		require.NoError(t, on.Submit(rawRequest(prompt, 200, nil), []*streaming.Channel{ch}))
		var last streaming.Chunk
		for n := 0; ; {
			c, err := ch.WaitPop(120 * time.Second)
			require.NoError(t, err)
			if n += len(c.TokenIDs); n >= 5 && !c.Finished {
				ch.Cancel()
			}
			if c.Finished {
				last = c
				break
			}
		}
		require.Equal(t, streaming.Cancelled, last.Reason)
		got := sameAnswer(t, on, off, rawRequest(prompt, 16, nil))
		require.Equal(t, got.Usage.PromptTokens-1, got.Usage.CachedTokens)
	})

	t.Run("more prompts than slots", func(t *testing.T) {
		// Distinct first words: no two share a prefix. Two slots: the
		// third prompt evicts the first's cache, the least recently used.
		ps := []string{"Bicycles: " + text[:300], "Wheels: " + text[300:600], "Roads: " + text[600:900]}
		for _, p := range ps {
			require.Zero(t, sameAnswer(t, on, off, rawRequest(p, 8, noSpec)).Usage.CachedTokens)
		}
		require.Zero(t, sameAnswer(t, on, off, rawRequest(ps[0], 8, noSpec)).Usage.CachedTokens, "evicted")
		last := sameAnswer(t, on, off, rawRequest(ps[2], 8, noSpec))
		require.Equal(t, last.Usage.PromptTokens-1, last.Usage.CachedTokens, "the most recent is kept")
	})
}

// TestPrefixCacheWithSpeculation: each drafter's state is its own per
// sequence (the n-gram index's history, the draft model's and the early
// exit's caches), so prefix reuse in the target leaves speculation exact:
// a repeated prompt and a chat's second turn emit the tokens of plain
// greedy decoding without reuse.
func TestPrefixCacheWithSpeculation(t *testing.T) {
	on, off := prefixRuntimes(t, modelPath, `,"max_slots":2,"spec_adaptive":false,"spec_min_prob":0.25,"draft_model_path":"`+modelPath+`"`)
	text := passage(t)
	ask := text[:500] + "\n\nRepeat the first two sentences above word for word."
	for _, drafter := range []string{"ngram", "draft_model", "early_exit"} {
		t.Run(drafter, func(t *testing.T) {
			spec := map[string]any{"drafter": drafter}
			plain := completeOne(t, off, turns(32, map[string]any{"speculate": false}, ask))
			one := sameAnswer(t, on, off, turns(32, spec, ask))
			require.Equal(t, plain.TokenIDs, one.TokenIDs)
			require.Positive(t, one.Usage.DraftProposed, "speculated")
			again := sameAnswer(t, on, off, turns(32, spec, ask))
			require.Equal(t, again.Usage.PromptTokens-1, again.Usage.CachedTokens)
			two := sameAnswer(t, on, off, turns(24, spec, ask, one.Text, "Now repeat the third sentence."))
			require.GreaterOrEqual(t, two.Usage.CachedTokens, one.Usage.PromptTokens)
			t.Logf("%s: turn 2 reused %d of %d prompt tokens; %d proposed, %d accepted", drafter,
				two.Usage.CachedTokens, two.Usage.PromptTokens, two.Usage.DraftProposed, two.Usage.DraftAccepted)
		})
	}
}

// TestPrefixCacheGemmaWindow: Gemma 3's local layers keep only their
// 512-token window and a margin, so a cache cut back far behind its end
// cannot serve (kv.Cache.Truncate refuses; no other cache can copy what it
// no longer holds) and the prompt is prefilled whole; where the window
// is still held the reuse is exact.
func TestPrefixCacheGemmaWindow(t *testing.T) {
	path := filepath.Join("..", "..", "models", "gemma-3-270m-q4_k_m.gguf")
	on, off := prefixRuntimes(t, path, `,"max_slots":1,"context_length":2048`)
	text := passage(t)
	long := strings.Repeat(text+"\n\n", 3) + "Repeat the first paragraph above."
	noSpec := map[string]any{"speculate": false}

	first := sameAnswer(t, on, off, rawRequest(long, 8, noSpec))
	require.Greater(t, first.Usage.PromptTokens, 1000, "far past the window")
	again := sameAnswer(t, on, off, rawRequest(long, 8, noSpec))
	require.Equal(t, again.Usage.PromptTokens-1, again.Usage.CachedTokens, "the window before the last token is held")
	// Diverging after 100 tokens: the cache's local layers moved on long
	// ago, so nothing is reused.
	early := text[:400] + " Who invented pedals?"
	require.Greater(t, commonTokens(t, on, long, early), 50)
	require.Zero(t, sameAnswer(t, on, off, rawRequest(early, 8, noSpec)).Usage.CachedTokens)
	// Short prompts stay inside the window: reused, and exact.
	short := text[:300] + " Continue."
	sameAnswer(t, on, off, rawRequest(short, 8, noSpec))
	got := sameAnswer(t, on, off, rawRequest(short, 8, noSpec))
	require.Equal(t, got.Usage.PromptTokens-1, got.Usage.CachedTokens)
}

// TestSharedPrefixPrefilledOnce: requests sent at once that share a long
// system prompt prefill it once: the ones behind wait for the first's
// prefill and take its entries (cached_tokens counts them), and every
// answer is the one a runtime without reuse gives.
func TestSharedPrefixPrefilledOnce(t *testing.T) {
	on, off := prefixRuntimes(t, modelPath, `,"max_slots":3,"prefill_chunk":64`)
	system := passage(t)[:1300]
	reqs := make([][]byte, 3)
	for i := range reqs {
		reqs[i] = rawRequest(system+fmt.Sprintf("\n\nQuestion %d: what is the passage about?", i+1), 12, nil)
	}
	shared := commonTokens(t, on, string(system)+"\n\nQuestion 1", string(system)+"\n\nQuestion 2")
	require.Greater(t, shared, 200)
	got := make([]streaming.Chunk, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = completeOne(t, on, req)
		}()
	}
	wg.Wait()
	cached := 0
	for i, req := range reqs {
		want := completeOne(t, off, req)
		require.Equal(t, want.TokenIDs, got[i].TokenIDs, "request %d", i)
		cached += got[i].Usage.CachedTokens
	}
	t.Logf("%d prompt tokens shared; cached tokens of the three requests: %d", shared, cached)
	require.GreaterOrEqual(t, cached, 2*(shared-64), "two of the three took the shared prefix from the first")
}
