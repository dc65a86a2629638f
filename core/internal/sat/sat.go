// Package sat is saturating arithmetic on byte counts: a size that would
// overflow an int64 becomes math.MaxInt64, which no memory budget admits,
// instead of wrapping around to a small number that one would.
package sat

import (
	"math"
	"math/bits"
)

// Mul is a·b for non-negative sizes, math.MaxInt64 on overflow (or for a
// negative operand).
func Mul(a, b int64) int64 {
	if a < 0 || b < 0 {
		return math.MaxInt64
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// Add is a+b for non-negative sizes, math.MaxInt64 on overflow.
func Add(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
