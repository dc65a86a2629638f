package sample

import (
	"math"
	"testing"

	"github.com/lmstream/lmstream/internal/race"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gammaQ is the regularised upper incomplete gamma function Q(a, x), so the
// p-value of a chi-square statistic c with k degrees of freedom is
// gammaQ(k/2, c/2). Series for x < a+1, Lentz's continued fraction beyond
// (Numerical Recipes' split), both to near machine precision.
func gammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	front := math.Exp(-x + a*math.Log(x) - lg)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 1000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if term < sum*1e-16 {
				break
			}
		}
		return 1 - front*sum
	}
	const tiny = 1e-300
	b := x + 1 - a
	c, d := 1/tiny, 1/b
	h := d
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	return front * h
}

func TestGammaQ(t *testing.T) {
	// Known chi-square critical values: P(X > x) for k degrees of freedom.
	for _, c := range []struct{ k, x, p float64 }{
		{1, 3.841458820694124, 0.05},
		{7, 14.067140449340169, 0.05},
		{7, 24.321886347856854, 0.001},
		{10, 2.558212432733509, 0.99},
		{50, 67.50480655, 0.05},
	} {
		assert.InDelta(t, c.p, gammaQ(c.k/2, c.x/2), 1e-8, "k=%v x=%v", c.k, c.x)
	}
}

// chiSquare draws n tokens with draw and returns the p-value of the counts
// against d's probabilities. Tokens outside d fail the test. Tokens beyond
// the first maxBins in d's order are pooled into one bin so every bin's
// expected count stays large.
func chiSquare(t *testing.T, d Dist, n int, maxBins int, draw func() int32) float64 {
	t.Helper()
	bin := map[int32]int{}
	for i, id := range d.IDs {
		bin[id] = min(i, maxBins)
	}
	bins := min(len(d.IDs), maxBins+1)
	want := make([]float64, bins)
	for i, p := range d.Probs {
		want[min(i, maxBins)] += p * float64(n)
	}
	got := make([]float64, bins)
	for range n {
		id := draw()
		b, ok := bin[id]
		require.True(t, ok, "drew token %d outside the distribution", id)
		got[b]++
	}
	var chi float64
	for i := range want {
		require.Greater(t, want[i], 5.0, "bin %d too small for the test", i)
		chi += (got[i] - want[i]) * (got[i] - want[i]) / want[i]
	}
	return gammaQ(float64(bins-1)/2, chi/2)
}

const (
	chiDraws = 200_000
	// A correct sampler fails with this probability; with fixed seeds the
	// outcome is deterministic anyway, so it only guards against edits.
	chiThreshold = 1e-4
)

func TestSampleMatchesDistribution(t *testing.T) {
	small := []float32{1.2, -0.3, 2.5, 0.1, 2.4, -1, 0.8, 1.9}
	for _, p := range []Params{
		{Temperature: 1},              // rejection sampler
		{Temperature: 0.6},            // rejection sampler, sharper
		{Temperature: 3},              // rejection sampler, flat
		{Temperature: 1, TopK: 5},     // Dist.Draw path
		{Temperature: 1.2, TopP: 0.9}, // top-p without top-k
		{Temperature: 1, MinP: 0.1},   // min-p alone
		{Temperature: 0.9, TopK: 6, TopP: 0.95, MinP: 0.05},
	} {
		p.Seed, p.HasSeed = 2024, true
		s := mustNew(t, p, len(small))
		d := s.Distribution(small).Clone()
		pv := chiSquare(t, d, chiDraws, 64, func() int32 { return s.Sample(small) })
		assert.Greater(t, pv, chiThreshold, "%+v: p-value %g", p, pv)
		t.Logf("%+v: %d tokens, p-value %.4f", p, d.Len(), pv)
	}
}

func TestSampleMatchesDistributionLargeVocab(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("slow (20k passes over 49,152 logits); skipped with -short and -race")
	}
	l := benchLogits()
	// Fewer draws than the small-vocabulary test (each costs a pass over
	// the vocabulary); the pooled tail bin keeps expected counts large.
	for _, temp := range []float64{0.7, 1.5} {
		s := mustNew(t, Params{Temperature: temp, Seed: 77, HasSeed: true}, len(l))
		d := s.Distribution(l).Clone()
		pv := chiSquare(t, d, 20_000, 12, func() int32 { return s.Sample(l) })
		assert.Greater(t, pv, chiThreshold, "T=%v: p-value %g", temp, pv)
		t.Logf("T=%v: p-value %.4f", temp, pv)
	}
}

// TestChiSquareRejectsBias shows the test has teeth: samplers with small,
// realistic bugs are rejected at the same threshold and draw count.
func TestChiSquareRejectsBias(t *testing.T) {
	small := []float32{1.2, -0.3, 2.5, 0.1, 2.4, -1, 0.8, 1.9}
	s := mustNew(t, Params{Temperature: 1, Seed: 2024, HasSeed: true}, len(small))
	d := s.Distribution(small).Clone()

	// The uniform draw scaled by 0.99, as if a sum had been off by 1%: the
	// least likely token loses a third of its mass.
	pv := chiSquare(t, d, chiDraws, 64, func() int32 { return d.Draw(s.Uniform() * 0.99) })
	assert.Less(t, pv, chiThreshold, "scaled draw: p-value %g", pv)

	// Temperature applied as 1.05 instead of 1.
	s2 := mustNew(t, Params{Temperature: 1.05, Seed: 2024, HasSeed: true}, len(small))
	pv = chiSquare(t, d, chiDraws, 64, func() int32 { return s2.Sample(small) })
	assert.Less(t, pv, chiThreshold, "temperature 1.05: p-value %g", pv)
	t.Logf("biased samplers rejected")
}
