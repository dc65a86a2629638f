package quant

// The i-quants' grids as the Go reference reads them (iqgrid_data.go holds
// their codes), and their sign encoding.

// Level tables of the grids (GGML's values).
var (
	iq2Levels    = [4]uint8{8, 25, 43, 0} // 2-bit codes; 3 never occurs
	iq3xxsLevels = [8]uint8{4, 12, 20, 28, 36, 44, 52, 62}
	iq3sLevels   = [8]uint8{1, 3, 5, 7, 9, 11, 13, 15}
)

var (
	iq2xxsGrid = expandGrid8(iq2xxsGridCodes[:])
	iq2xsGrid  = expandGrid8(iq2xsGridCodes[:])
	iq2sGrid   = expandGrid8(iq2sGridCodes[:])
	iq3xxsGrid = expandGrid4(iq3xxsGridCodes[:], &iq3xxsLevels)
	iq3sGrid   = expandGrid4(iq3sGridCodes[:], &iq3sLevels)
)

func expandGrid8(codes []uint16) [][8]uint8 {
	g := make([][8]uint8, len(codes))
	for k, c := range codes {
		for i := 0; i < 8; i++ {
			g[k][i] = iq2Levels[c>>(2*i)&3]
		}
	}
	return g
}

func expandGrid4(codes []uint16, levels *[8]uint8) [][4]uint8 {
	g := make([][4]uint8, len(codes))
	for k, c := range codes {
		for i := 0; i < 4; i++ {
			g[k][i] = levels[c>>(3*i)&7]
		}
	}
	return g
}

// evenSigns expands a 7-bit sign index of IQ2_XXS, IQ2_XS and IQ3_XXS to
// the signs of 8 elements (bit i set: element i negative): the stored bits
// are elements 0..6, and element 7's sign makes the count of negatives
// even (the quantizer keeps it so, flipping its smallest element if need
// be), which is how 8 signs fit in 7 bits.
func evenSigns(i uint32) uint8 {
	i &= 127
	p := i ^ i>>4
	p ^= p >> 2
	p ^= p >> 1
	return uint8(i | (p&1)<<7)
}

// signedSum8 is Σ ±g[i]·x[i] over 8 elements, element i negated where bit i
// of signs is set.
func signedSum8(g []uint8, signs uint8, x []byte) int {
	s := 0
	for i := 0; i < 8; i++ {
		v := int(g[i]) * int(int8(x[i]))
		if signs>>i&1 != 0 {
			v = -v
		}
		s += v
	}
	return s
}

// signed8 writes the 8 values ±dl·g[i] (signs as signedSum8's) to y.
func signed8(g []uint8, signs uint8, dl float32, y []float32) {
	for i := 0; i < 8; i++ {
		v := dl * float32(g[i])
		if signs>>i&1 != 0 {
			v = -v
		}
		y[i] = v
	}
}
