package sample

import (
	"math/rand/v2"
	"testing"
)

const benchVocab = 49152

// benchLogits imitates a language model's output: a broad bulk of unlikely
// tokens (normal, sd 2.5) and a handful of strong candidates well above it.
func benchLogits() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	l := make([]float32, benchVocab)
	for i := range l {
		l[i] = float32(r.NormFloat64() * 2.5)
	}
	for i := 0; i < 20; i++ {
		l[r.IntN(benchVocab)] = 12 + float32(r.NormFloat64()*2)
	}
	return l
}

func benchSample(b *testing.B, p Params) {
	p.Seed, p.HasSeed = 1, true
	s, err := New(p, benchVocab)
	if err != nil {
		b.Fatal(err)
	}
	l := benchLogits()
	for i := 0; i < 64; i++ {
		s.Accept(int32(i * 17))
	}
	b.ReportAllocs()
	for b.Loop() {
		s.Sample(l)
	}
}

func BenchmarkSampleGreedy(b *testing.B) { benchSample(b, Params{}) }
func BenchmarkSampleTemperature(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8})
}
func BenchmarkSampleTopKTopP(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, TopK: 40, TopP: 0.95})
}
func BenchmarkSampleTopPOnly(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, TopP: 0.95})
}
func BenchmarkSampleMinPOnly(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, MinP: 0.05})
}
func BenchmarkSamplePenalties(b *testing.B) {
	benchSample(b, Params{Temperature: 0.8, TopK: 40, TopP: 0.95, RepetitionPenalty: 1.1, FrequencyPenalty: 0.1, PresencePenalty: 0.1})
}
func BenchmarkDistributionDense(b *testing.B) {
	s, _ := New(Params{Temperature: 1, Seed: 1, HasSeed: true}, benchVocab)
	l := benchLogits()
	b.ReportAllocs()
	for b.Loop() {
		s.Distribution(l)
	}
}
