//go:build amd64 && !noasm

package quant

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run gen_packed8.go gen_amx.go gen_packed8_lean.go gen_packed8_avxvnni.go gen_packed8_iq4.go

// setupPacked8 installs the AVX2 8-row packed kernels of packed8_amd64.s
// (called where AVX2 is the best the CPU has).
func setupPacked8(k *kernelSet) { installPacked8(k, p8Asm) }

// setupPacked8VNNI installs their VPDPBUSD variants (called once AVX-512
// VNNI is known to be there). Q4_1 and Q8_0 matrices keep packed.go's
// 16-row layout there (packedShape); the 8-row kernels of those two types
// serve only the tests that compare the variants.
//
// The pair kernels also decode with GF2P8AFFINEQB, so they need GFNI
// (every AVX-512 VNNI Intel core from Ice Lake on, and AMD Zen 4, has
// it); without it the 8-row kernels serve every group.
func setupPacked8VNNI(k *kernelSet) {
	installPacked8(k, p8AsmVNNI)
	if cpu.X86.HasAVX512GFNI {
		installPacked16(k, p16AsmVNNI)
		installPacked16Legacy(k, p16LegacyVNNI)
	}
}

// installPacked8 installs kernels by weight type. The wrappers check every
// extent the assembly touches, so a slicing mistake in a caller panics
// instead of reading or writing out of bounds.
func installPacked8(k *kernelSet, asm map[Type][]func(wp *byte, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int, ng int)) {
	for wt, ks := range asm {
		rec, xb, legacy := p8Record(wt), ActType(wt).BlockBytes(), p8Legacy(wt)
		k.p8Acts[wt] = len(ks)
		k.p8[wt] = func(wp []byte, nb, ng int, x []byte, xs int, sc, out []float32, os, na int) {
			if na < 1 || na > len(ks) || nb < 1 || ng < 1 {
				panic("quant: packed8 kernel: bad call")
			}
			_ = wp[ng*nb*rec-1]
			_ = x[(na-1)*xs+nb*xb-1]
			if legacy {
				_ = sc[na*nb*2-1]
			}
			_ = out[(na-1)*os+ng*p8Rows-1]
			ks[na-1](unsafe.SliceData(wp), nb, unsafe.SliceData(x), xs,
				unsafe.SliceData(sc), 8*nb, unsafe.SliceData(out), 4*os, ng)
		}
	}
}

// installPacked16 installs the pair kernels by weight type; each takes
// as many activation rows as the type's 8-row kernel.
func installPacked16(k *kernelSet, asm map[Type][]func(wp *byte, gb, nb int, x *byte, xs int, out *float32, os int)) {
	for wt, ks := range asm {
		if len(ks) != k.p8Acts[wt] {
			panic("quant: pair kernels and 8-row kernels take different rows")
		}
		rec, xb := p8Record(wt), ActType(wt).BlockBytes()
		k.p16[wt] = func(wp []byte, gb, nb int, x []byte, xs int, _, out []float32, os, na int) {
			checkPair(len(ks), rec, xb, wp, gb, nb, x, xs, nil, false, out, os, na)
			ks[na-1](unsafe.SliceData(wp), gb, nb, unsafe.SliceData(x), xs, unsafe.SliceData(out), 4*os)
		}
	}
}

// installPacked16Legacy installs the pair kernels of the types that take
// p8Scales (Q4_0, Q5_0), as installPacked16 does.
func installPacked16Legacy(k *kernelSet, asm map[Type][]func(wp *byte, gb, nb int, x *byte, xs int, sc *float32, ss int, out *float32, os int)) {
	for wt, ks := range asm {
		if len(ks) != k.p8Acts[wt] || !p8Legacy(wt) {
			panic("quant: legacy pair kernels do not match their 8-row kernels")
		}
		rec, xb := p8Record(wt), ActType(wt).BlockBytes()
		k.p16[wt] = func(wp []byte, gb, nb int, x []byte, xs int, sc, out []float32, os, na int) {
			checkPair(len(ks), rec, xb, wp, gb, nb, x, xs, sc, true, out, os, na)
			ks[na-1](unsafe.SliceData(wp), gb, nb, unsafe.SliceData(x), xs,
				unsafe.SliceData(sc), 8*nb, unsafe.SliceData(out), 4*os)
		}
	}
}

// checkPair panics unless a pair kernel call stays inside its slices: the
// assembly trusts every extent it is given.
func checkPair(acts, rec, xb int, wp []byte, gb, nb int, x []byte, xs int, sc []float32, legacy bool, out []float32, os, na int) {
	if na < 1 || na > acts || nb < 1 || gb < nb*rec {
		panic("quant: pair kernel: bad call")
	}
	_ = wp[gb+nb*rec-1]
	_ = x[(na-1)*xs+nb*xb-1]
	if legacy {
		_ = sc[na*nb*2-1]
	}
	_ = out[(na-1)*os+2*p8Rows-1]
}
