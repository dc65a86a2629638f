package model

import (
	"unsafe"

	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
)

// widenKV widens cache rows src (kv.Type t, whole rows of one head) into
// dst, len(dst) floats: float16 exactly (widen), Q8_0 as d·q per value.
func widenKV(dst []float32, src []uint16, t kv.Type) {
	if t != kv.Q8_0 {
		widen(dst, src[:len(dst)])
		return
	}
	nb := len(dst) / 32
	src = src[:nb*17]
	if haveSIMD && canAVX2 && nb > 0 {
		dequantQ80AVX2(&dst[0], &src[0], nb)
		return
	}
	dequantQ80(dst[:nb*32], src)
}

// dequantQ80 is widenKV for Q8_0 blocks in Go: block b is a float16 scale
// d (src[17b]) and 32 int8s (the bytes of src[17b+1 : 17b+17]), value j
// d·q_j; the assembly gives the same floats (one rounding, the product).
func dequantQ80(dst []float32, src []uint16) {
	for b := 0; b < len(dst)/32; b++ {
		d := quant.F16ToF32(src[17*b])
		q := unsafe.Slice((*int8)(unsafe.Pointer(&src[17*b+1])), 32)
		for j, v := range q {
			dst[32*b+j] = d * float32(v)
		}
	}
}

// narrowKV stores the entry src (HeadDim floats) as one cache row dst of
// kv.Type t: rounded to float16, or quantized to Q8_0 blocks as llama.cpp
// quantizes its q8_0 cache (d = max|x|/127, q = round(x/d)).
func narrowKV(dst []uint16, src []float32, t kv.Type) {
	if t != kv.Q8_0 {
		narrow(dst[:len(src)], src)
		return
	}
	quant.QuantizeQ8_0(src, unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(src)/32*34))
}
