//go:build amd64 && !noasm

package quant

//go:noescape
func lanes8AVX2(dst, src *byte, wrb, n, nb, ss, ds int)

//go:noescape
func lanes4AVX2(dst, src *byte, wrb, nb, ss, ds int)

// pack8 is pack8Go, with a whole group's quants moved by AVX2 dword
// transposes: packing a model at load was mostly pack8Go's dword moves
// (about 1 GB/s a core for Q4_K, 0.5 for Q5_0), half of the Qwen2.5-Coder
// 1.5B's start-up.
func pack8(wt Type, w []byte, wrb, rows, cols, g int, dst []byte) {
	nb, bb, rec := cols/wt.BlockElems(), wt.BlockBytes(), p8Record(wt)
	if (g+1)*p8Rows > rows || nb == 0 || !hasAVX2() {
		pack8Go(wt, w, wrb, rows, cols, g, dst)
		return
	}
	w = w[g*p8Rows*wrb : (g+1)*p8Rows*wrb]
	dst = dst[:nb*rec]
	// lanes moves n dwords (a multiple of 4) at offset off of every block
	// of the 8 rows to offset at of its record. The asm reads
	// w[j·bb+off+r·wrb+4k] for j < nb, r < 8, k < n: inside w, as the
	// group is whole and off+4n ≤ bb; it writes dst[j·rec+at+32k+4r],
	// inside dst as at+32n ≤ rec.
	lanes := func(at, off, n int) {
		if at+32*n > rec || off+4*n > bb {
			panic("quant: pack8: a field outside the block")
		}
		if n >= 8 {
			lanes8AVX2(&dst[at], &w[off], wrb, n/8, nb, bb, rec)
		}
		if k := n - n%8; n%8 == 4 {
			lanes4AVX2(&dst[at+32*k], &w[off+4*k], wrb, nb, bb, rec)
		}
	}
	switch wt {
	case Q4_K:
		lanes(0, 16, 32)
		// The three scale dwords as four parts, the fourth (qs[0:4])
		// landing where d and dmin go, written over below.
		lanes(1024, 4, 4)
	case IQ4_XS:
		lanes(0, 8, 32)
	case Q6_K:
		lanes(0, 0, 32)      // ql
		lanes(1024, 128, 16) // qh
		lanes(1536, 192, 4)  // scales
	case Q8_0:
		lanes(0, 2, 8)
	case Q4_0, IQ4_NL:
		lanes(0, 2, 4)
	case Q4_1:
		lanes(0, 4, 4)
	case Q5_0:
		lanes(0, 6, 4)
	default:
		pack8Go(wt, w, wrb, p8Rows, cols, 0, dst)
		return
	}
	// The scalar fields, row by row, as pack8Go writes them.
	for r := 0; r < p8Rows; r++ {
		row := w[r*wrb : r*wrb+nb*bb]
		for b := 0; b < nb; b++ {
			s, out := row[b*bb:(b+1)*bb], dst[b*rec:(b+1)*rec]
			switch wt {
			case Q4_K:
				put16(out[1120+2*r:], le16(s))
				put16(out[1136+2*r:], le16(s[2:]))
			case IQ4_XS:
				put32(out[1024+4*r:], le32(s[4:]))
				put16(out[1056+2*r:], le16(s[2:]))
				put16(out[1072+2*r:], le16(s))
			case Q6_K:
				put16(out[1664+2*r:], le16(s[208:]))
			case Q8_0:
				put16(out[256+2*r:], le16(s))
			case Q4_0, IQ4_NL:
				put16(out[128+2*r:], le16(s))
			case Q4_1:
				put16(out[128+2*r:], le16(s))
				put16(out[144+2*r:], le16(s[2:]))
			case Q5_0:
				put32(out[128+4*r:], spreadQh(le32(s[2:])))
				put16(out[160+2*r:], le16(s))
			}
		}
	}
}
