//go:build ignore

// gen_packed8 writes packed8_amd64.s and packed8_kernels_amd64.go: the
// kernels over the 8-row packed layout of packed8.go (Q4_0, Q4_1, Q5_0,
// Q8_0, Q4_K, Q6_K; IQ4_NL and IQ4_XS in AVX2 only), in AVX2 and in
// AVX-512 VNNI variants. Run: go generate (the go:generate line of
// packed8_amd64.go names the files run together)
//
// One call runs na = 1…4 (the VNNI Q4_0, Q5_0, Q4_K and Q6_K kernels:
// 1…8) activation rows over one 8-row
// group of nb blocks
// and writes 8 floats per activation row (out, row stride os bytes). The
// eight lanes of a YMM are the eight weight rows, so everything that costs
// per weight block and row in the row-at-a-time kernels of gen_avx2.go (the
// f16 scale, the int-to-float conversion, the scaling FMA) costs here once
// per block for all eight rows. The integer products are VPMADDUBSW on a
// broadcast 4-byte slice of the activations against 4 bytes of each of the
// eight rows; for 4- and 5-bit weights four of those are summed as int16
// (31·127·2·4 < 2^15) before one VPMADDWD widens them.
//
// Every activation row runs the same instruction sequence with its own
// registers whatever na is, so a row's result does not depend on the rows
// beside it in the call (TestBatchInvariance).
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
)

type gen struct{ b bytes.Buffer }

func (g *gen) p(f string, a ...any) { fmt.Fprintf(&g.b, "\t"+f+"\n", a...) }
func (g *gen) label(l string)       { fmt.Fprintf(&g.b, "%s:\n", l) }

// Registers. SI: the group's current block record; DI: activation row 0's
// current block, R8 the row stride, R10 3·R8; BX: row 0's current scales,
// R11 the scale row stride, R12 3·R11; DX: out, R9 its row stride, R13
// 3·R9; CX: blocks left.
//
// Y12+j: row j's float sums; Y8+j: row j's int32 sums of the current block.
//
// The wide variants (more than four activation rows, VNNI kernels only)
// use the sixteen registers EVEX adds: Y8+j the float sums, Y24+j the
// int32 sums, Y16+j a sub-block's sums; AX is activation row 4's current
// block (rows 4–7 off it as rows 0–3 off DI), and after the loop out's
// row 4; R14 is row 4's current scales (legacy types).
var wide bool

func acc(j int) string {
	if wide {
		return fmt.Sprintf("Y%d", 8+j)
	}
	return fmt.Sprintf("Y%d", 12+j)
}

func isum(j int) string {
	if wide {
		return fmt.Sprintf("Y%d", 24+j)
	}
	return fmt.Sprintf("Y%d", 8+j)
}

var rowOff = []string{"", "(R8*1)", "(R8*2)", "(R10*1)"}

// xa is byte off of activation row j's current block.
func xa(off, j int) string {
	if j >= 4 {
		return fmt.Sprintf("%d(AX)%s", off, rowOff[j-4])
	}
	return fmt.Sprintf("%d(DI)%s", off, rowOff[j])
}

// sa is float32 k of activation row j's current block scales (rows 4–7
// of the wide variants off R14, as rows 0–3 off BX).
func sa(k, j int) string {
	base := "BX"
	if j >= 4 {
		base, j = "R14", j-4
	}
	return fmt.Sprintf("%d(%s)%s", 4*k, base, []string{"", "(R11*1)", "(R11*2)", "(R12*1)"}[j])
}

func oa(j int) string {
	base := "(DX)"
	if j >= 4 {
		base, j = "(AX)", j-4
	}
	return base + []string{"", "(R9*1)", "(R9*2)", "(R13*1)"}[j]
}

// nibbleBlock: Q4_0 / Q5_0 (five: the fifth bits from the record's qh
// words at 128(SI)). Record: 4 parts of 32 bytes (part k, lane r: bytes
// qs[4k:4k+4] of row r, so the low nibbles are elements 4k…4k+3 and the
// high ones 16+4k…), [qh'], then the 8 rows' d as f16 at dOff. The
// temporaries are Y4 (broadcast activations), Y5 (products), Y6 (int16
// sums); Y0–Y3 hold the decoded quants of one half block, Y7 the qh'
// words.
func nibbleBlock(g *gen, r int, five bool, dOff, qOff, mOff int) {
	if five {
		g.p("VMOVDQU 128(SI), Y7")
	}
	for h := 0; h < 2; h++ {
		nibbleQuants(g, h, five)
		for j := 0; j < r; j++ {
			for k := 0; k < 4; k++ {
				g.p("VPBROADCASTD %s, Y4", xa(qOff+16*h+4*k, j))
				if k == 0 {
					g.p("VPMADDUBSW Y4, Y%d, Y6", k)
				} else {
					g.p("VPMADDUBSW Y4, Y%d, Y5", k)
					g.p("VPADDW Y5, Y6, Y6")
				}
			}
			if h == 0 {
				g.p("VPMADDWD p8_one16<>(SB), Y6, %s", isum(j))
			} else {
				g.p("VPMADDWD p8_one16<>(SB), Y6, Y6")
				g.p("VPADDD Y6, %s, %s", isum(j), isum(j))
			}
		}
	}
	nibbleScale(g, r, dOff, mOff)
}

// nibbleQuants decodes half h of a Q4_0 / Q4_1 / Q5_0 record into Y0–Y3
// (part k in Yk: the low nibbles for h = 0, the high ones for h = 1), with
// five the fifth bits from the qh' words in Y7. Y4 is clobbered.
func nibbleQuants(g *gen, h int, five bool) {
	for k := 0; k < 4; k++ {
		q := fmt.Sprintf("Y%d", k)
		g.p("VMOVDQU %d(SI), %s", 32*k, q)
		if h == 1 {
			g.p("VPSRLW $4, %s, %s", q, q)
		}
		g.p("VPAND p8_nib<>(SB), %s, %s", q, q)
		if five {
			// qh' byte i: bit k = element 4k+i, bit 4+k = element
			// 16+4k+i; move the wanted bit to bit 4.
			switch {
			case h == 0:
				g.p("VPSLLD $%d, Y7, Y4", 4-k)
				g.p("VPAND p8_b10<>(SB), Y4, Y4")
			case k == 0:
				g.p("VPAND p8_b10<>(SB), Y7, Y4")
			default:
				g.p("VPSRLD $%d, Y7, Y4", k)
				g.p("VPAND p8_b10<>(SB), Y4, Y4")
			}
			g.p("VPOR Y4, %s, %s", q, q)
		}
	}
}

// nibbleScale adds the Q4_0 / Q4_1 / Q5_0 block's int32 sums (isum) to
// the float sums, scaled.
func nibbleScale(g *gen, r int, dOff, mOff int) {
	g.p("VCVTPH2PS %d(SI), Y0", dOff)
	if mOff > 0 {
		// Q4_1: acc += d_w·d_x·Σq·x + m_w·s_x (s_x, the scales' second
		// float, is d_x·Σx).
		g.p("VCVTPH2PS %d(SI), Y1", mOff)
		for j := 0; j < r; j++ {
			s := isum(j)
			g.p("VCVTDQ2PS %s, %s", s, s)
			g.p("VBROADCASTSS %s, Y4", sa(0, j))
			g.p("VBROADCASTSS %s, Y5", sa(1, j))
			g.p("VMULPS Y4, %s, %s", s, s)
			g.p("VFMADD231PS %s, Y0, %s", s, acc(j))
			g.p("VFMADD231PS Y5, Y1, %s", acc(j))
		}
		return
	}
	// acc += d_w · (d_x·Σq·x + c_x), c_x = −o·d_x·Σx (the scales' second
	// float), per row lane.
	for j := 0; j < r; j++ {
		s := isum(j)
		g.p("VCVTDQ2PS %s, %s", s, s)
		g.p("VBROADCASTSS %s, Y4", sa(0, j))
		g.p("VBROADCASTSS %s, Y5", sa(1, j))
		g.p("VFMADD213PS Y5, Y4, %s", s)
		g.p("VFMADD231PS %s, Y0, %s", s, acc(j))
	}
}

// q80Block: Q8_0. Record: 8 parts of 32 bytes (part k, lane r: qs[4k:4k+4]
// of row r, signed), then the 8 d as f16 at 256. Signed × signed through
// VPMADDUBSW: |w| against x·sign(w); a pair sum reaches 2·128·127, so each
// product is widened (VPMADDWD) before it is added.
func q80Block(g *gen, r int) { q80Madd(g, r, "p8_one16<>(SB)") }

// q80Madd is q80Block with the int16 ones in ones (a register or memory).
func q80Madd(g *gen, r int, ones string) {
	q80Parts(g, r, func(k, j int) {
		g.p("VPMADDUBSW Y4, Y1, Y5")
		if k == 0 {
			g.p("VPMADDWD %s, Y5, %s", ones, isum(j))
		} else {
			g.p("VPMADDWD %s, Y5, Y5", ones)
			g.p("VPADDD Y5, %s, %s", isum(j), isum(j))
		}
	})
}

