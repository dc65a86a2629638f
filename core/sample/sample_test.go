package sample

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logitsFor returns logits whose softmax at temperature 1 is probs
// (zero probabilities become -Inf).
func logitsFor(probs ...float64) []float32 {
	l := make([]float32, len(probs))
	for i, p := range probs {
		l[i] = float32(math.Log(p))
	}
	return l
}

func mustNew(t testing.TB, p Params, vocab int) *Sampler {
	t.Helper()
	if !p.HasSeed {
		p.Seed, p.HasSeed = 42, true
	}
	s, err := New(p, vocab)
	require.NoError(t, err)
	return s
}

func ids(d Dist) []int32 { return append([]int32(nil), d.IDs...) }

func TestInvalidParams(t *testing.T) {
	cases := []struct {
		p    Params
		want string
	}{
		{Params{Temperature: -0.1}, "temperature"},
		{Params{Temperature: math.NaN()}, "temperature"},
		{Params{Temperature: math.Inf(1)}, "temperature"},
		{Params{TopK: -1}, "top_k"},
		{Params{TopP: -0.5}, "top_p"},
		{Params{TopP: 1.01}, "top_p"},
		{Params{TopP: math.NaN()}, "top_p"},
		{Params{MinP: -0.01}, "min_p"},
		{Params{MinP: 1.5}, "min_p"},
		{Params{RepetitionPenalty: -1}, "repetition_penalty"},
		{Params{RepetitionPenalty: math.Inf(1)}, "repetition_penalty"},
		{Params{PresencePenalty: math.NaN()}, "presence_penalty"},
		{Params{FrequencyPenalty: math.Inf(-1)}, "frequency_penalty"},
		{Params{RepeatLastN: -2}, "repeat_last_n"},
	}
	for _, c := range cases {
		_, err := New(c.p, 10)
		if assert.Error(t, err, "%+v", c.p) {
			assert.Contains(t, err.Error(), c.want)
		}
	}
	_, err := New(Params{}, 0)
	assert.ErrorContains(t, err, "vocabulary size")

	// Every bad field is reported, not just the first.
	_, err = New(Params{Temperature: -1, TopK: -1, MinP: 2}, 10)
	require.Error(t, err)
	for _, w := range []string{"temperature", "top_k", "min_p"} {
		assert.Contains(t, err.Error(), w)
	}
}

func TestZeroValueSynonyms(t *testing.T) {
	s := mustNew(t, Params{TopK: 100}, 10)
	p := s.Params()
	assert.Equal(t, 0, p.TopK, "top_k above the vocabulary is off")
	assert.Equal(t, 1.0, p.TopP)
	assert.Equal(t, 1.0, p.RepetitionPenalty)
	assert.Equal(t, DefaultRepeatLastN, p.RepeatLastN)
}

func TestGreedyIsArgmax(t *testing.T) {
	s := mustNew(t, Params{}, 6)
	assert.Equal(t, int32(3), s.Sample([]float32{1, 2, 0, 5, 4, -1}))
	// Ties go to the lowest id.
	assert.Equal(t, int32(1), s.Sample([]float32{1, 7, 0, 7, 7, -1}))
	// NaN never wins.
	nan := float32(math.NaN())
	assert.Equal(t, int32(2), s.Sample([]float32{nan, 1, 3, nan, 2, nan}))
	d := s.Distribution([]float32{1, 7, 0, 7, 7, -1})
	assert.Equal(t, []int32{1}, d.IDs)
	assert.Equal(t, []float64{1}, d.Probs)

	r := rand.New(rand.NewPCG(3, 4))
	l := make([]float32, 1000)
	s = mustNew(t, Params{}, len(l))
	for range 100 {
		for i := range l {
			l[i] = float32(r.NormFloat64())
		}
		want := 0
		for i := range l {
			if l[i] > l[want] {
				want = i
			}
		}
		require.Equal(t, int32(want), s.Sample(l))
	}
}

