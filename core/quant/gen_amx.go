//go:build ignore

// gen_amx.go is the part of gen_packed8 (run together: go run
// gen_packed8.go gen_amx.go) that writes the AMX kernels: Q4_K and Q6_K
// against Q8_K over a run of row-group pairs (the pair kernels' layout)
// for 1…16 activation rows a call, with Intel's tile unit doing the
// multiply-adds. The Q4_K kernel comes first; the Q6_K one (further down)
// shares its frame header, pipelining and activation layout.
//
// Why the tile unit: a verify pass or a prefill chunk runs every weight
// block against many tokens, and VPDPBUSD spends one instruction per 64
// products; one TDPBSSD takes a sub-block (32 weights × 16 rows) against
// 16 tokens, 8192 products. What kept two earlier attempts (NOTES.md)
// slower than VNNI was the work around it, so this one is built to keep
// that small:
//
//   - The sub-block scale. Each 32 weights of a row have their own 6-bit
//     scale, so a tile product covers one sub-block (K = 32) and its sums
//     go out to memory (TILESTORED) to be scaled. The weights go in as
//     q − 8 (−8…7) rather than q, so a sub-block's sum C' = Σ x·(q − 8)
//     stays within ±32·127·8 = ±32512: an int16 in its int32 lane. One
//     VPDPWSSD against the pair (sc, 0) then scales and adds it, where
//     VPMULLD and VPADDD took three µops. The −8 comes back exactly as
//     8·sc times the sub-block's activation sum (the Q8_K block's bsums),
//     so the super-block's integer Σ sc·Σ x·q is the VNNI kernel's to the
//     bit, and everything after it is the VNNI kernel's sequence: a
//     token's logits do not depend on whether its batch went through the
//     tile unit (TestAMXEqualsPacked16). This needs activations within
//     ±127, which QuantizeQ8_K guarantees.
//   - The B tiles (the weights, split from their nibbles into bytes) are
//     built one super-block ahead, and the C tiles are scaled one
//     super-block behind, so no tile load waits on the vector stores that
//     built it and no vector load on the tile store that wrote it: the
//     earlier kernels loaded both straight after the stores, and the tile
//     loads took 17 ns instead of 2.5.
//   - The A tiles (the tokens' activations) load from a copy laid out
//     once per matmul (amxActs) in which every tile row is within one
//     cache line, next to what the finish needs of the activations
//     besides (sub-block sums, the block scale). One call covers a run
//     of pairs, so the tile configuration (63 ns) is loaded once per
//     call, not per row group.
//   - The records are prefetched four ahead in the order they are
//     consumed, into the next pair past a pair's end, as the pair kernels
//     do: the model's matrices stream from DRAM.
//
// What is left, measured (NOTES.md): the tile instructions and the vector
// work do not overlap, and the vector work per super-block that does not
// shrink with the tokens keeps calls of up to 8 rows (one pass of the
// VNNI pair kernels) on the VNNI kernel.
package main

import (
	"bytes"
	"fmt"
	"strings"
)

// Frame of q4kP16AMX, off R12 (SP rounded up to 64 bytes, so that every
// 64-byte store is one cache line).
const (
	axCfg    = 0    // the tile configuration (64 bytes)
	axEnd    = 64   // the token loop's end (ACC + 64·na)
	axNB     = 72   // nb
	axPairWP = 80   // the current pair's first record
	axOut    = 88   // the current pair's out
	axPairs  = 96   // pairs left
	axStep   = 128  // 320·na: from one super-block's activations in xa to the next
	axScales = 192  // 64s: sub-block s's scales as int32 lanes; 512 + 64s: its mins as int16 pairs
	axAcc    = 1216 // 64j: token j's float sums
	axB      = 2240 // two slots of 4096: 512s sub-block s's B tile (8 rows of 64 bytes)
	axC      = axB + 2*4096
	axFrame  = axC + 2*8192 // two slots of 8192: 1024s + 64j token j's row of sub-block s's C tile
	axMaxAct = 16
	amxAhead = 4 // records prefetched ahead (see q4kP16AMXpair)
)

// Tile instructions, which the Go assembler does not know, as bytes (VEX
// encodings from the Intel SDM).
var regNum = map[string]int{"AX": 0, "CX": 1, "DX": 2, "BX": 3, "SP": 4, "BP": 5, "SI": 6, "DI": 7,
	"R8": 8, "R9": 9, "R10": 10, "R11": 11, "R12": 12, "R13": 13}

