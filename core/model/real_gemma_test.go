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
)

// Gemma 3 270M (Q4_K_M, issue 13), checked as the Qwen models are against
// numbers recorded once from llama.cpp (testdata/gen_golden_gemma.py):
// golden top-5 logits (one prompt runs past the 512-token sliding window,
// so the local layers' window is compared too), greedy answers token for
// token through the cache, and perplexity on testdata/passage.txt. `make
// model MODEL=gemma3-270m` fetches the model; without it the tests skip.
const gemmaFile = "gemma-3-270m-q4_k_m.gguf"

// Tolerances against llama.cpp (llama-cpp-python 0.3.36), from
// measurements (2 threads, CPU, AVX2). llama.cpp's CPU GELU rounds its
// input to float16 and reads a float16 table; ours is the tanh formula in
// float32. That is most of the gap: rounding the GELU input to float16 in
// our pass (an experiment, not kept) moves our perplexity on the passage
// from 15.81 to 15.51, toward llama.cpp's 15.33.
//
//   - tolGemmaGolden: top-5 logits differ by 0.04–0.48 (logits of 5–30),
//     0.46 at position 600 of the long prompt. Without the sliding window
//     (every layer global) that position is off by 9.6: the window is what
//     makes the positions past 512 agree. 1.0 is twice the worst. With the
//     AVX2 8-row kernels (another summation order, so other activation
//     roundings at every layer's requantization) the worst is 0.78; on
//     the same machine the SIMD and pure-Go kernels differ by up to 2.4
//     logits over the whole vocabulary at one position, on SmolLM2 by 1.4:
//     this much is rounding noise, not a fault of either order. Scores
//     with keys on lanes (one FMA chain per key over the 256 dimensions,
//     scoresT) put position 15 of the first prompt 1.06 off, where exact
//     (float64) scores put it 0.85 off and the earlier 16-lane sums 0.62:
//     the summation order of the scores alone moves this model's logits
//     by 0.4, so 1.25.
//   - tolGemmaTie: a logit of ours may sit tolGemmaGolden from llama.cpp's,
//     so two tokens closer than that in llama.cpp's row may trade places.
//     Measured: position 31 of the fox prompt (llama.cpp's margin 0.027)
//     and greedy token 11 of the factorial question (0.742) flip with the
//     8-row kernels; all 72 greedy tokens matched with the row kernels.
//   - tolGemmaPerplexity: 15.81 against 15.33 (3.1%).
const (
	tolGemmaGolden     = 1.25
	tolGemmaTie        = tolGemmaGolden
	tolGemmaPerplexity = 0.05
)

func gemma(t *testing.T) (*Model, *tokenizer.Tokenizer, *qwenGolden) {
	t.Helper()
	if raceEnabled {
		t.Skip("real-model tests are skipped under -race (too slow); the tiny models cover the same code")
	}
	path, _ := filepath.Abs(filepath.Join("..", "..", "models", gemmaFile))
	if _, err := os.Stat(path); err != nil {
		t.Skipf("gemma3-270m not found at %s (run `make model MODEL=gemma3-270m`)", path)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "golden_gemma3-270m.json"))
	require.NoError(t, err)
	var g qwenGolden
	require.NoError(t, json.Unmarshal(data, &g))
	require.Equal(t, gemmaFile, g.Model)
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
	return m, tok, &g
}

// TestGemmaConfig checks what Load read from the metadata: the shape, the
// layer pattern (five local layers of window 512 and RoPE base 10,000,
// then a global one with base 1,000,000), the tied head.
func TestGemmaConfig(t *testing.T) {
	m, _, _ := gemma(t)
	c := m.Config()
	require.Equal(t, "gemma3", c.Arch)
	require.Equal(t, []int{18, 640, 4, 1, 256, 2048, 262144}, []int{c.Layers, c.Embd, c.Heads, c.KVHeads, c.HeadDim, c.FF, c.Vocab})
	require.True(t, c.TiedOutput && c.GELU && c.RopeNeox)
	require.Equal(t, float32(math.Sqrt(640)), c.EmbdScale)
	require.Equal(t, 512, c.SlidingWindow)
	require.Equal(t, float32(1e6), c.RopeTheta)
	require.Equal(t, float32(1e4), c.RopeThetaLocal)
	require.Zero(t, c.LogitSoftcap)
	var global []int
	for li := range c.Layers {
		if !c.Local(li) {
			global = append(global, li)
		}
	}
	require.Equal(t, []int{5, 11, 17}, global)
}