// q80Parts emits the Q8_0 record's 8 parts against r rows and then
// q80Scale: per part |w| in Y1, and per row x·sign(w) in Y4 for add(k, j)
// to put into row j's int32 sums (isum) by the kernel's instructions.
func q80Parts(g *gen, r int, add func(k, j int)) {
	for k := 0; k < 8; k++ {
		g.p("VMOVDQU %d(SI), Y0", 32*k)
		g.p("VPABSB Y0, Y1")
		for j := 0; j < r; j++ {
			g.p("VPBROADCASTD %s, Y4", xa(2+4*k, j))
			g.p("VPSIGNB Y0, Y4, Y4")
			add(k, j)
		}
	}
	q80Scale(g, r)
}

// q80Scale adds the Q8_0 block's int32 sums (isum) to the float sums.
func q80Scale(g *gen, r int) {
	g.p("VCVTPH2PS 256(SI), Y0")
	for j := 0; j < r; j++ {
		s := isum(j)
		g.p("VCVTDQ2PS %s, %s", s, s)
		g.p("VBROADCASTSS %s, Y4", sa(0, j))
		g.p("VMULPS Y4, Y0, Y4")
		g.p("VFMADD231PS %s, Y4, %s", s, acc(j))
	}
}

// q4kBlock: Q4_K against Q8_K. Record (1152 bytes, see packed8.go): 32
// parts of quants, then the rows' 12 scale bytes as three 32-byte words
// A (bytes 0–3), B (4–7), C (8–11), then d and dmin as f16. The 6-bit
// scales and mins of all eight rows are unpacked together with the same
// shifts and masks the row kernels apply to one row, spread to one vector
// per sub-block ([sc, sc] as int16 in each row's lane, for VPMADDWD) and
// kept in the frame: 0(SP) + 32s the scales, 256(SP) + 32s the mins.
func q4kBlock(g *gen, r int) {
	q4kScales(g, ymm, "pick")
	q4kSums(g, r)
	q4kFinish(g, r)
}

// q4kScales unpacks the rows' scales and mins (eight rows in a YMM, or a
// pair's sixteen in a ZMM: w) into the frame: 0(SP) + s·w.bytes the
// scales of sub-block s with pick ("pick": [sc, sc] as int16 pairs;
// "pickd": sc as an int32), 8·w.bytes on the mins, always as int16 pairs.
func q4kScales(g *gen, w width, pick string) { q4kScalesAt(g, w, pick, 0, 0, "SP") }

// q4kScalesAt is q4kScales for the record rec bytes from SI, into the
// frame at off(base) instead of 0(SP).
func q4kScalesAt(g *gen, w width, pick string, rec, off int, base string) {
	for i := 0; i < 3; i++ {
		w.load(g, rec+1024+32*i, i)
	}
	r := w.reg
	g.p("%s p8_b3f<>(SB), %s0, %s3", w.and, r, r) // sc 0–3
	g.p("%s p8_b3f<>(SB), %s1, %s4", w.and, r, r) // m 0–3
	g.p("VPSRLD $2, %s0, %s5", r, r)
	g.p("%s p8_b30<>(SB), %s5, %s5", w.and, r, r)
	g.p("%s p8_nib<>(SB), %s2, %s6", w.and, r, r)
	g.p("%s %s6, %s5, %s5", w.or, r, r, r) // sc 4–7: C & 15 | A >> 6 << 4
	g.p("VPSRLD $2, %s1, %s6", r, r)
	g.p("%s p8_b30<>(SB), %s6, %s6", w.and, r, r)
	g.p("VPSRLD $4, %s2, %s7", r, r)
	g.p("%s p8_nib<>(SB), %s7, %s7", w.and, r, r)
	g.p("%s %s7, %s6, %s6", w.or, r, r, r) // m 4–7: C >> 4 | B >> 6 << 4
	for s := 0; s < 8; s++ {
		sc, m := "3", "4"
		if s >= 4 {
			sc, m = "5", "6"
		}
		g.p("VPSHUFB %s_%s%d<>(SB), %s%s, %s7", w.tab, pick, s%4, r, sc, r)
		g.p("%s %s7, %d(%s)", w.store, r, off+w.bytes*s, base)
		g.p("VPSHUFB %s_pick%d<>(SB), %s%s, %s7", w.tab, s%4, r, m, r)
		g.p("%s %s7, %d(%s)", w.store, r, off+8*w.bytes+w.bytes*s, base)
	}
}

// q6kScales unpacks the rows' int8 scales (w: see q4kScales) into the
// frame: 0(SP) + sb·w.bytes sub-block sb's scale as int32 lanes,
// 16·w.bytes + t·w.bytes the pair (−32·sc_2t, −32·sc_2t+1) as int16s.
func q6kScales(g *gen, w width) {
	r := w.reg
	for i := 0; i < 4; i++ {
		w.load(g, 1536+32*i, 4)
		for b := 0; b < 4; b++ {
			g.p("VPSHUFB %s_pickt%d<>(SB), %s4, %s5", w.tab, b, r, r)
			g.p("VPSRAD $24, %s5, %s5", r, r)
			g.p("%s %s5, %d(SP)", w.store, r, w.bytes*(4*i+b))
		}
		g.p("%s %s6, %s6, %s6", w.xor, r, r, r)
		for h := 0; h < 2; h++ {
			g.p("VPSHUFB %s_pickw%d<>(SB), %s4, %s5", w.tab, h, r, r)
			g.p("VPSRAW $3, %s5, %s5", r, r) // sc·32, the byte having been the high one
			g.p("VPSUBW %s5, %s6, %s5", r, r, r)
			g.p("%s %s5, %d(SP)", w.store, r, 16*w.bytes+w.bytes*(2*i+h))
		}
	}
}

// width is what the scale unpacking needs to know of a kernel's vectors:
// eight rows in a YMM (the 8-row kernels) or a pair's sixteen in a ZMM.
type width struct {
	reg, tab     string // register prefix, shuffle tables' prefix
	bytes        int    // a vector's bytes: its stride in the frame
	and, or, xor string // with a 32-byte constant (YMM) or a dword broadcast (ZMM)
	store        string
	load         func(g *gen, off, r int) // part off (of both groups) into register r
}

var (
	ymm = width{reg: "Y", tab: "p8", bytes: 32, and: "VPAND", or: "VPOR", xor: "VPXOR", store: "VMOVDQU",
		load: func(g *gen, off, r int) { g.p("VMOVDQU %d(SI), Y%d", off, r) }}
	zmm = width{reg: "Z", tab: "p16", bytes: 64, and: "VPANDD.BCST", or: "VPORD", xor: "VPXORD", store: "VMOVDQU64", load: ld16}
)

// q4kSums: per sub-block s, Σ q·x as int16 pairs over its 32 elements (8
// products of 4; 15·128·2·8 < 2^15), times the scale into int32.
func q4kSums(g *gen, r int) {
	for s := 0; s < 8; s++ {
		for k := 0; k < 8; k++ {
			if s%2 == 0 {
				q4kSpreadPrefetch(g, 4*s+k)
			}
			g.p("VMOVDQU %d(SI), Y0", 32*(8*(s/2)+k))
			if s%2 == 1 {
				g.p("VPSRLW $4, Y0, Y0")
			}
			g.p("VPAND p8_nib<>(SB), Y0, Y0")
			for j := 0; j < r; j++ {
				pj := fmt.Sprintf("Y%d", 2+j)
				g.p("VPBROADCASTD %s, Y1", xa(4+32*s+4*k, j))
				if k == 0 {
					g.p("VPMADDUBSW Y1, Y0, %s", pj)
				} else {
					g.p("VPMADDUBSW Y1, Y0, Y1")
					g.p("VPADDW Y1, %s, %s", pj, pj)
				}
			}
		}
		for j := 0; j < r; j++ {
			pj := fmt.Sprintf("Y%d", 2+j)
			if s == 0 {
				g.p("VPMADDWD %d(SP), %s, %s", 32*s, pj, isum(j))
			} else {
				g.p("VPMADDWD %d(SP), %s, %s", 32*s, pj, pj)
				g.p("VPADDD %s, %s, %s", pj, isum(j), isum(j))
			}
		}
	}
}

