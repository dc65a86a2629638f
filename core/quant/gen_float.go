//go:build ignore

// gen_float writes dot_float_avx2_amd64.s and dot_float_avx2_amd64.go: the
// AVX2 (+F16C) kernels of the float weight types F16, BF16 and F32 against
// float32 activations. Run: go run gen_float.go gen_rowkernel.go
//
// They take gen_rowkernel.go's multi-row contract (a weight row being nb
// elements, an activation row nb float32s) but not its one-row-at-a-time
// frame: a kernel runs its weight rows three at a time against its R = 1…4
// activation rows, a tile of up to 3×4 dots. Per 8 elements a tile widens
// its three weight chunks once (VCVTPH2PS, or a zero-extend and shift for
// BF16) and loads each activation chunk once for 3·R FMAs from registers,
// where one weight row at a time loaded every activation chunk once per
// two FMAs and left the FMA units waiting on loads (issue 52: F16 prefill
// at 0.72–0.76 of llama.cpp's).
//
// Every dot of the tile keeps its own accumulator, 8 lanes over the 8-
// element chunks in order, summed across lanes in one fixed order, then
// the row's last nb%8 elements one by one into that sum: the same
// operations whatever the tile's shape (three rows, the last one or two,
// one to four activation rows), so a row's result does not depend on the
// batch or on the rows beside it (TestBatchInvariance), and the single-row
// dot is the 1×1 tile.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
)

type kind struct {
	name string
	eb   int // weight element bytes
	doc  string
	// load8 widens the 8 weights at addr to float32s in y.
	load8 func(g *gen, addr, y string)
	// load1 widens the one weight at addr to a float32 in lane 0 of x
	// (R14, the prefetch cursor of the loops before, free to clobber).
	load1 func(g *gen, addr, x string)
}

var kinds = []kind{
	{
		name: "floatF16", eb: 2,
		doc: "F16 weights: VCVTPH2PS.",
		load8: func(g *gen, addr, y string) {
			g.p("VCVTPH2PS %s, %s", addr, y)
		},
		load1: func(g *gen, addr, x string) {
			g.p("MOVWLZX %s, R14", addr)
			g.p("VMOVD R14, %s", x)
			g.p("VCVTPH2PS %s, %s", x, x)
		},
	},
	{
		name: "floatBF16", eb: 2,
		doc: "BF16 weights: the top half of a float32, zero-extended and shifted.",
		load8: func(g *gen, addr, y string) {
			g.p("VPMOVZXWD %s, %s", addr, y)
			g.p("VPSLLD $16, %s, %s", y, y)
		},
		load1: func(g *gen, addr, x string) {
			g.p("MOVWLZX %s, R14", addr)
			g.p("SHLL $16, R14")
			g.p("VMOVD R14, %s", x)
		},
	},
	{
		name: "floatF32", eb: 4,
		doc: "F32 weights.",
		load8: func(g *gen, addr, y string) {
			g.p("VMOVUPS %s, %s", addr, y)
		},
		load1: func(g *gen, addr, x string) {
			g.p("VMOVSS %s, %s", addr, x)
		},
	},
}

// tileRows is the most weight rows a tile takes: 3·4 accumulators, three
// widened weight chunks and one activation chunk are the 16 YMMs.
const tileRows = 3

// Registers. SI: the tile's first weight row, BX: the cursor in it (the
// other rows at BX + i·R10, R10 = the row's bytes, R11 = 3·R10); DI: the
// cursor in activation row 0 (row j at DI + j·R8, R9 = 3·R8); DX: out at
// the tile's first row (activation row j's at DX + j·R12, R12 = os·4,
// R13 = 3·R12); AX: weight rows left; CX: the loop count; R14: the
// prefetch cursor (see unroll).
//
// Y(R·i + j): the accumulator of weight row i against activation row j;
// Y12+i: weight row i's widened chunk; Y15: an activation chunk.
func accY(i, j, r int) string { return fmt.Sprintf("Y%d", r*i+j) }
func accX(i, j, r int) string { return fmt.Sprintf("X%d", r*i+j) }

var wRow = []string{"(BX)", "(BX)(R10*1)", "(BX)(R10*2)"}

