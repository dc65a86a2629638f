package spec

import (
	"math"
	"slices"
)

// Dist is a probability distribution over token ids, as the target's sampler
// leaves it after temperature, top-k, top-p and min-p. Dense when IDs is nil
// (P[id] is the probability of id), sparse otherwise (P[i] is the
// probability of IDs[i]; ids not listed have probability 0). P sums to 1 up
// to rounding.
type Dist struct {
	IDs []int32
	P   []float32
}

// Prob is the probability of id.
func (d Dist) Prob(id int32) float64 {
	if d.IDs == nil {
		if id < 0 || int(id) >= len(d.P) {
			return 0
		}
		return float64(d.P[id])
	}
	for i, x := range d.IDs {
		if x == id {
			return float64(d.P[i])
		}
	}
	return 0
}

// Argmax is the most probable token; ties go to the lowest id, as a plain
// greedy sampler that scans the vocabulary in order would choose. NaN
// probabilities never win; a distribution with nothing else (all NaN or
// -Inf) yields its lowest id rather than an invalid one, so a verifier
// always emits a real token. Only an empty distribution yields -1.
func Argmax(d Dist) int32 {
	best, bp := int32(-1), float32(math.Inf(-1))
	if d.IDs == nil {
		for i, p := range d.P {
			if p > bp {
				best, bp = int32(i), p
			}
		}
		if best < 0 && len(d.P) > 0 {
			return 0
		}
		return best
	}
	for i, p := range d.P {
		if id := d.IDs[i]; p > bp || (p == bp && id < best) {
			best, bp = id, p
		}
	}
	if best < 0 && len(d.IDs) > 0 {
		return slices.Min(d.IDs)
	}
	return best
}

// Source is an injected source of randomness for sampling verification.
type Source interface {
	// Uniform returns a uniform float64 in [0, 1).
	Uniform() float64
}

// SplitMix is a small, fast, seedable Source (SplitMix64). The zero value is
// a valid generator seeded with 0.
type SplitMix struct{ s uint64 }

// NewSplitMix returns a SplitMix seeded with seed.
func NewSplitMix(seed uint64) *SplitMix { return &SplitMix{s: seed} }

// Uint64 returns 64 random bits.
func (r *SplitMix) Uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Uniform returns a uniform float64 in [0, 1) with 53 random bits.
func (r *SplitMix) Uniform() float64 { return float64(r.Uint64()>>11) * 0x1p-53 }
