//go:build amd64 && !noasm

package quant

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Assembly kernels (AVX-512 F/BW/VL + VNNI + VBMI). They process whole pairs
// of blocks; the wrappers check lengths, then add an odd last block with the
// generic code.

//go:noescape
func dotQ4_1Q8_1VNNI(w, x *byte, npairs int) float32

//go:noescape
func dotQ4_1Q8_1x4VNNI(w, x *byte, xs, npairs int, out *[4]float32)

//go:noescape
func dotQ8_0Q8_0VNNI(w, x *byte, npairs int) float32

//go:noescape
func dotQ8_0Q8_0x4VNNI(w, x *byte, xs, npairs int, out *[4]float32)

//go:noescape
func dotQ4_0Q8_0VNNI(w, x *byte, npairs int) float32

//go:noescape
func dotQ4_0Q8_0x4VNNI(w, x *byte, xs, npairs int, out *[4]float32)

func hasVNNI512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
		cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VBMI
}

func setupSIMD(k *kernelSet) {
	if !hasVNNI512() {
		return
	}
	k.name = "avx512vnni"
	k.q4_1 = legacyDot(20, 36, dotQ4_1Q8_1VNNI, DotQ4_1Q8_1Generic)
	k.q8_0 = legacyDot(34, 34, dotQ8_0Q8_0VNNI, DotQ8_0Q8_0Generic)
	k.q4_0 = legacyDot(18, 34, dotQ4_0Q8_0VNNI, DotQ4_0Q8_0Generic)
	k.q4_1x4 = legacyDot4(20, 36, dotQ4_1Q8_1x4VNNI, DotQ4_1Q8_1Generic)
	k.q8_0x4 = legacyDot4(34, 34, dotQ8_0Q8_0x4VNNI, DotQ8_0Q8_0Generic)
	k.q4_0x4 = legacyDot4(18, 34, dotQ4_0Q8_0x4VNNI, DotQ4_0Q8_0Generic)
}

func legacyDot(wb, xb int, asm func(w, x *byte, npairs int) float32, tail quantDot) quantDot {
	return func(w, x []byte) float32 {
		nb := len(w) / wb
		if nb == 0 {
			return 0
		}
		_ = x[nb*xb-1] // bounds: the kernel reads nb activation blocks
		s := asm(unsafe.SliceData(w), unsafe.SliceData(x), nb/2)
		if nb&1 != 0 {
			s += tail(w[(nb-1)*wb:nb*wb], x[(nb-1)*xb:nb*xb])
		}
		return s
	}
}

func legacyDot4(wb, xb int, asm func(w, x *byte, xs, npairs int, out *[4]float32), tail quantDot) func(w, x []byte, xs int, out *[4]float32) {
	return func(w, x []byte, xs int, out *[4]float32) {
		nb := len(w) / wb
		_ = x[3*xs+nb*xb-1]
		if nb == 0 {
			*out = [4]float32{}
			return
		}
		asm(unsafe.SliceData(w), unsafe.SliceData(x), xs, nb/2, out)
		if nb&1 != 0 {
			wt := w[(nb-1)*wb : nb*wb]
			for i := 0; i < 4; i++ {
				o := i*xs + (nb-1)*xb
				out[i] += tail(wt, x[o:o+xb])
			}
		}
	}
}
