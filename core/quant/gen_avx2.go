//go:build ignore

// gen_avx2 writes dot_avx2_amd64.s and dot_avx2_amd64.go: the AVX2 dot
// kernels of every quantized weight type against its activation type, for
// CPUs without AVX-512 VNNI (AMD Zen 1–3, Intel before Ice Lake, the
// client cores). Run: go run gen_avx2.go
//
// Each kernel takes `rows` consecutive weight rows and R = 1…4 activation
// rows (stride xs) and writes the R·rows sums to out[j·os + row]: one call
// per tile, not per row, since a Go call per weight row costs as much as
// the dot of a short row (the 0.5B model's head alone has 151,936 rows). The code for one activation row is the same
// instruction sequence whatever R is, and it keeps its own accumulators,
// so a row's result does not depend on how many rows share the call
// (TestBatchInvariance): R only decides how many rows one decode of the
// weight block serves.
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
	"os"
	"strings"
)

// maxRows is the number of activation rows one call takes (the register
// budget: R float accumulators, and for the K-quants R int32 ones).
const maxRows = 4

// prefetchAhead: the kernels prefetch every cache line of the weights
// this many bytes ahead of the block they work on. The hardware
// prefetcher alone left a decode-sized stream at 24 GB/s on the EPYC's
// 2 threads (Q6_K); with this, 30.
const prefetchAhead = 2304

// prefetch emits the prefetches for the n weight bytes one loop
// iteration consumes.
func prefetch(g *gen, n int) {
	for off := 0; off < n; off += 64 {
		g.p("PREFETCHT0 %d(SI)", prefetchAhead+off)
	}
}

type kernel struct {
	name   string // Go name prefix: dotQ4_1AVX2 → dotQ4_1AVX2x1 … x4
	wb, xb int    // weight and activation block bytes
	sb     int    // bytes of float32 activation scales per block (0: none)
	doc    string
	setup  func(g *gen) // constants, once per call
	// block: one weight block against r activation rows. The legacy
	// types (sb > 0) leave each row's contribution in pair(j): written
	// when first, added to otherwise (see the loop in main).
	block func(g *gen, r int, first bool)
}

type gen struct{ b bytes.Buffer }

func (g *gen) p(f string, a ...any) { fmt.Fprintf(&g.b, "\t"+f+"\n", a...) }

// xa is the address of byte off of activation row j's current block.
func xa(off, j int) string {
	switch j {
	case 0:
		return fmt.Sprintf("%d(DI)", off)
	case 1:
		return fmt.Sprintf("%d(DI)(R8*1)", off)
	case 2:
		return fmt.Sprintf("%d(DI)(R8*2)", off)
	}
	return fmt.Sprintf("%d(DI)(R9*1)", off)
}

// Register use. Float accumulators Y12+j; int32 (K-quant) accumulators
// Y8+j; the legacy types' pair sums Y6+j.
func acc(j int) string  { return fmt.Sprintf("Y%d", 12+j) }
func acci(j int) string { return fmt.Sprintf("Y%d", 8+j) }
func pair(j int) string { return fmt.Sprintf("Y%d", 6+j) }

// into adds the float vector a·b to row j's pair sum, or starts it with
// a·b for the first block of a pair. Why pairs: with one FMA per block
// into the row's accumulator, a block cannot start its add before the
// previous block's has finished, and the FMA latency (4 cycles) is more
// than the rest of a small block's work; summing two blocks apart and
// then adding the pair halves that chain.
func into(g *gen, j int, a, b string, first bool) {
	if first {
		g.p("VMULPS %s, %s, %s", a, b, pair(j))
	} else {
		g.p("VFMADD231PS %s, %s, %s", a, b, pair(j))
	}
}

// nibbles16 loads 16 bytes of packed nibbles at off(SI) into Y0 as 32
// bytes in element order: low nibbles (elements 0..15) in the low lane,
// high nibbles (16..31) in the high lane. Y11 holds 0x0F bytes.
func nibbles16(g *gen, off int) {
	g.p("VMOVDQU %d(SI), X0", off)
	g.p("VPSRLW $4, X0, X1")
	g.p("VINSERTI128 $1, X1, Y0, Y0")
	g.p("VPAND Y11, Y0, Y0")
}

// highBits expands the 32 bits at off(SI) (bit i for element i) to Y1:
// 0xFF in byte i where bit i is set, 0 elsewhere. ones is an all-ones
// operand (register or memory).
func highBits(g *gen, off int, ones string) {
	g.p("VPBROADCASTD %d(SI), Y1", off)
	g.p("VPSHUFB avx2_bitbyte<>(SB), Y1, Y1") // byte i ← byte i/8 of the word
	g.p("VPOR avx2_bitmask<>(SB), Y1, Y1")    // all bits but bit i%8 set
	g.p("VPCMPEQB %s, Y1, Y1", ones)
}

