//go:build ignore

// Part of gen_packed8.go (run together): the AVX-VNNI 8-row kernels, for
// CPUs that have VPDPBUSD only in its VEX form on YMM registers (Intel's
// client cores from Alder Lake on, AMD Zen 5 where AVX-512 is off), over
// the 8-row layout of the AVX2 and AVX-512 VNNI kernels.
//
// VPDPBUSD adds four u8×s8 products into each int32 lane, where AVX2 needs
// VPMADDUBSW, VPADDW and VPMADDWD; its VEX form has no embedded broadcast
// and reaches only Y0–Y15, so the activations are broadcast into a
// register first and a call takes at most four rows, as the AVX2 kernels.
// The integer sums are exact either way and the float code after them is
// the AVX2 kernels', so the results are the same bits
// (TestPacked8AVXVNNIEqualsAVX2, and TestEmulatedAVXVNNI where the CPU
// cannot run them).
//
// Go's assembler knows VPDPBUSD only in its EVEX form, so vexDPBUSD
// writes the VEX encoding as bytes, with the instruction in Go's syntax
// beside it in a comment (the emulator in avxvnni_emu_test.go decodes the
// bytes, not the comment).
package main

import "fmt"

// vexDPBUSD emits VPDPBUSD src2, src1, dst (Go operand order: dst +=
// src1 (unsigned bytes) · src2 (signed bytes), four products a lane), all
// three YMM registers Y0–Y15: VEX.256.66.0F38.W0 50 /r.
func vexDPBUSD(g *gen, src2, src1, dst int) {
	b1 := byte(0x02) // map 0F38
	if dst < 8 {
		b1 |= 0x80 // R̄: ModRM.reg (dst) is Y0–Y7
	}
	b1 |= 0x40 // X̄: no index register
	if src2 < 8 {
		b1 |= 0x20 // B̄: ModRM.rm (src2) is Y0–Y7
	}
	b2 := byte((^src1&15)<<3 | 1<<2 | 1) // W0, vvvv = ~src1, L = 256, pp = 66
	modrm := byte(0xC0 | (dst&7)<<3 | src2&7)
	g.p("BYTE $0xc4; BYTE $0x%02x; BYTE $0x%02x; BYTE $0x50; BYTE $0x%02x // VPDPBUSD Y%d, Y%d, Y%d", b1, b2, modrm, src2, src1, dst)
}

// ymmNum is n of "Yn".
func ymmNum(r string) int {
	var n int
	if _, err := fmt.Sscanf(r, "Y%d", &n); err != nil || n > 15 {
		panic("not a VEX YMM register: " + r)
	}
	return n
}

// nibbleVex is nibbleBlock (Q4_0, Q4_1, Q5_0) with VPDPBUSD: each part
// loaded once and split into its two nibbles, each row's products added
// straight into its int32 sums. Registers: Y0, Y1 a part's low and high
// quants, Y2 the broadcast activations, Y4 a temporary, Y3 the 0x10
// bytes, Y6 the nibble mask (nibbleScale leaves both alone), Y7 the qh'
// words, Y8+j row j's int32 sums.
func nibbleVex(g *gen, r int, five bool, dOff, qOff, mOff int) {
	if five {
		g.p("VMOVDQU 128(SI), Y7")
	}
	for j := 0; j < r; j++ {
		g.p("VPXOR %s, %s, %s", isum(j), isum(j), isum(j))
	}
	for k := 0; k < 4; k++ {
		g.p("VMOVDQU %d(SI), Y0", 32*k)
		g.p("VPSRLW $4, Y0, Y1")
		g.p("VPAND Y6, Y0, Y0")
		g.p("VPAND Y6, Y1, Y1")
		if five {
			g.p("VPSLLD $%d, Y7, Y4", 4-k)
			g.p("VPAND Y3, Y4, Y4")
			g.p("VPOR Y4, Y0, Y0")
			if k == 0 {
				g.p("VPAND Y3, Y7, Y4")
			} else {
				g.p("VPSRLD $%d, Y7, Y4", k)
				g.p("VPAND Y3, Y4, Y4")
			}
			g.p("VPOR Y4, Y1, Y1")
		}
		for j := 0; j < r; j++ {
			g.p("VPBROADCASTD %s, Y2", xa(qOff+4*k, j))
			vexDPBUSD(g, 2, 0, ymmNum(isum(j)))
			g.p("VPBROADCASTD %s, Y2", xa(qOff+16+4*k, j))
			vexDPBUSD(g, 2, 1, ymmNum(isum(j)))
		}
	}
	nibbleScale(g, r, dOff, mOff)
}