func (g *gen) bytes(note string, b ...int) {
	var s []string
	for _, v := range b {
		s = append(s, fmt.Sprintf("BYTE $0x%02X", v&0xff))
	}
	g.p("%s // %s", strings.Join(s, "; "), note)
}

// tileMem writes a tile load or store (pp: 3 for TILELOADD, 2 for
// TILESTORED) of tile t at disp(base)(index*1).
func (g *gen) tileMem(note string, pp, t int, base, index string, disp int) {
	b, x := regNum[base], regNum[index]
	vex1 := 0x02 | 0x80 | (^x>>3&1)<<6 | (^b>>3&1)<<5
	g.bytes(note, 0xC4, vex1, 0x78|pp, 0x4B, 0x84|t<<3, (x&7)<<3|b&7,
		disp, disp>>8, disp>>16, disp>>24)
}

func (g *gen) tileloadd(t int, base, index string, disp int) {
	g.tileMem(fmt.Sprintf("TILELOADD %d(%s)(%s*1), TMM%d", disp, base, index, t), 3, t, base, index, disp)
}

func (g *gen) tilestored(t int, base, index string, disp int) {
	g.tileMem(fmt.Sprintf("TILESTORED TMM%d, %d(%s)(%s*1)", t, disp, base, index), 2, t, base, index, disp)
}

// ldtilecfgR12: LDTILECFG (R12).
func (g *gen) ldtilecfgR12() { g.bytes("LDTILECFG (R12)", 0xC4, 0xC2, 0x78, 0x49, 0x04, 0x24) }
func (g *gen) tilerelease()  { g.bytes("TILERELEASE", 0xC4, 0xE2, 0x78, 0x49, 0xC0) }
func (g *gen) tilezero(t int) {
	g.bytes(fmt.Sprintf("TILEZERO TMM%d", t), 0xC4, 0xE2, 0x7B, 0x49, 0xC0|t<<3)
}

// tdpbssd: C += A·B, both signed bytes.
func (g *gen) tdpbssd(c, a, b int) {
	g.bytes(fmt.Sprintf("TDPBSSD TMM%d, TMM%d, TMM%d", c, a, b), 0xC4, 0xE2, (^b&15)<<3|0x03, 0x5E, 0xC0|c<<3|a)
}

// amxBuildTiles multiplies the current super-block (activations at DI,
// B tiles at slot R13) into the C tiles at slot R13, with A in tiles 0/1,
// B in 2/3, C in 4–7 in turn. With build, it also splits the next
// super-block's records (rec bytes from SI, both groups) into the B tiles
// of the other slot: sub-block 2t's tile row k is part 8t + k's low
// nibbles as q − 8, 2t + 1's its high ones; and prefetches the records
// at R10 (amxAhead on, in the order they are consumed). The tile
// instructions go in between the build's, one sub-block every four parts.
func amxBuildTiles(g *gen, rec int, build bool) {
	g.p("LEAQ %d(R12)(R13*1), R9", axB)
	g.p("LEAQ %d(R12)(R13*2), DX", axC)
	g.p("MOVQ R13, AX")
	g.p("XORQ $4096, AX")
	g.p("LEAQ %d(R12)(AX*1), AX", axB)
	tiles := func(s int) {
		a, b, c := s%2, 2+s%2, 4+s%4
		g.tileloadd(a, "DI", "R8", 32*s)
		g.tileloadd(b, "R9", "R11", 512*s)
		g.tilezero(c)
		g.tdpbssd(c, a, b)
		g.tilestored(c, "DX", "R11", 1024*s)
	}
	if !build {
		for s := 0; s < 8; s++ {
			tiles(s)
		}
		return
	}
	for t := 0; t < 4; t++ {
		for line := 18 * t / 4; line < 18*(t+1)/4; line++ {
			g.p("PREFETCHT0 %d(R10)", 64*line)
			g.p("PREFETCHT0 %d(R10)(BX*1)", 64*line)
		}
		for k := 0; k < 8; k++ {
			if k%4 == 0 {
				tiles(2*t + k/4)
			}
			amxSplitPart(g, rec, t, k)
		}
	}
}

// amxBuild is amxBuildTiles' build alone, into slot R13 (the first
// super-block of a pair).
func amxBuild(g *gen, rec int) {
	g.p("LEAQ %d(R12)(R13*1), AX", axB)
	for t := 0; t < 4; t++ {
		for k := 0; k < 8; k++ {
			amxSplitPart(g, rec, t, k)
		}
	}
}

