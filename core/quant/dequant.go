package quant

import (
	"fmt"
	"math"
)

// Block layouts (all fields little-endian, blocks packed back to back with no
// padding, a row is a whole number of blocks):
//
// Legacy 32-element blocks. Their 4-bit variants keep element j (0..15) in the
// LOW nibble of qs[j] and element j+16 in the HIGH nibble of qs[j], so a
// 16-byte load gives the first half of the block with an AND and the second
// half with a shift — no interleaving across bytes.
//
//	Q4_0  18 B: d f16 | qs[16]            x = d·(q−8),       q ∈ [0,15]
//	Q4_1  20 B: d f16 | m f16 | qs[16]    x = d·q + m
//	Q5_0  22 B: d f16 | qh u32 | qs[16]   x = d·(q−16),      q = nibble | bit j of qh << 4
//	Q5_1  24 B: d f16 | m f16 | qh u32 | qs[16]   x = d·q + m
//	Q8_0  34 B: d f16 | qs[32] int8       x = d·q
//	Q8_1  36 B: d f16 | s f16 | qs[32] int8   x = d·q,  s = d·Σq (for the ·m term of Q4_1/Q5_1 dots)
//
// K-quants: 256-element super-blocks split into sub-blocks that carry small
// integer scales, themselves scaled by f16 super-block factors.
//
//	Q4_K 144 B: d f16 | dmin f16 | scales[12] | qs[128]
//	    8 sub-blocks of 32. sub-block j has 6-bit scale sc_j and 6-bit min m_j
//	    (see scaleMinK4 for the packing): x = d·sc_j·q − dmin·m_j.
//	    qs comes in four 32-byte groups, one per 64 elements: group g holds
//	    sub-block 2g in the low nibbles and sub-block 2g+1 in the high nibbles.
//	Q5_K 176 B: d f16 | dmin f16 | scales[12] | qh[32] | qs[128]
//	    as Q4_K with a fifth bit: element l of sub-block j takes bit j of qh[l]
//	    (l = 0..31), so q ∈ [0,31].
//	Q6_K 210 B: ql[128] | qh[64] | scales[16] int8 | d f16
//	    16 sub-blocks of 16 with int8 scales, x = d·sc·(q−32), q ∈ [0,63].
//	    Each 128-element half h uses ql[64h:64h+64], qh[32h:32h+32] and
//	    scales[8h:8h+8]; for l = 0..31 of that half:
//	      elem l     = ql[l]    low  nibble | (qh[l]>>0 & 3)<<4
//	      elem l+32  = ql[l+32] low  nibble | (qh[l]>>2 & 3)<<4
//	      elem l+64  = ql[l]    high nibble | (qh[l]>>4 & 3)<<4
//	      elem l+96  = ql[l+32] high nibble | (qh[l]>>6 & 3)<<4
//	    and element e of the half uses scales[8h + e/16].
//	Q8_K 292 B: d f32 | qs[256] int8 | bsums[16] int16
//	    x = d·q; bsums[i] = Σ qs[16i:16i+16], so dots against weights with an
//	    offset or min (Q4_K, Q5_K, Q6_K) need no extra pass over qs.

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12-byte field of Q4_K/Q5_K. Bytes 0..3 hold sc_0..3 in their low 6 bits,
// bytes 4..7 hold m_0..3 in their low 6 bits; sub-blocks 4..7 keep their low
// 4 bits in bytes 8..11 (scale in the low nibble, min in the high nibble) and
// their top 2 bits in the spare top bits of bytes 0..3 (scale) and 4..7 (min).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	sc = q[j+4]&0xf | (q[j-4]>>6)<<4
	m = q[j+4]>>4 | (q[j]>>6)<<4
	return
}

