package sample

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// argmaxRef is the plain loop argmax replaced: strictly greater wins, so
// ties go to the lowest index, NaN never wins, nothing above −Inf gives 0.
func argmaxRef(l []float32) int32 {
	best, bl := 0, float32(math.Inf(-1))
	for i, v := range l {
		if v > bl {
			best, bl = i, v
		}
	}
	return int32(best)
}

// argmax and maxLogit (the AVX2 scans where the CPU has them) give the
// plain loops' answers on rows of every length around the scans' block,
// with the maximum anywhere, ties, NaN, ±Inf and signed zeros.
func TestArgmaxMatchesTheLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	cases := 0
	for _, n := range []int{0, 1, 7, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 49152, 49153} {
		for trial := range 40 {
			l := make([]float32, n)
			for i := range l {
				l[i] = float32(rng.NormFloat64() * 3)
			}
			if n > 0 {
				switch trial % 10 {
				case 1: // a tie at the maximum
					i, j := rng.IntN(n), rng.IntN(n)
					l[i], l[j] = 50, 50
				case 2: // NaNs everywhere, one of them at the front
					for i := range l {
						if rng.IntN(3) == 0 {
							l[i] = nan
						}
					}
					l[0] = nan
				case 3: // all NaN
					for i := range l {
						l[i] = nan
					}
				case 4: // all −Inf but a NaN
					for i := range l {
						l[i] = -inf
					}
					l[rng.IntN(n)] = nan
				case 5: // +Inf, twice
					l[rng.IntN(n)], l[rng.IntN(n)] = inf, inf
				case 6: // zeros of both signs at the top
					for i := range l {
						l[i] = -float32(math.Abs(float64(l[i]))) - 1
					}
					l[rng.IntN(n)], l[rng.IntN(n)] = negZero, 0
				case 7: // the maximum in the tail past the last block
					l[n-1] = 99
				case 8: // −Inf and finite
					l[rng.IntN(n)] = -inf
				}
			}
			require.Equal(t, argmaxRef(l), argmax(l), "n=%d trial %d", n, trial)
			want, got := maxLogitGo(l), maxLogit(l)
			require.Equal(t, math.Float32bits(want) == math.Float32bits(got) || want == got, true, "n=%d trial %d: %v vs %v", n, trial, want, got)
			cases++
		}
	}
	require.Equal(t, 15*40, cases)
}

func BenchmarkArgmax(b *testing.B) {
	l := benchLogits()
	for b.Loop() {
		argmax(l)
	}
}

func BenchmarkArgmaxLoop(b *testing.B) {
	l := benchLogits()
	for b.Loop() {
		argmaxRef(l)
	}
}
