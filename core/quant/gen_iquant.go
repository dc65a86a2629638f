//go:build ignore

// gen_iquant: the blocks of the grid i-quants' AVX2 kernels (IQ3_S,
// IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S against Q8_K), written by gen_lowbit.go
// with its other kernels.
//
// Each 32-element sub-block is eight grid entries of 4 levels (IQ3) or
// four of 8 (IQ2): their indices, zero-extended to dwords, gather the
// entries (VPGATHERDD, VPGATHERDQ) into the 32 unsigned levels in element
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
	bytes32(s, "lb_sgnbit", func(i int) byte { return 1 << (i % 8) })
	bytes32(s, "lb_b01", func(int) byte { return 1 })
	// IQ3_S: bit k of qh to bit 8 of dword k.
	bytes32(s, "lb_qhsh", func(i int) byte {
		if i%4 == 0 {
			return byte(8 - i/4)
		}
		return 0
	})
	bytes32(s, "lb_d100", func(i int) byte {
		if i%4 == 1 {
			return 1
		}
		return 0
	})
	fmt.Fprintf(s, "DATA lb_quarter<>+0(SB)/4, $0x3e800000\nGLOBL lb_quarter<>(SB), RODATA|NOPTR, $4\n\n")
	fmt.Fprintf(s, "DATA lb_eighth<>+0(SB)/4, $0x3e000000\nGLOBL lb_eighth<>(SB), RODATA|NOPTR, $4\n\n")
	grid8(s, "lb_iq2xxs", "iq2xxsGridCodes")
	grid8(s, "lb_iq2xs", "iq2xsGridCodes")
	grid8(s, "lb_iq2s", "iq2sGridCodes")
	dwords32(s, "lb_d1ff", func(int) uint32 { return 511 })
	dwords32(s, "lb_d300", func(int) uint32 { return 0x300 })
	// IQ2_S: bits 2l, 2l+1 of qh to bits 8, 9 of dword l.
	dwords32(s, "lb_qh2sh", func(l int) uint32 { return uint32(8 - 2*l%8) })
}

