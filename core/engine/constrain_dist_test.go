package engine

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/internal/race"
)

// TestConstrainedSamplingPreservesDistribution: under a grammar, the
// second and third generated tokens are distributed as the target's
// sampling pipeline applied to the masked logits says, plain (where an
// untruncated sampler draws by rejection and a truncating one by testing
// tokens in rank order, from the masked row where that does not settle)
// and speculative (where drafts the grammar refuses are pruned and
// verification masks each node), chi-square with Bonferroni.
func TestConstrainedSamplingPreservesDistribution(t *testing.T) {
	dir := t.TempDir()
	target := tinyFile(t, dir, 16, 1, 3)
	b := tinyBackend(t, target, target, "")
	// The tiny vocabulary's tokens are "t3" … "t15" (t0 … t2 are
	// special): the grammar allows odd and even ones in turn, so the mask
	// changes every step, about half of the model's choices (and of its
	// drafts) are refused, a multi-digit token must follow the right
	// one-digit prefix through the trie, and the end of generation is not
	// allowed within the three tokens looked at.
	g, err := grammar.Parse("root ::= (odd even){3}\nodd ::= \"t\" ([3579] | \"1\" [135])\neven ::= \"t\" ([468] | \"1\" [024])")
	require.NoError(t, err)
	odd, even := []int32{3, 5, 7, 9, 11, 13, 15}, []int32{4, 6, 8, 10, 12, 14}
	allowed := func(pos int) []int32 {
		if pos%2 == 0 {
			return odd
		}
		return even
	}
	settings := []sample.Params{
		{Temperature: 1},                                   // rejection
		{Temperature: 1, RepetitionPenalty: 1.5},           // rejection, penalised
		{Temperature: 1.2, TopK: 3},                        // rank-order scan
		{Temperature: 1.5, TopP: 0.8, MinP: 0.02},          // rank-order scan
		{Temperature: 1.3, TopK: 5, TopP: 0.9, MinP: 0.05}, // all three cuts
	}
	// The n-gram drafter's path through pruning and verification is the
	// draft model's; the unconstrained test covers its proposals.
	drafters := []drafterKind{draftNone, draftModel}
	n := 2500
	if testing.Short() || race.Enabled {
		n = 1000
	}
	alpha := 1e-3 / float64(len(drafters)*len(settings))
	prompt := []int32{1, 5, 9, 4, 3, 7, 1, 5, 9}
	m := b.model.(model.CPU).Model
	for si, p := range settings {
		p.HasSeed = true
		p.RepeatLastN = 64
		if p.RepetitionPenalty == 0 {
			p.RepetitionPenalty = 1
		}
		exact := exactMaskedPairs(t, m, prompt, p, allowed)
		for _, drafter := range drafters {
			counts := map[[2]int32]int{}
			var proposed, accepted int
			for i := range n {
				p.Seed = uint64(si*1_000_000 + i)
				out, pa := generateItem(t, b, prompt, &item{params: p, drafter: drafter, grammar: g}, 3)
				counts[[2]int32{out[1], out[2]}]++
				require.True(t, slices.Contains(odd, out[0]), "first token %d outside the grammar", out[0])
				proposed += pa[0]
				accepted += pa[1]
			}
			chi, df := chiSquare(exact, counts, n)
			pv := chiSquareP(chi, max(df, 1))
			t.Logf("setting %d drafter %v: %d drafts proposed, %d accepted; chi2 %.1f df %d p %.3g", si, drafter, proposed, accepted, chi, df, pv)
			if drafter == draftModel {
				require.Greater(t, accepted, 0, "no draft survived the grammar: speculation untested")
			}
			require.Greater(t, pv, alpha, "setting %+v drafter %v", p, drafter)
		}
	}
}

// exactMaskedPairs is exactPairs with the logits of step k (0-based)
// masked to allowed(k) before the sampling pipeline.
func exactMaskedPairs(t testing.TB, m *model.Model, prompt []int32, p sample.Params, allowed func(int) []int32) map[[2]int32]float64 {
	out := map[[2]int32]float64{}
	dist := func(gen []int32) sample.Dist {
		return maskedDist(t, m, append(slices.Clone(prompt), gen...), p, gen, allowed(len(gen)))
	}
	d1 := dist(nil)
	for i, a := range d1.IDs {
		d2 := dist([]int32{a})
		for j, b := range d2.IDs {
			d3 := dist([]int32{a, b})
			for k, c := range d3.IDs {
				out[[2]int32{b, c}] += d1.Probs[i] * d2.Probs[j] * d3.Probs[k]
			}
		}
	}
	return out
}

// maskedDist is fullDist with every token outside allowed at -Inf.
func maskedDist(t testing.TB, m *model.Model, ctx []int32, p sample.Params, accepted, allowed []int32) sample.Dist {
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
	for id := range logits {
		if !slices.Contains(allowed, int32(id)) {
			logits[id] = float32(math.Inf(-1))
		}
	}
	smp, err := sample.New(p, v)
	require.NoError(t, err)
	for _, a := range accepted {
		smp.Accept(a)
	}
	return smp.Distribution(logits).Clone()
}

// chiSquare is the statistic of observed counts (n draws) against the
// exact probabilities: cells expecting fewer than 5 are pooled, and a
// count on an impossible pair fails it outright.
func chiSquare(exact map[[2]int32]float64, counts map[[2]int32]int, n int) (float64, int) {
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
			restO += float64(o)
			restE += 1e-9
		}
	}
	if restE > 0 {
		chi += (restO - restE) * (restO - restE) / max(restE, 1e-9)
		df++
	}
	return chi, df
}
