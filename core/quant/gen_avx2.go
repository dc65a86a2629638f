//go:build ignore

// gen_avx2 writes dot_avx2_amd64.s and dot_avx2_amd64.go: the AVX2 dot
// kernels of every quantized weight type against its activation type, for
// CPUs without AVX-512 VNNI (AMD Zen 1–3, Intel before Ice Lake, the
// client cores). Run: go run gen_avx2.go gen_blockrow.go gen_rowkernel.go
//
// The kernels take gen_rowkernel.go's multi-row contract (one call per
// tile of weight rows × R = 1…4 activation rows; the 0.5B model's head
// alone has 151,936 rows) and gen_blockrow.go's loop over a weight row's
// blocks; this file has what each type's block does.
//
// Integer products use VPMADDUBSW (unsigned × signed bytes → pairwise int16
// sums) then VPMADDWD (int16 → int32, by ones or by sub-block scales). The
// unsigned operand is always the weight: the 4/5/6-bit quants are
// non-negative as stored; signed weights (Q8_0, and Q4_0/Q5_0 after their
// offset) go in as |w| with the activation's sign flipped where w < 0
// (VPSIGNB). No int16 saturates: |w| ≤ 128 and |x| ≤ 127 for Q8_0 (the
// activation quantizer never writes −128), and 63·128·2 < 2^15 for Q6_K.
package main

import (
	"bytes"
	"fmt"
)

// highBits expands the 32 bits at off(SI) (bit i for element i) to Y1:
// 0xFF in byte i where bit i is set, 0 elsewhere. ones is an all-ones
// operand (register or memory).
func highBits(g *gen, off int, ones string) {
	g.p("VPBROADCASTD %d(SI), Y1", off)
	g.p("VPSHUFB avx2_bitbyte<>(SB), Y1, Y1") // byte i ← byte i/8 of the word
	g.p("VPOR avx2_bitmask<>(SB), Y1, Y1")    // all bits but bit i%8 set
	g.p("VPCMPEQB %s, Y1, Y1", ones)
}

// scaled adds the int32 sums in Y4 of row j, times the weight scale
// (float32 in every lane of dw) and the activation scale (float32 0 of
// the row's block in the scale rows), into the row's pair sum.
func scaled(g *gen, j int, dw string, first bool) {
	g.p("VCVTDQ2PS Y4, Y4")
	g.p("VBROADCASTSS %s, Y5", sa(0, j))
	g.p("VMULPS %s, Y5, Y5", dw)
	into(g, j, "Y4", "Y5", first)
}

// offsetRows: Y0 holds the 32 unsigned quants q of a Q4_0/Q5_0 block,
// whose weights are q − o. Per row: t = Σ q·x per lane group, then
// t·d_x + [−o·d_x·Σx, 0…] (the row's precomputed correction vector, one
// FMA) and that·d_w into the pair sum. Cheaper than the sign trick of
// signedRows by one vector op per row and block.
func offsetRows(g *gen, r int, first bool) {
	g.p("VPBROADCASTW (SI), X2")
	g.p("VCVTPH2PS X2, Y2") // d_w
	for j := 0; j < r; j++ {
		g.p("VPMADDUBSW %s, Y0, Y4", xa(2, j))
		g.p("VPMADDWD Y10, Y4, Y4")
		g.p("VCVTDQ2PS Y4, Y4")
		g.p("VBROADCASTSS %s, Y5", sa(8, j))
		g.p("VFMADD213PS %s, Y5, Y4", sa(0, j))
		into(g, j, "Y4", "Y2", first)
	}
}

// signedRows: Y0 holds 32 signed weights; for each row, Σ w·x per
// 8-element lane group, scaled into acc(j). Y10 holds int16 ones.
func signedRows(g *gen, r int, xoff int, first bool) {
	g.p("VPSIGNB Y0, Y0, Y1") // |w|
	g.p("VPBROADCASTW (SI), X2")
	g.p("VCVTPH2PS X2, Y2")
	for j := 0; j < r; j++ {
		g.p("VMOVDQU %s, Y4", xa(xoff, j))
		g.p("VPSIGNB Y0, Y4, Y4") // x·sign(w)
		g.p("VPMADDUBSW Y4, Y1, Y4")
		g.p("VPMADDWD Y10, Y4, Y4")
		scaled(g, j, "Y2", first)
	}
}

