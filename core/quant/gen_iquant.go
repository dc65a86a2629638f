//go:build ignore

// gen_iquant: the blocks of the grid i-quants' AVX2 kernels (IQ3_S,
// IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S against Q8_K), written by gen_lowbit.go
// with its other kernels.
//
// Each 32-element sub-block is eight grid entries of 4 levels (IQ3) or
// four of 8 (IQ2): each index is formed in a general register and its
// entry loaded into its lane, giving the 32 unsigned levels in element
// order. The 32 sign bits become a byte
// mask (broadcast, VPSHUFB byte i/8 to byte i, compare with bit i%8) and
// ±1 bytes, which flip the activations (VPSIGNB) before VPMADDUBSW takes
// level × x into int16 pairs (at most 2·62·127 < 2^15) and VPMADDWD
// multiplies them by the sub-block's (or half's) 2·ls+1. An index has
// exactly as many bits as its table has entries (8: 256, 9: 512, 10: 1024),
// so no block can read outside its table.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
)

// gridCodes reads the codes of one grid from iqgrid_data.go, the file the
// Go reference expands, so both read one table.
func gridCodes(name string) []uint16 {
	f, err := parser.ParseFile(token.NewFileSet(), "iqgrid_data.go", nil, 0)
	must(err)
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			if vs.Names[0].Name != name {
				continue
			}
			var out []uint16
			for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
				v, err := strconv.ParseUint(e.(*ast.BasicLit).Value, 0, 16)
				must(err)
				out = append(out, uint16(v))
			}
			return out
		}
	}
	panic("no grid " + name)
}

// grid4 emits a table of 4-level grid entries as dwords (level i in byte i).
func grid4(s *bytes.Buffer, sym, codes string, levels [8]byte) {
	c := gridCodes(codes)
	for k, code := range c {
		var v uint32
		for i := 0; i < 4; i++ {
			v |= uint32(levels[code>>(3*i)&7]) << (8 * i)
		}
		fmt.Fprintf(s, "DATA %s<>+%d(SB)/4, $0x%08x\n", sym, 4*k, v)
	}
	fmt.Fprintf(s, "GLOBL %s<>(SB), RODATA|NOPTR, $%d\n\n", sym, 4*len(c))
}

// grid8 emits a table of 8-level grid entries (IQ2: levels 8, 25, 43) as
// qwords (level i in byte i).
func grid8(s *bytes.Buffer, sym, codes string) {
	c := gridCodes(codes)
	levels := [4]byte{8, 25, 43, 0}
	for k, code := range c {
		var v uint64
		for i := 0; i < 8; i++ {
			v |= uint64(levels[code>>(2*i)&3]) << (8 * i)
		}
		fmt.Fprintf(s, "DATA %s<>+%d(SB)/8, $0x%016x\n", sym, 8*k, v)
	}
	fmt.Fprintf(s, "GLOBL %s<>(SB), RODATA|NOPTR, $%d\n\n", sym, 8*len(c))
}

// dwords32 emits a 32-byte constant whose dword i is f(i).
func dwords32(s *bytes.Buffer, name string, f func(i int) uint32) {
	bytes32(s, name, func(i int) byte { return byte(f(i/4) >> (8 * (i % 4))) })
}

func iquantData(s *bytes.Buffer) {
	grid4(s, "lb_iq3s", "iq3sGridCodes", [8]byte{1, 3, 5, 7, 9, 11, 13, 15})
	grid4(s, "lb_iq3xxs", "iq3xxsGridCodes", [8]byte{4, 12, 20, 28, 36, 44, 52, 62})
	bytes32(s, "lb_sgnshuf", func(i int) byte { return byte(i / 8) })
	for k := 0; k < 4; k++ { // byte i from byte 4k + i/8
		bytes32(s, fmt.Sprintf("lb_sgnshuf%d", k), func(i int) byte { return byte(4*k + i/8) })
	}
	dwords32(s, "lb_d1", func(int) uint32 { return 1 })
	dwords32(s, "lb_d7f", func(int) uint32 { return 0x7f })
	for l := 1; l < 4; l++ {
		dwords32(s, fmt.Sprintf("lb_d7f%d", l), func(int) uint32 { return 0x7f << (8 * l) })
	}
	bytes32(s, "lb_sgnbit", func(i int) byte { return 1 << (i % 8) })
	bytes32(s, "lb_b01", func(int) byte { return 1 })
	fmt.Fprintf(s, "DATA lb_quarter<>+0(SB)/4, $0x3e800000\nGLOBL lb_quarter<>(SB), RODATA|NOPTR, $4\n\n")
	fmt.Fprintf(s, "DATA lb_eighth<>+0(SB)/4, $0x3e000000\nGLOBL lb_eighth<>(SB), RODATA|NOPTR, $4\n\n")
	grid8(s, "lb_iq2xxs", "iq2xxsGridCodes")
	grid8(s, "lb_iq2xs", "iq2xsGridCodes")
	grid8(s, "lb_iq2s", "iq2sGridCodes")
}