// q4kFinish: acc += d·d_x·Σ sc·Σqx − dmin·d_x·Σ m·(bsum_2s + bsum_2s+1).
func q4kFinish(g *gen, r int) {
	g.p("VCVTPH2PS 1120(SI), Y2")
	g.p("VCVTPH2PS 1136(SI), Y3")
	for j := 0; j < r; j++ {
		for s := 0; s < 8; s++ {
			g.p("VPBROADCASTD %s, Y1", xa(260+4*s, j))
			if s == 0 {
				g.p("VPMADDWD 256(SP), Y1, Y6")
			} else {
				g.p("VPMADDWD %d(SP), Y1, Y1", 256+32*s)
				g.p("VPADDD Y1, Y6, Y6")
			}
		}
		g.p("VCVTDQ2PS %s, %s", isum(j), isum(j))
		g.p("VCVTDQ2PS Y6, Y6")
		g.p("VBROADCASTSS %s, Y1", xa(0, j))
		g.p("VMULPS Y1, Y2, Y4")
		g.p("VMULPS Y1, Y3, Y5")
		g.p("VFMADD231PS %s, Y4, %s", isum(j), acc(j))
		g.p("VFNMADD231PS Y6, Y5, %s", acc(j))
	}
}

// The VNNI variants (names ending in V) serve CPUs with AVX-512 VNNI in
// the same 8-row layout: VPDPBUSD (the EVEX form on YMM registers, which
// AVX512VL allows) adds four u8×s8 products into each int32 lane in one
// instruction, in place of VPMADDUBSW, VPADDW and VPMADDWD, and takes the
// 4-byte activation slice as an embedded broadcast. The integer sums are
// exact either way, and everything after them is the AVX2 kernels' float
// code, so both give the same bits (TestPacked8VNNIEqualsAVX2).

// nibbleBlockV is nibbleBlock with VPDPBUSD.
func nibbleBlockV(g *gen, r int, five bool, dOff, qOff, mOff int) {
	if five {
		g.p("VMOVDQU 128(SI), Y7")
	}
	for j := 0; j < r; j++ {
		g.p("VPXORD %s, %s, %s", isum(j), isum(j), isum(j))
	}
	for h := 0; h < 2; h++ {
		nibbleQuants(g, h, five)
		for j := 0; j < r; j++ {
			for k := 0; k < 4; k++ {
				g.p("VPDPBUSD.BCST %s, Y%d, %s", xa(qOff+16*h+4*k, j), k, isum(j))
			}
		}
	}
	nibbleScale(g, r, dOff, mOff)
}

// q80BlockV is q80Block with VPDPBUSD: |w| (unsigned) against x·sign(w).
func q80BlockV(g *gen, r int) {
	for j := 0; j < r; j++ {
		g.p("VPXOR %s, %s, %s", isum(j), isum(j), isum(j))
	}
	q80Parts(g, r, func(_, j int) { g.p("VPDPBUSD Y4, Y1, %s", isum(j)) })
}

// q4kBlockV is q4kBlock with VPDPBUSD: a sub-block's Σ q·x is an int32
// per row lane, multiplied by its scale (spread as an int32 per lane,
// p8_pickd) with VPMULLD.
func q4kBlockV(g *gen, r int) {
	q4kScales(g, ymm, "pickd")
	for s := 0; s < 8; s++ {
		// The next records' 18 lines, two or three per sub-block.
		for line := 18 * s / 8; line < 18*(s+1)/8; line++ {
			g.p("PREFETCHT0 %d(SI)", q4kAhead+64*line)
		}
		for k := 0; k < 8; k++ {
			g.p("VMOVDQU %d(SI), Y0", 32*(8*(s/2)+k))
			if s%2 == 1 {
				g.p("VPSRLW $4, Y0, Y0")
			}
			g.p("VPAND p8_nib<>(SB), Y0, Y0")
			for j := 0; j < r; j++ {
				pj := q4kPart(j)
				if k == 0 {
					g.p("VPXORD %s, %s, %s", pj, pj, pj)
				}
				g.p("VPDPBUSD.BCST %s, Y0, %s", xa(4+32*s+4*k, j), pj)
			}
		}
		for j := 0; j < r; j++ {
			pj := q4kPart(j)
			if s == 0 {
				g.p("VPMULLD %d(SP), %s, %s", 32*s, pj, isum(j))
			} else {
				g.p("VPMULLD %d(SP), %s, %s", 32*s, pj, pj)
				g.p("VPADDD %s, %s, %s", pj, isum(j), isum(j))
			}
		}
	}
	q4kFinish(g, r)
}

// q4kAhead: the VNNI Q4_K kernel prefetches two records ahead, its 18
// lines spread over the sub-blocks. All at the top of each record (as the
// AVX2 kernels do), the Qwen2.5-Coder-1.5B decode step took 35-40 ms
// instead of 32 on the Zen 4, and a verify pass of 8 tokens 96 instead
// of 76: the Q6_K lesson again (a burst of prefetches stalls the loads).
const q4kAhead = 2 * 1152

// q4kPart is the register of row j's sums of the current sub-block.
func q4kPart(j int) string {
	if wide {
		return fmt.Sprintf("Y%d", 16+j)
	}
	return fmt.Sprintf("Y%d", 2+j)
}

// The pair kernels (names ending in P16V, VNNI only) run two adjacent
// 8-row groups of the same layout at once, row r of the pair in lane r of
// a ZMM: part k's 32 bytes of the first group fill the low half and the
// second group's (BX bytes further on) the high half. Where the 512-bit
// VPDPBUSD issues two a cycle (Intel server cores: a 2-core AMX Xeon ran
// ZMM at 0.156 ns and YMM at 0.145 ns an instruction), this doubles the
// multiply-adds per cycle of a verify pass; where it is split in two
// (AMD Zen 4) it costs the same as two 8-row calls. Every lane runs the
// 8-row kernel's integer and float sequence, so both give the same bits
// (TestPacked16EqualsPacked8), and the layout stays the 8-row one: a
// matrix's last, unpaired or partial group goes through the 8-row kernel.

// ld16 loads part off of both groups into Z<z>.
func ld16(g *gen, off, z int) {
	g.p("VMOVDQU %d(SI), Y%d", off, z)
	g.p("VINSERTI64X4 $1, %d(SI)(BX*1), Z%d, Z%d", off, z, z)
}

// q4kBlock16 is q4kBlockV over a pair, with the two sub-blocks that share
// their parts (low and high nibbles) summed together: each part is loaded
// and split once, and a token's two sums advance in turn, so the next
// VPDPBUSD of a sum comes 2·na instructions later (8 at na = 4, enough
// for its 5-cycle latency at two a cycle) instead of na. With sixteen
// sum registers for eight tokens, the float sums live in the frame
// (p16Acc), touched once per super-block. Frame: 0(SP) + 64s the scales
// of sub-block s as int32 lanes, 512(SP) + 64s its mins as int16 pairs.
//
// Registers: Z0, Z1 the low and high quants of a part; Z16+j, Z8+j token
// j's sums of the current half sub-blocks 2t and 2t+1; Z24+j its int32
// sum of the super-block; Z2, Z3 the scales of sub-blocks 2t and 2t+1;
// Z4–Z7 temporaries.
func q4kBlock16(g *gen, r int) {
	q4kScales(g, zmm, "pickd")
	for j := 0; j < r; j++ {
		g.p("VPXORD Z%d, Z%d, Z%d", 24+j, 24+j, 24+j)
	}
	for t := 0; t < 4; t++ {
		for line := 18 * t / 4; line < 18*(t+1)/4; line++ {
			g.p("PREFETCHT0 %d(R11)", 64*line)
			g.p("PREFETCHT0 %d(R11)(BX*1)", 64*line)
		}
		for k := 0; k < 8; k++ {
			ld16(g, 32*(8*t+k), 0)
			g.p("VGF2P8AFFINEQB.BCST $0, gf_hi<>(SB), Z0, Z1")
			g.p("VPANDD.BCST p8_nib<>(SB), Z0, Z0")
			for j := 0; j < r; j++ {
				for h, q := range []int{16 + j, 8 + j} {
					if k%4 == 0 {
						g.p("VPXORD Z%d, Z%d, Z%d", q, q, q)
					}
					g.p("VPDPBUSD.BCST %s, Z%d, Z%d", xa(4+32*(2*t+h)+4*k, j), h, q)
				}
			}
			if k%4 != 3 {
				continue
			}
			// A half sub-block's Σ q·x (16 products, |Σ| ≤ 16·15·128 <
			// 2^15) is its int32 lane's low int16, and the scale (sc as
			// an int32) is the pair (sc, 0): one VPDPWSSD scales and adds
			// it, where VPMULLD (two µops on Intel) and VPADDD took three
			// for a whole sub-block. The two scales wait in Z2 and Z3, so
			// the loads do not grow with the tokens (as in q6kBlock16).
			// N = 8 in L2: 670 → 618 µs a call; the same VPMULLD from
			// registers gave 650.
			if k == 3 {
				g.p("VMOVDQU64 %d(SP), Z2", 64*(2*t))
				g.p("VMOVDQU64 %d(SP), Z3", 64*(2*t+1))
			}
			for j := 0; j < r; j++ {
				for h, q := range []int{16 + j, 8 + j} {
					g.p("VPDPWSSD Z%d, Z%d, Z%d", 2+h, q, 24+j)
				}
			}
		}
	}
	// acc += d·d_x·Σ sc·Σqx − dmin·d_x·Σ m·(bsum_2s + bsum_2s+1); the mins'
	// sums with VPDPWSSD (exact, as VPMADDWD and VPADDD are), the mins of
	// the eight sub-blocks in Z16–Z23 (free once the sums are in).
	g.p("VMOVDQU 1120(SI), X2")
	g.p("VINSERTI128 $1, 1120(SI)(BX*1), Y2, Y2")
	g.p("VCVTPH2PS Y2, Z2")
	g.p("VMOVDQU 1136(SI), X3")
	g.p("VINSERTI128 $1, 1136(SI)(BX*1), Y3, Y3")
	g.p("VCVTPH2PS Y3, Z3")
	for s := 0; s < 8; s++ {
		g.p("VMOVDQU64 %d(SP), Z%d", 512+64*s, 16+s)
	}
	for j := 0; j < r; j++ {
		m := 6 + j%2
		g.p("VPXORD Z%d, Z%d, Z%d", m, m, m)
		for s := 0; s < 8; s++ {
			g.p("VPDPWSSD.BCST %s, Z%d, Z%d", xa(260+4*s, j), 16+s, m)
		}
		g.p("VCVTDQ2PS Z%d, Z%d", 24+j, 24+j)
		g.p("VCVTDQ2PS Z%d, Z%d", m, m)
		g.p("VBROADCASTSS %s, Z1", xa(0, j))
		g.p("VMULPS Z1, Z2, Z4")
		g.p("VMULPS Z1, Z3, Z5")
		g.p("VMOVUPS %d(SP), Z%d", p16Acc+64*j, 8+j)
		g.p("VFMADD231PS Z%d, Z4, Z%d", 24+j, 8+j)
		g.p("VFNMADD231PS Z%d, Z5, Z%d", m, 8+j)
		g.p("VMOVUPS Z%d, %d(SP)", 8+j, p16Acc+64*j)
	}
}