// amxSplitPart splits part 8t + k of the records rec bytes from SI (both
// groups) into row k of the B tiles of sub-blocks 2t (low nibbles) and
// 2t + 1 (high), as q − 8, at AX.
func amxSplitPart(g *gen, rec, t, k int) {
	ld16(g, rec+32*(8*t+k), 0)
	g.p("VGF2P8AFFINEQB.BCST $0xf8, gf_lo8<>(SB), Z0, Z1")
	g.p("VGF2P8AFFINEQB.BCST $0xf8, gf_hi8<>(SB), Z0, Z2")
	g.p("VMOVDQA64 Z1, %d(AX)", 512*(2*t)+64*k)
	g.p("VMOVDQA64 Z2, %d(AX)", 512*(2*t+1)+64*k)
}

// amxFinish scales and sums the C tiles of slot R13, for the super-block
// whose record is rec bytes from SI and whose activations (amxActs) are
// axStep before DI, into the float sums: the VNNI pair kernel's
// q4kBlock16 sequence from its integer sums on.
//
// The −8 correction (8·sc_s·B_s, B_s the activations' sum over sub-block
// s) and the mins (m_s·B_s) take two sub-blocks a VPDPWSSD: a token's
// (B_2t, B_2t+1) pairs (B_s ≤ 32·127, and 8·sc·B fits an int32 lane's
// two products) against the rows' (8·sc_2t, 8·sc_2t+1) and (m_2t,
// m_2t+1). The sums are exact integers either way, so the bits are the
// VNNI kernel's.
//
// Registers: Z8+s the scales (sc, 0) of sub-block s, Z16+t (8·sc_2t,
// 8·sc_2t+1), Z20+t (m_2t, m_2t+1); Z2, Z3 the rows' d and dmin; Z4, Z5
// a token's integer sums; Z0, Z1, Z6, Z7 partial sums, then temporaries.
func amxFinish(g *gen, rec int) {
	q4kScalesAt(g, zmm, "pickd", rec, axScales, "R12")
	for s := 0; s < 8; s++ {
		g.p("VMOVDQA64 %d(R12), Z%d", axScales+64*s, 8+s)
	}
	for t := 0; t < 4; t++ {
		g.p("VPSLLD $16, Z%d, Z0", 9+2*t)
		g.p("VPORD Z0, Z%d, Z0", 8+2*t)
		g.p("VPSLLW $3, Z0, Z%d", 16+t)
		g.p("VMOVDQA64 %d(R12), Z%d", axScales+512+64*2*t, 20+t)
		g.p("VMOVDQA64 %d(R12), Z1", axScales+512+64*(2*t+1))
		g.p("VPTERNLOGD.BCST $0xe4, amx_lo16<>(SB), Z1, Z%d", 20+t)
	}
	g.p("VMOVDQU %d(SI), X2", rec+1120)
	g.p("VINSERTI128 $1, %d(SI)(BX*1), Y2, Y2", rec+1120)
	g.p("VCVTPH2PS Y2, Z2")
	g.p("VMOVDQU %d(SI), X3", rec+1136)
	g.p("VINSERTI128 $1, %d(SI)(BX*1), Y3, Y3", rec+1136)
	g.p("VCVTPH2PS Y3, Z3")
	g.p("LEAQ %d(R12)(R13*2), R9", axC)
	g.p("LEAQ 256(DI), AX")
	g.p("SUBQ %d(R12), AX", axStep)
	g.p("LEAQ %d(R12), DX", axAcc)
	l := fmt.Sprintf("q4kP16AMXtok%d", g.b.Len())
	g.label(l)
	g.p("VPMADDWD 0(R9), Z8, Z4")
	g.p("VPMADDWD %d(R9), Z12, Z0", 1024*4)
	g.p("VPXORD Z1, Z1, Z1")
	g.p("VPXORD Z5, Z5, Z5")
	for s := 1; s < 4; s++ {
		g.p("VPDPWSSD %d(R9), Z%d, Z4", 1024*s, 8+s)
		g.p("VPDPWSSD %d(R9), Z%d, Z0", 1024*(s+4), 12+s)
	}
	for t := 0; t < 4; t++ {
		g.p("VPDPWSSD.BCST %d(AX), Z%d, Z1", 4*t, 16+t)
		g.p("VPDPWSSD.BCST %d(AX), Z%d, Z5", 4*t, 20+t)
	}
	g.p("VPADDD Z0, Z4, Z4")
	g.p("VPADDD Z1, Z4, Z4")
	g.p("VCVTDQ2PS Z4, Z4")
	g.p("VCVTDQ2PS Z5, Z5")
	g.p("VMULPS.BCST 16(AX), Z2, Z6")
	g.p("VMULPS.BCST 16(AX), Z3, Z7")
	g.p("VMOVAPS 0(DX), Z1")
	g.p("VFMADD231PS Z4, Z6, Z1")
	g.p("VFNMADD231PS Z5, Z7, Z1")
	g.p("VMOVAPS Z1, 0(DX)")
	g.p("ADDQ $64, R9")
	g.p("ADDQ R8, AX")
	g.p("ADDQ $64, DX")
	g.p("CMPQ DX, %d(R12)", axEnd)
	g.p("JNE %s", l)
}

