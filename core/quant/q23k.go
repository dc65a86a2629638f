package quant

import "math"

// Q2_K and Q3_K: the 2- and 3-bit K-quants, 256-element super-blocks of
// sixteen 16-element sub-blocks, dotted against Q8_K activations (whose
// 16-element sums are exactly their sub-blocks).
//
//	Q2_K 84 B: scales[16] | qs[64] | d f16 | dmin f16
//	    sub-block s has scale scales[s]&15 and min scales[s]>>4:
//	    x = d·sc_s·q − dmin·m_s, q ∈ [0,3].
//	Q3_K 110 B: hmask[32] | qs[64] | scales[12] | d f16
//	    sub-block s has the 6-bit scale sc_s (see scalesQ3K): x = d·(sc_s−32)·q,
//	    q = low 2 bits − 4 where the high bit is clear, so q ∈ [−4,3].
//
// Both keep their low 2 bits the same way: each 128-element half h reads
// the 32 bytes qs[32h:32h+32], and element 32j+l of the half (j = 0..3,
// l = 0..31) is bits 2j, 2j+1 of byte l. So one 32-byte load shifted by 2j
// gives elements 32j..32j+31 of the half in order, the low 16 lanes being
// sub-block 8h+2j and the high 16 sub-block 8h+2j+1. Q3_K's high bit of
// element 32j+l of half h is bit 4h+j of hmask[l].

// q2Kq is the 2-bit quant of element e (0..255) of a Q2_K or Q3_K qs field.
func q2Kq(qs []byte, e int) int {
	h, j, l := e/128, e%128/32, e%32
	return int(qs[32*h+l] >> (2 * j) & 3)
}

// scalesQ3K unpacks Q3_K's twelve scale bytes into the sixteen 6-bit
// scales, less their offset of 32. Bytes 0..7 hold the low 4 bits: sub-block
// s < 8 in the low nibble of byte s, s ≥ 8 in the high nibble of byte s−8.
// Bytes 8..11 hold the top 2 bits: sub-block s in bits 2·(s/4) of byte
// 8 + s%4.
func scalesQ3K(p []byte) (sc [16]int) {
	for s := 0; s < 16; s++ {
		lo := int(p[s%8] >> (4 * (s / 8)) & 0xf)
		hi := int(p[8+s%4] >> (2 * (s / 4)) & 3)
		sc[s] = lo | hi<<4 - 32
	}
	return sc
}

// q3Kq is the signed 3-bit quant of element e of a Q3_K block.
func q3Kq(b []byte, e int) int {
	h, j, l := e/128, e%128/32, e%32
	q := q2Kq(b[32:96], e)
	if b[l]>>(4*h+j)&1 == 0 {
		q -= 4
	}
	return q
}

func dequantQ2K(b []byte, y []float32) {
	d, dmin := f16at(b[80:]), f16at(b[82:])
	for s := 0; s < 16; s++ {
		dl, ml := d*float32(b[s]&0xf), dmin*float32(b[s]>>4)
		for e := 16 * s; e < 16*s+16; e++ {
			y[e] = dl*float32(q2Kq(b[16:80], e)) - ml
		}
	}
}

func dequantQ3K(b []byte, y []float32) {
	d := f16at(b[108:])
	sc := scalesQ3K(b[96:108])
	for s := 0; s < 16; s++ {
		dl := d * float32(sc[s])
		for e := 16 * s; e < 16*s+16; e++ {
			y[e] = dl * float32(q3Kq(b, e))
		}
	}
}

// DotQ2_KQ8_KGeneric per super-block: d_x·(d·Σ_s sc_s·Σ q·x − dmin·Σ_s m_s·bsum_s).
func DotQ2_KQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 84
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[84*i:84*i+84], x[292*i:292*i+292]
		dx, xq, bsum := q8k(a)
		sumi, summ := 0, 0
		for s := 0; s < 16; s++ {
			si := 0
			for e := 16 * s; e < 16*s+16; e++ {
				si += q2Kq(b[16:80], e) * int(int8(xq[e]))
			}
			sumi += int(b[s]&0xf) * si
			summ += int(b[s]>>4) * bsum(s)
		}
		sum += dx * (f16at(b[80:])*float32(sumi) - f16at(b[82:])*float32(summ))
	}
	return sum
}

