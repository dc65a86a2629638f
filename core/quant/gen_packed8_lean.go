//go:build ignore

// Part of gen_packed8.go (run together): the AVX2 8-row kernels' blocks
// for one to three activation rows, a decode step's and a short verify's
// call.
//
// At one activation row a record's work is mostly its decode, which no
// other row shares, so what those blocks save is per part of the record:
//   - each part is loaded once and split into its low and high nibbles
//     (the blocks for four rows load it once per half, or per sub-block);
//   - the nibble mask and the int16 ones stay in registers (Y11, Y15),
//     where the four-row blocks, short of registers, take them from
//     memory: a load each time;
//   - a row's int16 sums run over as many products as cannot overflow
//     (eight 4-bit products: 8·2·15·127 < 2^15; four 5-bit ones) before
//     one VPMADDWD widens them.
//
// The integer sums are exact either way, and the float code after them is
// the other blocks', so the results are the same bits.
package main

import (
	"bytes"
	"fmt"
)

// leanRows is the most activation rows the lean blocks take: they keep
// their constants in the registers the fourth row's sums would use.
const leanRows = 3

// leanSetup loads the lean blocks' constants (once per call).
func leanSetup(g *gen, r int, five bool) {
	if r > leanRows {
		return
	}
	g.p("VMOVDQU p8_nib<>(SB), Y11")
	g.p("VMOVDQU p8_one16<>(SB), Y15")
	if five && r <= 2 {
		g.p("VMOVDQU p8_b10<>(SB), Y14") // free up to two rows
	}
}

// nibbleLean is nibbleBlock (Q4_0, Q4_1, Q5_0) for r ≤ leanRows rows.
// Registers: Y0, Y1 a part's low and high quants, Y2 and Y4
// temporaries, Y5, Y6, Y3 rows 0–2's int16 sums, Y7 the qh' words, Y8+j
// row j's int32 sums.
func nibbleLean(g *gen, r int, five bool, dOff, qOff, mOff int) {
	b10 := "Y14"
	if r > 2 {
		b10 = "p8_b10<>(SB)"
	}
	if five {
		g.p("VMOVDQU 128(SI), Y7")
	}
	per := 4 // parts whose products a row's int16 sums take (two products a part)
	if five {
		per = 2
	}
	s16 := []string{"Y5", "Y6", "Y3"}
	for k := 0; k < 4; k++ {
		g.p("VMOVDQU %d(SI), Y0", 32*k)
		g.p("VPSRLW $4, Y0, Y1")
		g.p("VPAND Y11, Y0, Y0")
		g.p("VPAND Y11, Y1, Y1")
		if five { // qh' byte i: bit k, bit 4+k the fifth bits of the low, high quant
			g.p("VPSLLD $%d, Y7, Y4", 4-k)
			g.p("VPAND %s, Y4, Y4", b10)
			g.p("VPOR Y4, Y0, Y0")
			if k == 0 {
				g.p("VPAND %s, Y7, Y4", b10)
			} else {
				g.p("VPSRLD $%d, Y7, Y4", k)
				g.p("VPAND %s, Y4, Y4", b10)
			}
			g.p("VPOR Y4, Y1, Y1")
		}
		for j := 0; j < r; j++ {
			g.p("VPBROADCASTD %s, Y2", xa(qOff+4*k, j))
			if k%per == 0 {
				g.p("VPMADDUBSW Y2, Y0, %s", s16[j])
			} else {
				g.p("VPMADDUBSW Y2, Y0, Y2")
				g.p("VPADDW Y2, %s, %s", s16[j], s16[j])
			}
			g.p("VPBROADCASTD %s, Y2", xa(qOff+16+4*k, j))
			g.p("VPMADDUBSW Y2, Y1, Y2")
			g.p("VPADDW Y2, %s, %s", s16[j], s16[j])
			if k%per == per-1 {
				if k+1 == per {
					g.p("VPMADDWD Y15, %s, %s", s16[j], isum(j))
				} else {
					g.p("VPMADDWD Y15, %s, %s", s16[j], s16[j])
					g.p("VPADDD %s, %s, %s", s16[j], isum(j), isum(j))
				}
			}
		}
	}
	nibbleScale(g, r, dOff, mOff)
}

