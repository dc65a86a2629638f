//go:build ignore

// gen_lowbit writes dot_lowbit_amd64.s and dot_lowbit_amd64.go: the AVX2
// dot kernels of the low-bit weight types (Q2_K, Q3_K, IQ4_XS against
// Q8_K; IQ4_NL, MXFP4 against Q8_0; the grid i-quants of gen_iquant.go
// against Q8_K).
// Run: go run gen_lowbit.go gen_iquant.go gen_blockrow.go gen_rowkernel.go
//
// They are gen_avx2.go's kind: gen_rowkernel.go's multi-row contract and
// gen_blockrow.go's loop over a weight row's blocks, whose per-row
// accumulators keep a row's result apart from the batch
// (TestBatchInvariance); this file has each type's block. Integer
// products are VPMADDUBSW (unsigned weight × signed activation → int16
// pairs) then VPMADDWD (by ones or by the sub-block scales). How each type gets an unsigned operand:
//   - Q2_K: its quants are 0..3; the mins come from Q8_K's sums.
//   - Q3_K: q+4 ∈ [0, 7] is the 2 low bits with the high bit as bit 2, so
//     the −4 comes back as −4·Σ sc·bsum once per block (as Q6_K's −32).
//   - IQ4_NL, IQ4_XS, MXFP4: a table lookup (VPSHUFB) gives signed levels;
//     they go in as |w| with the activation's sign flipped where w < 0
//     (VPSIGNB). No int16 saturates: |w|·|x| ≤ 127·127, twice, < 2^15.
package main

import (
	"bytes"
	"fmt"
	"math"
)

// addInt starts (first) or adds to row j's int32 sums with v.
func addInt(g *gen, j int, v string, first bool) {
	if first {
		g.p("VMOVDQA %s, %s", v, acci(j))
	} else {
		g.p("VPADDD %s, %s, %s", v, acci(j), acci(j))
	}
}

// tableRows: Y0 holds 32 signed weights of a 32-element block whose f16
// scale is at 0(SI) (dw: "") or whose float scale is already in Y2.
// Per row: Σ w·x per lane group, times d_w·d_x, into the pair sum.
func tableRows(g *gen, r int, first bool, f16 bool) {
	g.p("VPSIGNB Y0, Y0, Y1") // |w|
	if f16 {
		g.p("VPBROADCASTW (SI), X2")
		g.p("VCVTPH2PS X2, Y2")
	}
	for j := 0; j < r; j++ {
		g.p("VMOVDQU %s, Y4", xa(2, j))
		g.p("VPSIGNB Y0, Y4, Y4") // x·sign(w)
		g.p("VPMADDUBSW Y4, Y1, Y4")
		g.p("VPMADDWD Y10, Y4, Y4")
		g.p("VCVTDQ2PS Y4, Y4")
		g.p("VBROADCASTSS %s, Y5", sa(0, j))
		g.p("VMULPS Y2, Y5, Y5")
		into(g, j, "Y4", "Y5", first)
	}
}

// spreadNibbles loads the 4 bytes at off(SI) into AX as 8 bytes, byte s
// being nibble s%2 of byte s/2 (BX is clobbered).
func spreadNibbles(g *gen, off int) {
	g.p("MOVL %d(SI), AX", off)
	for _, st := range []struct {
		shift int
		mask  uint64
	}{{16, 0x0000FFFF0000FFFF}, {8, 0x00FF00FF00FF00FF}, {4, 0x0F0F0F0F0F0F0F0F}} {
		g.p("MOVQ AX, BX")
		g.p("SHLQ $%d, BX", st.shift)
		g.p("ORQ BX, AX")
		g.p("MOVQ $0x%016X, BX", st.mask)
		g.p("ANDQ BX, AX")
	}
}

// kFinish adds, per row, d_w·d_x·Σ(int32 sums) to the float accumulator;
// Y1 holds d_w (the block's f16 super-block scale) in every lane.
func kFinish(g *gen, r int) {
	for j := 0; j < r; j++ {
		g.p("VCVTDQ2PS %s, Y4", acci(j))
		g.p("VBROADCASTSS %s, Y5", xa(0, j))
		g.p("VMULPS Y1, Y5, Y5")
		g.p("VFMADD231PS Y4, Y5, %s", acc(j))
	}
}