// amxKernels writes q4kP16AMX:
// func(wp *byte, gb, nb int, x, xa *byte, xs int, out *float32, os int, na, pairs int)
// over pairs consecutive pairs (each 2·gb bytes; 16 floats out per
// activation row and pair, os the row stride in bytes), xa being amxActs
// of the na Q8_K rows at x (stride xs); it reads x itself only through xa.
func amxKernels(s, d *bytes.Buffer) {
	const rec = 1152
	g := &gen{}
	fmt.Fprintf(s, "// func q4kP16AMX(wp *byte, gb, nb int, x, xa *byte, xs int, out *float32, os int, na, pairs int)\n// Q4_K × Q8_K, AMX, 1…%d activation rows, a run of pairs.\n", axMaxAct)
	fmt.Fprintf(s, "TEXT ·q4kP16AMX(SB), 0, $%d-80\n", axFrame+64)
	k := amxFrame{name: "q4kP16AMX", rec: rec, actStride: 320, step: axStep, acc: axAcc}
	// The tile configuration: A tiles 0, 1 (na rows of 32 bytes), B tiles
	// 2, 3 (8 rows of 64), C tiles 4–7 (na rows of 64).
	k.cols, k.rows = [8]int{32, 32, 64, 64, 64, 64, 64, 64}, [8]string{"R10B", "R10B", "$8", "$8", "R10B", "R10B", "R10B", "R10B"}
	k.enter(g)
	k.pairStart(g)
	g.p("XORQ R13, R13")
	amxBuild(g, 0)
	g.label("q4kP16AMXloop")
	g.p("CMPQ CX, $1")
	g.p("JEQ q4kP16AMXlast")
	amxBuildTiles(g, rec, true)
	g.p("JMP q4kP16AMXbuilt")
	g.label("q4kP16AMXlast")
	amxBuildTiles(g, rec, false)
	g.label("q4kP16AMXbuilt")
	g.p("XORQ $4096, R13")
	g.p("CMPQ CX, %d(R12)", axNB)
	g.p("JEQ q4kP16AMXnofinish")
	amxFinish(g, -rec)
	g.label("q4kP16AMXnofinish")
	k.next(g)
	g.p("XORQ $4096, R13")
	amxFinish(g, -rec)
	k.leave(g)
	s.Write(g.b.Bytes())
	s.WriteString("\n")
	// amx_lo16: a dword's low half.
	s.WriteString("DATA amx_lo16<>+0(SB)/4, $0x0000ffff\nGLOBL amx_lo16<>(SB), RODATA|NOPTR, $4\n\n")
	d.WriteString("\n// q4kP16AMX is the AMX Q4_K kernel (gen_amx.go): na = 1…16 activation\n// rows over pairs consecutive pairs, os in bytes. Call it only where\n// hasAMX.\n//\n//go:noescape\nfunc q4kP16AMX(wp *byte, gb, nb int, x, xa *byte, xs int, out *float32, os int, na, pairs int)\n")
}