// gridLoad leaves in Y0 the 32 levels of a sub-block's n grid entries
// (n = 8 of 4 bytes, or 4 of 8) from the table at R12: index k is put in
// R10 or R11 by index(k, reg, tmp) (tmp: R13 or AX, free to clobber), and
// its entry loaded into its lane. Scalar loads, as VPGATHERDD and
// VPGATHERDQ took longer on Zen 3 (NOTES.md). X1 is clobbered.
func gridLoad(g *gen, n int, index func(k int, r, tmp string)) {
	size := 32 / n
	per := n / 2 // entries per XMM half
	for k := 0; k < n; k++ {
		r := []string{"R10", "R11"}[k%2]
		index(k, r, []string{"R13", "AX"}[k%2])
		x := []string{"X0", "X1"}[k/per]
		switch {
		case k%per == 0 && size == 4:
			g.p("VMOVD (R12)(%s*4), %s", r, x)
		case k%per == 0:
			g.p("VMOVQ (R12)(%s*8), %s", r, x)
		case size == 4:
			g.p("VPINSRD $%d, (R12)(%s*4), %s, %s", k%per, r, x, x)
		default:
			g.p("VPINSRQ $%d, (R12)(%s*8), %s, %s", k%per, r, x, x)
		}
	}
	g.p("VINSERTI128 $1, X1, Y0, Y0")
}

// byteIndex: index k is the byte at off+k(SI).
func byteIndex(g *gen, off int) func(k int, r, tmp string) {
	return func(k int, r, _ string) { g.p("MOVBLZX %d(SI), %s", off+k, r) }
}

// signsFromX4 turns the 32 sign bits in X4's low dword into ±1 bytes in
// Y4, byte i from bit i%8 of byte i/8.
func signsFromX4(g *gen) {
	g.p("VPBROADCASTD X4, Y4")
	g.p("VPSHUFB lb_sgnshuf<>(SB), Y4, Y4")
	g.p("VPAND lb_sgnbit<>(SB), Y4, Y4")
	g.p("VPCMPEQB lb_sgnbit<>(SB), Y4, Y4")
	g.p("VPOR lb_b01<>(SB), Y4, Y4")
}

// halfScales16 leaves in both lanes of Y7 the sixteen 2·ls+1 of the eight
// scale bytes at off(SI): byte 2s from the low nibble of byte s (the
// first 16 elements of sub-block s), byte 2s+1 from its high nibble; the
// lb_q2s tables then pick a sub-block's two as int16s by lane.
func halfScales16(g *gen, off int) {
	g.p("VMOVQ %d(SI), X7", off)
	g.p("VPSRLW $4, X7, X2")
	g.p("VPAND lb_b0f<>(SB), X7, X7")
	g.p("VPAND lb_b0f<>(SB), X2, X2")
	g.p("VPUNPCKLBW X2, X7, X7")
	g.p("VPADDB X7, X7, X7")
	g.p("VPOR lb_b01<>(SB), X7, X7")
	g.p("VINSERTI128 $1, X7, Y7, Y7")
}

// The sign and scale words of IQ3_XXS and IQ2_XXS, all eight sub-blocks'
// at once, at the top of a block: auxWords takes their 8 aux dwords in Y5
// (sub-block s in dword s) and leaves in Y6 each one's four sign bytes
// (evenParity's) and in both lanes of Y7 the eight 2·ls+1 as int16s.
func auxWords(g *gen) {
	g.p("VPSRLD $28, Y5, Y6")
	g.p("VPSLLD $1, Y6, Y6")
	g.p("VPOR lb_d1<>(SB), Y6, Y6")
	g.p("VEXTRACTI128 $1, Y6, X2")
	g.p("VPACKSSDW X2, X6, X7")
	g.p("VINSERTI128 $1, X7, Y7, Y7")
	// Sign index l (bits 7l..7l+6) to byte l.
	g.p("VPAND lb_d7f<>(SB), Y5, Y6")
	for l := 1; l < 4; l++ {
		g.p("VPSLLD $%d, Y5, Y2", l)
		g.p("VPAND lb_d7f%d<>(SB), Y2, Y2", l)
		g.p("VPOR Y2, Y6, Y6")
	}
	evenParity(g)
}