// p16Ahead is how many records ahead, in the order they are consumed,
// the pair kernels prefetch.
const p16Ahead = 4

// p16Acc is where in its frame a pair kernel keeps token j's float sums
// (p16Acc + 64j).
const p16Acc = 1024

// q6kBlock16 is q6kBlockV over a pair, quarters k and k+2 together (they
// share their ql bytes, low and high nibbles, and their qh bytes), so
// each load serves two sub-block sums per token, Z16+j and Z8+j. Frame:
// 0(SP) + 64sb sub-block sb's scale as int32 lanes, 1024(SP) + 64t the
// pair (−32·sc_2t, −32·sc_2t+1) as int16s, the float sums at p16Acc6.
func q6kBlock16(g *gen, r int) {
	q6kScales(g, zmm)
	for j := 0; j < r; j++ {
		g.p("VPXORD Z%d, Z%d, Z%d", 24+j, 24+j, 24+j)
	}
	for n := 0; n < 2; n++ {
		for half := 0; half < 2; half++ {
			for kk := 0; kk < 2; kk++ { // quarters kk (low nibbles) and kk+2 (high)
				for l := 4 * half; l < 4*half+4; l++ {
					if kk == 0 {
						for i := 0; i < 2; i++ {
							line := 2*(8*n+4*half+l%4) + i
							g.p("PREFETCHT0 %d(R11)", 64*line)
							g.p("PREFETCHT0 %d(R11)(BX*1)", 64*line)
						}
					}
					ql := 32 * (16*n + l) // ql_a: quarters 0 and 2
					if kk == 1 {
						ql += 32 * 8 // ql_b: quarters 1 and 3
					}
					ld16(g, ql, 4)
					ld16(g, 1024+32*(8*n+l), 6)
					// qh bits 2k, 2k+1 to bits 4, 5 (one affine each),
					// then quant = that | (ql nibble) in one VPTERNLOGD
					// (0xF8: A | B&C, C the nibble mask).
					g.p("VGF2P8AFFINEQB.BCST $0, gf_qh%d<>(SB), Z6, Z0", kk)
					g.p("VGF2P8AFFINEQB.BCST $0, gf_qh%d<>(SB), Z6, Z1", kk+2)
					g.p("VPTERNLOGD.BCST $0xf8, p8_nib<>(SB), Z4, Z0")
					g.p("VPSRLW $4, Z4, Z4")
					g.p("VPTERNLOGD.BCST $0xf8, p8_nib<>(SB), Z4, Z1")
					for j := 0; j < r; j++ {
						for h, q := range []int{16 + j, 8 + j} {
							if l == 4*half {
								g.p("VPXORD Z%d, Z%d, Z%d", q, q, q)
							}
							g.p("VPDPBUSD.BCST %s, Z%d, Z%d", xa(4+128*n+32*(kk+2*h)+4*l, j), h, q)
						}
					}
				}
				// The two sub-blocks' scales from registers, loaded
				// once rather than once per token: with a broadcast in
				// every VPDPBUSD, loads are what an eight-token call
				// runs short of (N = 8 in L2: 940 → 852 µs a call).
				for h := 0; h < 2; h++ {
					g.p("VMOVDQU64 %d(SP), Z%d", 64*(8*n+2*(kk+2*h)+half), 2+h)
				}
				for j := 0; j < r; j++ {
					for h, q := range []int{16 + j, 8 + j} {
						g.p("VPMULLD Z%d, Z%d, Z%d", 2+h, q, q)
						g.p("VPADDD Z%d, Z%d, Z%d", q, 24+j, 24+j)
					}
				}
			}
		}
	}
	for t := 0; t < 8; t++ {
		g.p("VMOVDQU64 %d(SP), Z4", 1024+64*t)
		for j := 0; j < r; j++ {
			g.p("VPDPWSSD.BCST %s, Z4, Z%d", xa(260+4*t, j), 24+j)
		}
	}
	// acc += d·d_x·isum.
	g.p("VMOVDQU 1664(SI), X2")
	g.p("VINSERTI128 $1, 1664(SI)(BX*1), Y2, Y2")
	g.p("VCVTPH2PS Y2, Z2")
	for j := 0; j < r; j++ {
		g.p("VCVTDQ2PS Z%d, Z%d", 24+j, 24+j)
		g.p("VBROADCASTSS %s, Z1", xa(0, j))
		g.p("VMULPS Z1, Z2, Z4")
		g.p("VMOVUPS %d(SP), Z%d", p16Acc6+64*j, 8+j)
		g.p("VFMADD231PS Z%d, Z4, Z%d", 24+j, 8+j)
		g.p("VMOVUPS Z%d, %d(SP)", 8+j, p16Acc6+64*j)
	}
}

// p16Acc6: where q6kBlock16 keeps the float sums in its frame.
const p16Acc6 = 1536

// pairSpec is one type's pair kernels: rec the record bytes, xb the
// activation block bytes, acc where the float sums live in the frame (0:
// in Z24+j, for blocks that leave those free), scale whether they take
// p8Scales (the legacy types).
type pairSpec struct {
	name, wt, doc string
	rec, xb, acc  int
	scale         bool
	block         func(*gen, int)
}

var pairKernels = []pairSpec{
	{name: "q4kP16V", wt: "Q4_K", doc: "Q4_K × Q8_K, VNNI, two 8-row groups", rec: 1152, xb: 292, acc: p16Acc, block: q4kBlock16},
	{name: "q6kP16V", wt: "Q6_K", doc: "Q6_K × Q8_K, VNNI, two 8-row groups", rec: 1680, xb: 292, acc: p16Acc6, block: q6kBlock16},
	{name: "q40P16V", wt: "Q4_0", doc: "Q4_0 × Q8_0, VNNI, two 8-row groups", rec: 144, xb: 34, scale: true, block: func(g *gen, r int) { nibbleBlock16(g, r, false, 144, 128) }},
	{name: "q50P16V", wt: "Q5_0", doc: "Q5_0 × Q8_0, VNNI, two 8-row groups", rec: 176, xb: 34, scale: true, block: func(g *gen, r int) { nibbleBlock16(g, r, true, 176, 160) }},
}