var kernels = []kernel{
	{
		name: "lowbitQ2_K", wb: 84, xb: 292,
		doc: "Q2_K × Q8_K: per 16-element sub-block Σ q·x times its 4-bit scale (VPMADDWD), the mins through Q8_K's 16-element sums.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB lb_b03<>(SB), Y7")
		},
		block: func(g *gen, r int, _ bool) {
			g.p("VMOVDQU (SI), X0")
			g.p("VPAND lb_b0f<>(SB), X0, X1")
			g.p("VINSERTI128 $1, X1, Y1, Y1") // the 16 scales in both lanes
			first := true
			for h := 0; h < 2; h++ {
				g.p("VMOVDQU %d(SI), Y2", 16+32*h)
				for j := 0; j < 4; j++ {
					if j == 0 {
						g.p("VPAND Y7, Y2, Y3")
					} else {
						g.p("VPSRLW $%d, Y2, Y3", 2*j)
						g.p("VPAND Y7, Y3, Y3")
					}
					g.p("VPSHUFB lb_q2s%d<>(SB), Y1, Y4", 4*h+j)
					for k := 0; k < r; k++ {
						g.p("VPMADDUBSW %s, Y3, Y5", xa(4+128*h+32*j, k))
						g.p("VPMADDWD Y4, Y5, Y5")
						addInt(g, k, "Y5", first)
					}
					first = false
				}
			}
			// acc += d·d_x·Σ sc·Σqx − dmin·d_x·Σ m·bsum.
			g.p("VPSRLW $4, X0, X0")
			g.p("VPAND lb_b0f<>(SB), X0, X0")
			g.p("VPMOVZXBW X0, Y0") // the 16 mins as int16
			g.p("VPBROADCASTW 80(SI), X1")
			g.p("VCVTPH2PS X1, Y1")
			g.p("VPBROADCASTW 82(SI), X2")
			g.p("VCVTPH2PS X2, Y2")
			for j := 0; j < r; j++ {
				g.p("VBROADCASTSS %s, Y3", xa(0, j))
				g.p("VMULPS Y1, Y3, Y4")
				g.p("VMULPS Y2, Y3, Y3")
				g.p("VCVTDQ2PS %s, Y5", acci(j))
				g.p("VFMADD231PS Y5, Y4, %s", acc(j))
				g.p("VPMADDWD %s, Y0, Y6", xa(260, j))
				g.p("VCVTDQ2PS Y6, Y6")
				g.p("VFNMADD231PS Y6, Y3, %s", acc(j))
			}
		},
	},
	{
		name: "lowbitQ3_K", wb: 110, xb: 292,
		doc: "Q3_K × Q8_K: q+4 in [0, 7] against x, per 16-element sub-block times its signed 6-bit scale; the −4 as 4·Σ sc·bsum once per block.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB lb_b03<>(SB), Y7")
		},
		block: func(g *gen, r int, _ bool) {
			// The sixteen 6-bit scales (see scalesQ3K): low nibbles from
			// bytes 0..7, top 2 bits from bytes 8..11.
			g.p("MOVL 96(SI), AX")
			g.p("MOVL 100(SI), BX")
			g.p("MOVL 104(SI), R10")
			g.p("MOVL AX, R11")
			g.p("ANDL $0x0f0f0f0f, R11")
			g.p("MOVL R10, R12")
			g.p("SHLL $4, R12")
			g.p("ANDL $0x30303030, R12")
			g.p("ORL R12, R11") // sc 0..3
			g.p("MOVL BX, R12")
			g.p("ANDL $0x0f0f0f0f, R12")
			g.p("MOVL R10, R13")
			g.p("SHLL $2, R13")
			g.p("ANDL $0x30303030, R13")
			g.p("ORL R13, R12") // sc 4..7
			g.p("SHLQ $32, R12")
			g.p("ORQ R12, R11")
			g.p("SHRL $4, AX")
			g.p("ANDL $0x0f0f0f0f, AX")
			g.p("MOVL R10, R13")
			g.p("ANDL $0x30303030, R13")
			g.p("ORL R13, AX") // sc 8..11
			g.p("SHRL $4, BX")
			g.p("ANDL $0x0f0f0f0f, BX")
			g.p("SHRL $2, R10")
			g.p("ANDL $0x30303030, R10")
			g.p("ORL R10, BX") // sc 12..15
			g.p("SHLQ $32, BX")
			g.p("ORQ BX, AX")
			g.p("VMOVQ R11, X0")
			g.p("VPINSRQ $1, AX, X0, X0")
			g.p("VPSUBB lb_b20<>(SB), X0, X0")
			g.p("VPMOVSXBW X0, Y0") // sc−32 as int16: 0..7 low lane, 8..15 high
			g.p("VMOVDQU (SI), Y2") // hmask
			first := true
			for h := 0; h < 2; h++ {
				perm := 0x44 // both lanes: scales 8h..8h+7
				if h == 1 {
					perm = 0xEE
				}
				g.p("VPERMQ $0x%X, Y0, Y1", perm)
				g.p("VMOVDQU %d(SI), Y3", 32+32*h)
				for j := 0; j < 4; j++ {
					if j == 0 {
						g.p("VPAND Y7, Y3, Y4")
					} else {
						g.p("VPSRLW $%d, Y3, Y4", 2*j)
						g.p("VPAND Y7, Y4, Y4")
					}
					m := 4*h + j // the hmask bit, to bit 2
					hb := "Y5"
					switch {
					case m < 2:
						g.p("VPSLLW $%d, Y2, Y5", 2-m)
					case m == 2:
						hb = "Y2"
					default:
						g.p("VPSRLW $%d, Y2, Y5", m-2)
					}
					g.p("VPAND lb_b04<>(SB), %s, Y5", hb)
					g.p("VPOR Y5, Y4, Y4")
					g.p("VPSHUFB lb_k6w%d<>(SB), Y1, Y6", j)
					for k := 0; k < r; k++ {
						g.p("VPMADDUBSW %s, Y4, Y5", xa(4+128*h+32*j, k))
						g.p("VPMADDWD Y6, Y5, Y5")
						addInt(g, k, "Y5", first)
					}
					first = false
				}
			}
			for j := 0; j < r; j++ {
				g.p("VPMADDWD %s, Y0, Y2", xa(260, j))
				g.p("VPSLLD $2, Y2, Y2")
				g.p("VPSUBD Y2, %s, %s", acci(j), acci(j))
			}
			g.p("VPBROADCASTW 108(SI), X1")
			g.p("VCVTPH2PS X1, Y1")
			kFinish(g, r)
		},
	},
	{
		name: "lowbitIQ4_XS", wb: 136, xb: 292,
		doc: "IQ4_XS × Q8_K: per 32-element sub-block Σ level·x (VPSIGNB, VPMADDUBSW) times its signed 6-bit scale (VPMADDWD).",
		setup: func(g *gen) {
			g.p("VPBROADCASTB lb_b0f<>(SB), Y7")
			g.p("VMOVDQU lb_iq4<>(SB), Y6")
		},
		block: func(g *gen, r int, _ bool) {
			// The eight 6-bit scales: nibble s%2 of scales_l[s/2] spread to
			// byte s, then bits 2s, 2s+1 of scales_h to bits 4, 5 of byte s.
			spreadNibbles(g, 4)
			g.p("MOVWQZX 2(SI), R10")
			for _, st := range []struct {
				shift int
				mask  uint64
			}{{24, 0x000000FF000000FF}, {12, 0x000F000F000F000F}, {6, 0x0303030303030303}} {
				g.p("MOVQ R10, BX")
				g.p("SHLQ $%d, BX", st.shift)
				g.p("ORQ BX, R10")
				g.p("MOVQ $0x%016X, BX", st.mask)
				g.p("ANDQ BX, R10")
			}
			g.p("SHLQ $4, R10")
			g.p("ORQ R10, AX")
			g.p("VMOVQ AX, X0")
			g.p("VPMOVZXBW X0, X0")
			g.p("VPSUBW lb_w32<>(SB), X0, X0")
			g.p("VINSERTI128 $1, X0, Y0, Y0") // ls−32 as int16, both lanes
			for s := 0; s < 8; s++ {
				g.p("VMOVDQU %d(SI), X1", 8+16*s)
				g.p("VPSRLW $4, X1, X2")
				g.p("VINSERTI128 $1, X2, Y1, Y1")
				g.p("VPAND Y7, Y1, Y1")
				g.p("VPSHUFB Y1, Y6, Y1") // the levels
				g.p("VPSIGNB Y1, Y1, Y2")
				g.p("VPSHUFB lb_w%d<>(SB), Y0, Y3", s)
				for j := 0; j < r; j++ {
					g.p("VMOVDQU %s, Y4", xa(4+32*s, j))
					g.p("VPSIGNB Y1, Y4, Y4")
					g.p("VPMADDUBSW Y4, Y2, Y4")
					g.p("VPMADDWD Y3, Y4, Y4")
					addInt(g, j, "Y4", s == 0)
				}
			}
			g.p("VPBROADCASTW (SI), X1")
			g.p("VCVTPH2PS X1, Y1")
			kFinish(g, r)
		},
	},
	{
		name: "lowbitIQ4_NL", wb: 18, xb: 34, sb: 4,
		doc: "IQ4_NL × Q8_0: the nibbles through the level table, signed × signed by VPSIGNB.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB lb_b0f<>(SB), Y11")
			g.p("VPBROADCASTW lb_one16<>(SB), Y10")
			g.p("VMOVDQU lb_iq4<>(SB), Y3")
		},
		block: func(g *gen, r int, first bool) {
			nibbles16(g, 2)
			g.p("VPSHUFB Y0, Y3, Y0")
			tableRows(g, r, first, true)
		},
	},
	{
		name: "lowbitMXFP4", wb: 17, xb: 34, sb: 4,
		doc: "MXFP4 × Q8_0: the nibbles through the doubled E2M1 table, the exponent through a table of 2^(e−128).",
		setup: func(g *gen) {
			g.p("VPBROADCASTB lb_b0f<>(SB), Y11")
			g.p("VPBROADCASTW lb_one16<>(SB), Y10")
			g.p("VMOVDQU lb_fp4<>(SB), Y3")
			g.p("LEAQ lb_e8m0<>(SB), R12")
		},
		block: func(g *gen, r int, first bool) {
			nibbles16(g, 1)
			g.p("VPSHUFB Y0, Y3, Y0")
			g.p("MOVBQZX (SI), AX")
			g.p("VBROADCASTSS (R12)(AX*4), Y2")
			tableRows(g, r, first, false)
		},
	},
}

