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

// widenKeysT widens the keys of positions [from, to) of kv head h in layer
// li of cache c into the transposed block dst: dimension d of position p
// at dst[d·ds + p−from], for d < hd. The cache keeps keys unit-major
// (kv.Cache.KBlock), so each dimension of a page's run is one contiguous
// widening; the values are those widenKV gives for the same entries.
func widenKeysT(dst []float32, ds int, c *kv.Cache, li, h, from, to, hd int) {
	for pos := from; pos < to; {
		end := min(to, kv.PageEnd(pos))
		blk, col := c.KBlock(li, h, pos)
		n, off := end-pos, pos-from
		if c.Type() == kv.Q8_0 {
			widenQ80T(dst[off:], ds, blk, col, n, hd)
		} else {
			for d := range hd {
				widen(dst[d*ds+off:d*ds+off+n], blk[d*kv.KStride+col:d*kv.KStride+col+n])
			}
		}
		pos = end
	}
}

// widenQ80T is widenKeysT for n positions of one page's Q8_0 keys from
// column col: unit 17b holds block b's scale of each position, unit
// 17b+1+j the int8s of dimensions 32b+2j (low byte) and 32b+2j+1 (high
// byte); each value is scale·q, the one rounding dequantQ80 makes.
func widenQ80T(dst []float32, ds int, blk []uint16, col, n, hd int) {
	const P = kv.KStride
	var sc [kv.PageSize]float32
	for b := range hd / 32 {
		for p, x := range blk[17*b*P+col : 17*b*P+col+n] {
			sc[p] = quant.F16ToF32(x)
		}
		for j := range 16 {
			lo, hi := dst[(32*b+2*j)*ds:][:n], dst[(32*b+2*j+1)*ds:][:n]
			for p, x := range blk[(17*b+1+j)*P+col : (17*b+1+j)*P+col+n] {
				lo[p] = sc[p] * float32(int8(x))
				hi[p] = sc[p] * float32(int8(x>>8))
			}
		}
	}
}

// widenKeyT widens one key (row: its RowLen units, kv.Cache.KRow) into
// column j of the transposed block dst (stride ds), tmp holding hd floats.
func widenKeyT(dst []float32, ds, j int, row []uint16, t kv.Type, tmp []float32) {
	widenKV(tmp, row, t)
	for d, x := range tmp {
		dst[d*ds+j] = x
	}
}