// pairKernel writes pair kernel name of pk for r activation rows:
// func(wp *byte, gb, nb int, x *byte, xs int, [sc *float32, ss int,] out
// *float32, os int), gb the bytes from the first group's records to the
// second's; 16 floats out per activation row.
//
// The block prefetches from R11 (first group) and R11 + BX (second): the
// records p16Ahead on in the order the pairs are consumed, which past the
// end of the pair's records is the next pair's (gb further on), not the
// second group's records that the straight SI + p16Ahead·rec would give.
// With that, a short row group (the gate matrix's 6 records) streams as
// well as a long one.
//
// The legacy types' scales: DX row 0's current pair of floats, R9 the
// row stride, R13 3·R9, R12 row 4's (sa16); out and its stride are read
// back into DX and R9 after the loop.
func pairKernel(s, d *bytes.Buffer, pk pairSpec, name string, r int) {
	args, sig := 56, "wp *byte, gb, nb int, x *byte, xs int, out *float32, os int"
	if pk.scale {
		args, sig = 72, "wp *byte, gb, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int"
	}
	frame := 0
	if pk.acc > 0 {
		frame = pk.acc + 64*r
	}
	g := &gen{}
	fmt.Fprintf(s, "// func %s(%s)\n// %s, %d activation row(s).\n", name, sig, pk.doc, r)
	fmt.Fprintf(s, "TEXT ·%s(SB), 0, $%d-%d\n", name, frame, args)
	g.p("MOVQ wp+0(FP), SI")
	g.p("MOVQ gb+8(FP), BX")
	g.p("MOVQ nb+16(FP), CX")
	g.p("MOVQ x+24(FP), DI")
	g.p("MOVQ xs+32(FP), R8")
	g.p("LEAQ (R8)(R8*2), R10")
	outArgs := func() {
		o := 40
		if pk.scale {
			o = 56
		}
		g.p("MOVQ out+%d(FP), DX", o)
		g.p("MOVQ os+%d(FP), R9", o+8)
		g.p("LEAQ (R9)(R9*2), R13")
	}
	if pk.scale {
		g.p("MOVQ sc+40(FP), DX")
		g.p("MOVQ ss+48(FP), R9")
		g.p("LEAQ (R9)(R9*2), R13")
		g.p("LEAQ (DX)(R9*4), R12")
	} else {
		outArgs()
	}
	g.p("LEAQ (DI)(R8*4), AX")
	g.p("LEAQ %d(SI), R11", p16Ahead*pk.rec)
	g.p("CMPQ CX, $%d", p16Ahead)
	g.p("JG %sfar", name)
	g.p("ADDQ BX, R11")
	g.label(name + "far")
	if pk.acc > 0 {
		g.p("VPXORD Z8, Z8, Z8")
		for j := 0; j < r; j++ {
			g.p("VMOVUPS Z8, %d(SP)", pk.acc+64*j)
		}
	} else {
		for j := 0; j < r; j++ {
			g.p("VPXORD Z%d, Z%d, Z%d", 24+j, 24+j, 24+j)
		}
	}
	g.label(name + "loop")
	pk.block(g, r)
	g.p("ADDQ $%d, SI", pk.rec)
	g.p("ADDQ $%d, DI", pk.xb)
	g.p("ADDQ $%d, AX", pk.xb)
	if pk.scale {
		g.p("ADDQ $8, DX")
		g.p("ADDQ $8, R12")
	}
	g.p("ADDQ $%d, R11", pk.rec)
	g.p("CMPQ CX, $%d", p16Ahead+1)
	g.p("JNE %snext", name)
	g.p("ADDQ BX, R11") // the prefetches reach the end of the pair
	g.label(name + "next")
	g.p("DECQ CX")
	g.p("JNZ %sloop", name)
	if pk.scale {
		outArgs()
	}
	g.p("LEAQ (DX)(R9*4), AX")
	for j := 0; j < r; j++ {
		if pk.acc > 0 {
			g.p("VMOVUPS %d(SP), Z8", pk.acc+64*j)
			g.p("VMOVUPS Z8, %s", oa(j))
		} else {
			g.p("VMOVUPS Z%d, %s", 24+j, oa(j))
		}
	}
	g.p("VZEROUPPER")
	g.p("RET")
	s.Write(g.b.Bytes())
	s.WriteString("\n")
	fmt.Fprintf(d, "//go:noescape\nfunc %s(%s)\n\n", name, sig)
}

// sa16 is float32 k of activation row j's current block scales in a
// legacy pair kernel (rows 0–3 off DX, 4–7 off R12, stride R9).
func sa16(k, j int) string {
	base := "DX"
	if j >= 4 {
		base, j = "R12", j-4
	}
	return fmt.Sprintf("%d(%s)%s", 4*k, base, []string{"", "(R9*1)", "(R9*2)", "(R13*1)"}[j])
}

// nibbleBlock16 is nibbleBlockV over a pair (Q4_0, and Q5_0 with five).
// The 8-row kernel spends on each part's two halves a load, a shift and
// two masks, and for Q5_0 a shift, a mask and an or more, for 8 rows;
// here one GF2P8AFFINEQB takes a part's high nibbles down and one per
// half puts a fifth bit at bit 4 (gf_q5l, gf_q5h), for 16 rows. The
// decode is most of a call at one activation row (a draft model's decode
// step: the Qwen2.5 0.5B's layers are Q5_0).
//
// Registers: Z0–Z3 the low quants of parts 0–3, Z4–Z7 the high ones (the
// raw part first), Z8 the qh' words, Z9 the rows' d, Z10 and Z11
// temporaries, Z16+j token j's int32 sum, Z24+j its float sums. The
// integer and float sequence of a lane is the 8-row kernel's, so both
// give the same bits.
func nibbleBlock16(g *gen, r int, five bool, rec, dOff int) {
	for line := 0; 64*line < rec; line++ {
		g.p("PREFETCHT0 %d(R11)", 64*line)
		g.p("PREFETCHT0 %d(R11)(BX*1)", 64*line)
	}
	if five {
		ld16(g, 128, 8)
	}
	for k := 0; k < 4; k++ {
		ld16(g, 32*k, 4+k)
		if five {
			g.p("VGF2P8AFFINEQB.BCST $0, gf_q5l%d<>(SB), Z8, Z%d", k, k)
			// 0xf8: A | B&C, C the nibble mask.
			g.p("VPTERNLOGD.BCST $0xf8, p8_nib<>(SB), Z%d, Z%d", 4+k, k)
			g.p("VGF2P8AFFINEQB.BCST $0, gf_q5h%d<>(SB), Z8, Z10", k)
			g.p("VGF2P8AFFINEQB.BCST $0, gf_hi<>(SB), Z%d, Z%d", 4+k, 4+k)
			g.p("VPORD Z10, Z%d, Z%d", 4+k, 4+k)
		} else {
			g.p("VPANDD.BCST p8_nib<>(SB), Z%d, Z%d", 4+k, k)
			g.p("VGF2P8AFFINEQB.BCST $0, gf_hi<>(SB), Z%d, Z%d", 4+k, 4+k)
		}
	}
	for j := 0; j < r; j++ {
		g.p("VPXORD Z%d, Z%d, Z%d", 16+j, 16+j, 16+j)
		for h := 0; h < 2; h++ {
			for k := 0; k < 4; k++ {
				g.p("VPDPBUSD.BCST %s, Z%d, Z%d", xa(2+16*h+4*k, j), 4*h+k, 16+j)
			}
		}
	}
	// acc += d_w · (d_x·Σq·x + c_x), as nibbleScale.
	g.p("VMOVDQU %d(SI), X9", dOff)
	g.p("VINSERTI128 $1, %d(SI)(BX*1), Y9, Y9", dOff)
	g.p("VCVTPH2PS Y9, Z9")
	for j := 0; j < r; j++ {
		g.p("VCVTDQ2PS Z%d, Z%d", 16+j, 16+j)
		g.p("VBROADCASTSS %s, Z10", sa16(0, j))
		g.p("VBROADCASTSS %s, Z11", sa16(1, j))
		g.p("VFMADD213PS Z11, Z10, Z%d", 16+j)
		g.p("VFMADD231PS Z%d, Z9, Z%d", 16+j, 24+j)
	}
}

