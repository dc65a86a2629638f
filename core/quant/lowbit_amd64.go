//go:build amd64 && !noasm

package quant

import "unsafe"

//go:generate go run gen_lowbit.go gen_blockrow.go gen_rowkernel.go

// setupLowBit installs the AVX2 kernels of the low-bit types
// (dot_lowbit_amd64.s) on every CPU that has AVX2, those with AVX-512 VNNI
// included: these types have no wider kernels.
func setupLowBit(k *kernelSet) {
	k.q2K, k.multi[Q2_K] = lowbitDot("lowbitQ2_K", Q2_K)
	k.q3K, k.multi[Q3_K] = lowbitDot("lowbitQ3_K", Q3_K)
	k.iq4xs, k.multi[IQ4_XS] = lowbitDot("lowbitIQ4_XS", IQ4_XS)
	k.iq4nl, k.multi[IQ4_NL] = lowbitDot("lowbitIQ4_NL", IQ4_NL)
	k.mxfp4, k.multi[MXFP4] = lowbitDot("lowbitMXFP4", MXFP4)
}

// lowbitDot wraps the R = 1…4 kernels of one type as avx2Dot does those of
// gen_avx2.go: the single-row dot and the multi-row form MatMul uses, both
// checking every extent the assembly reads, the single-row dot being the
// R = 1 kernel itself so that both give the same bits. (A copy rather than
// a shared function: the two generators' kernel tables evolve apart.)
func lowbitDot(name string, wt Type) (quantDot, multiDot) {
	ks, ok := lowbitKernels[name]
	if !ok {
		panic("quant: no low-bit kernel " + name)
	}
	at := ActType(wt)
	wb, xb, sk := wt.BlockBytes(), at.BlockBytes(), actScaleWords(wt)
	multi := func(w []byte, rows int, x []byte, xs int, sc []float32, na int, out []float32, os int) {
		if na < 1 || na > 4 || rows < 0 {
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
		if sk > 0 {
			_ = sc[na*nb*sk-1]
		}
		ks[na-1](unsafe.SliceData(w), rows, unsafe.SliceData(x), xs, nb, unsafe.SliceData(sc), unsafe.SliceData(out), os)
	}
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
