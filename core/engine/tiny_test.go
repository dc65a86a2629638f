package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/quant"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/spec"
)

// tinyFile writes a random Llama model with a vocabulary of `vocab` tokens
// (and an SPM tokenizer naming them "t0", "t1", ...) to a GGUF file.
// logitScale sharpens or flattens its next-token distributions.
func tinyFile(t testing.TB, dir string, vocab int, seed uint64, logitScale float64) string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 99))
	const embd, heads, kvHeads, ff, layers = 64, 4, 2, 128, 2
	w := gguf.NewWriter()
	toks := make([]string, vocab)
	for i := range toks {
		toks[i] = fmt.Sprintf("t%d", i)
	}
	toks[0], toks[1], toks[2] = "<unk>", "<s>", "</s>"
	scores := make([]float32, vocab)
	types := make([]int32, vocab)
	for i := range scores {
		scores[i] = -float32(i)
		types[i] = 1
	}
	types[0], types[1], types[2] = 2, 3, 3
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"},
		{"llama.block_count", uint32(layers)},
		{"llama.embedding_length", uint32(embd)},
		{"llama.attention.head_count", uint32(heads)},
		{"llama.attention.head_count_kv", uint32(kvHeads)},
		{"llama.feed_forward_length", uint32(ff)},
		{"llama.context_length", uint32(256)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(embd / heads)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", toks},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
	} {
		require.NoError(t, w.AddKV(kv.k, kv.v))
	}
	add := func(name string, dims []int, sd float64, mean float64) {
		n := 1
		for _, d := range dims {
			n *= d
		}
		data := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(mean+sd*r.NormFloat64())))
		}
		require.NoError(t, w.AddTensor(name, quant.F32, dims, data))
	}
	hd := embd / heads
	add("token_embd.weight", []int{embd, vocab}, 1, 0)
	add("output_norm.weight", []int{embd}, 0.1, 1)
	add("output.weight", []int{embd, vocab}, logitScale/math.Sqrt(embd), 0)
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", []int{embd}, 0.1, 1)
		add(p+"attn_q.weight", []int{embd, heads * hd}, 2/math.Sqrt(embd), 0)
		add(p+"attn_k.weight", []int{embd, kvHeads * hd}, 2/math.Sqrt(embd), 0)
		add(p+"attn_v.weight", []int{embd, kvHeads * hd}, 1/math.Sqrt(embd), 0)
		add(p+"attn_output.weight", []int{heads * hd, embd}, 1/math.Sqrt(embd), 0)
		add(p+"ffn_norm.weight", []int{embd}, 0.1, 1)
		add(p+"ffn_gate.weight", []int{embd, ff}, 1/math.Sqrt(embd), 0)
		add(p+"ffn_up.weight", []int{embd, ff}, 1/math.Sqrt(embd), 0)
		add(p+"ffn_down.weight", []int{ff, embd}, 1/math.Sqrt(ff), 0)
	}
	path := filepath.Join(dir, fmt.Sprintf("tiny-%d-%d.gguf", vocab, seed))
	require.NoError(t, w.WriteFile(path))
	return path
}

// tinyBackend loads a tiny target (and, with draftPath, a draft model) as
// a Backend driven directly by the test, without a runtime.
func tinyBackend(t testing.TB, path, draftPath, extra string) *Backend {
	t.Helper()
	cfg, err := loop.ParseConfig([]byte(MergeConfig(`{"model_path":"`+path+`","max_slots":2,"threads":1,"context_length":64,"spec_budget":6,"spec_max_depth":3,"spec_max_width":2,"spec_adaptive":false,"spec_min_prob":0.25`+
		`,"draft_model_path":"`+draftPath+`"}`, extra)))
	require.NoError(t, err)
	be, err := newCPU(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { be.Close() })
	return be.(*Backend)
}

// generate runs one sequence through Step until it has n tokens.
func generate(t testing.TB, b *Backend, prompt []int32, p sample.Params, drafter drafterKind, n int) []int32 {
	out, _ := generateStats(t, b, prompt, p, drafter, n)
	return out
}

// generateStats is generate that also counts drafts proposed and accepted.
func generateStats(t testing.TB, b *Backend, prompt []int32, p sample.Params, drafter drafterKind, n int) ([]int32, [2]int) {
	return generateItem(t, b, prompt, &item{params: p, drafter: drafter}, n)
}

// generateItem is generateStats for a prepared item (a grammar, say).
func generateItem(t testing.TB, b *Backend, prompt []int32, it *item, n int) ([]int32, [2]int) {
	var pa [2]int
	s := &loop.Slot{Request: &loop.Request{}, Prompt: prompt, Data: it}
	require.NoError(t, b.Open(s))
	defer b.Release(s)
	var out []int32
	res := make([]loop.StepResult, 1)
	for len(out) < n {
		res[0] = loop.StepResult{}
		b.Step([]*loop.Slot{s}, res)
		require.NoError(t, res[0].Err)
		out = append(out, res[0].Tokens...)
		pa[0] += res[0].DraftProposed
		pa[1] += res[0].DraftAccepted
	}
	return out[:n], pa
}

// exactPairs is the exact joint distribution of the second and third
// generated tokens after prompt, as the target's sampling pipeline defines
// it (penalties over the generated tokens, temperature, top-k, top-p,
// min-p), from full forward passes: Σ over the first token t1 of
// P(t1)·P(t2 | t1)·P(t3 | t1 t2).
func exactPairs(t testing.TB, m *model.Model, prompt []int32, p sample.Params) map[[2]int32]float64 {
	out := map[[2]int32]float64{}
	d1 := fullDist(t, m, prompt, p, nil)
	for i, a := range d1.IDs {
		g1 := []int32{a}
		d2 := fullDist(t, m, append(append([]int32{}, prompt...), g1...), p, g1)
		for j, b := range d2.IDs {
			g2 := []int32{a, b}
			d3 := fullDist(t, m, append(append([]int32{}, prompt...), g2...), p, g2)
			for k, c := range d3.IDs {
				out[[2]int32{b, c}] += d1.Probs[i] * d2.Probs[j] * d3.Probs[k]
			}
		}
	}
	return out
}