// q6kBlockV: Q6_K against Q8_K, VNNI only. Record (1680 bytes, see
// packed8.go): 32 parts of ql (part p, lane r: ql[4p:4p+4] of row r), 16
// of qh at 1024, 4 of the int8 scales at 1536 (part i: scales[4i:4i+4]),
// the eight d as f16 at 1664. Element 128n + 32k + 4l + i (i < 4) of a
// row is the nibble of ql[64n + 32(k&1) + 4l + i] (the low one for k < 2)
// with bits 2k, 2k+1 of qh[32n + 4l + i] above it, weighted by
// scales[8n + 2k + l/4]. The quants go in unsigned (0…63) and the −32
// offset as −32·Σ sc·bsum, added with VPDPWSSD from the Q8_K block's
// 16-element sums. Frame: 0(SP) + 32s sub-block s's scale as an int32 per
// row lane; 512(SP) + 32t the pair (−32·sc_2t, −32·sc_2t+1) as int16s.
// Registers: Y0–Y3 the quants of k = 0…3, Y4–Y6 temporaries, Y16 + 4k + j
// row j's int32 sum of the current sub-block of quarter k.
func q6kBlockV(g *gen, r int) {
	// Two records ahead: 19 MB of Q6_K at N = 1 on one thread of the
	// Zen 4 streamed at 23, 27 and 27 GB/s with one, two and four.
	const q6Ahead = 2 * 1680
	q6kScales(g, ymm)
	p := func(k, j int) string { return fmt.Sprintf("Y%d", 16+4*k+j) }
	for j := 0; j < r; j++ {
		g.p("VPXORD %s, %s, %s", isum(j), isum(j), isum(j))
	}
	if wide {
		q6kSumsWide(g, r, q6Ahead)
	}
	for n := 0; n < 2 && !wide; n++ {
		for half := 0; half < 2; half++ {
			for k := 0; k < 4; k++ {
				for j := 0; j < r; j++ {
					g.p("VPXORD %s, %s, %s", p(k, j), p(k, j), p(k, j))
				}
			}
			for l := 4 * half; l < 4*half+4; l++ {
				// Two of the next record's 28 cache lines per step (a burst
				// of 28 prefetches at the top halved the bandwidth).
				for i := 0; i < 2; i++ {
					line := 2*(8*n+4*half+l%4) + i
					g.p("PREFETCHT0 %d(SI)", q6Ahead+64*line)
				}
				g.p("VMOVDQU %d(SI), Y4", 32*(16*n+l))
				g.p("VMOVDQU %d(SI), Y5", 32*(16*n+8+l))
				g.p("VMOVDQU %d(SI), Y6", 1024+32*(8*n+l))
				// q0 = ql_a & 15 | (qh << 4) & 0x30, and so on.
				g.p("VPAND p8_nib<>(SB), Y4, Y0")
				g.p("VPSLLW $4, Y6, Y2")
				g.p("VPAND p8_b30<>(SB), Y2, Y2")
				g.p("VPOR Y2, Y0, Y0")
				g.p("VPAND p8_nib<>(SB), Y5, Y1")
				g.p("VPSLLW $2, Y6, Y2")
				g.p("VPAND p8_b30<>(SB), Y2, Y2")
				g.p("VPOR Y2, Y1, Y1")
				g.p("VPSRLW $4, Y4, Y2")
				g.p("VPAND p8_nib<>(SB), Y2, Y2")
				g.p("VPAND p8_b30<>(SB), Y6, Y3")
				g.p("VPOR Y3, Y2, Y2")
				g.p("VPSRLW $4, Y5, Y3")
				g.p("VPAND p8_nib<>(SB), Y3, Y3")
				g.p("VPSRLW $2, Y6, Y6")
				g.p("VPAND p8_b30<>(SB), Y6, Y6")
				g.p("VPOR Y6, Y3, Y3")
				for k := 0; k < 4; k++ {
					for j := 0; j < r; j++ {
						g.p("VPDPBUSD.BCST %s, Y%d, %s", xa(4+128*n+32*k+4*l, j), k, p(k, j))
					}
				}
			}
			for k := 0; k < 4; k++ {
				sb := 8*n + 2*k + half
				for j := 0; j < r; j++ {
					g.p("VPMULLD %d(SP), %s, %s", 32*sb, p(k, j), p(k, j))
					g.p("VPADDD %s, %s, %s", p(k, j), isum(j), isum(j))
				}
			}
		}
	}
	for t := 0; t < 8; t++ {
		g.p("VMOVDQU %d(SP), Y4", 512+32*t)
		for j := 0; j < r; j++ {
			g.p("VPDPWSSD.BCST %s, Y4, %s", xa(260+4*t, j), isum(j))
		}
	}
	// acc += d·d_x·isum.
	g.p("VCVTPH2PS 1664(SI), Y2")
	for j := 0; j < r; j++ {
		g.p("VCVTDQ2PS %s, %s", isum(j), isum(j))
		g.p("VBROADCASTSS %s, Y1", xa(0, j))
		g.p("VMULPS Y1, Y2, Y4")
		g.p("VFMADD231PS %s, Y4, %s", isum(j), acc(j))
	}
}

// q6kSumsWide is the quants part of q6kBlockV for more than four rows,
// where one sub-block sum per row and quarter (4r registers) does not fit:
// the quarters go one after the other, each decoding its own quants from
// ql and qh, so a row needs one register for its current sub-block (Y16+j).
func q6kSumsWide(g *gen, r, ahead int) {
	for n := 0; n < 2; n++ {
		for half := 0; half < 2; half++ {
			for k := 0; k < 4; k++ {
				for j := 0; j < r; j++ {
					g.p("VPXORD Y%d, Y%d, Y%d", 16+j, 16+j, 16+j)
				}
				for l := 4 * half; l < 4*half+4; l++ {
					if k == 0 {
						for i := 0; i < 2; i++ {
							line := 2*(8*n+4*half+l%4) + i
							g.p("PREFETCHT0 %d(SI)", ahead+64*line)
						}
					}
					ql := 32 * (16*n + l) // ql_a: quarters 0 and 2
					if k%2 == 1 {
						ql += 32 * 8 // ql_b: quarters 1 and 3
					}
					g.p("VMOVDQU %d(SI), Y4", ql)
					g.p("VMOVDQU %d(SI), Y6", 1024+32*(8*n+l))
					if k >= 2 {
						g.p("VPSRLW $4, Y4, Y4")
					}
					g.p("VPAND p8_nib<>(SB), Y4, Y0")
					// qh bits 2k, 2k+1 to bits 4, 5.
					switch k {
					case 0:
						g.p("VPSLLW $4, Y6, Y6")
					case 1:
						g.p("VPSLLW $2, Y6, Y6")
					case 3:
						g.p("VPSRLW $2, Y6, Y6")
					}
					g.p("VPAND p8_b30<>(SB), Y6, Y6")
					g.p("VPOR Y6, Y0, Y0")
					for j := 0; j < r; j++ {
						g.p("VPDPBUSD.BCST %s, Y0, Y%d", xa(4+128*n+32*k+4*l, j), 16+j)
					}
				}
				sb := 8*n + 2*k + half
				for j := 0; j < r; j++ {
					g.p("VPMULLD %d(SP), Y%d, Y%d", 32*sb, 16+j, 16+j)
					g.p("VPADDD Y%d, %s, %s", 16+j, isum(j), isum(j))
				}
			}
		}
	}
}

type kernel struct {
	name  string
	wt    string // the weight type's Go name
	rec   int    // record bytes per block
	xb    int    // activation block bytes
	frame int    // stack frame bytes
	scale bool   // takes p8Scales (the legacy types)
	vnni  bool   // needs AVX-512 VNNI (p8AsmVNNI)
	vex   bool   // needs AVX-VNNI (p8AsmAVXVNNI, gen_packed8_avxvnni.go)
	// spread: the block function issues its own prefetches, spread
	// through its work, instead of all at the top of the loop.
	spread bool
	block  func(g *gen, r int)
	doc    string
	// lean, setup: the block for up to leanRows activation rows, where
	// it differs, and its constants, loaded once a call
	// (gen_packed8_lean.go).
	lean  func(g *gen, r int)
	setup func(g *gen, r int)
	// acts: the most activation rows one call takes (maxAct unless set).
	// Eight rows stream a group's weights once for a verify pass of N = 8
	// and halve the per-row share of decoding them; that needs the
	// sixteen more registers of EVEX, so only VNNI kernels have it.
	acts int
}