// evenParity sets bit 7 of each byte of Y6 to the parity of its bits 0..6
// (evenSigns). Y2, Y3 are clobbered.
func evenParity(g *gen) {
	g.p("VPSRLD $4, Y6, Y2")
	g.p("VPXOR Y6, Y2, Y2")
	g.p("VPSRLD $2, Y2, Y3")
	g.p("VPXOR Y3, Y2, Y2")
	g.p("VPSRLD $1, Y2, Y3")
	g.p("VPXOR Y3, Y2, Y2")
	g.p("VPAND lb_b01<>(SB), Y2, Y2") // bit 0 of each byte: its parity
	g.p("VPSLLD $7, Y2, Y2")
	g.p("VPOR Y2, Y6, Y6")
}

// signsOf leaves in Y4 the ±1 bytes of sub-block s from the sign bytes in
// dword s of Y6 (Y1 is clobbered).
func signsOf(g *gen, s int) {
	g.p("VPERMQ $0x%X, Y6, Y1", []int{0x44, 0xEE}[s/4]) // s's half in both lanes
	g.p("VPSHUFB lb_sgnshuf%d<>(SB), Y1, Y4", s%4)
	g.p("VPAND lb_sgnbit<>(SB), Y4, Y4")
	g.p("VPCMPEQB lb_sgnbit<>(SB), Y4, Y4")
	g.p("VPOR lb_b01<>(SB), Y4, Y4")
}

// gridRows: Y0 holds a sub-block's 32 levels, Y4 its ±1 signs, sc its
// scale as int16s; per row, Σ ±level·x by pairs times the scale, into the
// row's int32 sums.
func gridRows(g *gen, r, s int, sc string) {
	for j := 0; j < r; j++ {
		g.p("VMOVDQU %s, Y5", xa(4+32*s, j))
		g.p("VPSIGNB Y4, Y5, Y5")
		g.p("VPMADDUBSW Y5, Y0, Y5")
		g.p("VPMADDWD %s, Y5, Y5", sc)
		addInt(g, j, "Y5", s == 0)
	}
}