// The Q6_K kernel, q6kP16AMX. Q6_K's sub-blocks are 16 weights, and a
// sub-block's sum Σ x·(q − 32) reaches ±16·127·32, past an int16, so the
// Q4_K kernel's trick (scale the tile sums with one VPDPWSSD) does not
// carry over, and a tile product per 16-weight sub-block would be a
// quarter of the tile unit. Instead the scale goes into the weights: w =
// sc·q (q the unsigned 6-bit quant, |w| ≤ 128·63) is an int16, split into
// its low byte (unsigned) and high byte (signed, −32…31), two B tiles. A
// super-block is then four K = 64 tile products per byte, accumulated in
// two C tiles for the whole super-block, and Σ x·w = C_lo + 256·C_hi
// exactly (|C_lo| ≤ 256·127·255). The −32 comes back as −32·Σ sc·bsum from
// the Q8_K block's 16-element sums, as the VNNI kernel does, so the
// super-block's integer is the VNNI pair kernel's and so are the bits.
//
// Building the B tiles costs per weight, not per token: two VPMADDUBSW
// (q against (sc, 0) and (0, sc): the even and odd elements' w as
// int16s), then two shifts and two selects to gather the low and the
// high bytes. The tile products and the finish are per token.

// Frame of q6kP16AMX, off R12; the header words are the Q4_K kernel's.
const (
	a6X     = 104  // the current super-block's Q8_K blocks (token 0's)
	a6Step  = 112  // 256·na: from one super-block's activations in xa to the next
	a6Acc   = 128  // 64j: token j's float sums
	a6B     = 2048 // two slots of 8192: chunk c's low-byte tile at 2048c, high-byte at 2048c + 1024
	a6C     = a6B + 2*8192
	a6Frame = a6C + 8192 + 2048 // C slots at a6C + slot: the low-byte C tile, then the high-byte one at +1024
	q6Rec   = 1680
	q6Lines = (q6Rec + 63) / 64
)

// tdpbsud: C += A·B, A signed bytes and B unsigned.
func (g *gen) tdpbsud(c, a, b int) {
	g.bytes(fmt.Sprintf("TDPBSUD TMM%d, TMM%d, TMM%d", c, a, b), 0xC4, 0xE2, (^b&15)<<3|0x02, 0x5E, 0xC0|c<<3|a)
}

// a6Tiles issues the tile work of chunk c (elements 64c…64c+63) of the
// current super-block: activations at DI (amxActs: a token's 256 bytes
// every R8 = 256), B tiles at R9, C tiles to DX.
func a6Tiles(g *gen, c int) {
	a, lo, hi := c%2, 2+2*(c%2), 3+2*(c%2)
	g.tileloadd(a, "DI", "R8", 64*c)
	g.tileloadd(lo, "R9", "R11", 2048*c)
	g.tileloadd(hi, "R9", "R11", 2048*c+1024)
	if c == 0 {
		g.tilezero(6)
		g.tilezero(7)
	}
	g.tdpbsud(6, a, lo)
	g.tdpbssd(7, a, hi)
	if c == 3 {
		g.tilestored(6, "DX", "R11", 0)
		g.tilestored(7, "DX", "R11", 1024)
	}
}

// a6Build builds the B tiles of the super-block whose record is off bytes
// from SI (both groups) at AX. With tiles, the current super-block's tile
// work goes in between (a chunk every eight steps) and the records at R10
// are prefetched. Step (n, half, kk, l) decodes quarters kk and kk + 2 at
// elements 4l…4l+3 (see q6kBlockV), sub-blocks 8n + 2k + half.
func a6Build(g *gen, off int, tiles bool) {
	for i := 0; i < 4; i++ { // ld16, EVEX-encoded for Z20 on
		g.p("VMOVDQU64 %d(SI), Y%d", off+1536+32*i, 20+i)
		g.p("VINSERTI64X4 $1, %d(SI)(BX*1), Z%d, Z%d", off+1536+32*i, 20+i, 20+i)
	}
	step := 0
	for n := 0; n < 2; n++ {
		for half := 0; half < 2; half++ {
			for kk := 0; kk < 2; kk++ {
				for h, k := range []int{kk, kk + 2} {
					sb := 8*n + 2*k + half
					g.p("VPSHUFB p16_pick%d<>(SB), Z%d, Z%d", sb%4, 20+sb/4, 24+2*h)
					g.p("VPSHUFB amx6_po%d<>(SB), Z%d, Z%d", sb%4, 20+sb/4, 25+2*h)
				}
				for l := 4 * half; l < 4*half+4; l++ {
					if tiles {
						if step%8 == 0 {
							a6Tiles(g, step/8)
						}
						for line := q6Lines * step / 32; line < q6Lines*(step+1)/32; line++ {
							g.p("PREFETCHT0 %d(R10)", 64*line)
							g.p("PREFETCHT0 %d(R10)(BX*1)", 64*line)
						}
					}
					step++
					ld16(g, off+32*(16*n+l)+256*kk, 4)
					ld16(g, off+1024+32*(8*n+l), 6)
					g.p("VGF2P8AFFINEQB.BCST $0, gf_qh%d<>(SB), Z6, Z0", kk)
					g.p("VGF2P8AFFINEQB.BCST $0, gf_qh%d<>(SB), Z6, Z1", kk+2)
					g.p("VPTERNLOGD.BCST $0xf8, p8_nib<>(SB), Z4, Z0")
					g.p("VPSRLW $4, Z4, Z4")
					g.p("VPTERNLOGD.BCST $0xf8, p8_nib<>(SB), Z4, Z1")
					for h, k := range []int{kk, kk + 2} {
						c, row := 2*n+k/2, 8*(k%2)+l
						g.p("VPMADDUBSW Z%d, Z%d, Z2", 24+2*h, h) // w of elements 0, 2 of each lane
						g.p("VPMADDUBSW Z%d, Z%d, Z3", 25+2*h, h) // of elements 1, 3
						g.p("VPSRLW $8, Z2, Z5")
						g.p("VPTERNLOGD.BCST $0xe4, amx_w0<>(SB), Z3, Z5") // high bytes
						g.p("VPSLLW $8, Z3, Z3")
						g.p("VPTERNLOGD.BCST $0xe4, amx_w0<>(SB), Z3, Z2") // low bytes
						g.p("VMOVDQA64 Z2, %d(AX)", 2048*c+64*row)
						g.p("VMOVDQA64 Z5, %d(AX)", 2048*c+1024+64*row)
					}
				}
			}
		}
	}
}

