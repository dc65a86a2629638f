package sample

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
)

// xoshiro256** (Blackman and Vigna): 256 bits of state, period 2^256-1,
// passes BigCrush, and costs a handful of shifts and multiplies per draw.
// It is written out here rather than taken from math/rand/v2 so that the
// stream for a given seed is fixed by this package alone and cannot change
// under a Go upgrade: a seeded request must replay identically.
type rng struct{ s [4]uint64 }

// splitmix64 expands a 64-bit seed into well-mixed state words; seeding
// xoshiro directly from a small seed would start it in a low-entropy corner
// of its state space (and an all-zero state never leaves zero).
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *rng) seed(seed uint64) {
	for i := range r.s {
		r.s[i] = splitmix64(&seed)
	}
}

func (r *rng) seedRandom() {
	var b [8]byte
	// crypto/rand.Read never returns an error on supported platforms (it
	// crashes the program instead), so there is nothing to handle.
	_, _ = rand.Read(b[:])
	r.seed(binary.LittleEndian.Uint64(b[:]))
}

func (r *rng) next() uint64 {
	s := &r.s
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// float64 returns a uniform value in [0, 1) with 53 random bits, so every
// representable multiple of 2^-53 is equally likely and 1 is never returned.
func (r *rng) float64() float64 {
	return float64(r.next()>>11) * 0x1p-53
}
