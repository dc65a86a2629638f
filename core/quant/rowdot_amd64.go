//go:build amd64 && !noasm

package quant

import "unsafe"

// rowKernelSet is the R = 1…4 variants of one multi-row kernel
// (gen_rowkernel.go's contract), as the generated tables hold them.
type rowKernelSet = [4]func(w *byte, rows int, x *byte, xs, nb int, sc *float32, out *float32, os int)

// rowKernelsNamed is table[name]; a name the generator did not write is a
// programming error.
func rowKernelsNamed(table map[string]rowKernelSet, name string) rowKernelSet {
	ks, ok := table[name]
	if !ok {
		panic("quant: no row kernel " + name)
	}
	return ks
}

// rowKernelMulti wraps ks as the multi-row form MatMul uses. A weight row
// is nb blocks of wb bytes, an activation row nb blocks of xb bytes with,
// where the kernel reads them (sk > 0), sk float32 scales per block in sc.
// Every extent the assembly reads is checked here, so a slicing mistake in
// a caller panics instead of reading out of bounds.
func rowKernelMulti(ks rowKernelSet, wb, xb, sk int) multiDot {
	return func(w []byte, rows int, x []byte, xs int, sc []float32, na int, out []float32, os int) {
		if na < 1 || na > len(ks) || rows < 0 {
			panic("quant: multi-row dot of a bad row count")
		}
		if rows == 0 {
			return
		}
		nb := len(w) / rows / wb
		if nb == 0 {
			for j := 0; j < na; j++ {
				clear(out[j*os : j*os+rows])
			}
			return
		}
		_ = w[rows*nb*wb-1]
		_ = x[(na-1)*xs+nb*xb-1]
		_ = out[(na-1)*os+rows-1]
		var scp *float32 // the kernels with sk = 0 never read it
		if sk > 0 {
			_ = sc[na*nb*sk-1]
			scp = unsafe.SliceData(sc)
		}
		ks[na-1](unsafe.SliceData(w), rows, unsafe.SliceData(x), xs, nb, scp, unsafe.SliceData(out), os)
	}
}

// quantRowDot wraps the kernels of one quantized weight type: the
// multi-row form and the single-row dot. The single-row dot is the R = 1
// kernel, the very code the multi-row form runs for each row, so both
// give bit-identical results. The 32-element types' kernels read the
// activation scales as float32 rows (actScales) rather than converting
// f16 per block and row; the single-row dot makes that row itself.
func quantRowDot(ks rowKernelSet, wt Type) (quantDot, multiDot) {
	wb, xb, sk := wt.BlockBytes(), ActType(wt).BlockBytes(), actScaleWords(wt)
	multi := rowKernelMulti(ks, wb, xb, sk)
	one := func(w, x []byte) float32 {
		nb := len(w) / wb
		if nb == 0 {
			return 0
		}
		var sc []float32
		var scp *[]float32
		if sk > 0 {
			_ = x[nb*xb-1]
			scp = scalePool.Get().(*[]float32)
			sc = growFloats(scp, nb*sk)
			actScales(wt, x, 1, nb, sc)
		}
		var o [1]float32
		multi(w[:nb*wb], 1, x, 0, sc, 1, o[:], 0)
		if scp != nil {
			scalePool.Put(scp)
		}
		return o[0]
	}
	return one, multi
}
