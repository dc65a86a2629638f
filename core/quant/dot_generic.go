package quant

import "math"

// Pure-Go reference dot products of one weight row with one activation row.
// The block count comes from len(w); x must hold as many activation blocks.
// They are the definition the SIMD kernels are tested against, so they
// follow the math literally: an exact integer sum per block, then one float
// multiply-add with the block scales, accumulated in float32.

// DotQ4_0Q8_0Generic: Σ_b d_w·d_x·Σ_j (q_j−8)·x_j.
func DotQ4_0Q8_0Generic(w, x []byte) float32 {
	nb := len(w) / 18
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[18*i:18*i+18], x[34*i:34*i+34]
		s := 0
		for j := 0; j < 16; j++ {
			s += (int(b[2+j]&0xf) - 8) * int(int8(a[2+j]))
			s += (int(b[2+j]>>4) - 8) * int(int8(a[18+j]))
		}
		sum += f16at(b) * f16at(a) * float32(s)
	}
	return sum
}

// DotQ4_1Q8_1Generic: Σ_b d_w·d_x·Σ_j q_j·x_j + m_w·s_x, where s_x = d_x·Σ_j x_j
// comes precomputed with the activation block.
func DotQ4_1Q8_1Generic(w, x []byte) float32 {
	nb := len(w) / 20
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[20*i:20*i+20], x[36*i:36*i+36]
		s := 0
		for j := 0; j < 16; j++ {
			s += int(b[4+j]&0xf) * int(int8(a[4+j]))
			s += int(b[4+j]>>4) * int(int8(a[20+j]))
		}
		sum += f16at(b)*f16at(a)*float32(s) + f16at(b[2:])*f16at(a[2:])
	}
	return sum
}

// DotQ5_0Q8_0Generic: as Q4_0 with the fifth bit from qh and offset 16.
func DotQ5_0Q8_0Generic(w, x []byte) float32 {
	nb := len(w) / 22
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[22*i:22*i+22], x[34*i:34*i+34]
		qh := le32(b[2:])
		s := 0
		for j := 0; j < 16; j++ {
			lo := int(b[6+j]&0xf) | int(qh>>j&1)<<4
			hi := int(b[6+j]>>4) | int(qh>>(j+16)&1)<<4
			s += (lo-16)*int(int8(a[2+j])) + (hi-16)*int(int8(a[18+j]))
		}
		sum += f16at(b) * f16at(a) * float32(s)
	}
	return sum
}

// DotQ5_1Q8_1Generic: as Q4_1 with the fifth bit from qh.
func DotQ5_1Q8_1Generic(w, x []byte) float32 {
	nb := len(w) / 24
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[24*i:24*i+24], x[36*i:36*i+36]
		qh := le32(b[4:])
		s := 0
		for j := 0; j < 16; j++ {
			lo := int(b[8+j]&0xf) | int(qh>>j&1)<<4
			hi := int(b[8+j]>>4) | int(qh>>(j+16)&1)<<4
			s += lo*int(int8(a[4+j])) + hi*int(int8(a[20+j]))
		}
		sum += f16at(b)*f16at(a)*float32(s) + f16at(b[2:])*f16at(a[2:])
	}
	return sum
}

// DotQ8_0Q8_0Generic: Σ_b d_w·d_x·Σ_j w_j·x_j.
func DotQ8_0Q8_0Generic(w, x []byte) float32 {
	nb := len(w) / 34
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[34*i:34*i+34], x[34*i:34*i+34]
		s := 0
		for j := 0; j < 32; j++ {
			s += int(int8(b[2+j])) * int(int8(a[2+j]))
		}
		sum += f16at(b) * f16at(a) * float32(s)
	}
	return sum
}

// q8k splits a Q8_K block into its scale, int8s and 16-element sums.
func q8k(a []byte) (d float32, qs []byte, bsum func(i int) int) {
	return math.Float32frombits(le32(a)), a[4 : 4+QK], func(i int) int { return int(int16(le16(a[4+QK+2*i:]))) }
}

