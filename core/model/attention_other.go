//go:build !amd64 || purego

package model

const haveAVX512 = false

func attnScores(q, k *float32, n, hd int, scale float32, out *float32) float32 {
	panic("unreachable")
}
func attnExp(x *float32, n int, mx float32) float32   { panic("unreachable") }
func attnWsum(p, v *float32, n, hd int, out *float32) { panic("unreachable") }

func swigluAVX512(gate, up *float32, n int) { panic("unreachable") }

func attnScores16(q *float32, nq, qs int, k *float32, nblk, hd int, scale float32, out *float32, os int, mx *float32, last uint16) {
	panic("unreachable")
}
func attnWsumG(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool) {
	panic("unreachable")
}

func attnMax(x *float32, n int) float32 { panic("unreachable") }

func rmsNormAVX512(dst, src, w *float32, d int, eps float32) { panic("unreachable") }
func addAVX512(x, y *float32, n int)                         { panic("unreachable") }

func widenF16(dst *float32, src *uint16, n int)  { panic("unreachable") }
func narrowF16(dst *uint16, src *float32, n int) { panic("unreachable") }