var xRow = []string{"(DI)", "(DI)(R8*1)", "(DI)(R8*2)", "(DI)(R9*1)"}
var oRow = []string{"(DX)", "(DX)(R12*1)", "(DX)(R12*2)", "(DX)(R13*1)"}

func off(o int, base string) string {
	if o == 0 {
		return base
	}
	return fmt.Sprintf("%d%s", o, base)
}

// chunk emits one 8-element chunk (at byte c·8·eb of the weights, c·32 of
// the activations) of a w×r tile.
func chunk(g *gen, k kind, w, r, c int) {
	for i := 0; i < w; i++ {
		k.load8(g, off(8*k.eb*c, wRow[i]), fmt.Sprintf("Y%d", 12+i))
	}
	for j := 0; j < r; j++ {
		g.p("VMOVUPS %s, Y15", off(32*c, xRow[j]))
		for i := 0; i < w; i++ {
			g.p("VFMADD231PS Y15, Y%d, %s", 12+i, accY(i, j, r))
		}
	}
}

// unroll is the chunks one iteration of a tile's main loop takes: 32
// elements, a cache line of F16/BF16 weights per row (two of F32).
//
// The prefetches: a decode step streams the weights from memory, and a
// tile reads its rows side by side, three streams 1152 bytes apart for
// SmolLM2's 576 F16 columns. Prefetching each row a fixed distance ahead
// (the row kernels' way; or the same place in the row one or two tiles
// on) left the stream at 0.6–0.7 of the read loop's rate where the
// single-row kernels had reached 0.9–1.1 (BenchmarkDecodeStreamCPU); no
// prefetch at all, 0.45–0.6. What works is one linear stream: R14 runs
// through the next tile's bytes in order, as many lines an iteration as
// the tile consumes.
const unroll = 4

// tile emits a w×r tile: w weight rows from SI against r activation rows,
// results to DX. l labels it.
func tile(g *gen, k kind, w, r int, l string) {
	for i := 0; i < w; i++ {
		for j := 0; j < r; j++ {
			a := accY(i, j, r)
			g.p("VXORPS %s, %s, %s", a, a, a)
		}
	}
	g.p("MOVQ SI, BX")
	g.p("LEAQ (SI)(R11*1), R14")
	g.p("MOVQ x+16(FP), DI")
	g.p("MOVQ nb+32(FP), CX")
	g.p("SHRQ $5, CX")
	g.p("JZ %schunks", l)
	g.label(l + "loop")
	for o := 0; o < w*unroll*8*k.eb; o += 64 {
		g.p("PREFETCHT0 %d(R14)", o)
	}
	for c := 0; c < unroll; c++ {
		chunk(g, k, w, r, c)
	}
	g.p("ADDQ $%d, BX", unroll*8*k.eb)
	g.p("ADDQ $%d, R14", w*unroll*8*k.eb)
	g.p("ADDQ $%d, DI", unroll*32)
	g.p("DECQ CX")
	g.p("JNZ %sloop", l)
	// The whole chunks left: (nb mod 32) / 8.
	g.label(l + "chunks")
	g.p("MOVQ nb+32(FP), CX")
	g.p("SHRQ $3, CX")
	g.p("ANDQ $3, CX")
	g.p("JZ %ssum", l)
	g.label(l + "chunk")
	chunk(g, k, w, r, 0)
	g.p("ADDQ $%d, BX", 8*k.eb)
	g.p("ADDQ $32, DI")
	g.p("DECQ CX")
	g.p("JNZ %schunk", l)
	// Each accumulator's lanes to one sum in its lane 0: high half onto
	// low, then lanes 2–3 onto 0–1, then lane 1 onto 0.
	g.label(l + "sum")
	for i := 0; i < w; i++ {
		for j := 0; j < r; j++ {
			a, x := accY(i, j, r), accX(i, j, r)
			g.p("VEXTRACTF128 $1, %s, X15", a)
			g.p("VADDPS X15, %s, %s", x, x)
			g.p("VPERMILPS $0x4E, %s, X15", x)
			g.p("VADDPS X15, %s, %s", x, x)
			g.p("VPERMILPS $0xB1, %s, X15", x)
			g.p("VADDSS X15, %s, %s", x, x)
		}
	}
	// The last nb mod 8 elements, one at a time.
	g.p("MOVQ nb+32(FP), CX")
	g.p("ANDQ $7, CX")
	g.p("JZ %sstore", l)
	g.label(l + "tail")
	for i := 0; i < w; i++ {
		k.load1(g, wRow[i], fmt.Sprintf("X%d", 12+i))
	}
	for j := 0; j < r; j++ {
		g.p("VMOVSS %s, X15", xRow[j])
		for i := 0; i < w; i++ {
			g.p("VFMADD231SS X15, X%d, %s", 12+i, accX(i, j, r))
		}
	}
	g.p("ADDQ $%d, BX", k.eb)
	g.p("ADDQ $4, DI")
	g.p("DECQ CX")
	g.p("JNZ %stail", l)
	g.label(l + "store")
	for i := 0; i < w; i++ {
		for j := 0; j < r; j++ {
			g.p("VMOVSS %s, %s", accX(i, j, r), off(4*i, oRow[j]))
		}
	}
}

