//go:build ignore

// Part of gen_packed8.go (run together): the AVX2 8-row kernels of IQ4_NL
// and IQ4_XS.
//
// IQ4_NL's record is Q4_0's (four parts of nibbles, the rows' d as f16 at
// 128), but a nibble indexes a table of signed levels (−127…113) instead
// of standing for q − 8. VPSHUFB looks a part's nibbles up in two
// register-resident tables: the levels' magnitudes, VPMADDUBSW's unsigned
// operand, and the levels themselves, whose signs VPSIGNB puts on the
// broadcast activations (as Q8_0's kernel does with its stored signed
// quants). A pair sum reaches 2·127·127, so every part's int16 products
// are widened (VPMADDWD) before they are added. The activation scales are
// p8Scales' pairs (d_x, 0): no offset to take back.
//
// IQ4_XS is IQ4_NL's nibbles in 32-element sub-blocks of a 256-element
// super-block, each with a 6-bit scale ls − 32, against Q8_K. Its kernel
// unpacks the eight rows' scales of a sub-block together into [sc, sc]
// int16 pairs in the frame, and the VPMADDWD that widens a part's
// products multiplies them by the scale as it does (as Q4_K's kernel
// does): the scales cost nothing per activation row.
package main

import (
	"bytes"
	"fmt"
)

// iq4nlSetup loads the kernel's constants once a call: Y2 the signed
// levels, Y3 their magnitudes (both 128-bit halves alike, as VPSHUFB
// indexes within a half), Y7 the nibble mask and, where a fourth row's
// float sums do not need it, Y15 the int16 ones.
func iq4nlSetup(g *gen, r int) {
	g.p("VMOVDQU p8_iq4<>(SB), Y2")
	g.p("VMOVDQU p8_iq4abs<>(SB), Y3")
	g.p("VMOVDQU p8_nib<>(SB), Y7")
	if r <= 3 {
		g.p("VMOVDQU p8_one16<>(SB), Y15")
	}
}

// iq4nlBlock: per part, the low then the high nibbles: Y6 the part, Y0
// the nibbles then their levels, Y1 the levels' magnitudes; per row Y4
// the broadcast activations with the levels' signs, Y5 the products.
func iq4nlBlock(g *gen, r int) {
	ones := "p8_one16<>(SB)"
	if r <= 3 {
		ones = "Y15"
	}
	for k := 0; k < 4; k++ {
		g.p("VMOVDQU %d(SI), Y6", 32*k)
		for h := 0; h < 2; h++ {
			if h == 0 {
				g.p("VPAND Y7, Y6, Y0")
			} else {
				g.p("VPSRLW $4, Y6, Y0")
				g.p("VPAND Y7, Y0, Y0")
			}
			g.p("VPSHUFB Y0, Y3, Y1")
			g.p("VPSHUFB Y0, Y2, Y0")
			for j := 0; j < r; j++ {
				g.p("VPBROADCASTD %s, Y4", xa(2+16*h+4*k, j))
				g.p("VPSIGNB Y0, Y4, Y4")
				g.p("VPMADDUBSW Y4, Y1, Y5")
				if k == 0 && h == 0 {
					g.p("VPMADDWD %s, Y5, %s", ones, isum(j))
				} else {
					g.p("VPMADDWD %s, Y5, Y5", ones)
					g.p("VPADDD Y5, %s, %s", isum(j), isum(j))
				}
			}
		}
	}
	// acc += d_w·d_x·Σ, per row lane (as Q8_0's q80Scale, d at 128).
	g.p("VCVTPH2PS 128(SI), Y0")
	for j := 0; j < r; j++ {
		s := isum(j)
		g.p("VCVTDQ2PS %s, %s", s, s)
		g.p("VBROADCASTSS %s, Y4", sa(0, j))
		g.p("VMULPS Y4, Y0, Y4")
		g.p("VFMADD231PS %s, Y4, %s", s, acc(j))
	}
}

