//go:build amd64 && !noasm

package quant

import "unsafe"

//go:generate go run gen_packed8.go

// setupPacked8 installs the 8-row packed kernels of packed8_amd64.s
// (called where AVX2 is the best the CPU has). The wrappers check every
// extent the assembly touches, so a slicing mistake in a caller panics
// instead of reading or writing out of bounds.
func setupPacked8(k *kernelSet) {
	for wt, ks := range p8Asm {
		rec, xb, legacy := p8Record(wt), ActType(wt).BlockBytes(), p8Legacy(wt)
		k.p8[wt] = func(wp []byte, nb int, x []byte, xs int, sc, out []float32, os, na int) {
			if na < 1 || na > p8Acts || nb < 1 {
				panic("quant: packed8 kernel: bad call")
			}
			_ = wp[nb*rec-1]
			_ = x[(na-1)*xs+nb*xb-1]
			if legacy {
				_ = sc[na*nb*2-1]
			}
			_ = out[(na-1)*os+p8Rows-1]
			ks[na-1](unsafe.SliceData(wp), nb, unsafe.SliceData(x), xs,
				unsafe.SliceData(sc), 8*nb, unsafe.SliceData(out), 4*os)
		}
	}
}
