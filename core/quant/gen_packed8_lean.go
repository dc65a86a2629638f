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
// The integer sums are exact either way, and the float code after them is
// the other blocks', so the results are the same bits.
package main

import "fmt"

// leanRows is the most activation rows the lean blocks take: they keep
// their constants in the registers the fourth row's sums would use.
const leanRows = 3

// leanSetup loads the lean blocks' constants (once per call).
func leanSetup(g *gen, five bool) {
	g.p("VMOVDQU p8_nib<>(SB), Y11")
	g.p("VMOVDQU p8_one16<>(SB), Y15")
	if five {
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
func q80Lean(g *gen, r int) {
	for k := 0; k < 8; k++ {
		g.p("VMOVDQU %d(SI), Y0", 32*k)
		g.p("VPABSB Y0, Y1")
		for j := 0; j < r; j++ {
			g.p("VPBROADCASTD %s, Y4", xa(2+4*k, j))
			g.p("VPSIGNB Y0, Y4, Y4")
			g.p("VPMADDUBSW Y4, Y1, Y5")
			if k == 0 {
				g.p("VPMADDWD Y15, Y5, %s", isum(j))
			} else {
				g.p("VPMADDWD Y15, Y5, Y5")
				g.p("VPADDD Y5, %s, %s", isum(j), isum(j))
			}
		}
	}
	q80Scale(g, r)
}

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
