package sample

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within runs f on its own goroutine and fails the test if it has not
// returned after d. A sampler that spins cannot be stopped, so the
// goroutine is abandoned; the failure is what matters.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// Issue 10, row 1: a subnormal temperature made 1/T +Inf, every token
// landed in the last bucket with weight NaN or 0, and sampleDense's
// rejection loop never accepted (2e-308 finished, 35 times slower).
// Temperatures below MinTemperature are now greedy.
func TestTinyTemperatureIsGreedy(t *testing.T) {
	l := benchLogits()
	want := argmax(l)
	for _, temp := range []float64{1e-320, 1e-310, 2e-308, 1e-300, 1e-9, MinTemperature / 2} {
		for _, p := range []Params{
			{Temperature: temp},
			{Temperature: temp, TopK: 40},
			{Temperature: temp, TopP: 0.9},
			{Temperature: temp, MinP: 0.05},
			{Temperature: temp, RepetitionPenalty: 1.3},
		} {
			s := mustNew(t, p, len(l))
			assert.Zero(t, s.Params().Temperature, "T=%g is greedy", temp)
			within(t, 5*time.Second, "Sample", func() {
				for range 3 {
					assert.Equal(t, want, s.Sample(l), "%+v", p)
				}
			})
			d := s.Distribution(l)
			assert.Equal(t, []int32{want}, d.IDs)
		}
	}
	// MinTemperature itself samples.
	s := mustNew(t, Params{Temperature: MinTemperature}, len(l))
	assert.Equal(t, MinTemperature, s.Params().Temperature)
	within(t, 5*time.Second, "Sample at MinTemperature", func() {
		for range 100 {
			s.Sample(l)
		}
	})
}

// The rejection loop itself is bounded whatever it is handed: an infinite
// 1/T (which New no longer lets through, so sampleDense is called
// directly), NaN and infinite logits. Without the bound each of these
// spins forever.
func TestSampleDenseIsBounded(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	cases := []struct {
		name string
		l    []float32
		invT float64
		want int32 // -1: any valid id
	}{
		{"infinite 1/T", []float32{0.5, 3, 1, 2.9}, math.Inf(1), 1},
		{"NaN 1/T", []float32{0.5, 3, 1, 2.9}, math.NaN(), 1},
		{"huge 1/T", []float32{0.5, 3, 1, 2.9}, 1e308, 1},
		{"NaN logits", []float32{nan, nan, 2, nan}, math.Inf(1), 2},
		{"all NaN", []float32{nan, nan, nan}, 1, -1},
		{"infinite logit", []float32{1, inf, 2}, math.Inf(1), -1},
	}
	for _, c := range cases {
		s := mustNew(t, Params{Temperature: 1}, len(c.l))
		within(t, 5*time.Second, c.name, func() {
			for range 20 {
				l, lmax := s.tame(c.l)
				got := s.sampleDense(l, lmax, c.invT)
				require.True(t, got >= 0 && int(got) < len(c.l), "%s: %d", c.name, got)
				if c.want >= 0 {
					assert.Equal(t, c.want, got, c.name)
				}
			}
		})
	}
}

// sampleExact, the fallback of the bounded loop, draws from the same
// distribution as everything else.
func TestSampleExactMatchesDistribution(t *testing.T) {
	small := []float32{1.2, -0.3, 2.5, 0.1, 2.4, -1, 0.8, 1.9}
	for _, temp := range []float64{0.6, 1, 3} {
		s := mustNew(t, Params{Temperature: temp, Seed: 9, HasSeed: true}, len(small))
		d := s.Distribution(small).Clone()
		lmax := maxLogit(small)
		pv := chiSquare(t, d, chiDraws, 64, func() int32 { return s.sampleExact(small, lmax, 1/temp) })
		assert.Greater(t, pv, chiThreshold, "T=%v: p-value %g", temp, pv)
	}
}

// Issue 10, row 2: repeat_last_n 2^40 with a penalty active made New
// allocate the whole window up front, a fatal out-of-memory abort inside
// lms_submit. The window is bounded, and its ring grows with the tokens
// accepted.
func TestRepeatLastNBounded(t *testing.T) {
	for _, n := range []int{1 << 36, 1 << 40, MaxRepeatLastN + 1, math.MaxInt} {
		_, err := New(Params{RepetitionPenalty: 1.1, RepeatLastN: n}, 10)
		assert.ErrorContains(t, err, "repeat_last_n", "%d", n)
	}
	s := mustNew(t, Params{RepetitionPenalty: 1.1, RepeatLastN: MaxRepeatLastN}, 10)
	assert.LessOrEqual(t, cap(s.ring), ringPrealloc, "the ring is not allocated whole")
	for i := range 10_000 {
		s.Accept(int32(i % 10))
	}
	assert.Equal(t, 10_000, s.ringN)
	for id := range int32(10) {
		assert.Equal(t, int32(1000), s.counts[id])
	}

	// A window longer than ringPrealloc slides like a short one once full.
	s = mustNew(t, Params{FrequencyPenalty: 1, RepeatLastN: ringPrealloc + 3}, 3)
	for range ringPrealloc + 3 {
		s.Accept(0)
	}
	s.Accept(1)
	s.Accept(2)
	assert.Equal(t, []int32{ringPrealloc + 1, 1, 1}, s.counts)
	assert.Equal(t, []float32{-float32(ringPrealloc + 1), -1, -1}, s.penalise([]float32{0, 0, 0}))
	s.Reset()
	assert.Equal(t, []int32{0, 0, 0}, s.counts)
	assert.Equal(t, []float32{0, 0, 0}, s.penalise([]float32{0, 0, 0}))
}

// The penalties are bounded so that, applied in float32, they cannot turn
// finite logits into infinities or NaN.
func TestPenaltyBounds(t *testing.T) {
	for _, p := range []Params{
		{RepetitionPenalty: 1e-300},
		{RepetitionPenalty: 0.005},
		{RepetitionPenalty: 1e300},
		{RepetitionPenalty: 101},
		{PresencePenalty: 1e300},
		{PresencePenalty: -101},
		{FrequencyPenalty: 1e39},
		{Temperature: 101},
		{Temperature: 1e300},
	} {
		_, err := New(p, 10)
		assert.Error(t, err, "%+v", p)
	}
	l := []float32{0, 3e38, -3e38, 1}
	for _, p := range []Params{
		{RepetitionPenalty: MinRepetitionPenalty, PresencePenalty: MaxAdditivePenalty, FrequencyPenalty: MaxAdditivePenalty},
		{RepetitionPenalty: MaxRepetitionPenalty, PresencePenalty: -MaxAdditivePenalty, FrequencyPenalty: -MaxAdditivePenalty},
	} {
		s := mustNew(t, p, len(l))
		for i := range 4 {
			s.Accept(int32(i))
		}
		for _, v := range s.penalise(l) {
			assert.False(t, math.IsNaN(float64(v)), "%+v: %v", p, s.penalise(l))
		}
		p.Temperature = 1
		s = mustNew(t, p, len(l))
		for i := range 4 {
			s.Accept(int32(i))
		}
		within(t, 5*time.Second, "Sample", func() {
			for range 10 {
				s.Sample(l)
			}
		})
	}
}