// iq4xsBlock: IQ4_XS against Q8_K. Record (1088 bytes, see packed8.go):
// 32 parts of nibbles (part 4s+k, lane r: qs[16s+4k:16s+4k+4] of row r),
// the rows' scales_l (a dword a row), scales_h and d (f16). The frame
// holds sub-block s's scales at 32s(SP). Registers as iq4nlBlock's, Y5
// and Y6 the scales' temporaries first.
func iq4xsBlock(g *gen, r int) {
	g.p("VMOVDQU 1024(SI), Y6")   // scales_l: sub-block s's low bits at dword bits 4s…4s+3
	g.p("VPMOVZXWD 1056(SI), Y5") // scales_h: its high bits at 2s, 2s+1
	for s := 0; s < 8; s++ {
		// Byte 0 of each lane: ls = low | high << 4 (the other bytes
		// garbage, which the pick drops).
		if s == 0 {
			g.p("VPAND Y7, Y6, Y0")
		} else {
			g.p("VPSRLD $%d, Y6, Y0", 4*s)
			g.p("VPAND Y7, Y0, Y0")
		}
		switch {
		case 2*s < 4:
			g.p("VPSLLD $%d, Y5, Y1", 4-2*s)
		case 2*s > 4:
			g.p("VPSRLD $%d, Y5, Y1", 2*s-4)
		default:
			g.p("VMOVDQA Y5, Y1")
		}
		g.p("VPAND p8_b30<>(SB), Y1, Y1")
		g.p("VPOR Y1, Y0, Y0")
		g.p("VPSHUFB p8_pick0<>(SB), Y0, Y0") // [ls, ls] as int16s
		g.p("VPSUBW p8_w32<>(SB), Y0, Y0")
		g.p("VMOVDQU Y0, %d(SP)", 32*s)
	}
	for s := 0; s < 8; s++ {
		for k := 0; k < 4; k++ {
			g.p("VMOVDQU %d(SI), Y6", 32*(4*s+k))
			for h := 0; h < 2; h++ {
				if h == 0 {
					g.p("VPAND Y7, Y6, Y0")
				} else {
					g.p("VPSRLW $4, Y6, Y0")
					g.p("VPAND Y7, Y0, Y0")
				}
				g.p("VPSHUFB Y0, Y3, Y1")
				g.p("VPSHUFB Y0, Y2, Y0")
				for j := 0; j < r; j++ {
					g.p("VPBROADCASTD %s, Y4", xa(4+32*s+16*h+4*k, j))
					g.p("VPSIGNB Y0, Y4, Y4")
					g.p("VPMADDUBSW Y4, Y1, Y5")
					if s == 0 && k == 0 && h == 0 {
						g.p("VPMADDWD %d(SP), Y5, %s", 32*s, isum(j))
					} else {
						g.p("VPMADDWD %d(SP), Y5, Y5", 32*s)
						g.p("VPADDD Y5, %s, %s", isum(j), isum(j))
					}
				}
			}
		}
	}
	// acc += d_w·d_x·Σ, d_x the Q8_K block's float32.
	g.p("VCVTPH2PS 1072(SI), Y0")
	for j := 0; j < r; j++ {
		s := isum(j)
		g.p("VCVTDQ2PS %s, %s", s, s)
		g.p("VBROADCASTSS %s, Y4", xa(0, j))
		g.p("VMULPS Y4, Y0, Y4")
		g.p("VFMADD231PS %s, Y4, %s", s, acc(j))
	}
}

// iq4Tables writes p8_iq4 (the IQ4_NL levels as int8, twice),
// p8_iq4abs (their magnitudes) and p8_w32 (int16 32s, IQ4_XS's scale
// offset).
func iq4Tables(s *bytes.Buffer) {
	for q := 0; q < 4; q++ {
		fmt.Fprintf(s, "DATA p8_w32<>+%d(SB)/8, $0x0020002000200020\n", 8*q)
	}
	s.WriteString("GLOBL p8_w32<>(SB), RODATA|NOPTR, $32\n\n")
	levels := [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	for _, t := range []struct {
		name string
		abs  bool
	}{{"p8_iq4", false}, {"p8_iq4abs", true}} {
		for q := 0; q < 4; q++ {
			var w uint64
			for i := 0; i < 8; i++ {
				v := levels[(8*q+i)%16]
				if t.abs && v < 0 {
					v = -v
				}
				w |= uint64(uint8(v)) << (8 * i)
			}
			fmt.Fprintf(s, "DATA %s<>+%d(SB)/8, $0x%016x\n", t.name, 8*q, w)
		}
		fmt.Fprintf(s, "GLOBL %s<>(SB), RODATA|NOPTR, $32\n\n", t.name)
	}
}