var kernels = []kernel{
	{name: "q40P8", wt: "Q4_0", rec: 144, xb: 34, scale: true, doc: "Q4_0 × Q8_0", block: func(g *gen, r int) { nibbleBlock(g, r, false, 128, 2, 0) },
		lean: func(g *gen, r int) { nibbleLean(g, r, false, 128, 2, 0) }, setup: func(g *gen, r int) { leanSetup(g, r, false) }},
	{name: "q41P8", wt: "Q4_1", rec: 160, xb: 36, scale: true, doc: "Q4_1 × Q8_1", block: func(g *gen, r int) { nibbleBlock(g, r, false, 128, 4, 144) },
		lean: func(g *gen, r int) { nibbleLean(g, r, false, 128, 4, 144) }, setup: func(g *gen, r int) { leanSetup(g, r, false) }},
	{name: "q50P8", wt: "Q5_0", rec: 176, xb: 34, scale: true, doc: "Q5_0 × Q8_0", block: func(g *gen, r int) { nibbleBlock(g, r, true, 160, 2, 0) },
		lean: func(g *gen, r int) { nibbleLean(g, r, true, 160, 2, 0) }, setup: func(g *gen, r int) { leanSetup(g, r, true) }},
	{name: "q80P8", wt: "Q8_0", rec: 272, xb: 34, scale: true, doc: "Q8_0 × Q8_0", block: q80Block,
		lean: q80Lean, setup: func(g *gen, r int) { leanSetup(g, r, false) }},
	{name: "q4kP8", wt: "Q4_K", rec: 1152, xb: 292, frame: 512, spread: true, doc: "Q4_K × Q8_K", block: q4kBlock,
		lean: q4kLean, setup: func(g *gen, r int) { leanSetup(g, r, false) }},
	{name: "q6kP8", wt: "Q6_K", rec: 1680, xb: 292, frame: 768, spread: true, doc: "Q6_K × Q8_K", block: q6kAVX2, setup: q6kSetup,
		lean: func(g *gen, r int) {
			if r == 1 {
				q6kLean(g, r)
			} else {
				q6kAVX2(g, r)
			}
		}},
	{name: "iq4nlP8", wt: "IQ4_NL", rec: 144, xb: 34, scale: true, doc: "IQ4_NL × Q8_0", block: iq4nlBlock, setup: iq4nlSetup},
	{name: "iq4xsP8", wt: "IQ4_XS", rec: 1088, xb: 292, frame: 256, doc: "IQ4_XS × Q8_K", block: iq4xsBlock, setup: iq4nlSetup},
	{name: "q40P8X", wt: "Q4_0", rec: 144, xb: 34, scale: true, vex: true, doc: "Q4_0 × Q8_0, AVX-VNNI",
		block: func(g *gen, r int) { nibbleVex(g, r, false, 128, 2, 0) }, setup: func(g *gen, r int) { vexSetup(g, false) }},
	{name: "q41P8X", wt: "Q4_1", rec: 160, xb: 36, scale: true, vex: true, doc: "Q4_1 × Q8_1, AVX-VNNI",
		block: func(g *gen, r int) { nibbleVex(g, r, false, 128, 4, 144) }, setup: func(g *gen, r int) { vexSetup(g, false) }},
	{name: "q50P8X", wt: "Q5_0", rec: 176, xb: 34, scale: true, vex: true, doc: "Q5_0 × Q8_0, AVX-VNNI",
		block: func(g *gen, r int) { nibbleVex(g, r, true, 160, 2, 0) }, setup: func(g *gen, r int) { vexSetup(g, true) }},
	{name: "q80P8X", wt: "Q8_0", rec: 272, xb: 34, scale: true, vex: true, doc: "Q8_0 × Q8_0, AVX-VNNI", block: q80Vex},
	{name: "q4kP8X", wt: "Q4_K", rec: 1152, xb: 292, frame: 512, vex: true, doc: "Q4_K × Q8_K, AVX-VNNI", block: q4kVex},
	{name: "q6kP8X", wt: "Q6_K", rec: 1680, xb: 292, frame: 768, spread: true, vex: true, doc: "Q6_K × Q8_K, AVX-VNNI", block: q6kVex},
	{name: "q40P8V", wt: "Q4_0", rec: 144, xb: 34, scale: true, vnni: true, acts: 8, doc: "Q4_0 × Q8_0, VNNI", block: func(g *gen, r int) { nibbleBlockV(g, r, false, 128, 2, 0) }},
	{name: "q41P8V", wt: "Q4_1", rec: 160, xb: 36, scale: true, vnni: true, doc: "Q4_1 × Q8_1, VNNI", block: func(g *gen, r int) { nibbleBlockV(g, r, false, 128, 4, 144) }},
	{name: "q50P8V", wt: "Q5_0", rec: 176, xb: 34, scale: true, vnni: true, acts: 8, doc: "Q5_0 × Q8_0, VNNI", block: func(g *gen, r int) { nibbleBlockV(g, r, true, 160, 2, 0) }},
	{name: "q80P8V", wt: "Q8_0", rec: 272, xb: 34, scale: true, vnni: true, doc: "Q8_0 × Q8_0, VNNI", block: q80BlockV},
	{name: "q4kP8V", wt: "Q4_K", rec: 1152, xb: 292, frame: 512, vnni: true, spread: true, acts: 8, doc: "Q4_K × Q8_K, VNNI", block: q4kBlockV},
	{name: "q6kP8V", wt: "Q6_K", rec: 1680, xb: 292, frame: 768, vnni: true, spread: true, acts: 8, doc: "Q6_K × Q8_K, VNNI", block: q6kBlockV},
}

// maxAct is the most activation rows per call of a kernel that does not
// set acts: rows 0–3 address off DI with R8 and R10 = 3·R8.
const maxAct = 4

func (k kernel) maxActs() int {
	if k.acts > 0 {
		return k.acts
	}
	return maxAct
}

// prefetchAhead is how far ahead of the current record the kernels
// prefetch the weights, in bytes.
const prefetchAhead = 2304

func bytes32(b *bytes.Buffer, name string, v byte) {
	for q := 0; q < 4; q++ {
		var w uint64
		for i := 0; i < 8; i++ {
			w |= uint64(v) << (8 * i)
		}
		fmt.Fprintf(b, "DATA %s<>+%d(SB)/8, $0x%016x\n", name, 8*q, w)
	}
	fmt.Fprintf(b, "GLOBL %s<>(SB), RODATA|NOPTR, $32\n\n", name)
}

// shuffle32 writes the 32-byte VPSHUFB control name: for each row's
// 4-byte lane, the dword ctl(b), b being the index of the lane's first
// byte within its 128-bit half (VPSHUFB indexes within a half; a 0x80
// byte gives zero).
func shuffle32(s *bytes.Buffer, name string, ctl func(b uint32) uint32) {
	for q := 0; q < 4; q++ {
		var w uint64
		for h := 0; h < 2; h++ {
			w |= uint64(ctl(uint32(4*((2*q+h)%4)))) << (32 * h)
		}
		fmt.Fprintf(s, "DATA %s<>+%d(SB)/8, $0x%016x\n", name, 8*q, w)
	}
	fmt.Fprintf(s, "GLOBL %s<>(SB), RODATA|NOPTR, $32\n\n", name)
}

// affine writes the GF2P8AFFINEQB matrix name (one qword) that sets
// result bit i to source bit from[i], and the bits not in from to zero.
func affine(s *bytes.Buffer, name string, from map[int]int) {
	var m uint64
	for i, b := range from {
		m |= uint64(1<<b) << (8 * (7 - i))
	}
	fmt.Fprintf(s, "DATA %s<>+0(SB)/8, $0x%016x\nGLOBL %s<>(SB), RODATA|NOPTR, $8\n\n", name, m, name)
}

// shuffle64 is shuffle32 for a ZMM's four 128-bit lanes.
func shuffle64(s *bytes.Buffer, name string, ctl func(b uint32) uint32) {
	for q := 0; q < 8; q++ {
		var w uint64
		for h := 0; h < 2; h++ {
			w |= uint64(ctl(uint32(4*((2*q+h)%4)))) << (32 * h)
		}
		fmt.Fprintf(s, "DATA %s<>+%d(SB)/8, $0x%016x\n", name, 8*q, w)
	}
	fmt.Fprintf(s, "GLOBL %s<>(SB), RODATA|NOPTR, $64\n\n", name)
}