var iquantKernels = []kernel{
	{
		name: "lowbitIQ3_S", wb: 110, xb: 292,
		doc: "IQ3_S × Q8_K: per 32-element sub-block the gathered grid levels times the signed activations, times 2·ls+1.",
		setup: func(g *gen) {
			g.p("LEAQ lb_iq3s<>(SB), R12")
		},
		block: func(g *gen, r int, _ bool) {
			// The eight 2·ls+1 as int16s in both lanes (Y7).
			spreadNibbles(g, 106)
			g.p("VMOVQ AX, X7")
			g.p("VPMOVZXBW X7, X7")
			g.p("VPSLLW $1, X7, X7")
			g.p("VPBROADCASTW lb_one16<>(SB), X2")
			g.p("VPOR X2, X7, X7")
			g.p("VINSERTI128 $1, X7, Y7, Y7")
			for s := 0; s < 8; s++ {
				// Index k: qs byte k | bit k of qh[s] << 8.
				g.p("MOVBLZX %d(SI), BX", 66+s)
				gridLoad(g, 8, func(k int, r, t string) {
					g.p("MOVBLZX %d(SI), %s", 2+8*s+k, r)
					g.p("MOVL BX, %s", t)
					g.p("SHLL $%d, %s", 8-k, t)
					g.p("ANDL $256, %s", t)
					g.p("ORL %s, %s", t, r)
				})
				g.p("VMOVD %d(SI), X4", 74+4*s)
				signsFromX4(g)
				g.p("VPSHUFB lb_w%d<>(SB), Y7, Y6", s)
				gridRows(g, r, s, "Y6")
			}
			g.p("VPBROADCASTW (SI), X1")
			g.p("VCVTPH2PS X1, Y1")
			kFinish(g, r)
		},
	},
	{
		name: "lowbitIQ3_XXS", wb: 98, xb: 292,
		doc: "IQ3_XXS × Q8_K: per 32-element sub-block the gathered grid levels times the signed activations (7 stored sign bits a group, the 8th their parity), times 2·ls+1; ¼ once per block.",
		setup: func(g *gen) {
			g.p("LEAQ lb_iq3xxs<>(SB), R12")
		},
		block: func(g *gen, r int, _ bool) {
			g.p("VMOVDQU 66(SI), Y5")
			auxWords(g)
			for s := 0; s < 8; s++ {
				gridLoad(g, 8, byteIndex(g, 2+8*s))
				signsOf(g, s)
				g.p("VPSHUFB lb_w%d<>(SB), Y7, Y2", s)
				gridRows(g, r, s, "Y2")
			}
			g.p("VPBROADCASTW (SI), X1")
			g.p("VCVTPH2PS X1, Y1")
			g.p("VBROADCASTSS lb_quarter<>(SB), Y2")
			g.p("VMULPS Y2, Y1, Y1")
			kFinish(g, r)
		},
	},
	{
		name: "lowbitIQ2_XXS", wb: 66, xb: 292,
		doc: "IQ2_XXS × Q8_K: per 32-element sub-block the gathered 8-level grid entries times the signed activations (7 stored sign bits a group, the 8th their parity), times 2·ls+1; ⅛ once per block.",
		setup: func(g *gen) {
			g.p("LEAQ lb_iq2xxs<>(SB), R12")
		},
		block: func(g *gen, r int, _ bool) {
			// The aux dwords are the odd ones of the 64 bytes at 2(SI):
			// VSHUFPS takes them by lane as 0, 1, 4, 5 | 2, 3, 6, 7.
			g.p("VMOVDQU 2(SI), Y5")
			g.p("VMOVDQU 34(SI), Y2")
			g.p("VSHUFPS $0xDD, Y2, Y5, Y5")
			g.p("VPERMQ $0xD8, Y5, Y5")
			auxWords(g)
			for s := 0; s < 8; s++ {
				gridLoad(g, 4, byteIndex(g, 2+8*s))
				signsOf(g, s)
				g.p("VPSHUFB lb_w%d<>(SB), Y7, Y2", s)
				gridRows(g, r, s, "Y2")
			}
			eighthFinish(g, r)
		},
	},
	{
		name: "lowbitIQ2_XS", wb: 74, xb: 292,
		doc: "IQ2_XS × Q8_K: per 32-element sub-block the gathered 8-level grid entries (9-bit indices) times the signed activations (7 sign bits and parity), times 2·ls+1 per 16; ⅛ once per block.",
		setup: func(g *gen) {
			g.p("LEAQ lb_iq2xs<>(SB), R12")
		},
		block: func(g *gen, r int, _ bool) {
			halfScales16(g, 66)
			// The 7-bit sign indices (q >> 9) packed to bytes: VPACKUSWB
			// takes them by lane as sub-blocks 0, 1, 4, 5 | 2, 3, 6, 7.
			g.p("VMOVDQU 2(SI), Y6")
			g.p("VMOVDQU 34(SI), Y2")
			g.p("VPSRLW $9, Y6, Y6")
			g.p("VPSRLW $9, Y2, Y2")
			g.p("VPACKUSWB Y2, Y6, Y6")
			g.p("VPERMQ $0xD8, Y6, Y6")
			evenParity(g)
			for s := 0; s < 8; s++ {
				gridLoad(g, 4, func(k int, r, _ string) {
					g.p("MOVWLZX %d(SI), %s", 2+8*s+2*k, r)
					g.p("ANDL $511, %s", r)
				})
				signsOf(g, s)
				g.p("VPSHUFB lb_q2s%d<>(SB), Y7, Y2", s)
				gridRows(g, r, s, "Y2")
			}
			eighthFinish(g, r)
		},
	},
	{
		name: "lowbitIQ2_S", wb: 82, xb: 292,
		doc: "IQ2_S × Q8_K: per 32-element sub-block the gathered 8-level grid entries (10-bit indices) times the activations under their 8 stored signs a group, times 2·ls+1 per 16; ⅛ once per block.",
		setup: func(g *gen) {
			g.p("LEAQ lb_iq2s<>(SB), R12")
		},
		block: func(g *gen, r int, _ bool) {
			halfScales16(g, 74)
			for s := 0; s < 8; s++ {
				g.p("VMOVD %d(SI), X4", 34+4*s)
				signsFromX4(g)
				g.p("VPSHUFB lb_q2s%d<>(SB), Y7, Y6", s)
				// Index l: qs byte l | bits 2l, 2l+1 of qh[s] << 8.
				g.p("MOVBLZX %d(SI), BX", 66+s)
				gridLoad(g, 4, func(l int, r, t string) {
					g.p("MOVBLZX %d(SI), %s", 2+4*s+l, r)
					g.p("MOVL BX, %s", t)
					g.p("SHLL $%d, %s", 8-2*l, t)
					g.p("ANDL $0x300, %s", t)
					g.p("ORL %s, %s", t, r)
				})
				gridRows(g, r, s, "Y6")
			}
			eighthFinish(g, r)
		},
	},
}

// eighthFinish: the block's d·⅛ (exact) to every lane of Y1, then kFinish.
func eighthFinish(g *gen, r int) {
	g.p("VPBROADCASTW (SI), X1")
	g.p("VCVTPH2PS X1, Y1")
	g.p("VBROADCASTSS lb_eighth<>(SB), Y2")
	g.p("VMULPS Y2, Y1, Y1")
	kFinish(g, r)
}
