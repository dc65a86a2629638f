//go:build ignore

// gen_float writes dot_float_avx2_amd64.s and dot_float_avx2_amd64.go: the
// AVX2 (+F16C) kernels of the float weight types F16, BF16 and F32 against
// float32 activations. Run: go run gen_float.go gen_rowkernel.go
//
// They take gen_rowkernel.go's multi-row contract, a weight row being nb
// elements and an activation row nb float32s. A weight row's 16-element
// chunks are widened to float32 once (VCVTPH2PS, or a zero-extend and
// shift for BF16) and every activation row takes them from registers: a batch converts each weight
// once per 4 tokens instead of once per token. Each activation row keeps
// two accumulators (chunk halves 0..7 and 8..15), summed in the same order
// whatever R is, then the row's last nb%16 elements one by one: a row's
// result does not depend on the batch (TestBatchInvariance).
package main

import "fmt"

type kind struct {
	name string
	eb   int // weight element bytes
	doc  string
	// load8 widens the 8 weights at off(SI) to float32s in y.
	load8 func(g *gen, off int, y string)
	// load1 widens the one weight at (SI) to a float32 in lane 0 of x.
	load1 func(g *gen, x string)
}

// Row j's accumulators: Y8+2j (chunk elements 0..7), Y9+2j (8..15).
func acc(j, h int) string { return fmt.Sprintf("Y%d", 8+2*j+h) }
func accX(j int) string   { return fmt.Sprintf("X%d", 8+2*j) }

var kinds = []kind{
	{
		name: "floatF16", eb: 2,
		doc: "F16 weights: VCVTPH2PS.",
		load8: func(g *gen, off int, y string) {
			g.p("VCVTPH2PS %d(SI), %s", off, y)
		},
		load1: func(g *gen, x string) {
			g.p("MOVWLZX (SI), AX")
			g.p("VMOVD AX, %s", x)
			g.p("VCVTPH2PS %s, %s", x, x)
		},
	},
	{
		name: "floatBF16", eb: 2,
		doc: "BF16 weights: the top half of a float32, zero-extended and shifted.",
		load8: func(g *gen, off int, y string) {
			g.p("VPMOVZXWD %d(SI), %s", off, y)
			g.p("VPSLLD $16, %s, %s", y, y)
		},
		load1: func(g *gen, x string) {
			g.p("MOVWLZX (SI), AX")
			g.p("SHLL $16, AX")
			g.p("VMOVD AX, %s", x)
		},
	},
	{
		name: "floatF32", eb: 4,
		doc: "F32 weights.",
		load8: func(g *gen, off int, y string) {
			g.p("VMOVUPS %d(SI), %s", off, y)
		},
		load1: func(g *gen, x string) {
			g.p("VMOVSS (SI), %s", x)
		},
	},
}

func main() {
	var ks []rowKernel
	for _, k := range kinds {
		ks = append(ks, rowKernel{name: k.name, doc: k.doc, setup: floatSetup,
			row: func(g *gen, name string, r int) { floatRow(g, k, name, r) }})
	}
	writeRowKernels("gen_float.go", "dot_float_avx2_amd64", "floatKernels", nil, ks)
}

// floatSetup keeps os·4 in R10 and 3·os·4 in R11 for the stores.
func floatSetup(g *gen) {
	g.p("MOVQ os+56(FP), R10")
	g.p("SHLQ $2, R10")
	g.p("LEAQ (R10)(R10*2), R11")
}

// floatRow emits one weight row of nb elements against r activation
// rows: 16-element chunks, then the nb%16 left one by one.
func floatRow(g *gen, k kind, name string, r int) {
	g.p("SHRQ $4, CX")
	for j := 0; j < r; j++ {
		g.p("VXORPS %s, %s, %s", acc(j, 0), acc(j, 0), acc(j, 0))
		g.p("VXORPS %s, %s, %s", acc(j, 1), acc(j, 1), acc(j, 1))
	}
	g.p("TESTQ CX, CX")
	g.p("JZ %ssum", name)
	g.label(name + "loop")
	prefetch(g, 16*k.eb)
	k.load8(g, 0, "Y0")
	k.load8(g, 8*k.eb, "Y1")
	for j := 0; j < r; j++ {
		g.p("VFMADD231PS %s, Y0, %s", xa(0, j), acc(j, 0))
		g.p("VFMADD231PS %s, Y1, %s", xa(32, j), acc(j, 1))
	}
	g.p("ADDQ $%d, SI", 16*k.eb)
	g.p("ADDQ $64, DI")
	g.p("DECQ CX")
	g.p("JNZ %sloop", name)
	// Each row's two accumulators to one sum in lane 0 of its first
	// register.
	g.label(name + "sum")
	for j := 0; j < r; j++ {
		a, x := acc(j, 0), accX(j)
		g.p("VADDPS %s, %s, %s", acc(j, 1), a, a)
		g.p("VEXTRACTF128 $1, %s, X4", a)
		g.p("VADDPS X4, %s, %s", x, x)
		g.p("VPERMILPS $0x4E, %s, X4", x)
		g.p("VADDPS X4, %s, %s", x, x)
		g.p("VPERMILPS $0xB1, %s, X4", x)
		g.p("VADDSS X4, %s, %s", x, x)
	}
	// The last nb%16 elements, one at a time.
	g.p("MOVQ nb+32(FP), CX")
	g.p("ANDQ $15, CX")
	g.p("JZ %sstore", name)
	g.label(name + "tail")
	k.load1(g, "X0")
	for j := 0; j < r; j++ {
		g.p("VMOVSS %s, X1", xa(0, j))
		g.p("VFMADD231SS X1, X0, %s", accX(j))
	}
	g.p("ADDQ $%d, SI", k.eb)
	g.p("ADDQ $4, DI")
	g.p("DECQ CX")
	g.p("JNZ %stail", name)
	g.label(name + "store")
	for j := 0; j < r; j++ {
		g.p("VMOVSS %s, %s", accX(j), []string{"(DX)", "(DX)(R10*1)", "(DX)(R10*2)", "(DX)(R11*1)"}[j])
	}
}
