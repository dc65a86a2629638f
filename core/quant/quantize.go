package quant

import (
	"fmt"
	"math"
)

// Quantizers. The activation quantizers (Q8_0, Q8_1, Q8_K) round to nearest
// with a scale chosen so the largest magnitude maps to ±127: the integer dot
// kernels multiply these int8 values directly against the weight integers.
// The weight quantizers are plain per-block round-to-nearest (legacy types)
// or a simple min/max scale choice (K-quants); they exist so tests can build
// small models, not to compete with llama.cpp's importance-weighted search.
//
// Every quantizer rounds the block scale to its stored precision (f16) first
// and then quantizes against the stored value, so dequantization reproduces
// exactly what the rounding chose.

func roundClamp(v float32, lo, hi int) int {
	q := int(math.Round(float64(v)))
	if q < lo {
		return lo
	}
	if q > hi {
		return hi
	}
	return q
}

func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

func absMax(x []float32) (amax, signedMax float32) {
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, signedMax = a, v
		}
	}
	return
}

func minMax(x []float32) (mn, mx float32) {
	mn, mx = x[0], x[0]
	for _, v := range x[1:] {
		mn = min(mn, v)
		mx = max(mx, v)
	}
	return
}

func checkQuant(t Type, src []float32, dst []byte) int {
	be, bb := t.BlockElems(), t.BlockBytes()
	if len(src)%be != 0 || len(dst) < len(src)/be*bb {
		panic(fmt.Sprintf("quant: quantize %s: %d floats into %d bytes", t, len(src), len(dst)))
	}
	return len(src) / be
}

// QuantizeQ8_0 quantizes whole 32-element blocks of src into dst.
func QuantizeQ8_0(src []float32, dst []byte) {
	nb := checkQuant(Q8_0, src, dst)
	active.Load().quantQ80(src[:32*nb], dst)
}

// quantizeQ8_0Generic is QuantizeQ8_0 in plain Go, the definition the SIMD
// quantizer reproduces bit for bit (len(src) a multiple of 32, dst checked).
func quantizeQ8_0Generic(src []float32, dst []byte) {
	nb := len(src) / 32
	for i := 0; i < nb; i++ {
		x, b := src[32*i:32*i+32], dst[34*i:34*i+34]
		amax, _ := absMax(x)
		h := F32ToF16(amax / 127)
		put16(b, h)
		id := inv(F16ToF32(h))
		for j, v := range x {
			b[2+j] = byte(int8(roundClamp(v*id, -127, 127)))
		}
	}
}

// QuantizeQ8_1 is QuantizeQ8_0 plus s = d·Σq per block, which lets a Q4_1 or
// Q5_1 dot add its per-block offset m as m·s without touching the int8s.
func QuantizeQ8_1(src []float32, dst []byte) {
	nb := checkQuant(Q8_1, src, dst)
	active.Load().quantQ81(src[:32*nb], dst)
}

// quantizeQ8_1Generic is QuantizeQ8_1 in plain Go (see quantizeQ8_0Generic).
func quantizeQ8_1Generic(src []float32, dst []byte) {
	nb := len(src) / 32
	for i := 0; i < nb; i++ {
		x, b := src[32*i:32*i+32], dst[36*i:36*i+36]
		amax, _ := absMax(x)
		h := F32ToF16(amax / 127)
		d := F16ToF32(h)
		id := inv(d)
		sum := 0
		for j, v := range x {
			q := roundClamp(v*id, -127, 127)
			sum += q
			b[4+j] = byte(int8(q))
		}
		put16(b, h)
		put16(b[2:], F32ToF16(d*float32(sum)))
	}
}

// QuantizeQ8_K quantizes 256-element super-blocks with an f32 scale and the 16
// per-16-element sums the K-quant dots use for their offsets.
func QuantizeQ8_K(src []float32, dst []byte) {
	nb := checkQuant(Q8_K, src, dst)
	active.Load().quantQ8K(src[:QK*nb], dst)
}