// unsignedRows: Y0 holds 32 unsigned weights q of a Q4_1/Q5_1 block:
// the pair sum gets m_w·s_x in lane 0 and d_w·d_x·Σ q·x.
func unsignedRows(g *gen, r int, first bool) {
	g.p("VMOVD (SI), X2")
	g.p("VCVTPH2PS X2, X2")    // d_w, m_w, 0, 0
	g.p("VPSRLDQ $4, X2, X3")  // m_w in lane 0, zeros elsewhere
	g.p("VBROADCASTSS X2, Y2") // d_w in every lane
	for j := 0; j < r; j++ {
		g.p("VBROADCASTSS %s, Y1", sa(1, j)) // s_x
		into(g, j, "Y1", "Y3", first)
		g.p("VPMADDUBSW %s, Y0, Y4", xa(4, j))
		g.p("VPMADDWD Y10, Y4, Y4")
		scaled(g, j, "Y2", false)
	}
}

// kScales unpacks the twelve 6-bit scale/min bytes at 4(SI) of a Q4_K or
// Q5_K block into R11 (8 scale bytes) and R12 (8 min bytes), then spreads
// the scales as int16 into both lanes of Y0.
func kScales(g *gen) {
	g.p("MOVL 4(SI), AX")
	g.p("MOVL 8(SI), BX")
	g.p("MOVL 12(SI), R10")
	g.p("MOVL AX, R11")
	g.p("ANDL $0x3f3f3f3f, R11") // sc[0:4]
	g.p("MOVL R10, R12")
	g.p("ANDL $0x0f0f0f0f, R12")
	g.p("MOVL AX, R13")
	g.p("SHRL $2, R13")
	g.p("ANDL $0x30303030, R13")
	g.p("ORL R13, R12") // sc[4:8]
	g.p("SHLQ $32, R12")
	g.p("ORQ R12, R11")
	g.p("MOVL BX, R12")
	g.p("ANDL $0x3f3f3f3f, R12") // m[0:4]
	g.p("SHRL $4, R10")
	g.p("ANDL $0x0f0f0f0f, R10")
	g.p("SHRL $2, BX")
	g.p("ANDL $0x30303030, BX")
	g.p("ORL BX, R10") // m[4:8]
	g.p("SHLQ $32, R10")
	g.p("ORQ R10, R12")
	g.p("VMOVQ R11, X0")
	g.p("VPMOVZXBW X0, X0")
	g.p("VINSERTI128 $1, X0, Y0, Y0")
}

// kGroups runs the four 64-element groups of a Q4_K/Q5_K block whose
// nibbles start at qs(SI); five adds the fifth bits from 16(SI).
func kGroups(g *gen, r, qs int, five bool) {
	for grp := 0; grp < 4; grp++ {
		g.p("VMOVDQU %d(SI), Y1", qs+32*grp)
		g.p("VPSRLW $4, Y1, Y2")
		g.p("VPAND Y7, Y1, Y1") // sub-block 2grp
		g.p("VPAND Y7, Y2, Y2") // sub-block 2grp+1
		if five {
			g.p("VMOVDQU 16(SI), Y5")
			if grp > 0 {
				g.p("VPSRLW $%d, Y5, Y5", 2*grp) // bit 2grp of each byte → bit 0
			}
			g.p("VPSLLW $4, Y5, Y6")
			g.p("VPAND avx2_b10<>(SB), Y6, Y6")
			g.p("VPOR Y6, Y1, Y1")
			g.p("VPSLLW $3, Y5, Y6")
			g.p("VPAND avx2_b10<>(SB), Y6, Y6")
			g.p("VPOR Y6, Y2, Y2")
		}
		g.p("VPSHUFB avx2_k4w%d<>(SB), Y0, Y3", 2*grp)
		g.p("VPSHUFB avx2_k4w%d<>(SB), Y0, Y4", 2*grp+1)
		for j := 0; j < r; j++ {
			g.p("VPMADDUBSW %s, Y1, Y5", xa(4+64*grp, j))
			g.p("VPMADDWD Y3, Y5, Y5")
			g.p("VPMADDUBSW %s, Y2, Y6", xa(4+64*grp+32, j))
			g.p("VPMADDWD Y4, Y6, Y6")
			if grp == 0 {
				g.p("VPADDD Y6, Y5, %s", acci(j))
			} else {
				g.p("VPADDD Y5, %s, %s", acci(j), acci(j))
				g.p("VPADDD Y6, %s, %s", acci(j), acci(j))
			}
		}
	}
	// acc += d·d_x·Σ sc·Σqx − dmin·d_x·Σ m·Σx.
	g.p("VPBROADCASTW (SI), X0")
	g.p("VCVTPH2PS X0, Y0")
	g.p("VPBROADCASTW 2(SI), X1")
	g.p("VCVTPH2PS X1, Y1")
	g.p("VMOVQ R12, X2")
	g.p("VPMOVZXBD X2, Y2")
	g.p("VPSLLD $16, Y2, Y3")
	g.p("VPOR Y3, Y2, Y2") // dword j: m_j in both int16 halves
	for j := 0; j < r; j++ {
		g.p("VBROADCASTSS %s, Y3", xa(0, j))
		g.p("VMULPS Y0, Y3, Y4")
		g.p("VMULPS Y1, Y3, Y3")
		g.p("VCVTDQ2PS %s, Y5", acci(j))
		g.p("VFMADD231PS Y5, Y4, %s", acc(j))
		g.p("VPMADDWD %s, Y2, Y6", xa(260, j)) // m_j·(bsum_2j + bsum_2j+1)
		g.p("VCVTDQ2PS Y6, Y6")
		g.p("VFNMADD231PS Y6, Y3, %s", acc(j))
	}
}