func main() {
	var s, d bytes.Buffer
	s.WriteString("// Code generated by gen_float.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\n#include \"textflag.h\"\n\n")
	d.WriteString("// Code generated by gen_float.go; DO NOT EDIT.\n\n//go:build amd64 && !noasm\n\npackage quant\n\n")
	var tab bytes.Buffer
	for _, k := range kinds {
		for r := 1; r <= maxRows; r++ {
			g := &gen{}
			name := fmt.Sprintf("%sx%d", k.name, r)
			fmt.Fprintf(&s, "// func %s%s\n// %s %d activation row(s), weight rows in tiles of %d.\n", name, kernelSig, k.doc, r, tileRows)
			fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
			g.p("MOVQ w+0(FP), SI")
			g.p("MOVQ rows+8(FP), AX")
			g.p("MOVQ xs+24(FP), R8")
			g.p("LEAQ (R8)(R8*2), R9")
			g.p("MOVQ nb+32(FP), R10")
			g.p("IMULQ $%d, R10", k.eb)
			g.p("LEAQ (R10)(R10*2), R11")
			g.p("MOVQ out+48(FP), DX")
			g.p("MOVQ os+56(FP), R12")
			g.p("SHLQ $2, R12")
			g.p("LEAQ (R12)(R12*2), R13")
			g.p("CMPQ AX, $%d", tileRows)
			g.p("JLT %sleft", name)
			g.label(name + "rows")
			tile(g, k, tileRows, r, name+"t")
			g.p("ADDQ R11, SI")
			g.p("ADDQ $%d, DX", 4*tileRows)
			g.p("SUBQ $%d, AX", tileRows)
			g.p("CMPQ AX, $%d", tileRows)
			g.p("JGE %srows", name)
			// The last one or two rows.
			g.label(name + "left")
			g.p("CMPQ AX, $1")
			g.p("JLT %sdone", name)
			g.p("JEQ %sone", name)
			tile(g, k, 2, r, name+"two")
			g.p("JMP %sdone", name)
			g.label(name + "one")
			tile(g, k, 1, r, name+"one")
			g.label(name + "done")
			g.p("VZEROUPPER")
			g.p("RET")
			s.Write(g.b.Bytes())
			s.WriteString("\n")
			fmt.Fprintf(&d, "//go:noescape\nfunc %s%s\n\n", name, kernelSig)
		}
		fmt.Fprintf(&tab, "\t%q: {%sx1, %sx2, %sx3, %sx4},\n", k.name, k.name, k.name, k.name, k.name)
	}
	fmt.Fprintf(&d, "// floatKernels: the R = 1…4 variants of each kernel, by name.\nvar floatKernels = map[string][%d]func%s{\n%s}\n", maxRows, kernelSig, tab.String())
	must(os.WriteFile("dot_float_avx2_amd64.s", s.Bytes(), 0o644))
	src, err := format.Source(d.Bytes())
	must(err)
	must(os.WriteFile("dot_float_avx2_amd64.go", src, 0o644))
}