// a6Finish adds the super-block before the current one (record −q6Rec
// from SI, Q8_K blocks −292 from a6X's, C tiles at slot R13) into the float
// sums, as the VNNI pair kernel's q6kBlock16 does from its integer sums
// on. Registers: Z8+t the rows' (−32·sc_2t, −32·sc_2t+1), Z2 their d.
func a6Finish(g *gen) {
	g.p("VPXORD Z7, Z7, Z7")
	for i := 0; i < 4; i++ {
		ld16(g, -q6Rec+1536+32*i, 4)
		for h := 0; h < 2; h++ {
			g.p("VPSHUFB p16_pickw%d<>(SB), Z4, Z5", h)
			g.p("VPSRAW $3, Z5, Z5") // sc·32, the byte having been the high one
			g.p("VPSUBW Z5, Z7, Z%d", 8+2*i+h)
		}
	}
	g.p("VMOVDQU %d(SI), X2", -q6Rec+1664)
	g.p("VINSERTI128 $1, %d(SI)(BX*1), Y2, Y2", -q6Rec+1664)
	g.p("VCVTPH2PS Y2, Z2")
	g.p("LEAQ %d(R12)(R13*1), R9", a6C)
	g.p("MOVQ %d(R12), AX", a6X)
	g.p("SUBQ $292, AX")
	g.p("LEAQ %d(R12), DX", a6Acc)
	l := fmt.Sprintf("q6kP16AMXtok%d", g.b.Len())
	g.label(l)
	g.p("VPSLLD $8, 1024(R9), Z4")
	g.p("VPADDD 0(R9), Z4, Z4")
	g.p("VPXORD Z1, Z1, Z1")
	for t := 0; t < 8; t++ {
		acc := 4
		if t%2 == 1 {
			acc = 1
		}
		g.p("VPDPWSSD.BCST %d(AX), Z%d, Z%d", 260+4*t, 8+t, acc)
	}
	g.p("VPADDD Z1, Z4, Z4")
	g.p("VCVTDQ2PS Z4, Z4")
	g.p("VMULPS.BCST 0(AX), Z2, Z6")
	g.p("VMOVAPS 0(DX), Z1")
	g.p("VFMADD231PS Z4, Z6, Z1")
	g.p("VMOVAPS Z1, 0(DX)")
	g.p("ADDQ $64, R9")
	g.p("ADDQ xs+40(FP), AX")
	g.p("ADDQ $64, DX")
	g.p("CMPQ DX, %d(R12)", axEnd)
	g.p("JNE %s", l)
}

