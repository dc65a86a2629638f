package engine

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/streaming"
)

// generateLogprobs runs one sequence asking for logprobs and top
// alternatives until it has n tokens, returning both and the drafts
// accepted.
func generateLogprobs(t testing.TB, b *Backend, prompt []int32, p sample.Params, drafter drafterKind, top, n int) ([]int32, []streaming.TokenLogprob, int) {
	t.Helper()
	s := &loop.Slot{Request: &loop.Request{}, Prompt: prompt,
		Data: &item{params: p, drafter: drafter, logprobs: true, topLogprobs: top}}
	require.NoError(t, b.Open(s))
	defer b.Release(s)
	var out []int32
	var lps []streaming.TokenLogprob
	accepted := 0
	res := make([]loop.StepResult, 1)
	for len(out) < n {
		res[0] = loop.StepResult{}
		b.Step([]*loop.Slot{s}, res)
		require.NoError(t, res[0].Err)
		require.Len(t, res[0].Logprobs, len(res[0].Tokens))
		out = append(out, res[0].Tokens...)
		for _, lp := range res[0].Logprobs {
			lp.Top = append([]streaming.Logprob(nil), lp.Top...) // the backend reuses its buffers
			lps = append(lps, lp)
		}
		accepted += res[0].DraftAccepted
	}
	return out[:n], lps[:n], accepted
}

// logSoftmax is the reference: log p over the whole row, in float64.
func logSoftmax(row []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(row))
	for i, v := range row {
		out[i] = float64(v) - mx - math.Log(sum)
	}
	return out
}

// directLogits runs the model over ctx in one pass and returns the last
// position's logits, with the penalties of p over accepted applied.
func directLogits(t testing.TB, m *model.Model, ctx []int32, p sample.Params, accepted []int32) []float32 {
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
	return append([]float32(nil), smp.Penalised(logits)...)
}

// Every reported logprob is the log-softmax, at temperature 1, of what a
// fresh forward pass over the prompt and the tokens before it gives (after
// the penalties of those tokens), whatever the sampling settings; the top
// alternatives are that row's best, in order, and their probabilities and
// the chosen one's stay within the distribution's mass.
func TestLogprobsMatchDirectForward(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 5, 4)
	b := tinyBackend(t, path, "", "")
	m := b.model.(model.CPU).Model
	prompt := []int32{3, 9, 4, 3, 9, 4, 3, 9}
	for _, p := range []sample.Params{
		{},
		{RepetitionPenalty: 1.3, PresencePenalty: 0.5},
		{Temperature: 0.7, TopK: 5, HasSeed: true, Seed: 11},
	} {
		const top, n = 20, 12
		toks, lps, _ := generateLogprobs(t, b, prompt, p, draftNone, top, n)
		for j, tok := range toks {
			lp := lps[j]
			want := logSoftmax(directLogits(t, m, append(append([]int32{}, prompt...), toks[:j]...), p, toks[:j]))
			require.Equal(t, tok, lp.ID)
			require.InDelta(t, want[tok], lp.Logprob, 1e-4, "%+v token %d", p, j)
			require.LessOrEqual(t, lp.Logprob, 0.0)
			require.Len(t, lp.Top, top)
			mass := 0.0
			for k, alt := range lp.Top {
				require.InDelta(t, want[alt.ID], alt.Logprob, 1e-4)
				mass += math.Exp(alt.Logprob)
				if k > 0 {
					prev := lp.Top[k-1]
					require.True(t, prev.Logprob > alt.Logprob || (prev.Logprob == alt.Logprob && prev.ID < alt.ID), "top not in order: %+v", lp.Top)
				}
			}
			require.LessOrEqual(t, mass, 1+1e-6)
			// No token left out of the top is likelier than its last.
			for id, w := range want {
				in := false
				for _, alt := range lp.Top {
					in = in || alt.ID == int32(id)
				}
				if !in {
					require.LessOrEqual(t, w, lp.Top[top-1].Logprob+1e-6)
				}
			}
			if p.Temperature == 0 {
				require.Equal(t, tok, lp.Top[0].ID, "greedy picks the most likely token")
			}
		}
	}
}

// Under speculation the logprobs are plain decoding's: each emitted
// token's row is the target's row at its tree node, with the penalty
// window of its path, so greedy output and logprobs agree token by token
// whether drafts were accepted or not (the n-gram drafter and a draft
// model, with and without penalties).
func TestLogprobsSpeculativeEqualPlain(t *testing.T) {
	dir := t.TempDir()
	path, draft := tinyFile(t, dir, 64, 5, 4), tinyFile(t, dir, 64, 5, 4)
	b := tinyBackend(t, path, draft, "")
	prompt := []int32{3, 9, 4, 3, 9, 4, 3, 9}
	for _, p := range []sample.Params{{}, {RepetitionPenalty: 1.2}} {
		const top, n = 5, 24
		want, wantLps, _ := generateLogprobs(t, b, prompt, p, draftNone, top, n)
		for _, d := range []drafterKind{draftNGram, draftModel} {
			got, gotLps, accepted := generateLogprobs(t, b, prompt, p, d, top, n)
			require.Equal(t, want, got, "%+v drafter %s", p, d)
			require.Positive(t, accepted, "%+v drafter %s: nothing speculated", p, d)
			for j := range want {
				require.InDelta(t, wantLps[j].Logprob, gotLps[j].Logprob, 1e-5, "%+v drafter %s token %d", p, d, j)
				require.Len(t, gotLps[j].Top, top)
				for k := range wantLps[j].Top {
					require.Equal(t, wantLps[j].Top[k].ID, gotLps[j].Top[k].ID)
					require.InDelta(t, wantLps[j].Top[k].Logprob, gotLps[j].Top[k].Logprob, 1e-5)
				}
			}
		}
	}
}

// A greedy request with logprobs needs the rows, so it never takes a
// runner's argmax-only pass; one without does.
func TestLogprobsLeaveTheArgmaxPath(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 5, 4)
	be, ar := argmaxBackend(t, path)
	prompt := []int32{3, 9, 4, 3, 9, 4, 3, 9}
	plainToks := generate(t, be.(*Backend), prompt, sample.Params{}, draftNGram, 16)
	require.Positive(t, ar.passes)
	before := ar.passes
	toks, lps, _ := generateLogprobs(t, be.(*Backend), prompt, sample.Params{}, draftNGram, 3, 16)
	require.Equal(t, before, ar.passes, "a logprobs request took the argmax path")
	require.Equal(t, plainToks, toks)
	for _, lp := range lps {
		require.Less(t, lp.Logprob, 0.0)
		require.Len(t, lp.Top, 3)
	}
}
