//go:build amd64 && !noasm

package quant

import "unsafe"

//go:noescape
func quantQ8AVX512(x *float32, nb int, dst *byte, stride, qoff int, q81 bool) int

//go:noescape
func quantQ8KAVX2(x *float32, nb int, dst *byte) int

// quantQ8KSIMD is the AVX2 Q8_K row quantizer: whole blocks in assembly,
// the generic code from the first block it leaves.
func quantQ8KSIMD(src []float32, dst []byte) {
	nb := len(src) / QK
	if nb == 0 {
		return
	}
	_ = dst[nb*292-1]
	done := quantQ8KAVX2(unsafe.SliceData(src), nb, unsafe.SliceData(dst))
	if done < nb {
		quantizeQ8_KGeneric(src[QK*done:QK*nb], dst[292*done:292*nb])
	}
}

//go:noescape
func quantQ8AVX2(x *float32, nb int, dst *byte, stride, qoff int, q81 bool) int

// quantQ8SIMD returns the Q8_0 (q81 false) or Q8_1 row quantizer of
// quantize_amd64.s: whole blocks in assembly, the generic code from the
// first block the assembly leaves (|x| ≥ 2²², Inf, NaN).
func quantQ8SIMD(q81 bool) func(src []float32, dst []byte) {
	return quantQ8With(quantQ8AVX512, q81)
}

// quantQ8With wraps one of the assembly quantizers.
func quantQ8With(asm func(x *float32, nb int, dst *byte, stride, qoff int, q81 bool) int, q81 bool) func(src []float32, dst []byte) {
	bb, qoff, generic := 34, 2, quantizeQ8_0Generic
	if q81 {
		bb, qoff, generic = 36, 4, quantizeQ8_1Generic
	}
	return func(src []float32, dst []byte) {
		nb := len(src) / 32
		if nb == 0 {
			return
		}
		_ = dst[nb*bb-1]
		done := asm(unsafe.SliceData(src), nb, unsafe.SliceData(dst), bb, qoff, q81)
		if done < nb {
			generic(src[32*done:32*nb], dst[bb*done:bb*nb])
		}
	}
}
