//go:build amd64 && !noasm

package quant

import "golang.org/x/sys/cpu"

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

// avx2Dot wraps the R = 1…4 kernels of one type (quantRowDot).
func avx2Dot(name string, wt Type) (quantDot, multiDot) {
	return quantRowDot(rowKernelsNamed(avx2Kernels, name), wt)
}
