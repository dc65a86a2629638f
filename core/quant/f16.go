package quant

import "math"

// Half-precision helpers. GGML stores every block scale as an IEEE 754
// binary16 ("f16": 1 sign bit, 5 exponent bits with bias 15, 10 mantissa
// bits) and some tensors as bfloat16 ("bf16": the top 16 bits of a float32,
// i.e. 1 sign, 8 exponent, 7 mantissa bits).

// F16ToF32 converts an IEEE binary16 value to float32 (exactly: every f16 is
// representable as a float32).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // Inf or NaN: keep the payload.
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0: // normal: rebias the exponent from 15 to 127.
		return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	default: // subnormal: man × 2^-24, a normal float32.
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
}

// F32ToF16 converts a float32 to IEEE binary16 with round-to-nearest-even,
// producing subnormals, ±Inf on overflow and a quiet NaN for NaN.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // the f16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// f16 subnormal k×2^-24 with k = man24 × 2^(exp-126).
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to ±0
		}
		man |= 0x800000
		shift := uint32(14 - e)
		k := man >> shift
		rem := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && k&1 == 1) {
			k++ // may carry into the smallest normal, which encodes correctly
		}
		return sign | uint16(k)
	}
	k := man >> 13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && k&1 == 1) {
		k++
	}
	// A mantissa carry ripples into the exponent; reaching 0x1f gives Inf.
	return sign | uint16(uint32(e)<<10+k)
}

// BF16ToF32 widens a bfloat16 value (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds a float32 to bfloat16, nearest-even; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// le16 and friends read little-endian fields of a block. Each checks its
// last byte first: with one bounds check the compiler merges the byte
// accesses into one load or store (put32 byte by byte was a third of
// packing a model at load).
func le16(b []byte) uint16 {
	_ = b[1]
	return uint16(b[0]) | uint16(b[1])<<8
}
func le32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
func put16(b []byte, v uint16) {
	_ = b[1]
	b[0], b[1] = byte(v), byte(v>>8)
}
func put32(b []byte, v uint32) {
	_ = b[3]
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// f16at reads the f16 at b[0:2] as float32.
func f16at(b []byte) float32 { return F16ToF32(le16(b)) }