// quantizeQ8_KGeneric is QuantizeQ8_K in plain Go, the definition the SIMD
// quantizer reproduces bit for bit (len(src) a multiple of 256, dst checked).
func quantizeQ8_KGeneric(src []float32, dst []byte) {
	nb := len(src) / QK
	bb := Q8_K.BlockBytes()
	for i := 0; i < nb; i++ {
		x, b := src[QK*i:QK*i+QK], dst[bb*i:bb*i+bb]
		amax, _ := absMax(x)
		d := amax / 127
		put32(b, math.Float32bits(d))
		id := inv(d)
		for g := 0; g < QK/16; g++ {
			sum := 0
			for j := 16 * g; j < 16*g+16; j++ {
				q := roundClamp(x[j]*id, -127, 127)
				sum += q
				b[4+j] = byte(int8(q))
			}
			put16(b[4+QK+2*g:], uint16(int16(sum)))
		}
	}
}

// Quantize converts whole blocks of src into type t (every type of this
// package, weights and activations). dst must hold len(src)/BlockElems blocks.
func Quantize(t Type, src []float32, dst []byte) error {
	if err := t.Support(); err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	be, bb := t.BlockElems(), t.BlockBytes()
	if len(src)%be != 0 {
		return fmt.Errorf("quant: %s: %d elements is not a whole number of %d-element blocks", t, len(src), be)
	}
	nb := len(src) / be
	if len(dst) < nb*bb {
		return fmt.Errorf("quant: %s: %d bytes cannot hold %d blocks", t, len(dst), nb)
	}
	switch t {
	case Q8_0:
		QuantizeQ8_0(src, dst)
		return nil
	case Q8_1:
		QuantizeQ8_1(src, dst)
		return nil
	case Q8_K:
		QuantizeQ8_K(src, dst)
		return nil
	}
	for i := 0; i < nb; i++ {
		x, b := src[i*be:(i+1)*be], dst[i*bb:(i+1)*bb]
		switch t {
		case F32:
			put32(b, math.Float32bits(x[0]))
		case F16:
			put16(b, F32ToF16(x[0]))
		case BF16:
			put16(b, F32ToBF16(x[0]))
		case Q4_0, Q5_0:
			// Map the value of largest magnitude to the most negative level
			// (−8 or −16), which uses the asymmetric range fully.
			half := 8
			if t == Q5_0 {
				half = 16
			}
			_, smax := absMax(x)
			h := F32ToF16(smax / -float32(half))
			put16(b, h)
			id := inv(F16ToF32(h))
			var qs [32]int
			for j, v := range x {
				qs[j] = roundClamp(v*id, -half, half-1) + half
			}
			packLegacy(t, b, qs[:])
		case Q4_1, Q5_1:
			levels := 15
			if t == Q5_1 {
				levels = 31
			}
			mn, mx := minMax(x)
			hd, hm := F32ToF16((mx-mn)/float32(levels)), F32ToF16(mn)
			put16(b, hd)
			put16(b[2:], hm)
			id, m := inv(F16ToF32(hd)), F16ToF32(hm)
			var qs [32]int
			for j, v := range x {
				qs[j] = roundClamp((v-m)*id, 0, levels)
			}
			packLegacy(t, b, qs[:])
		case Q4_K, Q5_K:
			quantizeQ45K(t, x, b)
		case Q6_K:
			quantizeQ6K(x, b)
		case Q2_K:
			quantizeQ2K(x, b)
		case Q3_K:
			quantizeQ3K(x, b)
		case IQ4_NL:
			quantizeIQ4NL(x, b)
		case IQ4_XS:
			quantizeIQ4XS(x, b)
		case MXFP4:
			quantizeMXFP4(x, b)
		case IQ3_S:
			quantizeIQ3S(x, b)
		case IQ3_XXS:
			quantizeIQ3XXS(x, b)
		case IQ2_XXS:
			quantizeIQ2XXS(x, b)
		case IQ2_XS:
			quantizeIQ2XS(x, b)
		case IQ2_S:
			quantizeIQ2S(x, b)
		}
	}
	return nil
}

// packLegacy stores 32 quants (already offset to be non-negative) in the
// nibble (+qh) fields of a legacy block that starts with its scale fields.
func packLegacy(t Type, b []byte, q []int) {
	var qs []byte
	switch t {
	case Q4_0:
		qs = b[2:18]
	case Q4_1:
		qs = b[4:20]
	case Q5_0, Q5_1:
		off := 2
		if t == Q5_1 {
			off = 4
		}
		var qh uint32
		for j := 0; j < 32; j++ {
			qh |= uint32(q[j]>>4&1) << j
		}
		put32(b[off:], qh)
		qs = b[off+4 : off+20]
	}
	for j := 0; j < 16; j++ {
		qs[j] = byte(q[j]&0xf) | byte(q[j+16]&0xf)<<4
	}
}