func TestSeedReproducible(t *testing.T) {
	l := benchLogits()
	run := func(seed uint64, p Params) []int32 {
		p.Seed, p.HasSeed = seed, true
		s := mustNew(t, p, len(l))
		out := make([]int32, 200)
		for i := range out {
			out[i] = s.Sample(l)
			s.Accept(out[i])
		}
		return out
	}
	for _, p := range []Params{
		{Temperature: 1.5},
		{Temperature: 1, TopK: 40, TopP: 0.95, RepetitionPenalty: 1.3},
		{Temperature: 1, MinP: 0.001},
	} {
		a, b, c := run(7, p), run(7, p), run(8, p)
		assert.Equal(t, a, b, "same seed, same tokens: %+v", p)
		assert.NotEqual(t, a, c, "different seeds should differ: %+v", p)
	}
	// The uniform stream too.
	s1, s2 := mustNew(t, Params{Seed: 9, HasSeed: true}, 2), mustNew(t, Params{Seed: 9, HasSeed: true}, 2)
	for range 100 {
		u := s1.Uniform()
		require.Equal(t, u, s2.Uniform())
		require.True(t, u >= 0 && u < 1)
	}
	// Unseeded samplers are seeded from crypto/rand.
	u1, _ := New(Params{}, 2)
	u2, _ := New(Params{}, 2)
	assert.NotEqual(t, u1.Uniform(), u2.Uniform())
}

func TestTemperatureDistribution(t *testing.T) {
	l := []float32{2, 1, 0, 1, -3}
	for _, temp := range []float64{0.5, 1, 2} {
		d := mustNew(t, Params{Temperature: temp}, len(l)).Distribution(l)
		var z float64
		for _, v := range l {
			z += math.Exp(float64(v) / temp)
		}
		assert.Equal(t, []int32{0, 1, 3, 2, 4}, ids(d), "sorted by prob, ties by id")
		for i, id := range d.IDs {
			assert.InDelta(t, math.Exp(float64(l[id])/temp)/z, d.Probs[i], 1e-12)
		}
		assert.InDelta(t, 1, sum(d.Probs), 1e-12)
	}
}

func sum(p []float64) (s float64) {
	for _, v := range p {
		s += v
	}
	return s
}

func TestTopK(t *testing.T) {
	l := logitsFor(0.1, 0.3, 0.05, 0.3, 0.25)
	d := mustNew(t, Params{Temperature: 1, TopK: 2}, 5).Distribution(l)
	assert.Equal(t, []int32{1, 3}, ids(d))
	assert.InDeltaSlice(t, []float64{0.5, 0.5}, d.Probs, 1e-6)

	// Ties at the cut: exactly K survive, the lower ids.
	l = []float32{1, 3, 3, 3, 0}
	d = mustNew(t, Params{Temperature: 1, TopK: 2}, 5).Distribution(l)
	assert.Equal(t, []int32{1, 2}, ids(d))
	d = mustNew(t, Params{Temperature: 1, TopK: 1}, 5).Distribution([]float32{0, 0, 0, 0, 0})
	assert.Equal(t, []int32{0}, ids(d))

	// K >= vocab keeps everything.
	for _, k := range []int{5, 6, 1000} {
		d = mustNew(t, Params{Temperature: 1, TopK: k}, 5).Distribution(logitsFor(0.1, 0.3, 0.05, 0.3, 0.25))
		assert.Equal(t, []int32{1, 3, 4, 0, 2}, ids(d), "k=%d", k)
	}

	// NaN ranks below everything, even when it fills the heap first.
	nan := float32(math.NaN())
	d = mustNew(t, Params{Temperature: 1, TopK: 2}, 5).Distribution([]float32{nan, nan, 1, 2, nan})
	assert.Equal(t, []int32{3, 2}, ids(d))
}

