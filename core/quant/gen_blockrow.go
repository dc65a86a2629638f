//go:build ignore

// gen_blockrow: the weight-row body of the quantized multi-row kernels
// (gen_avx2.go, gen_lowbit.go; each is run together with this file and
// gen_rowkernel.go): the loop over a row's blocks, each decoded once for
// all R activation rows, then each activation row's horizontal sum. The
// code for one activation row is the same instruction sequence whatever R
// is, and it keeps its own accumulators, so a row's result does not
// depend on how many rows share the call (TestBatchInvariance): R only
// decides how many rows one decode of the weight block serves.
package main

import (
	"fmt"
	"strings"
)

// kernel is one quantized weight type against its activation type.
type kernel struct {
	name   string // Go name prefix: dotQ4_1AVX2 → dotQ4_1AVX2x1 … x4
	wb, xb int    // weight and activation block bytes
	sb     int    // bytes of float32 activation scales per block (0: none)
	doc    string
	setup  func(g *gen) // constants, once per call
	// block: one weight block against r activation rows. The 32-element
	// types (sb > 0) leave each row's contribution in pair(j): written
	// when first, added to otherwise (see blockRow); the super-block types
	// add into acc(j) themselves.
	block func(g *gen, r int, first bool)
}

// Register use. Float accumulators Y12+j; int32 (super-block)
// accumulators Y8+j; the 32-element types' pair sums Y6+j.
func acc(j int) string  { return fmt.Sprintf("Y%d", 12+j) }
func acci(j int) string { return fmt.Sprintf("Y%d", 8+j) }
func pair(j int) string { return fmt.Sprintf("Y%d", 6+j) }

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

// rowKernels wraps each kernel in the shared frame (gen_rowkernel.go).
func rowKernels(ks []kernel) []rowKernel {
	out := make([]rowKernel, len(ks))
	for i, k := range ks {
		out[i] = rowKernel{name: k.name, doc: k.doc, setup: k.setup,
			row: func(g *gen, name string, r int) { blockRow(g, k, name, r) }}
	}
	return out
}

// blockRow emits one weight row of nb blocks against r activation rows,
// then the r row sums to out[j·os + row].
func blockRow(g *gen, k kernel, name string, r int) {
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
		g.label(name + "loop")
		prefetch(g, k.wb)
		k.block(g, r, true)
		step()
		g.p("DECQ CX")
		g.p("JNZ %sloop", name)
	} else {
		// 32-element blocks two at a time into the pair sums, then an odd
		// last block alone: acc = (…((0 + p01) + p23)…) + p_last whatever
		// r is.
		g.p("SHRQ $1, CX")
		g.p("JZ %stail", name)
		g.label(name + "loop")
		prefetch(g, 2*k.wb)
		k.block(g, r, true)
		step()
		k.block(g, r, false)
		step()
		addPairs()
		g.p("DECQ CX")
		g.p("JNZ %sloop", name)
		g.label(name + "tail")
		g.p("TESTQ $1, nb+32(FP)")
		g.p("JZ %sdone", name)
		k.block(g, r, true)
		step()
		addPairs()
		g.label(name + "done")
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
}
