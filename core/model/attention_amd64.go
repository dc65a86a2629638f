//go:build !purego

package model

import "golang.org/x/sys/cpu"

// haveAVX512 selects the assembly attention kernels of attention_amd64.s.
var haveAVX512 = cpu.X86.HasAVX512F

//go:noescape
func attnScores(q, k *float32, n, hd int, scale float32, out *float32) float32

//go:noescape
func attnExp(x *float32, n int, mx float32) float32

//go:noescape
func attnWsum(p, v *float32, n, hd int, out *float32)

//go:noescape
func swigluAVX512(gate, up *float32, n int)

//go:noescape
func attnScores16(q *float32, nq, qs int, k *float32, nblk, hd int, scale float32, out *float32, os int, mx *float32, last uint16)

//go:noescape
func attnWsumG(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool)

//go:noescape
func attnMax(x *float32, n int) float32

//go:noescape
func rmsNormAVX512(dst, src, w *float32, d int, eps float32)

//go:noescape
func addAVX512(x, y *float32, n int)

//go:noescape
func widenF16(dst *float32, src *uint16, n int)

//go:noescape
func narrowF16(dst *uint16, src *float32, n int)