// chiSquareP is the upper tail of the chi-square distribution
// (Wilson–Hilferty approximation, ample for a test at small alpha).
func chiSquareP(x float64, k int) float64 {
	kf := float64(k)
	z := (math.Cbrt(x/kf) - (1 - 2/(9*kf))) / math.Sqrt(2/(9*kf))
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// TestSamplingPreservesDistribution: with speculation (a draft model that
// disagrees with the target, so drafts are both accepted and rejected), the
// first two generated tokens are distributed as the target's sampling
// pipeline says, for several sampling settings (chi-square, Bonferroni).
func TestSamplingPreservesDistribution(t *testing.T) {
	dir := t.TempDir()
	target := tinyFile(t, dir, 16, 1, 3)
	// The target drafts for itself (the draft model's path is the target's
	// own file): long accepted paths, and rejections too since sampling
	// does not follow the beam.
	b := tinyBackend(t, target, target, "")
	prompt := []int32{1, 5, 9, 4}
	settings := []sample.Params{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 6},
		{Temperature: 1.3, TopP: 0.9},
		{Temperature: 1, MinP: 0.05, RepetitionPenalty: 1.3},
	}
	n := 4000
	if testing.Short() || race.Enabled {
		n = 1500
	}
	alpha := 1e-3 / float64(2*len(settings)) // Bonferroni over every test below
	for si, p := range settings {
		p.HasSeed = true
		p.RepeatLastN = 64
		if p.RepetitionPenalty == 0 {
			p.RepetitionPenalty = 1
		}
		for _, drafter := range []drafterKind{draftModel, draftNGram} {
			counts := map[[2]int32]int{}
			var proposed, accepted int
			for i := range n {
				p.Seed = uint64(si*1_000_000 + i)
				// A prompt with repeats so the n-gram drafter proposes too.
				pr := append(append([]int32{}, prompt...), 3, 7, 1, 5, 9)
				out, pa := generateStats(t, b, pr, p, drafter, 3)
				counts[[2]int32{out[1], out[2]}]++
				proposed += pa[0]
				accepted += pa[1]
			}
			pr := append(append([]int32{}, prompt...), 3, 7, 1, 5, 9)
			exact := exactPairs(t, b.model.(model.CPU).Model, pr, p)
			chi, df := 0.0, -1
			var restE, restO float64
			for k, e := range exact {
				e *= float64(n)
				o := float64(counts[k])
				if e < 5 {
					restE += e
					restO += o
					continue
				}
				chi += (o - e) * (o - e) / e
				df++
			}
			for k, o := range counts {
				if _, ok := exact[k]; !ok {
					restO += float64(o) // impossible pairs: any count is a failure
					restE += 1e-9
					_ = k
				}
			}
			if restE > 0 {
				chi += (restO - restE) * (restO - restE) / max(restE, 1e-9)
				df++
			}
			pv := chiSquareP(chi, max(df, 1))
			t.Logf("setting %d drafter %v: %d drafts proposed, %d accepted; chi2 %.1f df %d p %.3g", si, drafter, proposed, accepted, chi, df, pv)
			if drafter == draftModel {
				require.Greater(t, accepted, 0)
				require.Less(t, accepted, proposed)
			}
			require.Greater(t, pv, alpha, "setting %+v drafter %v", p, drafter)
		}
	}
}

// fullDist runs the model over ctx and returns the sampler's distribution
// with `accepted` in its penalty window.
func fullDist(t testing.TB, m *model.Model, ctx []int32, p sample.Params, accepted []int32) sample.Dist {
	v := m.Config().Vocab
	c := m.NewCache(len(ctx) + 1)
	var bt model.Batch
	for i, tok := range ctx {
		bt.Tokens = append(bt.Tokens, tok)
		bt.Cache = append(bt.Cache, c)
		bt.Pos = append(bt.Pos, i)
		bt.Parent = append(bt.Parent, i-1)
		bt.Logits = append(bt.Logits, i == len(ctx)-1)
	}
	logits := make([]float32, v)
	require.NoError(t, m.Forward(&bt, logits))
	smp, err := sample.New(p, v)
	require.NoError(t, err)
	for _, a := range accepted {
		smp.Accept(a)
	}
	return smp.Distribution(logits).Clone()
}

// TestDraftModelVocabularyMismatch: a draft model whose vocabulary differs
// from the target's is refused when the runtime is created.
func TestDraftModelVocabularyMismatch(t *testing.T) {
	dir := t.TempDir()
	target := tinyFile(t, dir, 16, 1, 3)
	other := tinyFile(t, dir, 24, 3, 3)
	_, err := loop.New([]byte(`{"model_path":"` + target + `","draft_model_path":"` + other + `","spec_budget":4}`))
	require.Equal(t, status.Model, status.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "vocabulary has 24 tokens")
	// Same vocabulary, different weights: accepted, and it drafts.
	same := tinyFile(t, dir, 16, 2, 3)
	rt, err := loop.New([]byte(`{"model_path":"` + target + `","draft_model_path":"` + same + `","spec_budget":4}`))
	require.NoError(t, err)
	rt.Close()
}

var _ = spec.Tree{}