// The format tables (GGML's: facts of the formats).
var (
	iq4Levels   = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	mxfp4Levels = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
)

func main() {
	var s bytes.Buffer
	fmt.Fprintf(&s, "DATA lb_one16<>+0(SB)/2, $1\nGLOBL lb_one16<>(SB), RODATA|NOPTR, $2\n\n")
	for _, c := range []struct {
		name string
		v    byte
	}{{"lb_b03", 0x03}, {"lb_b04", 0x04}, {"lb_b0f", 0x0f}, {"lb_b20", 0x20}} {
		v := c.v
		bytes32(&s, c.name, func(int) byte { return v })
	}
	bytes32(&s, "lb_w32", func(i int) byte { return byte(32 * (1 - i%2)) }) // int16 32s
	// Q2_K group g (half g/4, shift 2·(g%4)): int16 scale 2g in the low
	// lane's words, 2g+1 in the high lane's (VPSHUFB of the 16 scale
	// bytes; 0x80 zeroes the high byte of each word).
	for g := 0; g < 8; g++ {
		bytes32(&s, fmt.Sprintf("lb_q2s%d", g), func(i int) byte {
			if i%2 == 1 {
				return 0x80
			}
			return byte(2*g + i/16)
		})
	}
	// Q3_K quarter k of a half: int16 scale 2k in the low lane, 2k+1 in
	// the high (of the half's 8 scales in both lanes).
	for k := 0; k < 4; k++ {
		bytes32(&s, fmt.Sprintf("lb_k6w%d", k), func(i int) byte { return byte(2*(2*k+i/16) + i%2) })
	}
	// IQ4_XS sub-block s: int16 scale s in every word.
	for k := 0; k < 8; k++ {
		bytes32(&s, fmt.Sprintf("lb_w%d", k), func(i int) byte { return byte(2*k + i%2) })
	}
	bytes32(&s, "lb_iq4", func(i int) byte { return byte(iq4Levels[i%16]) })
	bytes32(&s, "lb_fp4", func(i int) byte { return byte(mxfp4Levels[i%16]) })
	// MXFP4: 2^(e−128) for every exponent byte (e = 255 is refused at load;
	// its entry is what GGML computes, 2^127).
	for e := 0; e < 256; e++ {
		fmt.Fprintf(&s, "DATA lb_e8m0<>+%d(SB)/4, $0x%08x\n", 4*e, math.Float32bits(float32(math.Ldexp(1, e-128))))
	}
	s.WriteString("GLOBL lb_e8m0<>(SB), RODATA|NOPTR, $1024\n\n")

	iquantData(&s)
	writeRowKernels("gen_lowbit.go", "dot_lowbit_amd64", "lowbitKernels", s.Bytes(), rowKernels(append(kernels, iquantKernels...)))
}