// q80Lean is q80Block for r ≤ leanRows rows, the int16 ones from Y15.
func q80Lean(g *gen, r int) { q80Madd(g, r, "Y15") }

// q4kLean is q4kBlock for r ≤ leanRows rows: the two sub-blocks 2t and
// 2t+1 whose quants share parts (low and high nibbles) go together, so a
// part is loaded and split once. Registers: Y0, Y1 a part's low and high
// quants, Y2+2j and Y3+2j row j's int16 sums of the two sub-blocks, Y8+j
// its int32 sum, one temporary (Y6, or Y15 for three rows: Q4_K takes no
// int16 ones).
func q4kLean(g *gen, r int) {
	q4kScales(g, ymm, "pick")
	tmp := "Y6"
	if r == 3 {
		tmp = "Y15"
	}
	s16 := func(j, h int) string { return fmt.Sprintf("Y%d", 2+2*j+h) }
	for t := 0; t < 4; t++ {
		for k := 0; k < 8; k++ {
			q4kSpreadPrefetch(g, 8*t+k)
			g.p("VMOVDQU %d(SI), Y0", 32*(8*t+k))
			g.p("VPSRLW $4, Y0, Y1")
			g.p("VPAND Y11, Y0, Y0")
			g.p("VPAND Y11, Y1, Y1")
			for j := 0; j < r; j++ {
				for h := 0; h < 2; h++ {
					g.p("VPBROADCASTD %s, %s", xa(4+32*(2*t+h)+4*k, j), tmp)
					if k == 0 {
						g.p("VPMADDUBSW %s, Y%d, %s", tmp, h, s16(j, h))
					} else {
						g.p("VPMADDUBSW %s, Y%d, %s", tmp, h, tmp)
						g.p("VPADDW %s, %s, %s", tmp, s16(j, h), s16(j, h))
					}
				}
			}
		}
		for j := 0; j < r; j++ {
			for h := 0; h < 2; h++ {
				g.p("VPMADDWD %d(SP), %s, %s", 32*(2*t+h), s16(j, h), s16(j, h))
			}
			if t == 0 {
				g.p("VPADDD %s, %s, %s", s16(j, 0), s16(j, 1), isum(j))
			} else {
				g.p("VPADDD %s, %s, %s", s16(j, 0), isum(j), isum(j))
				g.p("VPADDD %s, %s, %s", s16(j, 1), isum(j), isum(j))
			}
		}
	}
	q4kFinish(g, r)
}

// q6kAVX2 is the AVX2 8-row Q6_K block over the VNNI kernels' layout
// (see q6kBlockV), for one to four rows, a quarter at a time: a part's
// quants are rebuilt from its ql nibble and two qh bits (a load, a
// mask, a shift, a mask and an or, and for the high nibble one shift
// more), and its VPMADDUBSW pairs (|Σ| ≤ 2·63·127) are summed two parts
// at a time in int16 before one VPMADDWD scales them by the sub-block's
// scale, held as the int16 pair (sc, sc) in the frame. The −32 offset
// comes back as in the VNNI kernel, −32·Σ sc·bsum with VPMADDWD, so the
// integer sums, and with the shared float code the bits, are the VNNI
// kernel's. Frame: 0(SP) + 32sb sub-block sb's (sc, sc) pairs, 512(SP) +
// 32t the pairs (−32·sc_2t, −32·sc_2t+1). Registers: Y0 the quants, Y1
// the qh bits, Y2 the products, Y3 the nibble mask, Y4+j row j's int16
// sums, Y8+j its int32 sums; the 0x30 mask in Y15 up to three rows.
//
// Why eight rows: the row kernel spends on every 32 weights a scale
// shuffle, a VPMADDWD and an add per row beside the same rebuild; here
// the scaling is a VPMADDWD per 64 weights of eight rows.
func q6kAVX2(g *gen, r int) {
	b30 := "Y15"
	if r > 3 {
		b30 = "p8_b30<>(SB)"
	}
	const ahead = 2 * 1680 // two records, the VNNI kernel's distance
	q6kFrame(g)
	first := true
	step := 0
	for n := 0; n < 2; n++ {
		for half := 0; half < 2; half++ {
			for k := 0; k < 4; k++ {
				// Two of the next records' lines per quarter (a burst at
				// the top of the record halved the VNNI kernel's stream).
				for i := 0; i < 2; i++ {
					g.p("PREFETCHT0 %d(SI)", ahead+64*(2*step+i))
				}
				step++
				sb := 8*n + 2*k + half
				for l := 4 * half; l < 4*half+4; l++ {
					ql := 32 * (16*n + 8*(k&1) + l)
					g.p("VMOVDQU %d(SI), Y0", ql)
					if k >= 2 {
						g.p("VPSRLW $4, Y0, Y0")
					}
					g.p("VPAND Y3, Y0, Y0")
					g.p("VMOVDQU %d(SI), Y1", 1024+32*(8*n+l))
					switch k { // qh bits 2k, 2k+1 to bits 4, 5
					case 0:
						g.p("VPSLLW $4, Y1, Y1")
					case 1:
						g.p("VPSLLW $2, Y1, Y1")
					case 3:
						g.p("VPSRLW $2, Y1, Y1")
					}
					g.p("VPAND %s, Y1, Y1", b30)
					g.p("VPOR Y1, Y0, Y0")
					for j := 0; j < r; j++ {
						s16 := fmt.Sprintf("Y%d", 4+j)
						g.p("VPBROADCASTD %s, Y2", xa(4+128*n+32*k+4*l, j))
						if l%2 == 0 {
							g.p("VPMADDUBSW Y2, Y0, %s", s16)
							continue
						}
						g.p("VPMADDUBSW Y2, Y0, Y2")
						g.p("VPADDW Y2, %s, %s", s16, s16)
						g.p("VPMADDWD %d(SP), %s, %s", 32*sb, s16, s16)
						if first && l == 4*half+1 {
							g.p("VMOVDQA %s, %s", s16, isum(j))
						} else {
							g.p("VPADDD %s, %s, %s", s16, isum(j), isum(j))
						}
					}
					if l%2 == 1 {
						first = false
					}
				}
			}
		}
	}
	q6kOffsetFinish(g, r)
}