// DotQ4_KQ8_KGeneric per super-block: d·d_x·Σ_j sc_j·Σ q·x − dmin·d_x·Σ_j m_j·Σx,
// the Σx of each 32-element sub-block being two of Q8_K's 16-element bsums.
func DotQ4_KQ8_KGeneric(w, x []byte) float32 {
	return dotQ45K(w, x, false)
}

// DotQ5_KQ8_KGeneric: as Q4_K with the fifth bit.
func DotQ5_KQ8_KGeneric(w, x []byte) float32 {
	return dotQ45K(w, x, true)
}

func dotQ45K(w, x []byte, five bool) float32 {
	wb := 144
	if five {
		wb = 176
	}
	nb := len(w) / wb
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[wb*i:wb*i+wb], x[292*i:292*i+292]
		dx, xq, bsum := q8k(a)
		qs, qh := b[16:144], []byte(nil)
		if five {
			qh, qs = b[16:48], b[48:176]
		}
		sumi, summ := 0, 0
		for g := 0; g < 4; g++ {
			sc1, m1 := scaleMinK4(2*g, b[4:16])
			sc2, m2 := scaleMinK4(2*g+1, b[4:16])
			s1, s2 := 0, 0
			for l := 0; l < 32; l++ {
				lo, hi := int(qs[32*g+l]&0xf), int(qs[32*g+l]>>4)
				if five {
					lo |= int(qh[l]>>(2*g)&1) << 4
					hi |= int(qh[l]>>(2*g+1)&1) << 4
				}
				s1 += lo * int(int8(xq[64*g+l]))
				s2 += hi * int(int8(xq[64*g+32+l]))
			}
			sumi += int(sc1)*s1 + int(sc2)*s2
			summ += int(m1)*(bsum(4*g)+bsum(4*g+1)) + int(m2)*(bsum(4*g+2)+bsum(4*g+3))
		}
		sum += dx * (f16at(b)*float32(sumi) - f16at(b[2:])*float32(summ))
	}
	return sum
}

// DotQ6_KQ8_KGeneric: d·d_x·Σ_i sc_i·(Σ q·x − 32·Σx) over the 16 sub-blocks,
// the −32 offset applied through bsums.
func DotQ6_KQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 210
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[210*i:210*i+210], x[292*i:292*i+292]
		dx, xq, bsum := q8k(a)
		var q [QK]int
		for h := 0; h < 2; h++ {
			ql, qh := b[64*h:64*h+64], b[128+32*h:128+32*h+32]
			for l := 0; l < 32; l++ {
				q[128*h+l] = int(ql[l]&0xf | (qh[l]&3)<<4)
				q[128*h+l+32] = int(ql[l+32]&0xf | (qh[l]>>2&3)<<4)
				q[128*h+l+64] = int(ql[l]>>4 | (qh[l]>>4&3)<<4)
				q[128*h+l+96] = int(ql[l+32]>>4 | (qh[l]>>6&3)<<4)
			}
		}
		sumi := 0
		for s := 0; s < 16; s++ {
			si := 0
			for l := 16 * s; l < 16*s+16; l++ {
				si += q[l] * int(int8(xq[l]))
			}
			sumi += int(int8(b[192+s])) * (si - 32*bsum(s))
		}
		sum += dx * f16at(b[208:]) * float32(sumi)
	}
	return sum
}

// DotF32Generic: Σ w_i·x_i over len(w) elements.
func DotF32Generic(w, x []float32) float32 {
	x = x[:len(w)]
	var s float32
	for i, v := range w {
		s += v * x[i]
	}
	return s
}

// DotF16F32Generic: w holds len(w)/2 f16 values.
func DotF16F32Generic(w []byte, x []float32) float32 {
	n := len(w) / 2
	x = x[:n]
	var s float32
	for i := range x {
		s += f16at(w[2*i:]) * x[i]
	}
	return s
}

// DotBF16F32Generic: w holds len(w)/2 bf16 values.
func DotBF16F32Generic(w []byte, x []float32) float32 {
	n := len(w) / 2
	x = x[:n]
	var s float32
	for i := range x {
		s += BF16ToF32(le16(w[2*i:])) * x[i]
	}
	return s
}
