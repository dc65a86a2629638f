//go:build !noasm

package model

import "golang.org/x/sys/cpu"

// The assembly kernels: attention_amd64.s (AVX-512F) where the CPU has
// AVX-512, else attention_avx2_amd64.s (AVX2, FMA and F16C; every AVX2 CPU
// has F16C, but it is checked). The AVX2 kernels give bit for bit what the
// AVX-512 ones give, so results do not depend on which set a machine runs.
// haveSIMD says whether either set is in use; the simd* functions below
// call the selected one.
var (
	haveAVX512 = cpu.X86.HasAVX512F
	canAVX2    = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	haveAVX2   = canAVX2 && !haveAVX512
	haveSIMD   = haveAVX512 || haveAVX2
)

//go:noescape
func attnExp(x *float32, n int, mx float32) float32

//go:noescape
func swigluAVX512(gate, up *float32, n int)

//go:noescape
func attnWsumG(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool)

//go:noescape
func attnMax(x *float32, n int) float32

//go:noescape
func attnFold(out, o *float32, n int, a, b float32)

//go:noescape
func rmsNormAVX512(dst, src, w *float32, d int, eps float32)

//go:noescape
func addAVX512(x, y *float32, n int)

//go:noescape
func widenF16(dst *float32, src *uint16, n int)

//go:noescape
func narrowF16(dst *uint16, src *float32, n int)

// The AVX2 counterparts (same contracts; see attention_avx2_amd64.s).

//go:noescape
func attnExpAVX2(x *float32, n int, mx float32) float32

//go:noescape
func swigluAVX2(gate, up *float32, n int)

//go:noescape
func attnWsumGAVX2(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool)

//go:noescape
func attnMaxAVX2(x *float32, n int) float32

//go:noescape
func attnScoresTAVX2(q *float32, ng, qs int, kt *float32, ks, nk, hd int, scale float32, out *float32, os int)

//go:noescape
func attnScoresTF16AVX2(q *float32, ng, qs int, kt *uint16, ks, nk, hd int, scale float32, out *float32, os int)

//go:noescape
func attnFoldAVX2(out, o *float32, n int, a, b float32)

//go:noescape
func rmsNormAVX2(dst, src, w *float32, d int, eps float32)

//go:noescape
func addAVX2(x, y *float32, n int)

//go:noescape
func widenF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func narrowF16AVX2(dst *uint16, src *float32, n int)

// The dispatch: the AVX-512 kernel where haveAVX512, else the AVX2 one
// (only called when haveSIMD).

func simdExp(x *float32, n int, mx float32) float32 {
	if haveAVX512 {
		return attnExp(x, n, mx)
	}
	return attnExpAVX2(x, n, mx)
}

func simdSwiglu(gate, up *float32, n int) {
	if haveAVX512 {
		swigluAVX512(gate, up, n)
		return
	}
	swigluAVX2(gate, up, n)
}

func simdWsumG(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool) {
	if haveAVX512 {
		attnWsumG(p, ps, nh, v, n, hd, out, os, acc)
		return
	}
	attnWsumGAVX2(p, ps, nh, v, n, hd, out, os, acc)
}

func simdMax(x *float32, n int) float32 {
	if haveAVX512 {
		return attnMax(x, n)
	}
	return attnMaxAVX2(x, n)
}

func simdFold(out, o *float32, n int, a, b float32) {
	if haveAVX512 {
		attnFold(out, o, n, a, b)
		return
	}
	attnFoldAVX2(out, o, n, a, b)
}

func simdRMSNorm(dst, src, w *float32, d int, eps float32) {
	if haveAVX512 {
		rmsNormAVX512(dst, src, w, d, eps)
		return
	}
	rmsNormAVX2(dst, src, w, d, eps)
}

func simdAdd(x, y *float32, n int) {
	if haveAVX512 {
		addAVX512(x, y, n)
		return
	}
	addAVX2(x, y, n)
}

func simdWiden(dst *float32, src *uint16, n int) {
	if haveAVX512 {
		widenF16(dst, src, n)
		return
	}
	widenF16AVX2(dst, src, n)
}

func simdNarrow(dst *uint16, src *float32, n int) {
	if haveAVX512 {
		narrowF16(dst, src, n)
		return
	}
	narrowF16AVX2(dst, src, n)
}
