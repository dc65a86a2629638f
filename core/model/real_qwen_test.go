package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/chat"
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/internal/testmodel"
)

// The Qwen2.5-Coder-Instruct Q4_K_M models (issue 16), checked against
// numbers recorded once from llama.cpp with testdata/gen_golden_qwen.py:
// golden top-5 logits, greedy answers to coding questions token for token,
// and perplexity on testdata/passage.txt. `make model MODEL=<name>` fetches
// a model; CI fetches both. Without the file the tests skip and say so
// (fail under LMSTREAM_REQUIRE_MODELS=1).
var qwenModels = []struct {
	name, file string
	// ppl is the perplexity threshold on the first 128 tokens of
	// testdata/passage.txt, 8-10% above the measured value: 21.33 on the
	// 0.5B model (llama.cpp 21.37), 11.41 on the 1.5B (llama.cpp 11.37). A
	// broken forward pass (RoPE, mask, bias, a kernel) lands far above.
	ppl float64
}{
	{"qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 23},
	{"qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 12.5},
}

// qwenGolden is what gen_golden_qwen.py writes.
type qwenGolden struct {
	Model  string
	Oracle string
	Logits []struct {
		Text      string
		Tokens    []int32
		Positions []struct {
			Pos    int
			Top5   []int32
			Logits []float32
		}
	}
	Greedy []struct {
		Question string
		Prompt   string
		Tokens   []int32
		Answer   []int32
		Margins  []float32
		Text     string
	}
	Perplexity struct {
		Tokens int
		Value  float64
	}
}

// forEachQwen runs fn as a subtest per model, each with the model loaded
// (2 threads at most, as llama.cpp was run) and its golden numbers; a
// subtest skips when its model file is absent, and all skip under -race.
func forEachQwen(t *testing.T, fn func(t *testing.T, m *Model, tok *tokenizer.Tokenizer, f *gguf.File, g *qwenGolden, ppl float64)) {
	for _, q := range qwenModels {
		t.Run(q.name, func(t *testing.T) {
			if raceEnabled {
				t.Skip("real-model tests are skipped under -race (too slow); the tiny models cover the same code")
			}
			path, _ := filepath.Abs(filepath.Join("..", "..", "models", q.file))
			testmodel.Need(t, path) // CI fetches both (make test-models)
			data, err := os.ReadFile(filepath.Join("testdata", "golden_"+q.name+".json"))
			require.NoError(t, err)
			var g qwenGolden
			require.NoError(t, json.Unmarshal(data, &g))
			require.Equal(t, q.file, g.Model)
			f, err := gguf.Open(path)
			require.NoError(t, err)
			t.Cleanup(func() { f.Close() })
			start := time.Now()
			m, err := Load(f, min(2, runtime.GOMAXPROCS(0)))
			require.NoError(t, err)
			t.Cleanup(m.Close)
			tok, err := tokenizer.FromGGUF(f)
			require.NoError(t, err)
			require.Equal(t, tok.Size(), m.Config().Vocab)
			t.Logf("loaded in %v", time.Since(start).Round(time.Millisecond))
			start = time.Now()
			fn(t, m, tok, f, &g, q.ppl)
			t.Logf("checked in %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestQwenGoldenTop5 feeds llama.cpp's token ids for three prompts (plain
// code, a chat turn, prose with numbers) to Forward in one chain pass with
// every logit, with the same checks as TestGoldenTop5: at every recorded
// position the same top-1 token, llama.cpp's top-5 logits within
// tolQwenGolden, and the same top-5 set except for ids within
// 2·tolQwenGolden of the 5th logit.
func TestQwenGoldenTop5(t *testing.T) {
	forEachQwen(t, func(t *testing.T, m *Model, tok *tokenizer.Tokenizer, _ *gguf.File, g *qwenGolden, _ float64) {
		require.Len(t, g.Logits, 3)
		worst := 0.0
		for _, p := range g.Logits {
			require.Equal(t, p.Tokens, tok.Encode(p.Text, tokenizer.EncodeOptions{ParseSpecial: true}), p.Text)
			rows := run(t, m, new(Batch).chain(m.NewCache(len(p.Tokens)), p.Tokens, true))
			for _, pos := range p.Positions {
				row := rows[pos.Pos]
				require.Equal(t, pos.Top5[0], argmax(row), "%q position %d", p.Text, pos.Pos)
				for j, id := range pos.Top5 {
					d := math.Abs(float64(row[id] - pos.Logits[j]))
					worst = max(worst, d)
					require.Less(t, d, tolQwenGolden, "%q position %d token %d", p.Text, pos.Pos, id)
				}
				fifth := float64(pos.Logits[4])
				for _, id := range top(row, 5) {
					if !contains(pos.Top5, id) {
						require.Less(t, math.Abs(float64(row[id])-fifth), 2*tolQwenGolden,
							"%q position %d: token %d in our top 5 but not llama.cpp's", p.Text, pos.Pos, id)
					}
				}
			}
		}
		t.Logf("oracle %s: max |Δlogit| %.3f over the recorded top 5s", g.Oracle, worst)
	})
}

// TestQwenGreedyMatchesLlamaCpp asks the model's chat template for the
// prompt of each recorded coding question (it must render exactly what
// jinja2 rendered for llama.cpp), prefills it in one chain pass and decodes
// greedily one token per pass through the cache. Every token must equal
// llama.cpp's, with one exception, for near-ties: where llama.cpp's own
// top-1 margin was below tolQwenTie and its token's logit is within
// tolQwenTie of our top-1, we may pick the other token; the test logs it
// and goes on from llama.cpp's token (as if we had picked it), so the rest
// of the answer is still compared token for token.
//
// Why: such a choice is decided by rounding, not by the model. Measured on
// the 0.5B model, our engine picks "In" where llama-cpp-python 0.3.36 picks
// "To" as the first token of the C question (its margin 0.037; ours 0.209
// the other way on the portable kernels, 0.123 on AVX2), and the newer
// llama.cpp the benchmarks build (ggml 0.20.1, CPU) picks "In" too; that
// same build leaves 0.3.36 at the SQL question's 4th token (margin 0.092),
// where we agree with 0.3.36. Two builds of llama.cpp disagree at such
// margins. Every other token matches: 67 of 68 on the 0.5B model, 68 of 68
// on the 1.5B (smallest margin there 0.047, llama.cpp's, which we follow).
func TestQwenGreedyMatchesLlamaCpp(t *testing.T) {
	forEachQwen(t, func(t *testing.T, m *Model, tok *tokenizer.Tokenizer, f *gguf.File, g *qwenGolden, _ float64) {
		tmpl, err := f.String("tokenizer.chat_template")
		require.NoError(t, err)
		tm, err := chat.Detect(tmpl)
		require.NoError(t, err)
		require.NotEmpty(t, g.Greedy)
		compared, ties := 0, 0
		for _, q := range g.Greedy {
			prompt, err := tm.Render([]chat.Message{{Role: chat.RoleUser, Content: q.Question}}, true)
			require.NoError(t, err)
			require.Equal(t, q.Prompt, prompt)
			require.Equal(t, q.Tokens, tok.Encode(prompt, tokenizer.EncodeOptions{ParseSpecial: true}), q.Question)
			require.Len(t, q.Margins, len(q.Answer))

			c := m.NewCache(len(q.Tokens) + len(q.Answer))
			ids := q.Tokens
			var margins []float32
			for i, want := range q.Answer {
				rows := run(t, m, new(Batch).chain(c, ids, false))
				commitAll(t, c)
				row := rows[0]
				ours, runnerUp := top2(row)
				if ours != want {
					require.True(t, q.Margins[i] < tolQwenTie && row[ours]-row[want] < tolQwenTie,
						"%q: token %d is %d (%q), llama.cpp's %d (%q): llama.cpp's top-1 margin %.3f, ours over its token %.3f (near-tie bound %.2f); so far %q",
						q.Question, i, ours, tok.Decode([]int32{ours}, false), want, tok.Decode([]int32{want}, false),
						q.Margins[i], row[ours]-row[want], tolQwenTie, tok.Decode(q.Answer[:i], false))
					ties++
					t.Logf("%q: near-tie at token %d: we pick %q by %.3f, llama.cpp picked %q by %.3f; going on from llama.cpp's",
						q.Question, i, tok.Decode([]int32{ours}, false), row[ours]-row[want], tok.Decode([]int32{want}, false), q.Margins[i])
				}
				margins = append(margins, row[ours]-row[runnerUp])
				compared++
				ids = []int32{want}
			}
			t.Logf("%q → %q (smallest top-1 margin: ours %.3f, llama.cpp's %.3f)",
				q.Question, q.Text, minF(margins), minF(q.Margins))
		}
		t.Logf("%d tokens compared, %d near-ties", compared, ties)
	})
}

// TestQwenPerplexity scores the first 128 tokens of testdata/passage.txt
// (English prose, not code: these are coder models) in one chain pass with
// every logit, against each model's threshold and llama.cpp's perplexity on
// the same tokens (a prefix keeps the test short on the portable kernels).
func TestQwenPerplexity(t *testing.T) {
	forEachQwen(t, func(t *testing.T, m *Model, tok *tokenizer.Tokenizer, _ *gguf.File, g *qwenGolden, threshold float64) {
		text, err := os.ReadFile("testdata/passage.txt")
		require.NoError(t, err)
		ids := tok.Encode(string(text), tokenizer.EncodeOptions{})
		require.Greater(t, len(ids), g.Perplexity.Tokens)
		ids = ids[:g.Perplexity.Tokens]
		rows := run(t, m, new(Batch).chain(m.NewCache(len(ids)), ids, true))
		var nll float64
		for i := 0; i+1 < len(ids); i++ {
			nll -= logProb(rows[i], ids[i+1])
		}
		ppl := math.Exp(nll / float64(len(ids)-1))
		t.Logf("%d tokens: perplexity %.3f (llama.cpp %.3f, threshold %.1f)", len(ids), ppl, g.Perplexity.Value, threshold)
		require.Less(t, ppl, threshold)
		require.InDelta(t, g.Perplexity.Value, ppl, tolQwenPerplexity*g.Perplexity.Value)
	})
}

// top2 returns the ids of the largest and second largest logits (the lower
// id first among equals, as a stable sort would).
func top2(x []float32) (int32, int32) {
	a, b := 0, 1
	if x[b] > x[a] {
		a, b = b, a
	}
	for i := 2; i < len(x); i++ {
		switch {
		case x[i] > x[a]:
			a, b = i, a
		case x[i] > x[b]:
			b = i
		}
	}
	return int32(a), int32(b)
}

func minF(x []float32) float32 {
	m := float32(math.Inf(1))
	for _, v := range x {
		m = min(m, v)
	}
	return m
}

// Tolerances against llama.cpp, from measurements (2 threads, CPU):
//
//   - tolQwenGolden: our top-5 logits against llama-cpp-python 0.3.36's
//     differ by at most 0.369 on the 0.5B model with the portable kernels,
//     0.250 with the AVX2 ones, and 0.274 on the 1.5B (AVX2); logits of
//     10–24. Two builds of llama.cpp (0.3.36 and the ggml 0.20.1 one the
//     benchmarks use) differ from each other by up to 0.14 on the 0.5B and
//     swap two of its top-5 ids at two of the twelve positions. Both
//     engines quantize the activations to 8 bits and keep K/V in float16,
//     in different orders, so neither is exact; 0.75 is twice the worst.
//   - tolQwenTie: a greedy choice whose margin is below this may go either
//     way (TestQwenGreedyMatchesLlamaCpp). A margin moves by the difference
//     of the two logits' errors: at most twice the worst error measured
//     above in theory, 0.25 at the one flip seen (0.037 one way, 0.209 the
//     other); 0.5 lies between.
//   - tolQwenPerplexity: our perplexity on the passage's first 128 tokens is
//     21.33 against llama.cpp's 21.37 on the 0.5B model, 11.41 against
//     11.37 on the 1.5B (0.2% and 0.4% apart); 2% allows five times that.
const (
	tolQwenGolden     = 0.75
	tolQwenTie        = 0.5
	tolQwenPerplexity = 0.02
)