// sa is the address of float32 k of activation row j's current block in
// the scale rows (BX: row 0, R10: row stride, R11: 3·R10).
func sa(k, j int) string {
	switch j {
	case 0:
		return fmt.Sprintf("%d(BX)", 4*k)
	case 1:
		return fmt.Sprintf("%d(BX)(R10*1)", 4*k)
	case 2:
		return fmt.Sprintf("%d(BX)(R10*2)", 4*k)
	}
	return fmt.Sprintf("%d(BX)(R11*1)", 4*k)
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

// bytes32 emits a 32-byte constant whose byte i is f(i).
func bytes32(b *bytes.Buffer, name string, f func(i int) byte) {
	for q := 0; q < 4; q++ {
		var v uint64
		for i := 7; i >= 0; i-- {
			v = v<<8 | uint64(f(8*q+i))
		}
		fmt.Fprintf(b, "DATA %s<>+%d(SB)/8, $0x%016x\n", name, 8*q, v)
	}
	fmt.Fprintf(b, "GLOBL %s<>(SB), RODATA|NOPTR, $32\n\n", name)
}

func main() {
	var s bytes.Buffer
	s.WriteString("// Code generated by gen_avx2.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\n#include \"textflag.h\"\n\n")
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

	var d bytes.Buffer
	d.WriteString("// Code generated by gen_avx2.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\npackage quant\n\n")
	for _, k := range kernels {
		for r := 1; r <= maxRows; r++ {
			g := &gen{}
			name := fmt.Sprintf("%sx%d", k.name, r)
			fmt.Fprintf(&s, "// func %s(w *byte, rows int, x *byte, xs, nb int, sc *float32, out *float32, os int)\n// %s\n", name, k.doc)
			fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
			// Weight rows are contiguous (nb blocks each), so SI runs on from
			// one row into the next; the activation pointers restart per row
			// from the arguments.
			g.p("MOVQ w+0(FP), SI")
			g.p("MOVQ xs+24(FP), R8")
			g.p("MOVQ out+48(FP), DX")
			g.p("LEAQ (R8)(R8*2), R9")
			k.setup(g)
			s.Write(g.b.Bytes())
			g.b.Reset()
			fmt.Fprintf(&s, "%srow:\n", name)
			g.p("MOVQ x+16(FP), DI")
			g.p("MOVQ nb+32(FP), CX")
			if k.sb > 0 { // scale rows: nb blocks of sb bytes each
				g.p("MOVQ sc+40(FP), BX")
				g.p("IMUL3Q $%d, CX, R10", k.sb)
				g.p("LEAQ (R10)(R10*2), R11")
			}
			for j := 0; j < r; j++ {
				g.p("VXORPS %s, %s, %s", acc(j), acc(j), acc(j))
			}
			step := func() {
				g.p("ADDQ $%d, SI", k.wb)
				g.p("ADDQ $%d, DI", k.xb)
				if k.sb > 0 {
					g.p("ADDQ $%d, BX", k.sb)
				}
			}
			addPairs := func() {
				for j := 0; j < r; j++ {
					g.p("VADDPS %s, %s, %s", pair(j), acc(j), acc(j))
				}
			}
			if k.sb == 0 {
				s.Write(g.b.Bytes())
				g.b.Reset()
				fmt.Fprintf(&s, "%sloop:\n", name)
				prefetch(g, k.wb)
				k.block(g, r, true)
				step()
				g.p("DECQ CX")
				g.p("JNZ %sloop", name)
			} else {
				// Legacy blocks two at a time into the pair sums, then an
				// odd last block alone: acc = (…((0 + p01) + p23)…) + p_last
				// whatever r is.
				g.p("SHRQ $1, CX")
				g.p("JZ %stail", name)
				s.Write(g.b.Bytes())
				g.b.Reset()
				fmt.Fprintf(&s, "%sloop:\n", name)
				prefetch(g, 2*k.wb)
				k.block(g, r, true)
				step()
				k.block(g, r, false)
				step()
				addPairs()
				g.p("DECQ CX")
				g.p("JNZ %sloop", name)
				s.Write(g.b.Bytes())
				g.b.Reset()
				fmt.Fprintf(&s, "%stail:\n", name)
				g.p("TESTQ $1, nb+32(FP)")
				g.p("JZ %sdone", name)
				k.block(g, r, true)
				step()
				addPairs()
				s.Write(g.b.Bytes())
				g.b.Reset()
				fmt.Fprintf(&s, "%sdone:\n", name)
			}
			// Row sums to out[j·os + row].
			g.p("MOVQ os+56(FP), AX")
			g.p("SHLQ $2, AX")
			g.p("LEAQ (AX)(AX*2), CX")
			for j := 0; j < r; j++ {
				a := acc(j)
				x := "X" + strings.TrimPrefix(a, "Y")
				g.p("VEXTRACTF128 $1, %s, X4", a)
				g.p("VADDPS X4, %s, X4", x)
				g.p("VPERMILPS $0x4E, X4, X5")
				g.p("VADDPS X5, X4, X4")
				g.p("VPERMILPS $0xB1, X4, X5")
				g.p("VADDSS X5, X4, X4")
				g.p("VMOVSS X4, %s", []string{"(DX)", "(DX)(AX*1)", "(DX)(AX*2)", "(DX)(CX*1)"}[j])
			}
			g.p("ADDQ $4, DX")
			g.p("DECQ rows+8(FP)")
			g.p("JNZ %srow", name)
			g.p("VZEROUPPER")
			g.p("RET")
			s.Write(g.b.Bytes())
			s.WriteString("\n")
			fmt.Fprintf(&d, "//go:noescape\nfunc %s(w *byte, rows int, x *byte, xs, nb int, sc *float32, out *float32, os int)\n\n", name)
		}
	}
	var tab bytes.Buffer
	for _, k := range kernels {
		fmt.Fprintf(&tab, "\t%q: {%sx1, %sx2, %sx3, %sx4},\n", k.name, k.name, k.name, k.name, k.name)
	}
	fmt.Fprintf(&d, "// avx2Kernels: the R = 1…4 variants of each kernel, by name.\nvar avx2Kernels = map[string][%d]func(w *byte, rows int, x *byte, xs, nb int, sc *float32, out *float32, os int){\n%s}\n", maxRows, tab.String())
	must(os.WriteFile("dot_avx2_amd64.s", s.Bytes(), 0o644))
	must(os.WriteFile("dot_avx2_amd64.go", d.Bytes(), 0o644))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
