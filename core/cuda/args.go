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
	x, w, qs, ds, pass, rows, clear cu.DevicePtr
	dim                             int32
	eps                             float32
}

type quantArgs struct {
	x, qs, ds, pass cu.DevicePtr
	dim, swiglu     int32
}

type matVecArgs struct {
	out, res, bias, wq, ws, xq, xds, pass, src, nw, amax cu.DevicePtr
	rows, cols, head, ld, pro                            int32
	eps                                                  float32
}

type ropeArgs struct {
	qkv, rot, pass, toks                 cu.DevicePtr
	heads, kvheads, hd, neox, layer, pad int32
}

type attnArgs struct {
	qs, ds, q, pass, toks, extra, rot cu.DevicePtr
	heads, kvheads, hd, layer         int32
	scale                             float32
	rope, neox, pad                   int32
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
func (a *normArgs) fields() []any {
	return []any{a.x, a.w, a.qs, a.ds, a.pass, a.rows, a.clear, a.dim, a.eps}
}
func (a *quantArgs) fields() []any {
	return []any{a.x, a.qs, a.ds, a.pass, a.dim, a.swiglu}
}
func (a *matVecArgs) fields() []any {
	return []any{a.out, a.res, a.bias, a.wq, a.ws, a.xq, a.xds, a.pass, a.src, a.nw, a.amax, a.rows, a.cols, a.head, a.ld, a.pro, a.eps}
}
func (a *ropeArgs) fields() []any {
	return []any{a.qkv, a.rot, a.pass, a.toks, a.heads, a.kvheads, a.hd, a.neox, a.layer, a.pad}
}
func (a *attnArgs) fields() []any {
	return []any{a.qs, a.ds, a.q, a.pass, a.toks, a.extra, a.rot, a.heads, a.kvheads, a.hd, a.layer, a.scale, a.rope, a.neox, a.pad}
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

// Prologue modes of the mat-vec (MatVecArgs.pro in kernels.cu).
const (
	proNone   = 0 // activations already quantized in xq/xds
	proNorm   = 1 // RMSNorm of src rows, quantized
	proSwiGLU = 2 // silu(gate)·up of src rows, quantized
)

// proBytes is the dynamic shared memory a mat-vec prologue takes over
// rows of cols activations: MatVecTokens rows of int8s and their half2s.
func proBytes(cols int) int { return kernels.MatVecTokens * (cols + cols/32*4) }

// maxProBytes keeps the prologue under the dynamic shared memory a block
// gets without asking for more (48 KiB); wider rows take the separate
// quantization kernel.
const maxProBytes = 48 << 10

// launchPass queues the whole forward pass of n tokens (rows of which want
// logits) over the first layers, and with argmax each row's argmax key
// (kernels.cu, argmax_key) into keys instead of the logits: the final norm
// zeroes the keys and the head's product kernel raises them.
//
// A layer is 9 kernels, and fewer where the pass is small enough: up to
// kernels.MatVecMax tokens the mat-vecs normalise or gate their own
// input (their prologue) instead of the norm and quant kernels, and a
// one-token pass rotates and stores its K and V inside the attention
// kernel. Decoding one token is then 5 kernels a layer: a decode step's
// cost is mostly the latency of its kernels, not their bytes.
func (r *Runner) launchPass(n, rows, layers int, argmax bool) error {
	c, b, d := &r.cfg, &r.bufs, r.dev
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	pass := b.pass
	toks := pass.Add(r.toksOff())
	var err error
	var w cu.ArgWriter
	// Every kernel after the first (embed, which follows the pass's copy)
	// may launch while the one before it runs (device.dependent).
	run := func(f *cu.Function, grid, block [3]uint32, smem int, a kernelArgs) {
		if err == nil {
			err = d.launchShared(f, grid, block, smem, pack(&w, a), f != d.k.embed)
		}
	}
	norm := func(src, weight, gather, clear cu.DevicePtr, nr int) {
		run(d.k.rmsnormQuant, [3]uint32{uint32(nr), 1, 1}, [3]uint32{128, 1, 1}, kernels.NormSharedBytes(c.Embd),
			&normArgs{x: src, w: weight, qs: b.xq, ds: b.xds, pass: pass, rows: gather, clear: clear, dim: int32(c.Embd), eps: c.RMSEps})
	}
	// input says how the products of a layer get their activations: in
	// xq/xds (pro = proNone), or made by the mat-vec's prologue from src.
	type input struct {
		pro     int32
		src, nw cu.DevicePtr
	}
	vecMax := r.matVecMax()
	small := n <= vecMax // the mat-vec has a prologue
	// matvec writes W·x (+ bias) (+ res) into rows of ld floats of out,
	// with the kernel of W's type (the loader admits only those): the
	// mat-vec for a few tokens, the tensor cores for more.
	// The head (head) counts the pass's logits rows, not its tokens; with
	// amax it keeps only each row's argmax key.
	matvec := func(out, res, bias cu.DevicePtr, m *dmat, ld, nt int, head bool, amax cu.DevicePtr, in input) {
		a := &matVecArgs{out: out, res: res, bias: bias, wq: m.qs, ws: m.scales, xq: b.xq, xds: b.xds, pass: pass,
			src: in.src, nw: in.nw, amax: amax, rows: int32(m.rows), cols: int32(m.cols), ld: int32(ld), pro: in.pro, eps: c.RMSEps}
		if head {
			a.head = 1
		}
		f, grid, block := d.k.mul(m.typ, m.rows, nt, vecMax, amax != 0)
		smem := 0
		if in.pro != proNone {
			smem = proBytes(m.cols)
		}
		run(f, grid, block, smem, a)
	}
	// fused runs a fused product's pieces into rows of ld floats of out.
	fused := func(out, bias cu.DevicePtr, ps []piece, ld int, in input) {
		for _, p := range ps {
			pb := bias
			if pb != 0 {
				pb = pb.Add(4 * p.off)
			}
			matvec(out.Add(4*p.off), 0, pb, &p.m, ld, n, false, 0, in)
		}
	}
	// normed is the input of a product over the normalised residual
	// stream: the prologue's, or the norm kernel's output.
	normed := func(weight cu.DevicePtr) input {
		if small && proBytes(c.Embd) <= maxProBytes {
			return input{pro: proNorm, src: b.x, nw: weight}
		}
		norm(b.x, weight, 0, 0, n)
		return input{}
	}

	e := &r.tokEmbd
	run(d.k.embed, [3]uint32{uint32(n), 1, 1}, [3]uint32{256, 1, 1}, 0,
		&embedArgs{out: b.x, pass: pass, toks: toks, qs: e.qs, scales: e.scales, typ: int32(e.typ), dim: int32(c.Embd)})
	var neox int32
	if c.RopeNeox {
		neox = 1
	}
	scale := float32(1 / math.Sqrt(float64(c.HeadDim)))
	rot := pass.Add(r.rotOff())
	for li := 0; li < layers; li++ {
		l := &r.layers[li]
		// Attention block: x += Wo · attention(rope(Wq·xn), rope(Wk·xn), Wv·xn)
		// (the attention kernel quantizes its output for Wo).
		fused(b.qkv, l.bqkv, l.qkv, qDim+2*kvDim, normed(l.attnNorm))
		att := &attnArgs{qs: b.xq, ds: b.xds, q: b.qkv, pass: pass, toks: toks, extra: pass.Add(r.extraOff()), rot: rot,
			heads: int32(c.Heads), kvheads: int32(c.KVHeads), hd: int32(c.HeadDim), layer: int32(li), scale: scale, neox: neox}
		if n == 1 {
			att.rope = 1
		} else {
			run(d.k.ropeStore, [3]uint32{uint32(n), ceilDiv((qDim+2*kvDim)/2, 128), 1}, [3]uint32{128, 1, 1}, 0,
				&ropeArgs{qkv: b.qkv, rot: rot, pass: pass, toks: toks,
					heads: int32(c.Heads), kvheads: int32(c.KVHeads), hd: int32(c.HeadDim), neox: neox, layer: int32(li)})
		}
		// Always the same warps (kernels.AttentionWarps): how the keys split
		// between them fixes the order the softmax merges in, and a token's
		// output must not depend on its pass.
		attn, grid, smem := d.k.attentionFor(c, n, r.attentionGroupFrom())
		run(attn, grid, [3]uint32{32 * kernels.AttentionWarps, 1, 1}, smem, att)
		matvec(b.x, b.x, 0, &l.wo, c.Embd, n, false, 0, input{})
		// FFN block: x += Wdown · (silu(Wgate·xn) ⊙ Wup·xn)
		fused(b.gu, 0, l.gateUp, 2*c.FF, normed(l.ffnNorm))
		gated := input{pro: proSwiGLU, src: b.gu}
		if !small || proBytes(c.FF) > maxProBytes {
			run(d.k.quant, [3]uint32{ceilDiv(c.FF/32, 8), uint32(n), 1}, [3]uint32{256, 1, 1}, 0,
				&quantArgs{x: b.gu, qs: b.xq, ds: b.xds, pass: pass, dim: int32(c.FF), swiglu: 1})
			gated = input{}
		}
		matvec(b.x, b.x, 0, &l.wDown, c.Embd, n, false, 0, gated)
	}
	if rows > 0 {
		var keys cu.DevicePtr
		if argmax {
			keys = b.keys
		}
		norm(b.x, r.outNorm, pass.Add(r.rowsOff()), keys, rows)
		matvec(b.logits, 0, 0, &r.output, c.Vocab, rows, true, keys, input{})
	}
	return err
}
