package model

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// defaultModelPath is the repository's default model (fetched by `make
// model`), relative to this package.
const defaultModelPath = "../../models/SmolLM2-135M-Instruct.Q4_1.gguf"

// realModel loads the default model, or skips: when the file is absent
// (run `make model`) and under the race detector (a forward pass of the
// real model is too slow there; the tiny models cover the same code).
func realModel(tb testing.TB, threads int) (*Model, *tokenizer.Tokenizer) {
	tb.Helper()
	if raceEnabled {
		tb.Skip("real-model tests are skipped under -race (too slow); the tiny models cover the same code")
	}
	path, _ := filepath.Abs(defaultModelPath)
	if benchModel := os.Getenv("LMSTREAM_BENCH_MODEL"); benchModel != "" && isBenchmark(tb) {
		path = benchModel // the benchmarks on another model; the tests' numbers are the default model's
	}
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("default model not found at %s (run `make model`): %v", path, err)
	}
	f, err := gguf.Open(path)
	require.NoError(tb, err)
	tb.Cleanup(func() { f.Close() })
	m, err := Load(f, threads)
	require.NoError(tb, err)
	tok, err := tokenizer.FromGGUF(f)
	require.NoError(tb, err)
	require.Equal(tb, tok.Size(), m.Config().Vocab)
	return m, tok
}

// logSoftmax returns log p(tok) under logits.
func logProb(logits []float32, tok int32) float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(logits[tok]) - mx - math.Log(sum)
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// TestPerplexity scores testdata/passage.txt (an English passage written for
// this test, 373 tokens) in one chain forward pass with every logit, and
// again in 64-token chunks through the cache.
//
// Measured with SmolLM2-135M-Instruct Q4_1: perplexity 13.44 (both ways,
// 2 threads). A broken implementation (wrong RoPE mode, mask or norm)
// lands in the hundreds or thousands; uniform guessing is 49152.
func TestPerplexity(t *testing.T) {
	m, tok := realModel(t, runtime.GOMAXPROCS(0))
	text, err := os.ReadFile("testdata/passage.txt")
	require.NoError(t, err)
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{})
	require.Greater(t, len(ids), 300)
	ppl := func(rows [][]float32) float64 {
		var nll float64
		for i := 0; i+1 < len(ids); i++ {
			nll -= logProb(rows[i], ids[i+1])
		}
		return math.Exp(nll / float64(len(ids)-1))
	}
	whole := run(t, m, new(Batch).chain(m.NewCache(len(ids)), ids, true))
	p1 := ppl(whole)

	c := m.NewCache(len(ids))
	var chunked [][]float32
	for i := 0; i < len(ids); i += 64 {
		rows := run(t, m, new(Batch).chain(c, ids[i:min(i+64, len(ids))], true))
		commitAll(t, c)
		chunked = append(chunked, rows...)
	}
	p2 := ppl(chunked)
	t.Logf("%d tokens: perplexity %.3f (one pass), %.3f (64-token chunks)", len(ids), p1, p2)
	require.Less(t, p1, 18.0)
	require.InDelta(t, p1, p2, 0.05*p1)
}

// greedy decodes n tokens after prompt (one chain prefill, then one token
// per pass) and returns the text.
func greedy(t *testing.T, m *Model, tok *tokenizer.Tokenizer, prompt string, n int) string {
	ids := tok.Encode(prompt, tokenizer.EncodeOptions{ParseSpecial: true})
	c := m.NewCache(len(ids) + n)
	var out []int32
	for range n {
		rows := run(t, m, new(Batch).chain(c, ids, false))
		commitAll(t, c)
		next := argmax(rows[0])
		if tok.EOG(next) {
			break
		}
		out = append(out, next)
		ids = []int32{next}
	}
	return string(tok.Decode(out, true))
}

func TestGreedyFacts(t *testing.T) {
	m, tok := realModel(t, runtime.GOMAXPROCS(0))
	chat := func(q string) string {
		return "<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n"
	}
	for _, tc := range []struct{ prompt, want string }{
		{"The capital of France is", "Paris"},
		{chat("What is the capital of France?"), "Paris"},
		{chat("What is the capital of Japan?"), "Tokyo"},
		{"The largest planet in our solar system is", "Jupiter"},
	} {
		got := greedy(t, m, tok, tc.prompt, 24)
		t.Logf("%q → %q", tc.prompt, got)
		require.True(t, strings.Contains(got, tc.want), "%q → %q, want %q in it", tc.prompt, got, tc.want)
	}
}

// isBenchmark reports whether tb runs a benchmark.
func isBenchmark(tb testing.TB) bool {
	_, ok := tb.(*testing.B)
	return ok
}

// A decode step makes about two hundred matmul calls; each used to
// allocate its job and a method value, megabytes of garbage a second at
// a hundred tokens a second. On one thread (no pool jobs) a step now
// allocates only attention's one object a layer.
func TestDecodeStepAllocations(t *testing.T) {
	m, _ := realModel(t, 1)
	c := m.NewCache(16)
	b := new(Batch).chain(c, []int32{4649}, true)
	logits := make([]float32, m.Config().Vocab)
	allocs := testing.AllocsPerRun(20, func() {
		if err := m.Forward(b, logits); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, float64(m.Config().Layers+4), "allocations in one decode step of %d layers", m.Config().Layers)
}
