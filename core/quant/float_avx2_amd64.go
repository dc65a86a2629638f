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

// floatDot wraps the R = 1…4 kernels of one float type as lowbitDot does
// the quantized ones; x is float32 activation rows (as bytes, xs bytes
// apart), one weight "block" is one element.
func floatDot(name string, wt Type) (func(w []byte, x []float32) float32, multiDot) {
	ks, ok := floatKernels[name]
	if !ok {
		panic("quant: no float kernel " + name)
	}
	eb := wt.BlockBytes()
	multi := func(w []byte, rows int, x []byte, xs int, _ []float32, na int, out []float32, os int) {
		if na < 1 || na > 4 || rows < 0 {
			panic("quant: multi-row dot of a bad row count")
		}
		if rows == 0 {
			return
		}
		n := len(w) / rows / eb
		if n == 0 {
			for j := 0; j < na; j++ {
				clear(out[j*os : j*os+rows])
			}
			return
		}
		_ = w[rows*n*eb-1]
		_ = x[(na-1)*xs+4*n-1]
		_ = out[(na-1)*os+rows-1]
		ks[na-1](unsafe.SliceData(w), rows, unsafe.SliceData(x), xs, n, nil, unsafe.SliceData(out), os)
	}
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
