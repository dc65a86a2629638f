package sample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lmstream/lmstream/internal/race"
	"github.com/stretchr/testify/require"
)

// allowedSettings are the truncating pipelines DistributionAllowed serves,
// each cut alone and combined, with and without penalties.
var allowedSettings = []Params{
	{Temperature: 1, TopK: 5},
	{Temperature: 0.7, TopK: 40},
	{Temperature: 1, TopP: 0.9},
	{Temperature: 1.3, TopP: 0.5},
	{Temperature: 1, MinP: 0.05},
	{Temperature: 0.8, MinP: 0.3},
	{Temperature: 1, TopK: 40, TopP: 0.9},
	{Temperature: 1, TopK: 20, MinP: 0.1},
	{Temperature: 1, TopP: 0.95, MinP: 0.02},
	{Temperature: 0.9, TopK: 50, TopP: 0.8, MinP: 0.05},
	{Temperature: 1.1, TopK: 30, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.3, PresencePenalty: 0.5},
}

// allowedRow is a row of vocab logits like a model's (a broad bulk and a
// few strong candidates), in three kinds: plain, peaked, and rounded to
// quarters so that many tokens tie, at the top-k boundary among others.
func allowedRow(r *rand.Rand, vocab int) []float32 {
	l := make([]float32, vocab)
	sd := 1 + 2*r.Float64()
	for i := range l {
		l[i] = float32(r.NormFloat64() * sd)
	}
	for range r.IntN(30) {
		l[r.IntN(vocab)] = float32(4 + r.Float64()*10)
	}
	if r.IntN(3) == 0 {
		for i := range l {
			l[i] = float32(math.Round(float64(l[i])*4) / 4)
		}
	}
	return l
}

// allowedMask is a random grammar's verdict: a density of allowed tokens
// from almost all to a few, and often the row's best tokens refused (a
// model straying from the grammar), which the scan must step over.
func allowedMask(r *rand.Rand, l []float32) []bool {
	ok := make([]bool, len(l))
	dens := []float64{0.97, 0.6, 0.2, 0.02}[r.IntN(4)]
	for i := range ok {
		ok[i] = r.Float64() < dens
	}
	if r.IntN(2) == 0 {
		idx := make([]int, len(l))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int {
			return candCmp(cand{l[a], int32(a)}, cand{l[b], int32(b)})
		})
		for _, i := range idx[:r.IntN(40)] {
			ok[i] = false
		}
	}
	ok[r.IntN(len(ok))] = true // never an empty mask
	return ok
}

func maskRow(l []float32, ok []bool) []float32 {
	m := slices.Clone(l)
	for i := range m {
		if !ok[i] {
			m[i] = float32(math.Inf(-1))
		}
	}
	return m
}

// TestDistributionAllowedIsTheMaskedDistribution: wherever the scan
// settles, its Dist is the masked row's, bit for bit (ids and float64
// probabilities), and a seeded sampler draws the same token either way;
// and it settles often enough to matter, on several thousand random rows
// and masks per setting.
func TestDistributionAllowedIsTheMaskedDistribution(t *testing.T) {
	rows := 1500
	if testing.Short() || race.Enabled {
		rows = 300
	}
	const vocab = 3000
	for si, p := range allowedSettings {
		r := rand.New(rand.NewPCG(uint64(si), 13))
		p.Seed, p.HasSeed = uint64(si), true
		ref, fast := mustNew(t, p, vocab), mustNew(t, p, vocab)
		settled := 0
		for range rows {
			l := allowedRow(r, vocab)
			ok := allowedMask(r, l)
			if r.IntN(2) == 0 {
				ref.Reset()
				fast.Reset()
				for range r.IntN(64) {
					id := int32(r.IntN(vocab))
					ref.Accept(id)
					fast.Accept(id)
				}
			}
			keep := slices.Clone(l)
			want := ref.Distribution(maskRow(l, ok)).Clone()
			tested := 0
			got, settles := fast.DistributionAllowed(l, func(id int32) bool { tested++; return ok[id] })
			require.Equal(t, keep, l, "the caller's logits were modified")
			require.LessOrEqual(t, tested, max(allowedScan, 4*p.TopK), "scan past its bound")
			if !settles {
				continue
			}
			settled++
			require.Equal(t, want.IDs, got.IDs, "setting %d %+v", si, p)
			require.Equal(t, want.Probs, got.Probs, "setting %d %+v", si, p)
			// The same uniform gives the same token.
			tokRef := ref.Sample(maskRow(l, ok))
			tokFast, settles := fast.SampleAllowed(l, func(id int32) bool { return ok[id] })
			require.True(t, settles)
			require.Equal(t, tokRef, tokFast)
		}
		t.Logf("setting %d %+v: settled %d of %d rows", si, p, settled, rows)
		require.Greater(t, settled, rows/8, "the scan settles too rarely to be tested (or to help)")
	}
}