func TestTopP(t *testing.T) {
	l := logitsFor(0.1, 0.4, 0.05, 0.3, 0.15)
	// sorted: 1 (.4), 3 (.3), 4 (.15), 0 (.1), 2 (.05)
	for _, c := range []struct {
		p    float64
		want []int32
	}{
		{0.1, []int32{1}},
		{0.4, []int32{1}},        // reached exactly by the first token
		{0.41, []int32{1, 3}},    // just above
		{0.7, []int32{1, 3}},     // exact boundary is inclusive
		{0.85, []int32{1, 3, 4}}, // exact
		{0.9, []int32{1, 3, 4, 0}},
		{0.96, []int32{1, 3, 4, 0, 2}},
		{1, []int32{1, 3, 4, 0, 2}}, // off
	} {
		d := mustNew(t, Params{Temperature: 1, TopP: c.p}, 5).Distribution(l)
		assert.Equal(t, c.want, ids(d), "top_p=%v", c.p)
		assert.InDelta(t, 1, sum(d.Probs), 1e-12)
	}
	// Renormalised over the nucleus.
	d := mustNew(t, Params{Temperature: 1, TopP: 0.7}, 5).Distribution(l)
	assert.InDeltaSlice(t, []float64{0.4 / 0.7, 0.3 / 0.7}, d.Probs, 1e-6)

	// Ties straddling the cut: the lower id goes first and only as many as
	// needed are kept.
	d = mustNew(t, Params{Temperature: 1, TopP: 0.5}, 4).Distribution(logitsFor(0.2, 0.3, 0.3, 0.2))
	assert.Equal(t, []int32{1, 2}, ids(d))
	d = mustNew(t, Params{Temperature: 1, TopP: 0.65}, 4).Distribution(logitsFor(0.2, 0.3, 0.3, 0.2))
	assert.Equal(t, []int32{1, 2, 0}, ids(d))

	// Top-p applies to the top-k survivors, renormalised.
	d = mustNew(t, Params{Temperature: 1, TopK: 2, TopP: 0.6}, 5).Distribution(l)
	assert.Equal(t, []int32{1, 3}, ids(d), "0.4/0.7 = 0.57 < 0.6")
	d = mustNew(t, Params{Temperature: 1, TopK: 2, TopP: 0.55}, 5).Distribution(l)
	assert.Equal(t, []int32{1}, ids(d))
}

func TestMinP(t *testing.T) {
	l := logitsFor(0.1, 0.4, 0.05, 0.3, 0.15)
	for _, c := range []struct {
		p    float64
		want []int32
	}{
		{0.1, []int32{1, 3, 4, 0, 2}},
		{0.125, []int32{1, 3, 4, 0, 2}}, // 0.05 = 0.125*0.4 exactly: kept
		{0.13, []int32{1, 3, 4, 0}},
		{0.25, []int32{1, 3, 4, 0}}, // exact
		{0.375, []int32{1, 3, 4}},   // exact
		{0.75, []int32{1, 3}},       // exact
		{0.8, []int32{1}},
		{1, []int32{1}},
	} {
		d := mustNew(t, Params{Temperature: 1, MinP: c.p}, 5).Distribution(l)
		assert.Equal(t, c.want, ids(d), "min_p=%v", c.p)
		assert.InDelta(t, 1, sum(d.Probs), 1e-12)
	}
	// min_p = 1 keeps every token tied for most likely.
	d := mustNew(t, Params{Temperature: 1, MinP: 1}, 5).Distribution([]float32{1, 4, 2, 4, 4})
	assert.Equal(t, []int32{1, 3, 4}, ids(d))
	assert.InDeltaSlice(t, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}, d.Probs, 1e-12)

	// Min-p is judged at the sampling temperature: at T=2 the ratios are
	// square roots of those at T=1 (0.05/0.4 = 1/8 becomes 0.354).
	d = mustNew(t, Params{Temperature: 2, MinP: 0.3}, 5).Distribution(l)
	assert.Equal(t, []int32{1, 3, 4, 0, 2}, ids(d))
	d = mustNew(t, Params{Temperature: 2, MinP: 0.4}, 5).Distribution(l)
	assert.Equal(t, []int32{1, 3, 4, 0}, ids(d))

	// After top-p: top-p 0.9 keeps {1,3,4,0}; min-p 0.3 then drops 0
	// (0.1 < 0.12).
	d = mustNew(t, Params{Temperature: 1, TopP: 0.9, MinP: 0.3}, 5).Distribution(l)
	assert.Equal(t, []int32{1, 3, 4}, ids(d))
	assert.InDeltaSlice(t, []float64{0.4 / 0.85, 0.3 / 0.85, 0.15 / 0.85}, d.Probs, 1e-6)
}