// q80Vex is q80Block with VPDPBUSD: |w| (unsigned) against x·sign(w).
func q80Vex(g *gen, r int) {
	for j := 0; j < r; j++ {
		g.p("VPXOR %s, %s, %s", isum(j), isum(j), isum(j))
	}
	q80Parts(g, r, func(_, j int) { vexDPBUSD(g, 4, 1, ymmNum(isum(j))) })
}

// q4kVex is q4kBlock with VPDPBUSD: a sub-block's Σ q·x an int32 per row
// lane, times its scale (q4kScales' "pickd": an int32 per lane) with
// VPMULLD. Up to two rows, the two sub-blocks sharing a part go together
// (the part loaded and split once; Y2+2j, Y3+2j row j's sums of them);
// three and four rows take a sub-block at a time (Y2+j). Y0, Y1 the
// quants, Y6 the broadcast activations, Y7 the nibble mask.
func q4kVex(g *gen, r int) {
	q4kScales(g, ymm, "pickd")
	g.p("VMOVDQU p8_nib<>(SB), Y7")
	if r <= 2 {
		for t := 0; t < 4; t++ {
			for k := 0; k < 8; k++ {
				g.p("VMOVDQU %d(SI), Y0", 32*(8*t+k))
				g.p("VPSRLW $4, Y0, Y1")
				g.p("VPAND Y7, Y0, Y0")
				g.p("VPAND Y7, Y1, Y1")
				for j := 0; j < r; j++ {
					for h := 0; h < 2; h++ {
						s := 2 + 2*j + h
						if k == 0 {
							g.p("VPXOR Y%d, Y%d, Y%d", s, s, s)
						}
						g.p("VPBROADCASTD %s, Y6", xa(4+32*(2*t+h)+4*k, j))
						vexDPBUSD(g, 6, h, s)
					}
				}
			}
			for j := 0; j < r; j++ {
				for h := 0; h < 2; h++ {
					g.p("VPMULLD %d(SP), Y%d, Y%d", 32*(2*t+h), 2+2*j+h, 2+2*j+h)
				}
				if t == 0 {
					g.p("VPADDD Y%d, Y%d, %s", 2+2*j, 3+2*j, isum(j))
				} else {
					g.p("VPADDD Y%d, %s, %s", 2+2*j, isum(j), isum(j))
					g.p("VPADDD Y%d, %s, %s", 3+2*j, isum(j), isum(j))
				}
			}
		}
		q4kFinish(g, r)
		return
	}
	for s := 0; s < 8; s++ {
		for k := 0; k < 8; k++ {
			g.p("VMOVDQU %d(SI), Y0", 32*(8*(s/2)+k))
			if s%2 == 1 {
				g.p("VPSRLW $4, Y0, Y0")
			}
			g.p("VPAND Y7, Y0, Y0")
			for j := 0; j < r; j++ {
				if k == 0 {
					g.p("VPXOR Y%d, Y%d, Y%d", 2+j, 2+j, 2+j)
				}
				g.p("VPBROADCASTD %s, Y6", xa(4+32*s+4*k, j))
				vexDPBUSD(g, 6, 0, 2+j)
			}
		}
		for j := 0; j < r; j++ {
			if s == 0 {
				g.p("VPMULLD %d(SP), Y%d, %s", 32*s, 2+j, isum(j))
			} else {
				g.p("VPMULLD %d(SP), Y%d, Y%d", 32*s, 2+j, 2+j)
				g.p("VPADDD Y%d, %s, %s", 2+j, isum(j), isum(j))
			}
		}
	}
	q4kFinish(g, r)
}