// gridGather leaves in Y0 the 32 levels of the eight 4-level entries
// whose byte indices are at off(SI) (into the table at R12); hi, when set,
// ORs its register's dwords (bit 8 of each index) in first. Y1, Y3 are
// clobbered.
func gridGather(g *gen, off int, hi string) {
	g.p("VPMOVZXBD %d(SI), Y1", off)
	if hi != "" {
		g.p("VPOR %s, Y1, Y1", hi)
	}
	g.p("VPCMPEQD Y3, Y3, Y3")
	g.p("VPGATHERDD Y3, (R12)(Y1*4), Y0")
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

// evenSignsBX completes the four 7-bit sign indices in bytes 0..3 of BX
// with their parity bits (evenSigns) and leaves their ±1 bytes in Y4
// (R10, R11 are clobbered).
func evenSignsBX(g *gen) {
	g.p("MOVL BX, R10")
	g.p("SHRL $4, R10")
	g.p("XORL BX, R10")
	g.p("MOVL R10, R11")
	g.p("SHRL $2, R11")
	g.p("XORL R11, R10")
	g.p("MOVL R10, R11")
	g.p("SHRL $1, R11")
	g.p("XORL R11, R10")
	g.p("ANDL $0x01010101, R10") // bit 0 of each byte: the parity of its bits 0..6
	g.p("SHLL $7, R10")
	g.p("ORL R10, BX")
	g.p("VMOVD BX, X4")
	signsFromX4(g)
}

// auxSigns gathers the four 7-bit sign indices of the IQ3_XXS/IQ2_XXS
// word in AX into bytes 0..3 of BX.
func auxSigns(g *gen) {
	g.p("MOVL AX, BX")
	g.p("ANDL $0x7f, BX")
	for l := 1; l < 4; l++ {
		g.p("MOVL AX, R10")
		g.p("SHLL $%d, R10", l)
		g.p("ANDL $0x%x, R10", 0x7f<<(8*l))
		g.p("ORL R10, BX")
	}
}

// auxScale leaves 2·(AX>>28)+1 in every int16 of Y6.
func auxScale(g *gen) {
	g.p("SHRL $28, AX")
	g.p("LEAL 1(AX)(AX*1), AX")
	g.p("VMOVD AX, X6")
	g.p("VPBROADCASTW X6, Y6")
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

// grid8Gather leaves in Y0 the 32 levels of the four 8-level entries
// whose dword indices are in X1 (table at R12). Y3 is clobbered.
func grid8Gather(g *gen) {
	g.p("VPCMPEQD Y3, Y3, Y3")
	g.p("VPGATHERDQ Y3, (R12)(X1*8), Y0")
}

// gridRows: Y0 holds a sub-block's 32 levels, Y4 its ±1 signs, Y6 its
// scale as int16s; per row, Σ ±level·x by pairs times the scale, into the
// row's int32 sums.
func gridRows(g *gen, r, s int) {
	for j := 0; j < r; j++ {
		g.p("VMOVDQU %s, Y5", xa(4+32*s, j))
		g.p("VPSIGNB Y4, Y5, Y5")
		g.p("VPMADDUBSW Y5, Y0, Y5")
		g.p("VPMADDWD Y6, Y5, Y5")
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
				g.p("MOVBLZX %d(SI), AX", 66+s)
				g.p("VMOVD AX, X2")
				g.p("VPBROADCASTD X2, Y2")
				g.p("VPSLLVD lb_qhsh<>(SB), Y2, Y2")
				g.p("VPAND lb_d100<>(SB), Y2, Y2")
				gridGather(g, 2+8*s, "Y2")
				g.p("VMOVD %d(SI), X4", 74+4*s)
				signsFromX4(g)
				g.p("VPSHUFB lb_w%d<>(SB), Y7, Y6", s)
				gridRows(g, r, s)
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
			for s := 0; s < 8; s++ {
				g.p("MOVL %d(SI), AX", 66+4*s)
				auxSigns(g)
				evenSignsBX(g)
				auxScale(g)
				gridGather(g, 2+8*s, "")
				gridRows(g, r, s)
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
			for s := 0; s < 8; s++ {
				g.p("MOVL %d(SI), AX", 6+8*s)
				auxSigns(g)
				evenSignsBX(g)
				auxScale(g)
				g.p("VPMOVZXBD %d(SI), X1", 2+8*s)
				grid8Gather(g)
				gridRows(g, r, s)
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
			for s := 0; s < 8; s++ {
				g.p("MOVQ %d(SI), AX", 2+8*s)
				// Sign index l (bits 16l+9..16l+15) to byte l of BX.
				g.p("MOVQ AX, BX")
				g.p("SHRQ $9, BX")
				g.p("ANDL $0x7f, BX")
				for l := 1; l < 4; l++ {
					g.p("MOVQ AX, R10")
					g.p("SHRQ $%d, R10", 8*l+9)
					g.p("ANDL $0x%x, R10", 0x7f<<(8*l))
					g.p("ORL R10, BX")
				}
				evenSignsBX(g)
				g.p("VPSHUFB lb_q2s%d<>(SB), Y7, Y6", s)
				g.p("VMOVQ AX, X1")
				g.p("VPMOVZXWD X1, X1")
				g.p("VPAND lb_d1ff<>(SB), X1, X1")
				grid8Gather(g)
				gridRows(g, r, s)
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
				// Index l: qs byte | bits 2l, 2l+1 of qh[s] at bits 8, 9.
				g.p("MOVBLZX %d(SI), AX", 66+s)
				g.p("VMOVD AX, X2")
				g.p("VPBROADCASTD X2, X2")
				g.p("VPSLLVD lb_qh2sh<>(SB), X2, X2")
				g.p("VPAND lb_d300<>(SB), X2, X2")
				g.p("VPMOVZXBD %d(SI), X1", 2+4*s)
				g.p("VPOR X2, X1, X1")
				grid8Gather(g)
				gridRows(g, r, s)
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
