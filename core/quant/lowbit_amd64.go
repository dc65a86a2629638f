//go:build amd64 && !noasm

package quant

//go:generate go run gen_lowbit.go gen_iquant.go gen_blockrow.go gen_rowkernel.go

// setupLowBit installs the AVX2 kernels of the low-bit types
// (dot_lowbit_amd64.s) on every CPU that has AVX2, those with AVX-512 VNNI
// included: these types have no wider kernels.
func setupLowBit(k *kernelSet) {
	k.q2K, k.multi[Q2_K] = lowbitDot("lowbitQ2_K", Q2_K)
	k.q3K, k.multi[Q3_K] = lowbitDot("lowbitQ3_K", Q3_K)
	k.iq4xs, k.multi[IQ4_XS] = lowbitDot("lowbitIQ4_XS", IQ4_XS)
	k.iq4nl, k.multi[IQ4_NL] = lowbitDot("lowbitIQ4_NL", IQ4_NL)
	k.mxfp4, k.multi[MXFP4] = lowbitDot("lowbitMXFP4", MXFP4)
	k.iq3s, k.multi[IQ3_S] = lowbitDot("lowbitIQ3_S", IQ3_S)
	k.iq3xxs, k.multi[IQ3_XXS] = lowbitDot("lowbitIQ3_XXS", IQ3_XXS)
	k.iq2xxs, k.multi[IQ2_XXS] = lowbitDot("lowbitIQ2_XXS", IQ2_XXS)
	k.iq2xs, k.multi[IQ2_XS] = lowbitDot("lowbitIQ2_XS", IQ2_XS)
	k.iq2s, k.multi[IQ2_S] = lowbitDot("lowbitIQ2_S", IQ2_S)
}

// lowbitDot wraps the R = 1…4 kernels of one type (quantRowDot).
func lowbitDot(name string, wt Type) (quantDot, multiDot) {
	return quantRowDot(rowKernelsNamed(lowbitKernels, name), wt)
}
