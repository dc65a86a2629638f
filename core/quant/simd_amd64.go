//go:build amd64 && !noasm

package quant

import (
	"os"
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

// KernelsEnv names the environment variable that caps the kernel set the
// process uses: one of KernelSetNames ("generic" the pure-Go code, "avx2"
// the AVX2 kernels even where AVX-512 VNNI is present, "avx512vnni" no AMX
// tiles where the CPU has them, ...) or empty for the best the CPU has. It
// is read once, at start-up (SelectKernels changes the cap later). Why: the
// AVX2 kernels serve every CPU without AVX-512 VNNI (AMD Zen 1–3, Intel
// client cores), and a machine that has it can only test and measure them
// this way; likewise the VNNI kernels on an AMX Xeon.
const KernelsEnv = "LMSTREAM_CPU_KERNELS"

func setupSIMD(k *kernelSet) { setupSIMDUpTo(k, os.Getenv(KernelsEnv)) }

// canRun reports whether this CPU can run the kernel set named set (one of
// KernelSetNames).
func canRun(set string) bool {
	switch set {
	case "generic":
		return true
	case "avx2":
		return hasAVX2()
	case "avxvnni":
		return hasAVXVNNI()
	case "avx512vnni":
		return hasVNNI512() && hasAVX2()
	case "amx":
		return hasAMX() && hasAVX2()
	}
	return false
}

// setupSIMDUpTo installs in k the best kernels the CPU has, up to the set
// named limit (empty: no limit).
func setupSIMDUpTo(k *kernelSet, limit string) {
	switch limit {
	case "generic":
		return
	case "avx2":
		if hasAVX2() {
			setupAVX2(k)
		}
		return
	case "avxvnni":
		switch {
		case hasAVXVNNI():
			setupAVXVNNI(k)
		case hasAVX2():
			setupAVX2(k)
		}
		return
	}
	if cpu.X86.HasAVX512F {
		k.name = "avx512"
		k.f32 = dotF32SIMD
		k.f16 = halfDot(dotF16F32AVX512, DotF16F32Generic)
		k.bf16 = halfDot(dotBF16F32AVX512, DotBF16F32Generic)
		k.quantQ80 = quantQ8SIMD(false)
		k.quantQ81 = quantQ8SIMD(true)
	}
	if !hasVNNI512() {
		switch {
		case hasAVXVNNI():
			setupAVXVNNI(k)
		case hasAVX2():
			setupAVX2(k)
		}
		return
	}
	k.name = "avx512vnni"
	// The AVX2 Q8_K quantizer (bit-identical to the generic one): every
	// K-quant matmul quantizes its activations with it, and in pure Go it
	// took 9% of a verify pass of the Qwen2.5 1.5B model.
	if hasAVX2() {
		k.quantQ8K = quantQ8KSIMD
		setupLowBit(k)
		// Float weights too: the AVX-512 dots above run one weight row
		// against one token, converting it again for every token.
		setupFloatAVX2(k)
	}
	k.q4_1 = legacyDot(20, 36, dotQ4_1Q8_1VNNI, DotQ4_1Q8_1Generic)
	k.q8_0 = legacyDot(34, 34, dotQ8_0Q8_0VNNI, DotQ8_0Q8_0Generic)
	k.q4_0 = legacyDot(18, 34, dotQ4_0Q8_0VNNI, DotQ4_0Q8_0Generic)
	k.q4K = kDot(144, dotQ4_KQ8_KVNNI)
	// Unpacked Q6_K takes the AVX2 multi-row kernel at every N: at N = 1 it
	// is a little slower than the single-row one, but a batch decodes each
	// weight block once for up to 4 tokens, and N = 1 must run the same
	// code as N > 1 (TestBatchInvariance). (Prepacked Q6_K runs packed8.go's
	// VNNI kernel.)
	k.q6K, k.multi[Q6_K] = avx2Dot("dotQ6_KAVX2", Q6_K)
	k.q5K = kDot(176, dotQ5_KQ8_KVNNI)
	k.q5_0 = legacyDot(22, 34, dotQ5_0Q8_0VNNI, DotQ5_0Q8_0Generic)
	k.q5_1 = legacyDot(24, 36, dotQ5_1Q8_1VNNI, DotQ5_1Q8_1Generic)
	k.q4_1r = func(w, xr []byte, npairs int) float32 {
		_, _ = w[npairs*40-1], xr[npairs*q81PairBytes-1]
		return dotQ4_1R(unsafe.SliceData(w), unsafe.SliceData(xr), npairs)
	}
	k.q4_1rx4 = func(w, xr []byte, xs, npairs int, out *[4]float32) {
		_, _ = w[npairs*40-1], xr[3*xs+npairs*q81PairBytes-1]
		dotQ4_1Rx4(unsafe.SliceData(w), unsafe.SliceData(xr), xs, npairs, out)
	}
	setupPacked(k)
	setupPacked8VNNI(k)
	if limit != "avx512vnni" && hasAMX() {
		setupAMX(k)
	}
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

//go:noescape
func dotF32AVX512(w, x *float32, n int) float32

//go:noescape
func dotF16F32AVX512(w *byte, x *float32, n int) float32

//go:noescape
func dotBF16F32AVX512(w *byte, x *float32, n int) float32

func dotF32SIMD(w, x []float32) float32 {
	n := len(w)
	x = x[:n]
	m := n &^ 31
	var s float32
	if m > 0 {
		s = dotF32AVX512(unsafe.SliceData(w), unsafe.SliceData(x), m)
	}
	return s + DotF32Generic(w[m:], x[m:])
}

func halfDot(asm func(w *byte, x *float32, n int) float32, tail func(w []byte, x []float32) float32) func(w []byte, x []float32) float32 {
	return func(w []byte, x []float32) float32 {
		n := len(w) / 2
		x = x[:n]
		m := n &^ 31
		var s float32
		if m > 0 {
			s = asm(unsafe.SliceData(w), unsafe.SliceData(x), m)
		}
		return s + tail(w[2*m:2*n], x[m:])
	}
}

//go:noescape
func dotQ4_KQ8_KVNNI(w, x *byte, nb int) float32

//go:noescape
func dotQ6_KQ8_KVNNI(w, x *byte, nb int) float32

func kDot(wb int, asm func(w, x *byte, nb int) float32) quantDot {
	return func(w, x []byte) float32 {
		nb := len(w) / wb
		if nb == 0 {
			return 0
		}
		_ = x[nb*292-1]
		return asm(unsafe.SliceData(w), unsafe.SliceData(x), nb)
	}
}

//go:noescape
func dotQ5_KQ8_KVNNI(w, x *byte, nb int) float32

//go:noescape
func dotQ5_0Q8_0VNNI(w, x *byte, npairs int) float32

//go:noescape
func dotQ5_1Q8_1VNNI(w, x *byte, npairs int) float32

//go:noescape
func dotQ4_1R(w, xr *byte, npairs int) float32

//go:noescape
func dotQ4_1Rx4(w, xr *byte, xs, npairs int, out *[4]float32)