// Dequantize expands whole blocks of type t from src into dst. len(dst) must
// be a whole number of blocks and src must hold at least that many blocks.
func Dequantize(t Type, src []byte, dst []float32) error {
	if err := t.Support(); err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	be, bb := t.BlockElems(), t.BlockBytes()
	if len(dst)%be != 0 {
		return fmt.Errorf("quant: %s: %d elements is not a whole number of %d-element blocks", t, len(dst), be)
	}
	nb := len(dst) / be
	if len(src) < nb*bb {
		return fmt.Errorf("quant: %s: %d bytes hold fewer than the %d blocks asked for", t, len(src), nb)
	}
	if err := Validate(t, src[:nb*bb]); err != nil {
		return fmt.Errorf("quant: %w", err)
	}
	for i := 0; i < nb; i++ {
		b := src[i*bb : (i+1)*bb]
		y := dst[i*be : (i+1)*be]
		switch t {
		case F32:
			y[0] = math.Float32frombits(le32(b))
		case F16:
			y[0] = f16at(b)
		case BF16:
			y[0] = BF16ToF32(le16(b))
		case Q4_0:
			d := f16at(b)
			for j := 0; j < 16; j++ {
				y[j] = d * float32(int(b[2+j]&0xf)-8)
				y[j+16] = d * float32(int(b[2+j]>>4)-8)
			}
		case Q4_1:
			d, m := f16at(b), f16at(b[2:])
			for j := 0; j < 16; j++ {
				y[j] = d*float32(b[4+j]&0xf) + m
				y[j+16] = d*float32(b[4+j]>>4) + m
			}
		case Q5_0:
			d, qh := f16at(b), le32(b[2:])
			for j := 0; j < 16; j++ {
				lo := int(b[6+j]&0xf) | int(qh>>j&1)<<4
				hi := int(b[6+j]>>4) | int(qh>>(j+16)&1)<<4
				y[j] = d * float32(lo-16)
				y[j+16] = d * float32(hi-16)
			}
		case Q5_1:
			d, m, qh := f16at(b), f16at(b[2:]), le32(b[4:])
			for j := 0; j < 16; j++ {
				lo := uint32(b[8+j]&0xf) | (qh>>j&1)<<4
				hi := uint32(b[8+j]>>4) | (qh>>(j+16)&1)<<4
				y[j] = d*float32(lo) + m
				y[j+16] = d*float32(hi) + m
			}
		case Q8_0:
			d := f16at(b)
			for j := 0; j < 32; j++ {
				y[j] = d * float32(int8(b[2+j]))
			}
		case Q8_1:
			d := f16at(b)
			for j := 0; j < 32; j++ {
				y[j] = d * float32(int8(b[4+j]))
			}
		case Q4_K:
			dequantQ4K(b, y)
		case Q5_K:
			dequantQ5K(b, y)
		case Q6_K:
			dequantQ6K(b, y)
		case Q2_K:
			dequantQ2K(b, y)
		case Q3_K:
			dequantQ3K(b, y)
		case IQ4_NL:
			dequantIQ4NL(b, y)
		case IQ4_XS:
			dequantIQ4XS(b, y)
		case MXFP4:
			dequantMXFP4(b, y)
		case IQ3_S:
			dequantIQ3S(b, y)
		case IQ3_XXS:
			dequantIQ3XXS(b, y)
		case IQ2_XXS:
			dequantIQ2XXS(b, y)
		case IQ2_XS:
			dequantIQ2XS(b, y)
		case IQ2_S:
			dequantIQ2S(b, y)
		case Q8_K:
			d := math.Float32frombits(le32(b))
			for j := 0; j < QK; j++ {
				y[j] = d * float32(int8(b[4+j]))
			}
		}
	}
	return nil
}

func dequantQ4K(b []byte, y []float32) {
	d, dmin := f16at(b), f16at(b[2:])
	scales, qs := b[4:16], b[16:144]
	for g := 0; g < 4; g++ {
		sc1, m1 := scaleMinK4(2*g, scales)
		sc2, m2 := scaleMinK4(2*g+1, scales)
		d1, o1 := d*float32(sc1), dmin*float32(m1)
		d2, o2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*g : 32*g+32]
		for l := 0; l < 32; l++ {
			y[64*g+l] = d1*float32(q[l]&0xf) - o1
			y[64*g+32+l] = d2*float32(q[l]>>4) - o2
		}
	}
}

func dequantQ5K(b []byte, y []float32) {
	d, dmin := f16at(b), f16at(b[2:])
	scales, qh, qs := b[4:16], b[16:48], b[48:176]
	for g := 0; g < 4; g++ {
		sc1, m1 := scaleMinK4(2*g, scales)
		sc2, m2 := scaleMinK4(2*g+1, scales)
		d1, o1 := d*float32(sc1), dmin*float32(m1)
		d2, o2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*g : 32*g+32]
		for l := 0; l < 32; l++ {
			lo := q[l]&0xf | (qh[l]>>(2*g)&1)<<4
			hi := q[l]>>4 | (qh[l]>>(2*g+1)&1)<<4
			y[64*g+l] = d1*float32(lo) - o1
			y[64*g+32+l] = d2*float32(hi) - o2
		}
	}
}

func dequantQ6K(b []byte, y []float32) {
	d := f16at(b[208:])
	for h := 0; h < 2; h++ {
		ql, qh, sc := b[64*h:64*h+64], b[128+32*h:128+32*h+32], b[192+8*h:192+8*h+8]
		o := y[128*h : 128*h+128]
		for l := 0; l < 32; l++ {
			q1 := int(ql[l]&0xf|(qh[l]>>0&3)<<4) - 32
			q2 := int(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			is := l / 16
			o[l] = d * float32(int8(sc[is])) * float32(q1)
			o[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			o[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			o[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}