// TestDistributionAllowedDeclines: no truncation, greedy, an infinite
// logit where the scan reaches it, or a grammar refusing every token of
// the scan leave the row to the masked path.
func TestDistributionAllowedDeclines(t *testing.T) {
	const vocab = 1000
	r := rand.New(rand.NewPCG(5, 6))
	l := allowedRow(r, vocab)
	all := func(int32) bool { return true }
	for _, p := range []Params{{Temperature: 1}, {TopK: 5}, {Temperature: 1, TopK: maxAllowedTopK + 1}} {
		_, ok := mustNew(t, p, vocab).DistributionAllowed(l, all)
		require.False(t, ok, "%+v", p)
	}
	p := Params{Temperature: 1, TopK: 5}
	_, ok := mustNew(t, p, vocab).DistributionAllowed(l, func(id int32) bool { return id == worstOf(l) })
	require.False(t, ok, "only one allowed token, far beyond the scan's reach")
	inf := slices.Clone(l)
	inf[7] = float32(math.Inf(1))
	_, ok = mustNew(t, p, vocab).DistributionAllowed(inf, all)
	require.False(t, ok, "+Inf logit")
	_, ok = mustNew(t, p, vocab).DistributionAllowed(l, func(int32) bool { return false })
	require.False(t, ok, "nothing allowed")
}

// worstOf returns the least likely token of l.
func worstOf(l []float32) int32 {
	i := 0
	for j, v := range l {
		if v < l[i] {
			i = j
		}
	}
	return int32(i)
}

// TestSampleAllowedMatchesDistribution: drawing through the scan, with
// the masked path where it declines as the constrained decoder does,
// follows the masked row's distribution (chi-square).
func TestSampleAllowedMatchesDistribution(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	// A flat row, so that every cut keeps a few dozen tokens.
	l := make([]float32, 400)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2)
	}
	ok := make([]bool, len(l))
	for i := range ok {
		ok[i] = i%3 != 0
	}
	allowed := func(id int32) bool { return ok[id] }
	masked := maskRow(l, ok)
	n := chiDraws / 4
	for _, p := range []Params{
		{Temperature: 1, TopK: 8},
		{Temperature: 0.5, TopP: 0.7},
		{Temperature: 1, MinP: 0.05},
		{Temperature: 1.2, TopK: 30, TopP: 0.9, MinP: 0.02},
	} {
		p.Seed, p.HasSeed = 99, true
		s := mustNew(t, p, len(l))
		d := s.Distribution(masked).Clone()
		fast := 0
		// Bins expecting at least 20 draws, the rest pooled.
		bins := 0
		for bins < d.Len()-1 && d.Probs[bins]*float64(n) >= 20 {
			bins++
		}
		pv := chiSquare(t, d, n, bins, func() int32 {
			if tok, settled := s.SampleAllowed(l, allowed); settled {
				fast++
				return tok
			}
			return s.Sample(masked)
		})
		t.Logf("%+v: %d tokens, %d of %d draws by the scan, p-value %.4f", p, d.Len(), fast, n, pv)
		require.Greater(t, fast, 0)
		require.Greater(t, pv, chiThreshold, "%+v", p)
	}
}