// TestGemmaGoldenTop5 is TestQwenGoldenTop5 for Gemma: llama.cpp's token
// ids (BOS first: the model adds it) in one chain pass with every logit;
// at every recorded position the same top-1 (one of its top 2 at a near-tie), llama.cpp's top-5 logits
// within tolGemmaGolden, the same top-5 set but for near-ties. The fourth
// prompt is 725 tokens: positions 520, 600 and 724 lie past the window.
func TestGemmaGoldenTop5(t *testing.T) {
	m, tok, g := gemma(t)
	require.Len(t, g.Logits, 4)
	worst := 0.0
	for _, p := range g.Logits {
		require.Equal(t, p.Tokens, tok.Encode(p.Text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true}), p.Text)
		rows := run(t, m, new(Batch).chain(m.NewCache(len(p.Tokens)), p.Tokens, true))
		for _, pos := range p.Positions {
			row := rows[pos.Pos]
			if margin := pos.Logits[0] - pos.Logits[1]; margin >= tolGemmaTie {
				require.Equal(t, pos.Top5[0], argmax(row), "%.40q position %d", p.Text, pos.Pos)
			} else { // a near-tie: llama.cpp's top 2, in either order
				require.Contains(t, pos.Top5[:2], argmax(row), "%.40q position %d (near-tie, margin %.3f)", p.Text, pos.Pos, margin)
			}
			for j, id := range pos.Top5 {
				d := math.Abs(float64(row[id] - pos.Logits[j]))
				worst = max(worst, d)
				require.Less(t, d, tolGemmaGolden, "%.40q position %d token %d", p.Text, pos.Pos, id)
			}
			fifth := float64(pos.Logits[4])
			for _, id := range top(row, 5) {
				if !contains(pos.Top5, id) {
					require.Less(t, math.Abs(float64(row[id])-fifth), 2*tolGemmaGolden,
						"%.40q position %d: token %d in our top 5 but not llama.cpp's", p.Text, pos.Pos, id)
				}
			}
		}
	}
	t.Logf("oracle %s: max |Δlogit| %.3f over the recorded top 5s", g.Oracle, worst)
}

// TestGemmaGreedyMatchesLlamaCpp renders each question with the Gemma chat
// family (the file ships no template; the family must give exactly what
// jinja2 rendered from Gemma 3's template for llama.cpp), prefills it and
// decodes greedily one token per pass through the cache, every token equal
// to llama.cpp's but for near-ties, as in TestQwenGreedyMatchesLlamaCpp.
func TestGemmaGreedyMatchesLlamaCpp(t *testing.T) {
	m, tok, g := gemma(t)
	tm := chat.ForArch("gemma3")
	require.NotNil(t, tm)
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
		for i, want := range q.Answer {
			rows := run(t, m, new(Batch).chain(c, ids, false))
			commitAll(t, c)
			row := rows[0]
			ours := argmax(row)
			if ours != want {
				require.True(t, q.Margins[i] < tolGemmaTie && row[ours]-row[want] < tolGemmaTie,
					"%q: token %d is %d (%q), llama.cpp's %d (%q), its margin %.3f",
					q.Question, i, ours, tok.Decode([]int32{ours}, false), want, tok.Decode([]int32{want}, false), q.Margins[i])
				ties++
			}
			compared++
			ids = []int32{want}
		}
		t.Logf("%q → %q", q.Question, q.Text)
	}
	t.Logf("%d tokens compared, %d near-ties", compared, ties)
}

// TestGemmaPerplexity scores the first tokens of testdata/passage.txt
// (BOS first) in one chain pass against llama.cpp's perplexity on them.
func TestGemmaPerplexity(t *testing.T) {
	m, tok, g := gemma(t)
	text, err := os.ReadFile("testdata/passage.txt")
	require.NoError(t, err)
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{AddSpecial: true})
	require.Greater(t, len(ids), g.Perplexity.Tokens)
	ids = ids[:g.Perplexity.Tokens]
	rows := run(t, m, new(Batch).chain(m.NewCache(len(ids)), ids, true))
	var nll float64
	for i := 0; i+1 < len(ids); i++ {
		nll -= logProb(rows[i], ids[i+1])
	}
	ppl := math.Exp(nll / float64(len(ids)-1))
	t.Logf("%d tokens: perplexity %.3f (llama.cpp %.3f)", len(ids), ppl, g.Perplexity.Value)
	require.InDelta(t, g.Perplexity.Value, ppl, tolGemmaPerplexity*g.Perplexity.Value)
}
