//go:build !amd64 || noasm

package model

const (
	haveAVX512 = false
	canAVX2    = false
	haveAVX2   = false
	haveSIMD   = false
)

func attnExp(x *float32, n int, mx float32) float32 { panic("unreachable") }

func swigluAVX512(gate, up *float32, n int) { panic("unreachable") }

func attnWsumG(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool) {
	panic("unreachable")
}

func attnMax(x *float32, n int) float32 { panic("unreachable") }

func attnFold(out, o *float32, n int, a, b float32)     { panic("unreachable") }
func attnFoldAVX2(out, o *float32, n int, a, b float32) { panic("unreachable") }
func simdFold(out, o *float32, n int, a, b float32)     { panic("unreachable") }

func rmsNormAVX512(dst, src, w *float32, d int, eps float32) { panic("unreachable") }
func addAVX512(x, y *float32, n int)                         { panic("unreachable") }

func widenF16(dst *float32, src *uint16, n int)  { panic("unreachable") }
func narrowF16(dst *uint16, src *float32, n int) { panic("unreachable") }

func attnExpAVX2(x *float32, n int, mx float32) float32 { panic("unreachable") }
func swigluAVX2(gate, up *float32, n int)               { panic("unreachable") }
func attnWsumGAVX2(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool) {
	panic("unreachable")
}
func attnMaxAVX2(x *float32, n int) float32 { panic("unreachable") }
func attnScoresTAVX2(q *float32, ng, qs int, kt *float32, ks, nk, hd int, scale float32, out *float32, os int) {
	panic("unreachable")
}
func attnScoresTF16AVX2(q *float32, ng, qs int, kt *uint16, ks, nk, hd int, scale float32, out *float32, os int) {
	panic("unreachable")
}
func rmsNormAVX2(dst, src, w *float32, d int, eps float32) { panic("unreachable") }
func addAVX2(x, y *float32, n int)                         { panic("unreachable") }
func widenF16AVX2(dst *float32, src *uint16, n int)        { panic("unreachable") }
func narrowF16AVX2(dst *uint16, src *float32, n int)       { panic("unreachable") }

// The dispatch (never called: haveSIMD is false).

func simdExp(x *float32, n int, mx float32) float32 { panic("unreachable") }
func simdSwiglu(gate, up *float32, n int)           { panic("unreachable") }
func simdWsumG(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool) {
	panic("unreachable")
}
func simdMax(x *float32, n int) float32                    { panic("unreachable") }
func simdRMSNorm(dst, src, w *float32, d int, eps float32) { panic("unreachable") }
func simdAdd(x, y *float32, n int)                         { panic("unreachable") }
func simdWiden(dst *float32, src *uint16, n int)           { panic("unreachable") }
func simdNarrow(dst *uint16, src *float32, n int)          { panic("unreachable") }
