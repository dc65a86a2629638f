package quant

// IQ2_XXS, IQ2_XS and IQ2_S: 256-element super-blocks whose weights come
// eight at a time from a grid of non-negative level vectors (levels 8, 25,
// 43; iqgrid.go), with a sign per weight and 4-bit scales; dotted against
// Q8_K. Element e = 32s + 8l + i is in sub-block s (0..7), group l (0..3),
// position i (0..7), and takes entry i of its group's grid index.
//
//	IQ2_XXS 66 B: d f16 | then per sub-block s: idx[4] | aux u32
//	    the group indices idx[l] (8 bits, iq2xxsGrid) at 2+8s+l; aux holds
//	    the group signs as 7-bit indices (bits 7l..7l+6, see evenSigns) and
//	    ls in bits 28..31: x = ±d·(ls+½)/4·level.
//	IQ2_XS 74 B: d f16 | qs[32] u16 | scales[8]
//	    group l of sub-block s is qs[4s+l]: index (9 bits, iq2xsGrid) in
//	    bits 0..8, 7-bit signs index in bits 9..15; the sub-block's two
//	    halves of 16 (groups 0, 1 and 2, 3) take ls from the low and high
//	    nibble of scales[s]: x = ±d·(ls+½)/4·level.
//	IQ2_S 82 B: d f16 | qs[32] | signs[32] | qh[8] | scales[8]
//	    index (10 bits, iq2sGrid) = qs[4s+l] | bits 2l, 2l+1 of qh[s] << 8;
//	    signs[4s+l] holds all 8 signs of the group (bit i: element i); the
//	    scales as IQ2_XS's.
//
// The dots keep the integer form of the scales, 2·ls+1, and apply the
// remaining ⅛ once per block, as GGML does.

// iq2Scale is 2·ls+1 of group l of sub-block s, for IQ2_XS and IQ2_S,
// whose scales field starts at off.
func iq2Scale(b []byte, off, s, l int) int { return 2*int(b[off+s]>>(4*(l/2))&15) + 1 }

func iq2xsGroup(b []byte, s, l int) (idx int, signs uint8) {
	q := le16(b[2+8*s+2*l:])
	return int(q & 511), evenSigns(uint32(q >> 9))
}

func iq2sGroup(b []byte, s, l int) (idx int, signs uint8) {
	return int(b[2+4*s+l]) | int(b[66+s]>>(2*l)&3)<<8, b[34+4*s+l]
}

func dequantIQ2XXS(b []byte, y []float32) {
	d := f16at(b)
	for s := 0; s < 8; s++ {
		aux := le32(b[6+8*s:])
		dl := d * (0.5 + float32(aux>>28)) * 0.25
		for l := 0; l < 4; l++ {
			signed8(iq2xxsGrid[b[2+8*s+l]][:], evenSigns(aux>>(7*l)), dl, y[32*s+8*l:])
		}
	}
}

func dequantIQ2XS(b []byte, y []float32) {
	d := f16at(b)
	for s := 0; s < 8; s++ {
		for l := 0; l < 4; l++ {
			dl := d * (0.5 + float32(b[66+s]>>(4*(l/2))&15)) * 0.25
			idx, signs := iq2xsGroup(b, s, l)
			signed8(iq2xsGrid[idx][:], signs, dl, y[32*s+8*l:])
		}
	}
}

func dequantIQ2S(b []byte, y []float32) {
	d := f16at(b)
	for s := 0; s < 8; s++ {
		for l := 0; l < 4; l++ {
			dl := d * (0.5 + float32(b[74+s]>>(4*(l/2))&15)) * 0.25
			idx, signs := iq2sGroup(b, s, l)
			signed8(iq2sGrid[idx][:], signs, dl, y[32*s+8*l:])
		}
	}
}

// DotIQ2_XXSQ8_KGeneric per super-block: d·d_x/8·Σ_s (2·ls_s+1)·Σ ±level·x.
func DotIQ2_XXSQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 66
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[66*i:66*i+66], x[292*i:292*i+292]
		dx, xq, _ := q8k(a)
		sumi := 0
		for s := 0; s < 8; s++ {
			aux := le32(b[6+8*s:])
			si := 0
			for l := 0; l < 4; l++ {
				si += signedSum8(iq2xxsGrid[b[2+8*s+l]][:], evenSigns(aux>>(7*l)), xq[32*s+8*l:])
			}
			sumi += int(2*(aux>>28)+1) * si
		}
		sum += dx * (f16at(b) * 0.125) * float32(sumi)
	}
	return sum
}

// DotIQ2_XSQ8_KGeneric per super-block: d·d_x/8·Σ_halves (2·ls+1)·Σ ±level·x.
func DotIQ2_XSQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 74
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[74*i:74*i+74], x[292*i:292*i+292]
		dx, xq, _ := q8k(a)
		sumi := 0
		for s := 0; s < 8; s++ {
			for l := 0; l < 4; l++ {
				idx, signs := iq2xsGroup(b, s, l)
				sumi += iq2Scale(b, 66, s, l) * signedSum8(iq2xsGrid[idx][:], signs, xq[32*s+8*l:])
			}
		}
		sum += dx * (f16at(b) * 0.125) * float32(sumi)
	}
	return sum
}

// DotIQ2_SQ8_KGeneric per super-block: d·d_x/8·Σ_halves (2·ls+1)·Σ ±level·x.
func DotIQ2_SQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 82
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[82*i:82*i+82], x[292*i:292*i+292]
		dx, xq, _ := q8k(a)
		sumi := 0
		for s := 0; s < 8; s++ {
			for l := 0; l < 4; l++ {
				idx, signs := iq2sGroup(b, s, l)
				sumi += iq2Scale(b, 74, s, l) * signedSum8(iq2sGrid[idx][:], signs, xq[32*s+8*l:])
			}
		}
		sum += dx * (f16at(b) * 0.125) * float32(sumi)
	}
	return sum
}

// DotIQ2_XXSQ8_K is the dot of an IQ2_XXS weight row with a Q8_K activation row.
func DotIQ2_XXSQ8_K(w, x []byte) float32 { return active.Load().iq2xxs(w, x) }

// DotIQ2_XSQ8_K is the dot of an IQ2_XS weight row with a Q8_K activation row.
func DotIQ2_XSQ8_K(w, x []byte) float32 { return active.Load().iq2xs(w, x) }

// DotIQ2_SQ8_K is the dot of an IQ2_S weight row with a Q8_K activation row.
func DotIQ2_SQ8_K(w, x []byte) float32 { return active.Load().iq2s(w, x) }
