package cuda

import (
	"math"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
)

// launchPass queues the whole forward pass of n tokens (rows of which want
// logits) over the first layers. Each launch packs its kernel's argument
// struct in the field order of kernels.cu; cu.Launch checks the size
// against the kernel's own.
func (r *Runner) launchPass(n, rows, layers int) error {
	c, b, d := &r.cfg, &r.bufs, r.dev
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	pass := b.pass
	toks := pass.Add(r.toksOff())
	extra := pass.Add(r.extraOff())
	rowIdx := pass.Add(r.rowsOff())
	var err error
	run := func(f *cu.Function, grid, block [3]uint32, w *cu.ArgWriter) {
		if err == nil {
			err = d.launch(f, grid, block, w.Bytes())
		}
	}
	var w cu.ArgWriter
	args := func(ptrs ...cu.DevicePtr) *cu.ArgWriter {
		w.Reset()
		for _, p := range ptrs {
			w.Ptr(p)
		}
		return &w
	}
	i32 := func(w *cu.ArgWriter, v ...int) *cu.ArgWriter {
		for _, x := range v {
			w.I32(int32(x))
		}
		return w
	}
	norm := func(src, weight cu.DevicePtr, gather cu.DevicePtr, nr int) {
		a := i32(args(src, weight, b.xq, b.xds, pass, gather), c.Embd)
		a.F32(c.RMSEps)
		run(d.k.rmsnormQuant, [3]uint32{uint32(nr), 1, 1}, [3]uint32{256, 1, 1}, a)
	}
	// matvec writes W·x (+ bias) (+ res) into rows of ld floats of out.
	matvec := func(out, res, bias cu.DevicePtr, m *dmat, ld, nt int, head bool) {
		h := 0
		if head {
			h = 1
		}
		a := i32(args(out, res, bias, m.qs, m.scales, b.xq, b.xds, pass), m.rows, m.cols, int(m.typ), h, ld, 0)
		run(d.k.matvec, [3]uint32{ceilDiv(m.rows, kernels.MatVecWarps), ceilDiv(nt, kernels.MatVecTokens), 1}, [3]uint32{32 * kernels.MatVecWarps, 1, 1}, a)
	}
	// fused runs a fused product's pieces into rows of ld floats of out.
	fused := func(out, bias cu.DevicePtr, ps []piece, ld int) {
		for _, p := range ps {
			pb := bias
			if pb != 0 {
				pb = pb.Add(4 * p.off)
			}
			matvec(out.Add(4*p.off), 0, pb, &p.m, ld, n, false)
		}
	}

	e := &r.tokEmbd
	run(d.k.embed, [3]uint32{uint32(n), 1, 1}, [3]uint32{256, 1, 1}, i32(args(b.x, pass, toks, e.qs, e.scales), int(e.typ), c.Embd))
	neox := 0
	if c.RopeNeox {
		neox = 1
	}
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	for li := 0; li < layers; li++ {
		l := &r.layers[li]
		// Attention block: x += Wo · attention(rope(Wq·xn), rope(Wk·xn), Wv·xn)
		// (the attention kernel quantizes its output for Wo).
		norm(b.x, l.attnNorm, 0, n)
		fused(b.qkv, l.bqkv, l.qkv, qDim+2*kvDim)
		run(d.k.ropeStore, [3]uint32{uint32(n), 1, 1}, [3]uint32{128, 1, 1},
			i32(args(b.qkv, pass.Add(r.rotOff()), pass, toks), c.Heads, c.KVHeads, c.HeadDim, neox, li, 0))
		a := i32(args(b.xq, b.xds, b.qkv, pass, toks, extra), c.Heads, c.KVHeads, c.HeadDim, li)
		a.F32(scale)
		a.I32(0)
		run(d.k.attention, [3]uint32{uint32(n), uint32(c.Heads), 1}, [3]uint32{32 * 4, 1, 1}, a)
		matvec(b.x, b.x, 0, &l.wo, c.Embd, n, false)
		// FFN block: x += Wdown · (silu(Wgate·xn) ⊙ Wup·xn)
		norm(b.x, l.ffnNorm, 0, n)
		fused(b.gu, 0, l.gateUp, 2*c.FF)
		run(d.k.quant, [3]uint32{ceilDiv(c.FF/32, 8), uint32(n), 1}, [3]uint32{256, 1, 1}, i32(args(b.gu, b.xq, b.xds, pass), c.FF, 1))
		matvec(b.x, b.x, 0, &l.wDown, c.Embd, n, false)
	}
	if rows > 0 {
		norm(b.x, r.outNorm, rowIdx, rows)
		matvec(b.logits, 0, 0, &r.output, c.Vocab, rows, true)
	}
	return err
}
