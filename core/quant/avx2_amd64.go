//go:build amd64 && !noasm

package quant

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run gen_avx2.go gen_blockrow.go gen_rowkernel.go

// hasAVX2 reports whether the AVX2 kernels of dot_avx2_amd64.s can run:
// AVX2 and FMA (every such CPU also has F16C, which they use for the f16
// scales).
func hasAVX2() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasOSXSAVE }

// setupAVX2 installs the AVX2 dot kernels for every quantized weight type
// (used where AVX-512 VNNI is missing).
func setupAVX2(k *kernelSet) {
	if k.name == "generic" {
		k.name = "avx2"
	} else {
		k.name += "+avx2"
	}
	k.q4_0, k.multi[Q4_0] = avx2Dot("dotQ4_0AVX2", Q4_0)
	k.q4_1, k.multi[Q4_1] = avx2Dot("dotQ4_1AVX2", Q4_1)
	k.q5_0, k.multi[Q5_0] = avx2Dot("dotQ5_0AVX2", Q5_0)
	k.q5_1, k.multi[Q5_1] = avx2Dot("dotQ5_1AVX2", Q5_1)
	k.q8_0, k.multi[Q8_0] = avx2Dot("dotQ8_0AVX2", Q8_0)
	k.q4K, k.multi[Q4_K] = avx2Dot("dotQ4_KAVX2", Q4_K)
	k.q5K, k.multi[Q5_K] = avx2Dot("dotQ5_KAVX2", Q5_K)
	k.q6K, k.multi[Q6_K] = avx2Dot("dotQ6_KAVX2", Q6_K)
	if !cpu.X86.HasAVX512F {
		k.quantQ80 = quantQ8With(quantQ8AVX2, false)
		k.quantQ81 = quantQ8With(quantQ8AVX2, true)
	}
	k.quantQ8K = quantQ8KSIMD
	setupPacked8(k)
	setupLowBit(k)
	setupFloatAVX2(k)
}

// avx2Dot wraps the R = 1…4 kernels of one type: the single-row dot and
// the multi-row form MatMul uses. Both check every extent the assembly
// reads, so a slicing mistake in a caller panics instead of reading out of
// bounds. The single-row dot is the R = 1 kernel, the very code the
// multi-row form runs for each row, so both give bit-identical results.
// The legacy types' kernels read the activation scales as float32 rows
// (actScales) rather than converting f16 per block and row.
func avx2Dot(name string, wt Type) (quantDot, multiDot) {
	ks, ok := avx2Kernels[name]
	if !ok {
		panic("quant: no AVX2 kernel " + name)
	}
	at := ActType(wt)
	wb, xb, sk := wt.BlockBytes(), at.BlockBytes(), actScaleWords(wt)
	multi := func(w []byte, rows int, x []byte, xs int, sc []float32, na int, out []float32, os int) {
		if na < 1 || na > 4 || rows < 0 {
			panic("quant: multi-row dot of a bad row count")
		}
		nb := len(w) / max(rows, 1) / wb
		if rows == 0 {
			return
		}
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