// amx6Kernel writes q6kP16AMX:
// func(wp *byte, gb, nb int, x, xa *byte, xs int, out *float32, os int, na, pairs int)
// as q4kP16AMX; its xa (amxActs) has the quants alone, the finish reading
// the Q8_K blocks' own bsums and scales from x.
func amx6Kernel(s, d *bytes.Buffer) {
	g := &gen{}
	fmt.Fprintf(s, "// func q6kP16AMX(wp *byte, gb, nb int, x, xa *byte, xs int, out *float32, os int, na, pairs int)\n// Q6_K × Q8_K, AMX, 1…%d activation rows, a run of pairs.\n", axMaxAct)
	fmt.Fprintf(s, "TEXT ·q6kP16AMX(SB), 0, $%d-80\n", a6Frame+64)
	// A tiles 0, 1 and C tiles 6, 7: na rows of 64 bytes; B tiles 2–5: 16
	// rows of 64.
	k := amxFrame{name: "q6kP16AMX", rec: q6Rec, actStride: 256, step: a6Step, acc: a6Acc, x: a6X}
	k.cols, k.rows = [8]int{64, 64, 64, 64, 64, 64, 64, 64}, [8]string{"R10B", "R10B", "$16", "$16", "$16", "$16", "R10B", "R10B"}
	k.enter(g)
	k.pairStart(g)
	g.p("XORQ R13, R13")
	g.p("LEAQ %d(R12), AX", a6B)
	a6Build(g, 0, false)
	g.label("q6kP16AMXloop")
	g.p("LEAQ %d(R12)(R13*1), R9", a6B)
	g.p("LEAQ %d(R12)(R13*1), DX", a6C)
	g.p("CMPQ CX, $1")
	g.p("JEQ q6kP16AMXlast")
	g.p("MOVQ R13, AX")
	g.p("XORQ $8192, AX")
	g.p("LEAQ %d(R12)(AX*1), AX", a6B)
	a6Build(g, q6Rec, true)
	g.p("JMP q6kP16AMXbuilt")
	g.label("q6kP16AMXlast")
	for c := 0; c < 4; c++ {
		a6Tiles(g, c)
	}
	g.label("q6kP16AMXbuilt")
	g.p("XORQ $8192, R13")
	g.p("CMPQ CX, %d(R12)", axNB)
	g.p("JEQ q6kP16AMXnofinish")
	a6Finish(g)
	g.label("q6kP16AMXnofinish")
	k.next(g)
	g.p("XORQ $8192, R13")
	a6Finish(g)
	k.leave(g)
	s.Write(g.b.Bytes())
	s.WriteString("\n")
	// amx_w0: a word's low byte. amx6_po<j>: byte j of each row's 4-byte
	// lane (its sub-block's scale) against the lane's odd bytes, zeros
	// against the even ones, for VPMADDUBSW (p16_pick<j> is the even one).
	s.WriteString("DATA amx_w0<>+0(SB)/4, $0x00ff00ff\nGLOBL amx_w0<>(SB), RODATA|NOPTR, $4\n\n")
	for j := uint32(0); j < 4; j++ {
		shuffle64(s, fmt.Sprintf("amx6_po%d", j), func(b uint32) uint32 { return 0x80 | (b+j)<<8 | 0x80<<16 | (b+j)<<24 })
	}
	d.WriteString("\n// q6kP16AMX is the AMX Q6_K kernel (gen_amx.go): na = 1…16 activation\n// rows over pairs consecutive pairs, os in bytes. Call it only where\n// hasAMX.\n//\n//go:noescape\nfunc q6kP16AMX(wp *byte, gb, nb int, x, xa *byte, xs int, out *float32, os int, na, pairs int)\n")
}

// amxFrame is what the two AMX kernels' shared scaffolding needs to know
// of one: the prologue (arguments into the frame, the tile configuration),
// the start of a pair, the step to the next super-block and the epilogue
// (the sums out, the next pair). The kernels' super-block work goes in
// between.
type amxFrame struct {
	name      string
	rec       int       // a record's bytes
	actStride int       // amxActStride
	step, acc int       // frame offsets: actStride·na, the float sums
	x         int       // frame offset of the current Q8_K blocks, 0 if the kernel reads xa alone
	cols      [8]int    // the tiles' bytes a row
	rows      [8]string // the tiles' rows: R10B (na) or a constant
}