// q6kVex is q6kAVX2 with VPDPBUSD: a sub-block's int32 sums (a quarter's
// four l-steps) times its scale (q6kScales: an int32 per lane) with
// VPMULLD, the −32 offset and the float code as q6kAVX2's. One row
// rebuilds an l-step's four quarters together (q6kLean's order; Y7, Y9,
// Y10, Y11 the quarters' sums); more rows go a quarter at a time (Y4+j).
// Y3 the nibble mask, the 0x30 mask in Y15 up to three rows.
func q6kVex(g *gen, r int) {
	b30 := "Y15"
	if r > 3 {
		b30 = "p8_b30<>(SB)"
	}
	const ahead = 2 * 1680
	q6kScales(g, ymm)
	g.p("VMOVDQU p8_nib<>(SB), Y3")
	if r <= 3 {
		g.p("VMOVDQU p8_b30<>(SB), Y15")
	}
	for j := 0; j < r; j++ {
		g.p("VPXOR %s, %s, %s", isum(j), isum(j), isum(j))
	}
	if r == 1 {
		q := []int{0, 1, 4, 6}
		s := []int{7, 9, 10, 11}
		for n := 0; n < 2; n++ {
			for l := 0; l < 8; l++ {
				step := 8*n + l
				for i := 0; i < 2; i++ {
					g.p("PREFETCHT0 %d(SI)", ahead+64*(2*step+i))
				}
				g.p("VMOVDQU %d(SI), Y0", 32*(16*n+l))
				g.p("VMOVDQU %d(SI), Y1", 32*(16*n+8+l))
				g.p("VMOVDQU %d(SI), Y2", 1024+32*(8*n+l))
				g.p("VPSRLW $4, Y0, Y4")
				g.p("VPAND Y3, Y4, Y4")
				g.p("VPAND Y15, Y2, Y5")
				g.p("VPOR Y5, Y4, Y4")
				g.p("VPAND Y3, Y0, Y0")
				g.p("VPSLLW $4, Y2, Y5")
				g.p("VPAND Y15, Y5, Y5")
				g.p("VPOR Y5, Y0, Y0")
				g.p("VPSRLW $4, Y1, Y6")
				g.p("VPAND Y3, Y6, Y6")
				g.p("VPSRLW $2, Y2, Y5")
				g.p("VPAND Y15, Y5, Y5")
				g.p("VPOR Y5, Y6, Y6")
				g.p("VPAND Y3, Y1, Y1")
				g.p("VPSLLW $2, Y2, Y5")
				g.p("VPAND Y15, Y5, Y5")
				g.p("VPOR Y5, Y1, Y1")
				for k := 0; k < 4; k++ {
					if l%4 == 0 {
						g.p("VPXOR Y%d, Y%d, Y%d", s[k], s[k], s[k])
					}
					g.p("VPBROADCASTD %s, Y5", xa(4+128*n+32*k+4*l, 0))
					vexDPBUSD(g, 5, q[k], s[k])
					if l%4 == 3 {
						sb := 8*n + 2*k + l/4
						g.p("VPMULLD %d(SP), Y%d, Y%d", 32*sb, s[k], s[k])
						g.p("VPADDD Y%d, %s, %s", s[k], isum(0), isum(0))
					}
				}
			}
		}
		q6kOffsetFinish(g, r)
		return
	}
	step := 0
	for n := 0; n < 2; n++ {
		for half := 0; half < 2; half++ {
			for k := 0; k < 4; k++ {
				for i := 0; i < 2; i++ {
					g.p("PREFETCHT0 %d(SI)", ahead+64*(2*step+i))
				}
				step++
				for j := 0; j < r; j++ {
					g.p("VPXOR Y%d, Y%d, Y%d", 4+j, 4+j, 4+j)
				}
				for l := 4 * half; l < 4*half+4; l++ {
					g.p("VMOVDQU %d(SI), Y0", 32*(16*n+8*(k&1)+l))
					if k >= 2 {
						g.p("VPSRLW $4, Y0, Y0")
					}
					g.p("VPAND Y3, Y0, Y0")
					g.p("VMOVDQU %d(SI), Y1", 1024+32*(8*n+l))
					switch k {
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
						g.p("VPBROADCASTD %s, Y2", xa(4+128*n+32*k+4*l, j))
						vexDPBUSD(g, 2, 0, 4+j)
					}
				}
				sb := 8*n + 2*k + half
				for j := 0; j < r; j++ {
					g.p("VPMULLD %d(SP), Y%d, Y%d", 32*sb, 4+j, 4+j)
					g.p("VPADDD Y%d, %s, %s", 4+j, isum(j), isum(j))
				}
			}
		}
	}
	q6kOffsetFinish(g, r)
}

// vexSetup loads nibbleVex's constants.
func vexSetup(g *gen, five bool) {
	g.p("VMOVDQU p8_nib<>(SB), Y6")
	if five {
		g.p("VMOVDQU p8_b10<>(SB), Y3")
	}
}
