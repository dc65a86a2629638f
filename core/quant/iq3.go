package quant

// IQ3_S and IQ3_XXS: 256-element super-blocks whose weights come four at a
// time from a grid of non-negative level vectors (iqgrid.go), with a sign
// bit per weight and a 4-bit scale per 32-element sub-block; dotted against
// Q8_K. Element e = 32s + 8l + i is in sub-block s (0..7), group l (0..3),
// position i (0..7); its level is entry i%4 of the group's grid index
// number 2l + i/4 (k below).
//
//	IQ3_S 110 B: d f16 | qs[64] | qh[8] | signs[32] | scales[4]
//	    grid index (9 bits, iq3sGrid) = qs[8s+k] | bit k of qh[s] << 8;
//	    sign = bit i of signs[4s+l]; ls = nibble s%2 of scales[s/2]:
//	    x = ±d·(2·ls+1)·level, levels odd 1..15.
//	IQ3_XXS 98 B: d f16 | qs[64] | aux[8] u32
//	    grid index (8 bits, iq3xxsGrid) = qs[8s+k]; aux[s] holds the group
//	    signs as 7-bit indices (bits 7l..7l+6, see evenSigns) and ls in bits
//	    28..31: x = ±d·(ls+½)/2·level, levels 4..62.
//
// The dots keep the integer form of the scales, 2·ls+1, and apply the
// rest once per block (×1 for IQ3_S, ×¼ for IQ3_XXS), as GGML does.

// iq3sIndex is the grid index of group k (0..7) of sub-block s.
func iq3sIndex(b []byte, s, k int) int {
	return int(b[2+8*s+k]) | int(b[66+s]>>k&1)<<8
}

// iq3sScale is 2·ls+1 of sub-block s.
func iq3sScale(b []byte, s int) int { return 2*int(b[106+s/2]>>(4*(s%2))&15) + 1 }

// iq3sGroup gathers the 8 levels of group l of sub-block s.
func iq3sGroup(b []byte, s, l int) (g [8]uint8) {
	copy(g[:4], iq3sGrid[iq3sIndex(b, s, 2*l)][:])
	copy(g[4:], iq3sGrid[iq3sIndex(b, s, 2*l+1)][:])
	return g
}

func dequantIQ3S(b []byte, y []float32) {
	d := f16at(b)
	for s := 0; s < 8; s++ {
		dl := d * float32(iq3sScale(b, s))
		for l := 0; l < 4; l++ {
			g := iq3sGroup(b, s, l)
			signed8(g[:], b[74+4*s+l], dl, y[32*s+8*l:])
		}
	}
}

// DotIQ3_SQ8_KGeneric per super-block: d·d_x·Σ_s (2·ls_s+1)·Σ ±level·x.
func DotIQ3_SQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 110
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[110*i:110*i+110], x[292*i:292*i+292]
		dx, xq, _ := q8k(a)
		sumi := 0
		for s := 0; s < 8; s++ {
			si := 0
			for l := 0; l < 4; l++ {
				g := iq3sGroup(b, s, l)
				si += signedSum8(g[:], b[74+4*s+l], xq[32*s+8*l:])
			}
			sumi += iq3sScale(b, s) * si
		}
		sum += dx * f16at(b) * float32(sumi)
	}
	return sum
}

// iq3xxsAux is the sign-and-scale word of sub-block s.
func iq3xxsAux(b []byte, s int) uint32 { return le32(b[66+4*s:]) }

func iq3xxsGroup(b []byte, s, l int) (g [8]uint8) {
	copy(g[:4], iq3xxsGrid[b[2+8*s+2*l]][:])
	copy(g[4:], iq3xxsGrid[b[2+8*s+2*l+1]][:])
	return g
}

func dequantIQ3XXS(b []byte, y []float32) {
	d := f16at(b)
	for s := 0; s < 8; s++ {
		aux := iq3xxsAux(b, s)
		dl := d * (0.5 + float32(aux>>28)) * 0.5
		for l := 0; l < 4; l++ {
			g := iq3xxsGroup(b, s, l)
			signed8(g[:], evenSigns(aux>>(7*l)), dl, y[32*s+8*l:])
		}
	}
}

// DotIQ3_XXSQ8_KGeneric per super-block: d·d_x/4·Σ_s (2·ls_s+1)·Σ ±level·x.
func DotIQ3_XXSQ8_KGeneric(w, x []byte) float32 {
	nb := len(w) / 98
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[98*i:98*i+98], x[292*i:292*i+292]
		dx, xq, _ := q8k(a)
		sumi := 0
		for s := 0; s < 8; s++ {
			aux := iq3xxsAux(b, s)
			si := 0
			for l := 0; l < 4; l++ {
				g := iq3xxsGroup(b, s, l)
				si += signedSum8(g[:], evenSigns(aux>>(7*l)), xq[32*s+8*l:])
			}
			sumi += int(2*(aux>>28)+1) * si
		}
		sum += dx * (f16at(b) * 0.25) * float32(sumi)
	}
	return sum
}

// DotIQ3_SQ8_K is the dot of an IQ3_S weight row with a Q8_K activation row.
func DotIQ3_SQ8_K(w, x []byte) float32 { return active.Load().iq3s(w, x) }

// DotIQ3_XXSQ8_K is the dot of an IQ3_XXS weight row with a Q8_K activation row.
func DotIQ3_XXSQ8_K(w, x []byte) float32 { return active.Load().iq3xxs(w, x) }