// enter loads the arguments (R8 = actStride, R11 = 64), lays out the
// frame's header and loads the tile configuration (palette 1).
func (k *amxFrame) enter(g *gen) {
	g.p("LEAQ 63(SP), R12")
	g.p("ANDQ $~63, R12")
	g.p("MOVQ wp+0(FP), SI")
	g.p("MOVQ gb+8(FP), BX")
	g.p("MOVQ nb+16(FP), CX")
	g.p("MOVQ $%d, R8", k.actStride)
	g.p("MOVQ na+64(FP), R10")
	g.p("IMUL3Q $%d, R10, AX", k.actStride)
	g.p("MOVQ AX, %d(R12)", k.step)
	g.p("MOVQ SI, %d(R12)", axPairWP)
	g.p("MOVQ CX, %d(R12)", axNB)
	g.p("MOVQ out+48(FP), AX")
	g.p("MOVQ AX, %d(R12)", axOut)
	g.p("MOVQ pairs+72(FP), AX")
	g.p("MOVQ AX, %d(R12)", axPairs)
	g.p("MOVQ R10, AX")
	g.p("SHLQ $6, AX")
	g.p("LEAQ %d(R12)(AX*1), AX", k.acc)
	g.p("MOVQ AX, %d(R12)", axEnd)
	g.p("MOVQ $64, R11")
	g.p("VPXORD Z0, Z0, Z0")
	g.p("VMOVDQA64 Z0, %d(R12)", axCfg)
	g.p("MOVB $1, %d(R12)", axCfg)
	for t := 0; t < 8; t++ {
		g.p("MOVW $%d, %d(R12)", k.cols[t], axCfg+16+2*t)
		g.p("MOVB %s, %d(R12)", k.rows[t], axCfg+48+t)
	}
	g.ldtilecfgR12()
}

// pairStart begins a pair: DI at the activations (xa), CX the
// super-blocks, R10 the records amxAhead super-blocks on in the order they
// are consumed, which past the end of the pair's are the next pair's (BX
// further on), as the pair kernels do: the model's matrices stream from
// DRAM, and a short row (6 super-blocks for a 1536-wide input) would
// otherwise wait on every pair's first records. The float sums start at 0.
func (k *amxFrame) pairStart(g *gen) {
	g.label(k.name + "pair")
	if k.x != 0 {
		g.p("MOVQ x+24(FP), AX")
		g.p("MOVQ AX, %d(R12)", k.x)
	}
	g.p("MOVQ xa+32(FP), DI")
	g.p("MOVQ %d(R12), CX", axNB)
	g.p("LEAQ %d(SI), R10", amxAhead*k.rec)
	g.p("CMPQ CX, $%d", amxAhead)
	g.p("JG %sfar", k.name)
	g.p("ADDQ BX, R10")
	g.label(k.name + "far")
	g.p("VPXORD Z0, Z0, Z0")
	for j := 0; j < axMaxAct; j++ {
		g.p("VMOVDQA64 Z0, %d(R12)", k.acc+64*j)
	}
}

// next steps to the next super-block and loops back to the kernel's
// loop label.
func (k *amxFrame) next(g *gen) {
	g.p("ADDQ $%d, SI", k.rec)
	if k.x != 0 {
		g.p("ADDQ $292, %d(R12)", k.x)
	}
	g.p("ADDQ %d(R12), DI", k.step)
	g.p("ADDQ $%d, R10", k.rec)
	g.p("CMPQ CX, $%d", amxAhead+1)
	g.p("JNE %snext", k.name)
	g.p("ADDQ BX, R10")
	g.label(k.name + "next")
	g.p("DECQ CX")
	g.p("JNZ %sloop", k.name)
}

// leave writes token j's 16 sums to out + j·os, moves on to the next pair
// and, after the last, releases the tiles and returns.
func (k *amxFrame) leave(g *gen) {
	g.p("MOVQ %d(R12), AX", axOut)
	g.p("MOVQ os+56(FP), R9")
	g.p("LEAQ %d(R12), DX", k.acc)
	g.label(k.name + "out")
	g.p("VMOVAPS 0(DX), Z0")
	g.p("VMOVUPS Z0, 0(AX)")
	g.p("ADDQ R9, AX")
	g.p("ADDQ $64, DX")
	g.p("CMPQ DX, %d(R12)", axEnd)
	g.p("JNE %sout", k.name)
	g.p("MOVQ %d(R12), SI", axPairWP)
	g.p("LEAQ (SI)(BX*2), SI")
	g.p("MOVQ SI, %d(R12)", axPairWP)
	g.p("ADDQ $64, %d(R12)", axOut)
	g.p("DECQ %d(R12)", axPairs)
	g.p("JNZ %spair", k.name)
	g.tilerelease()
	g.p("VZEROUPPER")
	g.p("RET")
}