func TestInfiniteLogits(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	s := mustNew(t, Params{Temperature: 1}, 5)
	d := s.Distribution([]float32{1, inf, 2, inf, nan})
	assert.Equal(t, []int32{1, 3}, ids(d))
	assert.Equal(t, []float64{0.5, 0.5}, d.Probs)
	for range 100 {
		id := s.Sample([]float32{1, inf, 2, inf, nan})
		require.True(t, id == 1 || id == 3, "got %d", id)
	}
	// Nothing above -Inf: uniform rather than a hang or NaN.
	ninf := float32(math.Inf(-1))
	d = s.Distribution([]float32{ninf, nan, ninf, ninf, ninf})
	assert.Equal(t, 5, d.Len())
	for range 100 {
		id := s.Sample([]float32{ninf, nan, ninf, ninf, ninf})
		require.True(t, id >= 0 && id < 5)
	}
	// A NaN logit is never sampled.
	for range 1000 {
		require.NotEqual(t, int32(1), s.Sample([]float32{0, nan, 0, 0, 0}))
	}
}

func TestPenalties(t *testing.T) {
	l := []float32{2, -1, 0.5, 3, -2}
	s := mustNew(t, Params{RepetitionPenalty: 2, RepeatLastN: 4}, 5)
	for _, id := range []int32{0, 1, 1} {
		s.Accept(id)
	}
	got := s.penalise(l)
	// positive logit divided, negative multiplied, unseen untouched
	assert.Equal(t, []float32{1, -2, 0.5, 3, -2}, got)
	assert.Equal(t, []float32{2, -1, 0.5, 3, -2}, l, "caller's logits untouched")

	s = mustNew(t, Params{PresencePenalty: 0.5, FrequencyPenalty: 0.25, RepeatLastN: 4}, 5)
	for _, id := range []int32{0, 1, 1, 1} {
		s.Accept(id)
	}
	// 0: 2 - 0.5 - 0.25; 1: -1 - 0.5 - 3*0.25
	assert.Equal(t, []float32{1.25, -2.25, 0.5, 3, -2}, s.penalise(l))

	// All three: repetition first, then the subtractive penalties.
	s = mustNew(t, Params{RepetitionPenalty: 1.25, PresencePenalty: 1, FrequencyPenalty: 0.5}, 5)
	for _, id := range []int32{3, 3, 4} {
		s.Accept(id)
	}
	assert.InDeltaSlice(t, []float64{2, -1, 0.5, 3/1.25 - 1 - 1, -2*1.25 - 1 - 0.5}, f64(s.penalise(l)), 1e-6)

	// The window slides: with RepeatLastN 2, only the last two count.
	s = mustNew(t, Params{FrequencyPenalty: 1, RepeatLastN: 2}, 5)
	for _, id := range []int32{0, 0, 2, 3} {
		s.Accept(id)
	}
	assert.Equal(t, []float32{2, -1, -0.5, 2, -2}, s.penalise(l))
	s.Accept(3)
	assert.Equal(t, []float32{2, -1, 0.5, 1, -2}, s.penalise(l))
	s.Reset()
	assert.Equal(t, l, s.penalise(l))

	// Penalties change the greedy choice.
	s = mustNew(t, Params{RepetitionPenalty: 2}, 5)
	assert.Equal(t, int32(3), s.Sample(l))
	s.Accept(3)
	assert.Equal(t, int32(0), s.Sample(l), "3/2 = 1.5 < 2")

	assert.Panics(t, func() { s.Accept(5) })
	assert.Panics(t, func() { s.Accept(-1) })
	assert.Panics(t, func() { s.Sample(l[:4]) })
}

func f64(l []float32) []float64 {
	out := make([]float64, len(l))
	for i, v := range l {
		out[i] = float64(v)
	}
	return out
}