// q6kFrame lays out a record's scales in the frame for q6kAVX2 and
// q6kLean.
func q6kFrame(g *gen) {
	for i := 0; i < 4; i++ {
		g.p("VMOVDQU %d(SI), Y4", 1536+32*i)
		for b := 0; b < 4; b++ {
			g.p("VPSHUFB p8_pickh%d<>(SB), Y4, Y5", b)
			g.p("VPSRAW $8, Y5, Y5") // (sc, sc), sign-extended
			g.p("VMOVDQU Y5, %d(SP)", 32*(4*i+b))
		}
		g.p("VPXOR Y6, Y6, Y6")
		for h := 0; h < 2; h++ {
			g.p("VPSHUFB p8_pickw%d<>(SB), Y4, Y5", h)
			g.p("VPSRAW $3, Y5, Y5") // sc·32, the byte having been the high one
			g.p("VPSUBW Y5, Y6, Y5")
			g.p("VMOVDQU Y5, %d(SP)", 512+32*(2*i+h))
		}
	}
}

// q6kOffsetFinish adds the −32 offset's sums to the rows' int32 sums and
// those, scaled, to their float sums, as the VNNI kernel does.
func q6kOffsetFinish(g *gen, r int) {
	for t := 0; t < 8; t++ {
		g.p("VMOVDQU %d(SP), Y0", 512+32*t)
		for j := 0; j < r; j++ {
			g.p("VPBROADCASTD %s, Y1", xa(260+4*t, j))
			g.p("VPMADDWD Y0, Y1, Y1")
			g.p("VPADDD Y1, %s, %s", isum(j), isum(j))
		}
	}
	g.p("VCVTPH2PS 1664(SI), Y2")
	for j := 0; j < r; j++ {
		g.p("VCVTDQ2PS %s, %s", isum(j), isum(j))
		g.p("VBROADCASTSS %s, Y1", xa(0, j))
		g.p("VMULPS Y1, Y2, Y4")
		g.p("VFMADD231PS %s, Y4, %s", isum(j), acc(j))
	}
}

// q6kSetup loads q6kAVX2's constants.
func q6kSetup(g *gen, r int) {
	g.p("VMOVDQU p8_nib<>(SB), Y3")
	if r <= 3 {
		g.p("VMOVDQU p8_b30<>(SB), Y15")
	}
}

