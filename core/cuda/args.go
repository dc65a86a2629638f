package cuda

import (
	"math"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
)

// The argument struct of each kernel, field for field in the order of its
// C struct in kernels.cu (TestArgsMatchKernelStructs compares the two). A
// field is a cu.DevicePtr (u64), an int32 (int), a float32 (float) or an
// array of int32.

type embedArgs struct {
	out, pass, toks, qs, scales cu.DevicePtr
	typ, dim                    int32
}

type normArgs struct {
	x, w, qs, ds, pass, rows cu.DevicePtr
	dim                      int32
	eps                      float32
}

type quantArgs struct {
	x, qs, ds, pass cu.DevicePtr
	dim, swiglu     int32
}

type matVecArgs struct {
	out, res, bias, wq, ws, xq, xds, pass cu.DevicePtr
	rows, cols, head, ld                  int32
}

type ropeArgs struct {
	qkv, rot, pass, toks                 cu.DevicePtr
	heads, kvheads, hd, neox, layer, pad int32
}

type attnArgs struct {
	qs, ds, q, pass, toks, extra cu.DevicePtr
	heads, kvheads, hd, layer    int32
	scale                        float32
	pad                          int32
}

type commitArgs struct {
	k, v                             cu.DevicePtr
	cap, hd, blocks, len, moves, pad int32
	src, dst                         [kernels.CommitMoves]int32
}

// fields lists a struct's values in order, for packing and for the layout
// test.
func (a *embedArgs) fields() []any {
	return []any{a.out, a.pass, a.toks, a.qs, a.scales, a.typ, a.dim}
}
func (a *normArgs) fields() []any { return []any{a.x, a.w, a.qs, a.ds, a.pass, a.rows, a.dim, a.eps} }
func (a *quantArgs) fields() []any {
	return []any{a.x, a.qs, a.ds, a.pass, a.dim, a.swiglu}
}
func (a *matVecArgs) fields() []any {
	return []any{a.out, a.res, a.bias, a.wq, a.ws, a.xq, a.xds, a.pass, a.rows, a.cols, a.head, a.ld}
}
func (a *ropeArgs) fields() []any {
	return []any{a.qkv, a.rot, a.pass, a.toks, a.heads, a.kvheads, a.hd, a.neox, a.layer, a.pad}
}
func (a *attnArgs) fields() []any {
	return []any{a.qs, a.ds, a.q, a.pass, a.toks, a.extra, a.heads, a.kvheads, a.hd, a.layer, a.scale, a.pad}
}
func (a *commitArgs) fields() []any {
	return []any{a.k, a.v, a.cap, a.hd, a.blocks, a.len, a.moves, a.pad, a.src, a.dst}
}

type kernelArgs interface{ fields() []any }

// pack lays a's fields out with C alignment.
func pack(w *cu.ArgWriter, a kernelArgs) []byte {
	w.Reset()
	for _, f := range a.fields() {
		switch v := f.(type) {
		case cu.DevicePtr:
			w.Ptr(v)
		case int32:
			w.I32(v)
		case float32:
			w.F32(v)
		case [kernels.CommitMoves]int32:
			for _, x := range v {
				w.I32(x)
			}
		default:
			panic("cuda: unknown argument field type")
		}
	}
	return w.Bytes()
}

// launchPass queues the whole forward pass of n tokens (rows of which want
// logits) over the first layers.
func (r *Runner) launchPass(n, rows, layers int) error {
	c, b, d := &r.cfg, &r.bufs, r.dev
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	pass := b.pass
	toks := pass.Add(r.toksOff())
	var err error
	var w cu.ArgWriter
	run := func(f *cu.Function, grid, block [3]uint32, a kernelArgs) {
		if err == nil {
			err = d.launch(f, grid, block, pack(&w, a))
		}
	}
	norm := func(src, weight, gather cu.DevicePtr, nr int) {
		run(d.k.rmsnormQuant, [3]uint32{uint32(nr), 1, 1}, [3]uint32{uint32(min(c.Embd, 1024)), 1, 1},
			&normArgs{x: src, w: weight, qs: b.xq, ds: b.xds, pass: pass, rows: gather, dim: int32(c.Embd), eps: c.RMSEps})
	}
	// matvec writes W·x (+ bias) (+ res) into rows of ld floats of out,
	// with the kernel of W's type (the loader admits only those).
	matvec := func(out, res, bias cu.DevicePtr, m *dmat, ld, nt int, head bool) {
		a := &matVecArgs{out: out, res: res, bias: bias, wq: m.qs, ws: m.scales, xq: b.xq, xds: b.xds, pass: pass,
			rows: int32(m.rows), cols: int32(m.cols), ld: int32(ld)}
		if head {
			a.head = 1
		}
		run(d.k.matvec[m.typ], [3]uint32{ceilDiv(m.rows, kernels.MatVecWarps), ceilDiv(nt, kernels.MatVecTokens), 1},
			[3]uint32{32 * kernels.MatVecWarps, 1, 1}, a)
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
	run(d.k.embed, [3]uint32{uint32(n), 1, 1}, [3]uint32{256, 1, 1},
		&embedArgs{out: b.x, pass: pass, toks: toks, qs: e.qs, scales: e.scales, typ: int32(e.typ), dim: int32(c.Embd)})
	var neox int32
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
			&ropeArgs{qkv: b.qkv, rot: pass.Add(r.rotOff()), pass: pass, toks: toks,
				heads: int32(c.Heads), kvheads: int32(c.KVHeads), hd: int32(c.HeadDim), neox: neox, layer: int32(li)})
		run(d.k.attention, [3]uint32{uint32(n), uint32(c.Heads), 1}, [3]uint32{32 * 4, 1, 1},
			&attnArgs{qs: b.xq, ds: b.xds, q: b.qkv, pass: pass, toks: toks, extra: pass.Add(r.extraOff()),
				heads: int32(c.Heads), kvheads: int32(c.KVHeads), hd: int32(c.HeadDim), layer: int32(li), scale: scale})
		matvec(b.x, b.x, 0, &l.wo, c.Embd, n, false)
		// FFN block: x += Wdown · (silu(Wgate·xn) ⊙ Wup·xn)
		norm(b.x, l.ffnNorm, 0, n)
		fused(b.gu, 0, l.gateUp, 2*c.FF)
		run(d.k.quant, [3]uint32{ceilDiv(c.FF/32, 8), uint32(n), 1}, [3]uint32{256, 1, 1},
			&quantArgs{x: b.gu, qs: b.xq, ds: b.xds, pass: pass, dim: int32(c.FF), swiglu: 1})
		matvec(b.x, b.x, 0, &l.wDown, c.Embd, n, false)
	}
	if rows > 0 {
		norm(b.x, r.outNorm, pass.Add(r.rowsOff()), rows)
		matvec(b.logits, 0, 0, &r.output, c.Vocab, rows, true)
	}
	return err
}