// DotQ3_KQ8_KGeneric per super-block: d_x·d·Σ_s sc_s·Σ q·x with q ∈ [−4,3].
func DotQ3_KQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 110
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[110*i:110*i+110], x[292*i:292*i+292]
		dx, xq, _ := q8k(a)
		sc := scalesQ3K(b[96:108])
		sumi := 0
		for s := 0; s < 16; s++ {
			si := 0
			for e := 16 * s; e < 16*s+16; e++ {
				si += q3Kq(b, e) * int(int8(xq[e]))
			}
			sumi += sc[s] * si
		}
		sum += dx * f16at(b[108:]) * float32(sumi)
	}
	return sum
}

// quantizeQ2K: an affine map per 16-element sub-block as quantizeQ45K's,
// with 4-bit scales and mins under the super-block factors d and dmin.
func quantizeQ2K(x []float32, b []byte) {
	var scale, mins [16]float32
	maxScale, maxMin := float32(0), float32(0)
	for s := 0; s < 16; s++ {
		mn, mx := minMax(x[16*s : 16*s+16])
		mn = min(mn, 0)
		mx = max(mx, mn)
		scale[s], mins[s] = (mx-mn)/3, -mn
		maxScale, maxMin = max(maxScale, scale[s]), max(maxMin, mins[s])
	}
	hd, hdm := F32ToF16(maxScale/15), F32ToF16(maxMin/15)
	put16(b[80:], hd)
	put16(b[82:], hdm)
	d, dmin := F16ToF32(hd), F16ToF32(hdm)
	var q [QK]int
	for s := 0; s < 16; s++ {
		sc := roundClamp(scale[s]*inv(d), 0, 15)
		m := roundClamp(mins[s]*inv(dmin), 0, 15)
		b[s] = byte(sc | m<<4)
		ds, dm := d*float32(sc), dmin*float32(m)
		for e := 16 * s; e < 16*s+16; e++ {
			q[e] = roundClamp((x[e]+dm)*inv(ds), 0, 3)
		}
	}
	packQ2Bits(b[16:80], q[:])
}

// packQ2Bits stores the low 2 bits of 256 quants in the qs layout of
// Q2_K and Q3_K.
func packQ2Bits(qs []byte, q []int) {
	clear(qs[:64])
	for e := 0; e < QK; e++ {
		h, j, l := e/128, e%128/32, e%32
		qs[32*h+l] |= byte(q[e]&3) << (2 * j)
	}
}

// quantizeQ3K: a signed scale per 16-element sub-block mapping its value of
// largest magnitude to −4; the 6-bit scales share one f16 factor.
func quantizeQ3K(x []float32, b []byte) {
	var scale [16]float32
	maxAbs := float32(0)
	for s := 0; s < 16; s++ {
		_, smax := absMax(x[16*s : 16*s+16])
		scale[s] = smax / -4
		maxAbs = max(maxAbs, float32(math.Abs(float64(scale[s]))))
	}
	hd := F32ToF16(maxAbs / 31)
	put16(b[108:], hd)
	d := F16ToF32(hd)
	var q [QK]int
	clear(b[96:108])
	clear(b[0:32])
	for s := 0; s < 16; s++ {
		sc := roundClamp(scale[s]*inv(d), -32, 31)
		u := sc + 32
		b[96+s%8] |= byte(u&0xf) << (4 * (s / 8))
		b[104+s%4] |= byte(u>>4) << (2 * (s / 4))
		id := inv(d * float32(sc))
		for e := 16 * s; e < 16*s+16; e++ {
			q[e] = roundClamp(x[e]*id, -4, 3) + 4
			if q[e] >= 4 {
				h, j, l := e/128, e%128/32, e%32
				b[l] |= 1 << (4*h + j)
			}
		}
	}
	packQ2Bits(b[32:96], q[:])
}

// DotQ2_KQ8_K is the dot of a Q2_K weight row with a Q8_K activation row.
func DotQ2_KQ8_K(w, x []byte) float32 { return active.Load().q2K(w, x) }

// DotQ3_KQ8_K is the dot of a Q3_K weight row with a Q8_K activation row.
func DotQ3_KQ8_K(w, x []byte) float32 { return active.Load().q3K(w, x) }
