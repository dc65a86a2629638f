//go:build amd64 && !noasm

package quant

import "unsafe"

//go:generate go run gen_float.go gen_rowkernel.go

// setupFloatAVX2 installs the AVX2 kernels of the float weight types
// (dot_float_avx2_amd64.s): the multi-row form MatMul runs for F16, BF16
// and F32 weights at every N, and the single-row dots, which are its R = 1
// kernel so that both give the same bits. On AVX-512 CPUs too: with the
// single-row AVX-512 dots a batch widens every weight once per token, and
// one token streams the weights from memory either way (not measured on
// such a CPU yet; see NOTES.md).
func setupFloatAVX2(k *kernelSet) {
	k.f16, k.multi[F16] = floatDot("floatF16", F16)
	k.bf16, k.multi[BF16] = floatDot("floatBF16", BF16)
	var f32 func(w []byte, x []float32) float32
	f32, k.multi[F32] = floatDot("floatF32", F32)
	k.f32 = func(w, x []float32) float32 {
		if len(w) == 0 {
			return 0
		}
		return f32(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 4*len(w)), x)
	}
}

// floatDot wraps the R = 1…4 kernels of one float type: the multi-row
// form (rowKernelMulti; one weight "block" is one element, one activation
// block one float32) and the single-row dot, its R = 1 kernel.
func floatDot(name string, wt Type) (func(w []byte, x []float32) float32, multiDot) {
	eb := wt.BlockBytes()
	multi := rowKernelMulti(rowKernelsNamed(floatKernels, name), eb, 4, 0)
	one := func(w []byte, x []float32) float32 {
		n := len(w) / eb
		if n == 0 {
			return 0
		}
		x = x[:n]
		var o [1]float32
		multi(w[:n*eb], 1, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*n), 0, nil, 1, o[:], 0)
		return o[0]
	}
	return one, multi
}