func main() {
	var s bytes.Buffer
	s.WriteString("// Code generated by gen_packed8.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\n#include \"textflag.h\"\n\n")
	bytes32(&s, "p8_nib", 0x0f)
	// GF2P8AFFINEQB matrices (byte 7−i of the qword selects the source
	// bits of result bit i): gf_hi moves a byte's high nibble to the low
	// one (bits 4–7 to 0–3, zeros above); gf_qh<k> moves bits 2k, 2k+1 to
	// bits 4, 5 (a Q6_K quarter's high bits), zeros elsewhere.
	affine(&s, "gf_hi", map[int]int{0: 4, 1: 5, 2: 6, 3: 7})
	// gf_lo8, gf_hi8: a byte's low (high) nibble q as the int8 q − 8:
	// bits 0–2 are q's, bits 3–7 its top bit inverted (the affine
	// constant 0xf8 does the inverting). For the AMX kernel (gen_amx.go).
	affine(&s, "gf_lo8", map[int]int{0: 0, 1: 1, 2: 2, 3: 3, 4: 3, 5: 3, 6: 3, 7: 3})
	affine(&s, "gf_hi8", map[int]int{0: 4, 1: 5, 2: 6, 3: 7, 4: 7, 5: 7, 6: 7, 7: 7})
	for k := 0; k < 4; k++ {
		affine(&s, fmt.Sprintf("gf_qh%d", k), map[int]int{4: 2 * k, 5: 2*k + 1})
	}
	// gf_q5l<k>, gf_q5h<k>: a Q5_0 qh' byte's bit k (bit 4+k) to bit 4,
	// zeros elsewhere: the fifth bits of part k's low (high) nibbles.
	for k := 0; k < 4; k++ {
		affine(&s, fmt.Sprintf("gf_q5l%d", k), map[int]int{4: k})
		affine(&s, fmt.Sprintf("gf_q5h%d", k), map[int]int{4: 4 + k})
	}
	bytes32(&s, "p8_b10", 0x10)
	bytes32(&s, "p8_b3f", 0x3f)
	bytes32(&s, "p8_b30", 0x30)
	// p8_pick<j>: in every row's 4-byte lane, byte j of that lane as an
	// int16 in both halves; p8_pickd<j>: byte j as an int32; p8_pickt<j>:
	// byte j in the lane's top byte, zeros below (an arithmetic shift by
	// 24 then sign-extends it).
	for j := uint32(0); j < 4; j++ {
		shuffle32(&s, fmt.Sprintf("p8_pick%d", j), func(b uint32) uint32 { return (b + j) | 0x80<<8 | (b+j)<<16 | 0x80<<24 })
	}
	for j := uint32(0); j < 4; j++ {
		shuffle32(&s, fmt.Sprintf("p8_pickd%d", j), func(b uint32) uint32 { return (b + j) | 0x80<<8 | 0x80<<16 | 0x80<<24 })
	}
	for j := uint32(0); j < 4; j++ {
		shuffle32(&s, fmt.Sprintf("p8_pickt%d", j), func(b uint32) uint32 { return 0x80 | 0x80<<8 | 0x80<<16 | (b+j)<<24 })
	}
	// p8_pickw<h>: bytes 2h and 2h+1 of the lane, each in the high byte
	// of one int16.
	for h := uint32(0); h < 2; h++ {
		shuffle32(&s, fmt.Sprintf("p8_pickw%d", h), func(b uint32) uint32 { return 0x80 | (b+2*h)<<8 | 0x80<<16 | (b+2*h+1)<<24 })
	}
	// p16_pick<j>, p16_pickd<j>, p16_pickt<j>, p16_pickw<h>: the p8_
	// tables over a ZMM.
	for j := uint32(0); j < 4; j++ {
		shuffle64(&s, fmt.Sprintf("p16_pick%d", j), func(b uint32) uint32 { return (b + j) | 0x80<<8 | (b+j)<<16 | 0x80<<24 })
		shuffle64(&s, fmt.Sprintf("p16_pickd%d", j), func(b uint32) uint32 { return (b + j) | 0x80<<8 | 0x80<<16 | 0x80<<24 })
		shuffle64(&s, fmt.Sprintf("p16_pickt%d", j), func(b uint32) uint32 { return 0x80 | 0x80<<8 | 0x80<<16 | (b+j)<<24 })
	}
	for h := uint32(0); h < 2; h++ {
		shuffle64(&s, fmt.Sprintf("p16_pickw%d", h), func(b uint32) uint32 { return 0x80 | (b+2*h)<<8 | 0x80<<16 | (b+2*h+1)<<24 })
	}
	leanTables(&s)
	iq4Tables(&s)
	for q := 0; q < 4; q++ {
		fmt.Fprintf(&s, "DATA p8_one16<>+%d(SB)/8, $0x0001000100010001\n", 8*q)
	}
	s.WriteString("GLOBL p8_one16<>(SB), RODATA|NOPTR, $32\n\n")

	var d, d2 bytes.Buffer
	d.WriteString("// Code generated by gen_packed8.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\npackage quant\n\n")
	for _, k := range kernels {
		for r := 1; r <= k.maxActs(); r++ {
			name := fmt.Sprintf("%sx%d", k.name, r)
			wide = r > maxAct
			g := &gen{}
			fmt.Fprintf(&s, "// func %s(wp *byte, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int, ng int)\n// %s, %d activation row(s), ng consecutive 8-row groups.\n", name, k.doc, r)
			if k.frame == 0 {
				fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $0-72\n", name)
			} else {
				fmt.Fprintf(&s, "TEXT ·%s(SB), 0, $%d-72\n", name, k.frame)
			}
			g.p("MOVQ wp+0(FP), SI")
			g.p("MOVQ xs+24(FP), R8")
			g.p("LEAQ (R8)(R8*2), R10")
			g.p("MOVQ ss+40(FP), R11")
			g.p("LEAQ (R11)(R11*2), R12")
			g.p("MOVQ out+48(FP), DX")
			g.p("MOVQ os+56(FP), R9")
			g.p("LEAQ (R9)(R9*2), R13")
			block := k.block
			if k.lean != nil && r <= leanRows {
				block = k.lean
			}
			if k.setup != nil {
				k.setup(g, r)
			}
			// One call runs ng groups: the records of a matrix's groups
			// follow each other, so SI runs on from one group into the
			// next, and a group starts the activations (and their
			// scales) over. A Go call per 8-row group (its bounds
			// checks, the assembly's prologue and stores) had cost
			// about a tenth of a SmolLM2 decode step.
			g.label(name + "group")
			g.p("MOVQ nb+8(FP), CX")
			g.p("MOVQ x+16(FP), DI")
			g.p("MOVQ sc+32(FP), BX")
			if wide {
				g.p("LEAQ (DI)(R8*4), AX")
				if k.scale {
					g.p("LEAQ (BX)(R11*4), R14")
				}
			}
			for j := 0; j < r; j++ {
				g.p("VXORPS %s, %s, %s", acc(j), acc(j), acc(j))
			}
			g.label(name + "loop")
			// Every cache line of the record prefetchAhead bytes on: the
			// hardware prefetcher alone left the kernels at about 0.7 of
			// the read bandwidth on the EPYC (19 → 24 GB/s for the Q4_K
			// kernel on 2 threads with it; 1 and 4 records ahead did worse).
			for off := 0; off < k.rec && !k.spread; off += 64 {
				g.p("PREFETCHT0 %d(SI)", prefetchAhead+off)
			}
			block(g, r)
			g.p("ADDQ $%d, SI", k.rec)
			g.p("ADDQ $%d, DI", k.xb)
			if wide {
				g.p("ADDQ $%d, AX", k.xb)
			}
			if k.scale {
				g.p("ADDQ $8, BX")
				if wide {
					g.p("ADDQ $8, R14")
				}
			}
			g.p("DECQ CX")
			g.p("JNZ %sloop", name)
			if wide {
				g.p("LEAQ (DX)(R9*4), AX")
			}
			for j := 0; j < r; j++ {
				g.p("VMOVUPS %s, %s", acc(j), oa(j))
			}
			g.p("ADDQ $32, DX")
			g.p("DECQ ng+64(FP)")
			g.p("JNZ %sgroup", name)
			g.p("VZEROUPPER")
			g.p("RET")
			s.Write(g.b.Bytes())
			s.WriteString("\n")
			fmt.Fprintf(&d, "//go:noescape\nfunc %s(wp *byte, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int, ng int)\n\n", name)
		}
	}
	for _, set := range []string{"avx2", "vnni", "vex"} {
		switch set {
		case "avx2":
			d.WriteString("// p8Asm: the na = 1, 2, … variants of each packed8 kernel, by weight type.\nvar p8Asm = map[Type][]func(wp *byte, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int, ng int){\n")
		case "vnni":
			d.WriteString("\n// p8AsmVNNI: the same with VPDPBUSD, for CPUs with AVX-512 VNNI.\nvar p8AsmVNNI = map[Type][]func(wp *byte, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int, ng int){\n")
		case "vex":
			d.WriteString("\n// p8AsmAVXVNNI: the same with VPDPBUSD's VEX form, for CPUs with AVX-VNNI.\nvar p8AsmAVXVNNI = map[Type][]func(wp *byte, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int, ng int){\n")
		}
		for _, k := range kernels {
			if (k.vnni && set == "vnni") || (k.vex && set == "vex") || (!k.vnni && !k.vex && set == "avx2") {
				fmt.Fprintf(&d, "\t%s: {", k.wt)
				for r := 1; r <= k.maxActs(); r++ {
					if r > 1 {
						d.WriteString(", ")
					}
					fmt.Fprintf(&d, "%sx%d", k.name, r)
				}
				d.WriteString("},\n")
			}
		}
		d.WriteString("}\n")
	}
	// The pair kernels.
	for _, legacy := range []bool{false, true} {
		if legacy {
			d.WriteString("\n// p16LegacyVNNI: the pair kernels of the types that take p8Scales.\nvar p16LegacyVNNI = map[Type][]func(wp *byte, gb, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int){\n")
		} else {
			d.WriteString("\n// p16AsmVNNI: the pair kernels (two 8-row groups in a ZMM), VNNI only.\nvar p16AsmVNNI = map[Type][]func(wp *byte, gb, nb int, x *byte, xs int, out *float32, os int){\n")
		}
		for _, pk := range pairKernels {
			if pk.scale != legacy {
				continue
			}
			fmt.Fprintf(&d, "\t%s: {", pk.wt)
			for r := 1; r <= 8; r++ {
				name := fmt.Sprintf("%sx%d", pk.name, r)
				pairKernel(&s, &d2, pk, name, r)
				if r > 1 {
					d.WriteString(", ")
				}
				d.WriteString(name)
			}
			d.WriteString("},\n")
		}
		d.WriteString("}\n")
	}
	d.WriteString("\n")
	d.Write(bytes.TrimSuffix(d2.Bytes(), []byte("\n")))
	amxKernels(&s, &d)
	amx6Kernel(&s, &d)
	must(os.WriteFile("packed8_amd64.s", s.Bytes(), 0o644))
	src, err := format.Source(d.Bytes()) // aligns the tables' keys
	must(err)
	must(os.WriteFile("packed8_kernels_amd64.go", src, 0o644))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
