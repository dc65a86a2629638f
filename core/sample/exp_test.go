package sample

import (
	"math"
	"testing"
)

func TestExpNegAccuracy(t *testing.T) {
	if got := expNeg(0); got != 1 {
		t.Fatalf("expNeg(0) = %v, want exactly 1", got)
	}
	for _, x := range []float64{math.NaN(), math.Inf(-1), -700.5, -1e9} {
		if got := expNeg(x); got != 0 {
			t.Errorf("expNeg(%v) = %v, want 0", x, got)
		}
	}
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := -700 * float64(i) / 2_000_000
		want := math.Exp(x)
		got := expNeg(x)
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	// Small arguments are where the logits of likely tokens land.
	for i := 0; i <= 100_000; i++ {
		x := -float64(i) * 1e-5
		if rel := math.Abs(expNeg(x)-math.Exp(x)) / math.Exp(x); rel > worst {
			worst = rel
		}
	}
	if worst > 1e-11 {
		t.Fatalf("worst relative error %g, want <= 1e-11", worst)
	}
	t.Logf("worst relative error %g", worst)
}

func BenchmarkExpNeg(b *testing.B) {
	x := make([]float64, 4096)
	for i := range x {
		x[i] = -float64(i) / 200
	}
	var sink float64
	for b.Loop() {
		for _, v := range x {
			sink += expNeg(v)
		}
	}
	_ = sink
}

func BenchmarkMathExp(b *testing.B) {
	x := make([]float64, 4096)
	for i := range x {
		x[i] = -float64(i) / 200
	}
	var sink float64
	for b.Loop() {
		for _, v := range x {
			sink += math.Exp(v)
		}
	}
	_ = sink
}