var kernels = []kernel{
	{
		name: "dotQ4_0AVX2", sb: 36, wb: 18, xb: 34,
		doc: "Q4_0 × Q8_0: the nibbles as unsigned quants, the −8 through the activations' sums.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB avx2_nib<>(SB), Y11")
			g.p("VPBROADCASTW avx2_one16<>(SB), Y10")
		},
		block: func(g *gen, r int, first bool) {
			nibbles16(g, 2)
			offsetRows(g, r, first)
		},
	},
	{
		name: "dotQ4_1AVX2", sb: 8, wb: 20, xb: 36,
		doc: "Q4_1 × Q8_1: d_w·d_x·Σ q·x + m_w·s_x.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB avx2_nib<>(SB), Y11")
			g.p("VPBROADCASTW avx2_one16<>(SB), Y10")
		},
		block: func(g *gen, r int, first bool) {
			nibbles16(g, 4)
			unsignedRows(g, r, first)
		},
	},
	{
		name: "dotQ5_0AVX2", sb: 36, wb: 22, xb: 34,
		doc: "Q5_0 × Q8_0: q from the nibble and the qh bit as unsigned quants, the −16 through the activations' sums.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB avx2_nib<>(SB), Y11")
			g.p("VPBROADCASTW avx2_one16<>(SB), Y10")
		},
		block: func(g *gen, r int, first bool) {
			nibbles16(g, 6)
			highBits(g, 2, "avx2_ones<>(SB)")
			g.p("VPAND avx2_b10<>(SB), Y1, Y1")
			g.p("VPOR Y1, Y0, Y0")
			offsetRows(g, r, first)
		},
	},
	{
		name: "dotQ5_1AVX2", sb: 8, wb: 24, xb: 36,
		doc: "Q5_1 × Q8_1: as Q4_1 with the fifth bit from qh.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB avx2_nib<>(SB), Y11")
			g.p("VPBROADCASTW avx2_one16<>(SB), Y10")
		},
		block: func(g *gen, r int, first bool) {
			nibbles16(g, 8)
			highBits(g, 4, "avx2_ones<>(SB)")
			g.p("VPAND avx2_b10<>(SB), Y1, Y1")
			g.p("VPOR Y1, Y0, Y0")
			unsignedRows(g, r, first)
		},
	},
	{
		name: "dotQ8_0AVX2", sb: 4, wb: 34, xb: 34,
		doc: "Q8_0 × Q8_0.",
		setup: func(g *gen) {
			g.p("VPBROADCASTW avx2_one16<>(SB), Y10")
		},
		block: func(g *gen, r int, first bool) {
			g.p("VMOVDQU 2(SI), Y0")
			signedRows(g, r, 2, first)
		},
	},
	{
		name: "dotQ4_KAVX2", wb: 144, xb: 292,
		doc: "Q4_K × Q8_K: per 32-element sub-block an int32 Σ q·x times its 6-bit scale (VPMADDWD), the mins through Q8_K's 16-element sums.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB avx2_nib<>(SB), Y7")
		},
		block: func(g *gen, r int, _ bool) {
			kScales(g)
			kGroups(g, r, 16, false)
		},
	},
	{
		name: "dotQ5_KAVX2", wb: 176, xb: 292,
		doc: "Q5_K × Q8_K: as Q4_K with the fifth bit of sub-block s in bit s of qh[l].",
		setup: func(g *gen) {
			g.p("VPBROADCASTB avx2_nib<>(SB), Y7")
		},
		block: func(g *gen, r int, _ bool) {
			kScales(g)
			kGroups(g, r, 48, true)
		},
	},
	{
		name: "dotQ6_KAVX2", wb: 210, xb: 292,
		doc: "Q6_K × Q8_K: 6-bit q in [0, 63] against x, per 16-element sub-block times its int8 scale; the −32 offset as 32·Σ sc·bsum once per block.",
		setup: func(g *gen) {
			g.p("VPBROADCASTB avx2_nib<>(SB), Y7")
		},
		block: func(g *gen, r int, _ bool) {
			g.p("VPMOVSXBW 192(SI), Y0") // the 16 scales as int16
			first := true
			for h := 0; h < 2; h++ {
				perm := 0x44 // both lanes: scales 8h..8h+7
				if h == 1 {
					perm = 0xEE
				}
				g.p("VPERMQ $0x%X, Y0, Y1", perm)
				ql0, ql1, qh := 64*h, 64*h+32, 128+32*h
				for k := 0; k < 4; k++ {
					ql := ql0
					if k&1 == 1 {
						ql = ql1
					}
					g.p("VMOVDQU %d(SI), Y2", ql)
					if k >= 2 {
						g.p("VPSRLW $4, Y2, Y2")
					}
					g.p("VPAND Y7, Y2, Y2")
					g.p("VMOVDQU %d(SI), Y3", qh)
					switch k { // bits 2k, 2k+1 of qh → bits 4, 5
					case 0:
						g.p("VPAND avx2_b03<>(SB), Y3, Y3")
						g.p("VPSLLW $4, Y3, Y3")
					case 1:
						g.p("VPAND avx2_b0C<>(SB), Y3, Y3")
						g.p("VPSLLW $2, Y3, Y3")
					case 2:
						g.p("VPAND avx2_b30<>(SB), Y3, Y3")
					case 3:
						g.p("VPAND avx2_bC0<>(SB), Y3, Y3")
						g.p("VPSRLW $2, Y3, Y3")
					}
					g.p("VPOR Y3, Y2, Y2")
					g.p("VPSHUFB avx2_k6w%d<>(SB), Y1, Y3", k)
					for j := 0; j < r; j++ {
						g.p("VPMADDUBSW %s, Y2, Y4", xa(4+128*h+32*k, j))
						g.p("VPMADDWD Y3, Y4, Y4")
						if first {
							g.p("VMOVDQA Y4, %s", acci(j))
						} else {
							g.p("VPADDD Y4, %s, %s", acci(j), acci(j))
						}
					}
					first = false
				}
			}
			g.p("VPBROADCASTW 208(SI), X1")
			g.p("VCVTPH2PS X1, Y1")
			for j := 0; j < r; j++ {
				g.p("VPMADDWD %s, Y0, Y2", xa(260, j))
				g.p("VPSLLD $5, Y2, Y2")
				g.p("VPSUBD Y2, %s, %s", acci(j), acci(j))
				g.p("VCVTDQ2PS %s, Y2", acci(j))
				g.p("VBROADCASTSS %s, Y3", xa(0, j))
				g.p("VMULPS Y1, Y3, Y3")
				g.p("VFMADD231PS Y2, Y3, %s", acc(j))
			}
		},
	},
}

