package quant

import "math"

// IQ4_NL and IQ4_XS: 4-bit indices into one fixed non-linear table of
// int8 levels (denser near zero, where most weights are), times a scale.
//
//	IQ4_NL 18 B: d f16 | qs[16]    x = d·iq4Levels[q]; element j (0..15)
//	    in the low nibble of qs[j], element j+16 in its high nibble (as Q4_0).
//	    Dotted against Q8_0.
//	IQ4_XS 136 B: d f16 | scales_h u16 | scales_l[4] | qs[128]
//	    8 sub-blocks of 32, each laid out as an IQ4_NL block's nibbles in
//	    qs[16s:16s+16], with a 6-bit scale ls_s (low 4 bits: nibble s%2 of
//	    scales_l[s/2]; top 2 bits: bits 2s, 2s+1 of scales_h):
//	    x = d·(ls_s − 32)·iq4Levels[q]. Dotted against Q8_K.

// iq4Levels is GGML's IQ4_NL/IQ4_XS value table (a fact of the format).
var iq4Levels = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// scalesIQ4XS returns the eight sub-block scales of an IQ4_XS block, less
// their offset of 32.
func scalesIQ4XS(b []byte) (sc [8]int) {
	h := le16(b[2:])
	for s := 0; s < 8; s++ {
		lo := int(b[4+s/2] >> (4 * (s % 2)) & 0xf)
		sc[s] = lo | int(h>>(2*s)&3)<<4 - 32
	}
	return sc
}

func dequantIQ4NL(b []byte, y []float32) {
	d := f16at(b)
	for j := 0; j < 16; j++ {
		y[j] = d * float32(iq4Levels[b[2+j]&0xf])
		y[j+16] = d * float32(iq4Levels[b[2+j]>>4])
	}
}

func dequantIQ4XS(b []byte, y []float32) {
	d := f16at(b)
	sc := scalesIQ4XS(b)
	for s := 0; s < 8; s++ {
		dl := d * float32(sc[s])
		qs := b[8+16*s : 8+16*s+16]
		for j := 0; j < 16; j++ {
			y[32*s+j] = dl * float32(iq4Levels[qs[j]&0xf])
			y[32*s+j+16] = dl * float32(iq4Levels[qs[j]>>4])
		}
	}
}

// iq4Sum is Σ iq4Levels[q]·x over the 32 elements of nibbles qs[0:16]
// against the int8s xq[0:32].
func iq4Sum(qs, xq []byte) int {
	s := 0
	for j := 0; j < 16; j++ {
		s += int(iq4Levels[qs[j]&0xf]) * int(int8(xq[j]))
		s += int(iq4Levels[qs[j]>>4]) * int(int8(xq[j+16]))
	}
	return s
}

// DotIQ4_NLQ8_0Generic: Σ_b d_w·d_x·Σ_j iq4Levels[q_j]·x_j.
func DotIQ4_NLQ8_0Generic(w, x []byte) float32 {
	nb := len(w) / 18
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[18*i:18*i+18], x[34*i:34*i+34]
		sum += f16at(b) * f16at(a) * float32(iq4Sum(b[2:18], a[2:34]))
	}
	return sum
}

// DotIQ4_XSQ8_KGeneric per super-block: d·d_x·Σ_s (ls_s−32)·Σ iq4Levels[q]·x.
func DotIQ4_XSQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 136
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[136*i:136*i+136], x[292*i:292*i+292]
		dx, xq, _ := q8k(a)
		sc := scalesIQ4XS(b)
		sumi := 0
		for s := 0; s < 8; s++ {
			sumi += sc[s] * iq4Sum(b[8+16*s:8+16*s+16], xq[32*s:32*s+32])
		}
		sum += dx * f16at(b) * float32(sumi)
	}
	return sum
}

// nearestLevel is the index of the first entry of levels closest to v.
func nearestLevel(levels []float32, v float32) int {
	best, bd := 0, float32(math.Inf(1))
	for i, l := range levels {
		if d := float32(math.Abs(float64(v - l))); d < bd {
			best, bd = i, d
		}
	}
	return best
}

var iq4LevelsF = func() (f [16]float32) {
	for i, v := range iq4Levels {
		f[i] = float32(v)
	}
	return f
}()

// iq4Pack writes the nibbles of the 32 values x/d (nearest level each).
func iq4Pack(x []float32, d float32, qs []byte) {
	id := inv(d)
	for j := 0; j < 16; j++ {
		lo := nearestLevel(iq4LevelsF[:], x[j]*id)
		hi := nearestLevel(iq4LevelsF[:], x[j+16]*id)
		qs[j] = byte(lo | hi<<4)
	}
}

// quantizeIQ4NL maps the block's value of largest magnitude to the table's
// −127 and every value to its nearest level.
func quantizeIQ4NL(x []float32, b []byte) {
	_, smax := absMax(x)
	h := F32ToF16(smax / -127)
	put16(b, h)
	iq4Pack(x, F16ToF32(h), b[2:18])
}

// quantizeIQ4XS: as IQ4_NL per 32-element sub-block, the sub-block scales
// rounded to 6 bits under one f16 factor.
func quantizeIQ4XS(x []float32, b []byte) {
	var scale [8]float32
	maxAbs := float32(0)
	for s := 0; s < 8; s++ {
		_, smax := absMax(x[32*s : 32*s+32])
		scale[s] = smax / -127
		maxAbs = max(maxAbs, float32(math.Abs(float64(scale[s]))))
	}
	hd := F32ToF16(maxAbs / 31)
	put16(b, hd)
	d := F16ToF32(hd)
	var h uint16
	clear(b[4:8])
	for s := 0; s < 8; s++ {
		sc := roundClamp(scale[s]*inv(d), -32, 31)
		u := sc + 32
		b[4+s/2] |= byte(u&0xf) << (4 * (s % 2))
		h |= uint16(u>>4) << (2 * s)
		iq4Pack(x[32*s:32*s+32], d*float32(sc), b[8+16*s:8+16*s+16])
	}
	put16(b[2:], h)
}

// DotIQ4_NLQ8_0 is the dot of an IQ4_NL weight row with a Q8_0 activation row.
func DotIQ4_NLQ8_0(w, x []byte) float32 { return active.Load().iq4nl(w, x) }

// DotIQ4_XSQ8_K is the dot of an IQ4_XS weight row with a Q8_K activation row.
func DotIQ4_XSQ8_K(w, x []byte) float32 { return active.Load().iq4xs(w, x) }