// reference is a direct, slow transcription of the documented pipeline:
// math.Exp softmax over the whole vocabulary, full sort, then each cut with
// renormalisation. Distribution must agree with it.
func reference(p Params, l []float32) (ids []int32, probs []float64) {
	p, _ = p.normalise(len(l))
	type tp struct {
		id int32
		p  float64
	}
	m := math.Inf(-1)
	for _, v := range l {
		m = math.Max(m, float64(v))
	}
	var all []tp
	var z float64
	for i, v := range l {
		w := math.Exp((float64(v) - m) / p.Temperature)
		all = append(all, tp{int32(i), w})
		z += w
	}
	for i := range all {
		all[i].p /= z
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].p > all[j].p })
	renorm := func() {
		var z float64
		for _, c := range all {
			z += c.p
		}
		for i := range all {
			all[i].p /= z
		}
	}
	if p.TopK > 0 && p.TopK < len(all) {
		all = all[:p.TopK]
		renorm()
	}
	if p.TopP < 1 {
		var cum float64
		for i, c := range all {
			cum += c.p
			if cum >= p.TopP*(1-boundarySlack) {
				all = all[:i+1]
				break
			}
		}
		renorm()
	}
	if p.MinP > 0 {
		thr := p.MinP * all[0].p
		n := len(all)
		for i, c := range all {
			if c.p < thr*(1-boundarySlack) {
				n = i
				break
			}
		}
		all = all[:n]
		renorm()
	}
	for _, c := range all {
		ids = append(ids, c.id)
		probs = append(probs, c.p)
	}
	return ids, probs
}

func TestDistributionMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 300 {
		vocab := 1 + r.IntN(3000)
		l := make([]float32, vocab)
		sd := []float64{0.3, 2, 6}[trial%3]
		for i := range l {
			l[i] = float32(r.NormFloat64() * sd)
		}
		p := Params{Temperature: []float64{0.3, 0.8, 1, 1.7}[r.IntN(4)]}
		if r.IntN(2) == 0 {
			p.TopK = r.IntN(vocab + 5)
		}
		if r.IntN(2) == 0 {
			p.TopP = r.Float64()
		}
		if r.IntN(2) == 0 {
			p.MinP = r.Float64() * r.Float64()
		}
		wantIDs, wantP := reference(p, l)
		d := mustNew(t, p, vocab).Distribution(l)
		require.Equal(t, wantIDs, ids(d), "trial %d %+v", trial, p)
		for i := range wantP {
			require.InDelta(t, wantP[i], d.Probs[i], 1e-9*math.Max(1, wantP[i]))
		}
		for i, id := range d.IDs {
			require.Equal(t, d.Probs[i], d.Prob(id))
		}
	}
}

func TestDistHelpers(t *testing.T) {
	d := Dist{IDs: []int32{4, 1, 7}, Probs: []float64{0.5, 0.3, 0.2}}
	assert.Equal(t, 0.3, d.Prob(1))
	assert.Equal(t, 0.0, d.Prob(2))
	assert.Equal(t, int32(4), d.Draw(0))
	assert.Equal(t, int32(4), d.Draw(0.49))
	assert.Equal(t, int32(1), d.Draw(0.5))
	assert.Equal(t, int32(7), d.Draw(0.9999999))
	c := d.Clone()
	c.Probs[0] = 0
	assert.Equal(t, 0.5, d.Probs[0])

	// A Dist from a sampler is overwritten by the next call; a clone isn't.
	s := mustNew(t, Params{Temperature: 1, TopK: 2}, 4)
	a := s.Distribution([]float32{0, 1, 2, 3})
	kept := a.Clone()
	s.Distribution([]float32{3, 2, 1, 0})
	assert.Equal(t, []int32{3, 2}, kept.IDs)
}

func TestNoAllocationsAfterWarmUp(t *testing.T) {
	l := benchLogits()
	for _, p := range []Params{
		{},
		{Temperature: 0.8},
		{Temperature: 0.8, TopK: 40, TopP: 0.95},
		{Temperature: 0.8, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: 0.2},
		{Temperature: 0.8, MinP: 0.05},
	} {
		s := mustNew(t, p, len(l))
		for i := range 100 {
			s.Accept(int32(i))
		}
		s.Sample(l)
		s.Distribution(l)
		n := testing.AllocsPerRun(20, func() {
			s.Accept(s.Sample(l))
			s.Distribution(l)
		})
		assert.Zero(t, n, "%+v", p)
	}
}

func TestNthIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	p := make([]uint8, 5000)
	for i := range p {
		p[i] = uint8(r.IntN(3))
	}
	for c := uint8(0); c < 3; c++ {
		var want []int
		for i, v := range p {
			if v == c {
				want = append(want, i)
			}
		}
		for k, w := range want {
			require.Equal(t, w, nthIndex(p, c, k))
		}
	}
}
