package sample

import "math"

// expTable[j] = 2^(j/expTableSize).
var expTable = func() (t [expTableSize]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / expTableSize)
	}
	return t
}()

const (
	expTableBits = 5
	expTableSize = 1 << expTableBits
	// round52 added to a float64 of magnitude < 2^51 rounds it to an
	// integer held in the low mantissa bits (round-to-nearest-even).
	round52 = 0x1.8p52
)

// expNeg computes e^x for x <= 0 to about 1e-12 relative error, returning 0
// for x < -700 (near the bottom of the normal range, and negligible next to the
// weight 1 of the most likely token) and for NaN.
//
// Why not math.Exp: the sampler evaluates one exponential per vocabulary
// entry (49,152 for SmolLM2) whenever nothing truncates the distribution,
// and math.Exp's general-purpose argument handling costs several times more
// than this. The reduction is x = (m*32 + j)*ln2/32 + r with |r| <= ln2/64,
// so e^x = 2^m * 2^(j/32) * e^r; a degree-4 polynomial for e^r on that tiny
// interval is accurate far below the float32 precision of the logits
// themselves. expNeg(0) is exactly 1, which min-p relies on (the most likely
// token has weight exactly 1).
func expNeg(x float64) float64 {
	if !(x >= -700) {
		return 0
	}
	t := x*(expTableSize/math.Ln2) + round52
	k := int64(math.Float64bits(t)) << 12 >> 12 // sign-extend the 52-bit integer
	kf := t - round52
	r := x - kf*(math.Ln2/expTableSize)
	p := 1 + r*(1+r*(0.5+r*(1.0/6+r*(1.0/24))))
	v := expTable[k&(expTableSize-1)] * p
	// Multiply by 2^m by adding m to the exponent field; v is in
	// [~0.98, ~2.02) and m >= -1010, so the result stays normal.
	m := k >> expTableBits
	return math.Float64frombits(uint64(int64(math.Float64bits(v)) + m<<52))
}