func main() {
	var s bytes.Buffer
	fmt.Fprintf(&s, "DATA avx2_nib<>+0(SB)/1, $0x0f\nGLOBL avx2_nib<>(SB), RODATA|NOPTR, $1\n\n")
	fmt.Fprintf(&s, "DATA avx2_one16<>+0(SB)/2, $1\nGLOBL avx2_one16<>(SB), RODATA|NOPTR, $2\n\n")
	for _, c := range []struct {
		name string
		v    byte
	}{{"avx2_b08", 0x08}, {"avx2_b10", 0x10}, {"avx2_bF0", 0xF0}, {"avx2_ones", 0xFF},
		{"avx2_b03", 0x03}, {"avx2_b0C", 0x0C}, {"avx2_b30", 0x30}, {"avx2_bC0", 0xC0}} {
		v := c.v
		bytes32(&s, c.name, func(int) byte { return v })
	}
	// highBits: byte i takes byte i/8 of the broadcast 32-bit word (VPSHUFB
	// indexes within a 128-bit lane; each lane holds the whole word), then
	// every bit but bit i%8 is set.
	bytes32(&s, "avx2_bitbyte", func(i int) byte { return byte(i / 8) })
	bytes32(&s, "avx2_bitmask", func(i int) byte { return ^byte(1 << (i % 8)) })
	// Q4_K/Q5_K: int16 scale j (of 8, in both lanes) in every word.
	for j := 0; j < 8; j++ {
		bytes32(&s, fmt.Sprintf("avx2_k4w%d", j), func(i int) byte { return byte(2*j + i%2) })
	}
	// Q6_K: quarter k of a half: scale 2k in the low lane, 2k+1 in the high.
	for k := 0; k < 4; k++ {
		bytes32(&s, fmt.Sprintf("avx2_k6w%d", k), func(i int) byte {
			w := 2 * k
			if i >= 16 {
				w++
			}
			return byte(2*w + i%2)
		})
	}

	writeRowKernels("gen_avx2.go", "dot_avx2_amd64", "avx2Kernels", s.Bytes(), rowKernels(kernels))
}