// quantizeQ45K: each 32-element sub-block j gets an affine map
// x ≈ d·sc_j·q − dmin·m_j with min_j = −min(0, min x) and a scale covering
// [−min_j, max x]; the super-block factors d and dmin map the largest sub-block
// scale and min to 63, the top of the 6-bit range.
func quantizeQ45K(t Type, x []float32, b []byte) {
	levels := 15
	if t == Q5_K {
		levels = 31
	}
	var scale, mins [8]float32
	for j := 0; j < 8; j++ {
		mn, mx := minMax(x[32*j : 32*j+32])
		mn = min(mn, 0)
		mx = max(mx, mn)
		scale[j] = (mx - mn) / float32(levels)
		mins[j] = -mn
	}
	maxScale, maxMin := float32(0), float32(0)
	for j := 0; j < 8; j++ {
		maxScale = max(maxScale, scale[j])
		maxMin = max(maxMin, mins[j])
	}
	hd, hdm := F32ToF16(maxScale/63), F32ToF16(maxMin/63)
	put16(b, hd)
	put16(b[2:], hdm)
	d, dmin := F16ToF32(hd), F16ToF32(hdm)
	var sc, m [8]uint8
	for j := 0; j < 8; j++ {
		sc[j] = uint8(roundClamp(scale[j]*inv(d), 0, 63))
		m[j] = uint8(roundClamp(mins[j]*inv(dmin), 0, 63))
	}
	packScaleMinK4(b[4:16], sc, m)
	var q [QK]int
	for j := 0; j < 8; j++ {
		ds, dm := d*float32(sc[j]), dmin*float32(m[j])
		for l := 0; l < 32; l++ {
			q[32*j+l] = roundClamp((x[32*j+l]+dm)*inv(ds), 0, levels)
		}
	}
	qs := b[16:144]
	if t == Q5_K {
		qh := b[16:48]
		qs = b[48:176]
		for l := 0; l < 32; l++ {
			var h byte
			for j := 0; j < 8; j++ {
				h |= byte(q[32*j+l]>>4&1) << j
			}
			qh[l] = h
		}
	}
	for g := 0; g < 4; g++ {
		for l := 0; l < 32; l++ {
			qs[32*g+l] = byte(q[64*g+l]&0xf) | byte(q[64*g+32+l]&0xf)<<4
		}
	}
}

// packScaleMinK4 is the inverse of scaleMinK4.
func packScaleMinK4(p []byte, sc, m [8]uint8) {
	for j := 0; j < 4; j++ {
		p[j] = sc[j] | (sc[j+4]>>4)<<6
		p[j+4] = m[j] | (m[j+4]>>4)<<6
		p[j+8] = sc[j+4]&0xf | (m[j+4]&0xf)<<4
	}
}

// quantizeQ6K: 16-element sub-blocks with a signed scale mapping the value of
// largest magnitude to −32; the int8 sub-block scales share one f16 factor.
func quantizeQ6K(x []float32, b []byte) {
	var scale [16]float32
	maxAbs := float32(0)
	for j := 0; j < 16; j++ {
		_, smax := absMax(x[16*j : 16*j+16])
		scale[j] = smax / -32
		if a := float32(math.Abs(float64(scale[j]))); a > maxAbs {
			maxAbs = a
		}
	}
	hd := F32ToF16(maxAbs / 127)
	put16(b[208:], hd)
	d := F16ToF32(hd)
	var q [QK]int
	for j := 0; j < 16; j++ {
		s := int8(roundClamp(scale[j]*inv(d), -127, 127))
		b[192+j] = byte(s)
		id := inv(d * float32(s))
		for l := 16 * j; l < 16*j+16; l++ {
			q[l] = roundClamp(x[l]*id, -32, 31) + 32
		}
	}
	for h := 0; h < 2; h++ {
		ql, qh, e := b[64*h:64*h+64], b[128+32*h:128+32*h+32], q[128*h:128*h+128]
		for l := 0; l < 32; l++ {
			ql[l] = byte(e[l]&0xf) | byte(e[l+64]&0xf)<<4
			ql[l+32] = byte(e[l+32]&0xf) | byte(e[l+96]&0xf)<<4
			qh[l] = byte(e[l]>>4) | byte(e[l+32]>>4)<<2 | byte(e[l+64]>>4)<<4 | byte(e[l+96]>>4)<<6
		}
	}
}