// leanTables writes the lean blocks' shuffle tables: p8_pickh<b>, byte b
// of each row's 4-byte lane in the high byte of both its int16s.
func leanTables(s *bytes.Buffer) {
	for b := uint32(0); b < 4; b++ {
		shuffle32(s, fmt.Sprintf("p8_pickh%d", b), func(base uint32) uint32 { return 0x80 | (base+b)<<8 | 0x80<<16 | (base+b)<<24 })
	}
}

// q6kLean is q6kAVX2 for one activation row: an l-step's three parts
// (two of ql, one of qh) are loaded once and rebuilt into all four
// quarters' quants (Y0, Y1, Y4, Y6), where the quarter-at-a-time order
// loads ql twice and qh four times. Y7, Y9, Y10, Y11 hold the quarters'
// int16 sums, Y5 is the temporary.
func q6kLean(g *gen, r int) {
	if r != 1 {
		panic("q6kLean: one row")
	}
	q6kFrame(g)
	const ahead = 2 * 1680
	q := []string{"Y0", "Y1", "Y4", "Y6"}
	s16 := []string{"Y7", "Y9", "Y10", "Y11"}
	first := true
	for n := 0; n < 2; n++ {
		for l := 0; l < 8; l++ {
			step := 8*n + l
			for i := 0; i < 2; i++ {
				g.p("PREFETCHT0 %d(SI)", ahead+64*(2*step+i))
			}
			g.p("VMOVDQU %d(SI), Y0", 32*(16*n+l))
			g.p("VMOVDQU %d(SI), Y1", 32*(16*n+8+l))
			g.p("VMOVDQU %d(SI), Y2", 1024+32*(8*n+l))
			g.p("VPSRLW $4, Y0, Y4") // quarter 2: ql_a's high nibble, qh bits 4, 5
			g.p("VPAND Y3, Y4, Y4")
			g.p("VPAND Y15, Y2, Y5")
			g.p("VPOR Y5, Y4, Y4")
			g.p("VPAND Y3, Y0, Y0") // quarter 0: ql_a's low nibble, qh bits 0, 1
			g.p("VPSLLW $4, Y2, Y5")
			g.p("VPAND Y15, Y5, Y5")
			g.p("VPOR Y5, Y0, Y0")
			g.p("VPSRLW $4, Y1, Y6") // quarter 3: ql_b's high nibble, qh bits 6, 7
			g.p("VPAND Y3, Y6, Y6")
			g.p("VPSRLW $2, Y2, Y5")
			g.p("VPAND Y15, Y5, Y5")
			g.p("VPOR Y5, Y6, Y6")
			g.p("VPAND Y3, Y1, Y1") // quarter 1: ql_b's low nibble, qh bits 2, 3
			g.p("VPSLLW $2, Y2, Y5")
			g.p("VPAND Y15, Y5, Y5")
			g.p("VPOR Y5, Y1, Y1")
			for k := 0; k < 4; k++ {
				g.p("VPBROADCASTD %s, Y5", xa(4+128*n+32*k+4*l, 0))
				if l%2 == 0 {
					g.p("VPMADDUBSW Y5, %s, %s", q[k], s16[k])
					continue
				}
				sb := 8*n + 2*k + l/4
				g.p("VPMADDUBSW Y5, %s, Y5", q[k])
				g.p("VPADDW Y5, %s, %s", s16[k], s16[k])
				g.p("VPMADDWD %d(SP), %s, %s", 32*sb, s16[k], s16[k])
				if first {
					g.p("VMOVDQA %s, %s", s16[k], isum(0))
					first = false
				} else {
					g.p("VPADDD %s, %s, %s", s16[k], isum(0), isum(0))
				}
			}
		}
	}
	q6kOffsetFinish(g, r)
}

// q4kSpreadPrefetch issues, before part p (0…31) of a Q4_K record, its
// share of the prefetches of the record q4kAhead bytes on: the record's
// 18 lines spread over its parts, as the VNNI kernel spreads them over
// its sub-blocks. All 18 at the top of the record, a Qwen2.5-1.5B-sized
// Q4_K stream on one thread reached 0.70 of the read bandwidth where the
// other types' reached 0.8–1.0.
func q4kSpreadPrefetch(g *gen, p int) {
	for line := 18 * p / 32; line < 18*(p+1)/32; line++ {
		g.p("PREFETCHT0 %d(SI)", q4kAhead+64*line)
	}
}
