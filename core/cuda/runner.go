// Package cuda is the CUDA backend: core/model's forward pass on an NVIDIA
// GPU, behind model.Runner, so the engine's batching, speculation, sampling
// and verification (core/engine) run unchanged on top of it.
//
// Nothing links CUDA: the driver and NVRTC are opened at run time (package
// cu, package nvrtc), and the kernels (package kernels) are compiled for the
// device's exact architecture when a runtime is created, then cached.
//
// The files read top to bottom: device.go (driver, compiler, kernels),
// weights.go (upload), runner.go (load, buffers, the pass), cache.go (the
// device KV cache), args.go (each kernel's argument struct).
package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
)

type layer struct {
	attnNorm, ffnNorm cu.DevicePtr
	qkv               []piece      // Q, K and V in one output row
	bqkv              cu.DevicePtr // their biases, 0 without
	wo                dmat
	gateUp            []piece // gate and up in one output row
	wDown             dmat
}

// Runner is a model on one GPU. Like model.Model, it is used from one
// goroutine at a time.
type Runner struct {
	dev     *device
	cfg     model.Config
	tokEmbd dmat
	output  dmat
	outNorm cu.DevicePtr
	layers  []layer
	freq    []float64 // RoPE frequencies; the host computes each pass's cos and sin

	plan   model.Plan
	bufs   buffers
	graphs map[graphKey]*cu.GraphExec
	eager  bool // launch kernel by kernel instead of replaying graphs
	// groupFrom overrides kernels.AttentionGroupFrom when not 0.
	groupFrom int
	// vecMax overrides kernels.MatVecMax when not 0.
	vecMax int
	allocs map[cu.DevicePtr]bool // every device allocation, freed by Close
}

// buffers are the pass's activations, sized for capTok tokens, capRows
// logits rows and capExtra extra visibility entries; grown on demand.
type buffers struct {
	capTok, capRows, capExtra int
	x, qkv, gu                cu.DevicePtr // float32: residual stream, [q|k|v] rows, [gate|up] rows
	xq, xds                   cu.DevicePtr // quantized matmul input
	logits                    cu.DevicePtr
	keys                      cu.DevicePtr // u64 [capRows]: a greedy pass's argmax keys
	pass                      cu.DevicePtr // Pass, Tok[capTok], extra[capExtra], rows[capRows]
	host                      *cu.HostBuf  // pinned staging of pass
	logitsHost                *cu.HostBuf
}

// Load uploads the model of a GGUF file (Llama and Qwen2 families; Q4_1,
// Q5_0, Q8_0, Q4_K and Q6_K matrices in any mix, as a Q4_K_M file has them;
// an F32 embedding table if untied) to the GPU chosen by o.
func Load(f *gguf.File, o Options) (*Runner, error) { return LoadWithProgress(f, o, nil) }

// LoadWithProgress is Load reporting the share of the file's tensor bytes
// uploaded (0 to 1) after each tensor, when progress is not nil.
func LoadWithProgress(f *gguf.File, o Options, progress func(float64)) (*Runner, error) {
	cfg, err := model.ReadConfig(f)
	if err != nil {
		return nil, status.Errorf(status.Model, "%v", err)
	}
	if err := checkShape(cfg); err != nil {
		return nil, status.Errorf(status.Model, "%v", err)
	}
	dev, err := openDevice(o)
	if err != nil {
		return nil, status.Errorf(status.Backend, "cuda backend: %v", err)
	}
	r := &Runner{dev: dev, cfg: cfg, allocs: map[cu.DevicePtr]bool{}}
	leave, err := dev.ctx.Enter()
	if err != nil {
		dev.close()
		return nil, status.Errorf(status.Backend, "cuda backend: %v", err)
	}
	defer leave()
	// The norm stages a row in shared memory: past 48 KiB (an embedding
	// of 12,288) the kernel has to ask for it.
	if err := dev.k.rmsnormQuant.SetMaxDynamicShared(kernels.NormSharedBytes(cfg.Embd)); err != nil {
		dev.close()
		return nil, status.Errorf(status.Backend, "cuda backend: rows of %d floats for the norm: %v", cfg.Embd, err)
	}
	ld := &loader{f: f, r: r, progress: progress}
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	r.tokEmbd = ld.matrix("token_embd.weight", cfg.Embd, cfg.Vocab, true)
	r.outNorm = ld.vector("output_norm.weight", cfg.Embd)
	if cfg.TiedOutput {
		r.output = r.tokEmbd
		if r.output.typ.String() == "F32" {
			ld.err = fmt.Errorf("cuda: the tied output head is F32, which has no CUDA matmul kernel yet")
		}
	} else {
		r.output = ld.matrix("output.weight", cfg.Embd, cfg.Vocab, false)
	}
	for i := 0; i < cfg.Layers && ld.err == nil; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		qkvRows := []int{qDim, kvDim, kvDim}
		r.layers = append(r.layers, layer{
			attnNorm: ld.vector(p+"attn_norm.weight", cfg.Embd),
			qkv:      ld.fused([]string{p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}, cfg.Embd, qkvRows),
			bqkv:     ld.fusedBias([]string{p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"}, qkvRows),
			wo:       ld.matrix(p+"attn_output.weight", qDim, cfg.Embd, false),
			ffnNorm:  ld.vector(p+"ffn_norm.weight", cfg.Embd),
			gateUp:   ld.fused([]string{p + "ffn_gate.weight", p + "ffn_up.weight"}, cfg.Embd, []int{cfg.FF, cfg.FF}),
			wDown:    ld.matrix(p+"ffn_down.weight", cfg.FF, cfg.Embd, false),
		})
	}
	r.freq = model.RopeFrequencies(cfg)
	if ld.err != nil {
		r.closeLocked()
		dev.close()
		return nil, status.Errorf(status.Model, "%v", ld.err)
	}
	return r, nil
}

// checkShape refuses shapes the kernels are not written for.
func checkShape(c model.Config) error {
	if x := c.Extras(); len(x) > 0 {
		return fmt.Errorf("cuda: this %s model needs what the GPU kernels do not run yet (%s); use the cpu backend", c.Arch, strings.Join(x, ", "))
	}
	switch {
	case c.HeadDim%32 != 0 || c.HeadDim > kernels.MaxHeadDim:
		return fmt.Errorf("cuda: head dimension %d: the attention kernel takes multiples of 32 up to %d", c.HeadDim, kernels.MaxHeadDim)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("cuda: %d heads do not share %d kv heads evenly", c.Heads, c.KVHeads)
	case c.Embd%32 != 0 || c.FF%32 != 0:
		return fmt.Errorf("cuda: embedding %d and feed-forward %d must be multiples of 32", c.Embd, c.FF)
	}
	return nil
}

// SetGraphs chooses graph replay (the default) or one launch per kernel:
// the same kernels with the same arguments either way, so the same logits.
func (r *Runner) SetGraphs(on bool) { r.eager = !on }

// SetDependentLaunch turns programmatic dependent launch on or off (where
// the device has it): the same kernels and arguments, so the same logits.
func (r *Runner) SetDependentLaunch(on bool) {
	on = on && r.dev.ctx.CanLaunchDependent()
	if on != r.dev.dependent {
		r.dev.stream.Sync()
		r.dropGraphs()
		r.dev.dependent = on
	}
}

// SetAttentionGroupFrom sets the fewest tokens of a pass whose attention
// blocks take all of a kv head's query heads (for benchmarks; 0 restores
// kernels.AttentionGroupFrom). The same logits either way.
func (r *Runner) SetAttentionGroupFrom(n int) { r.retune(&r.groupFrom, n) }

func (r *Runner) attentionGroupFrom() int { return orDefault(r.groupFrom, kernels.AttentionGroupFrom) }

// SetMatVecMax sets the most tokens (or head rows) a product runs on the
// mat-vec for, past which the tensor cores take it (for benchmarks; 0
// restores kernels.MatVecMax). The same logits either way.
func (r *Runner) SetMatVecMax(n int) { r.retune(&r.vecMax, n) }

func (r *Runner) matVecMax() int { return orDefault(r.vecMax, kernels.MatVecMax) }

// retune sets a pass-shape override to n, dropping the graphs captured
// with the old value (their kernels and grids follow it).
func (r *Runner) retune(override *int, n int) {
	if n != *override {
		r.dev.stream.Sync()
		r.dropGraphs()
		*override = n
	}
}

// orDefault is an override where set (above 0), else the default.
func orDefault(override, def int) int {
	if override > 0 {
		return override
	}
	return def
}

// Device says which GPU runs the model and where its libraries came from.
func (r *Runner) Device() string { return r.dev.where }

func (r *Runner) Config() model.Config { return r.cfg }

func (r *Runner) alloc(n int) (cu.DevicePtr, error) {
	p, err := r.dev.ctx.Alloc(max(n, 1))
	if err == nil {
		r.allocs[p] = true
	}
	return p, err
}

func (r *Runner) free(p cu.DevicePtr) {
	if p != 0 && r.allocs[p] {
		r.dev.ctx.Free(p)
		delete(r.allocs, p)
	}
}

// NewCache reserves a device cache for one sequence of up to ctx tokens.
func (r *Runner) NewCache(ctx int) (model.Cache, error) { return r.newCache(ctx, r.cfg.Layers) }

// NewPrefixCache reserves a cache of the first layers (the early exit).
func (r *Runner) NewPrefixCache(ctx, layers int) (model.Cache, error) { return r.newCache(ctx, layers) }

func (r *Runner) newCache(ctx, layers int) (model.Cache, error) {
	if ctx < 1 || layers < 1 || layers > r.cfg.Layers {
		return nil, fmt.Errorf("cuda: cache of %d positions over %d layers", ctx, layers)
	}
	leave, err := r.dev.ctx.Enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	size := layers * r.cfg.KVHeads * ctx * r.cfg.HeadDim * 2
	c := &Cache{r: r, layers: layers, cap: ctx}
	if c.k, err = r.alloc(size); err != nil {
		return nil, err
	}
	if c.v, err = r.alloc(size); err != nil {
		r.free(c.k)
		return nil, err
	}
	return c, nil
}

// Close frees every device allocation, the kernels and the context.
func (r *Runner) Close() error {
	if r.dev == nil {
		return nil
	}
	if leave, err := r.dev.ctx.Enter(); err == nil {
		r.closeLocked()
		leave()
	}
	r.dev.close()
	r.dev = nil
	return nil
}

func (r *Runner) closeLocked() {
	r.dev.stream.Sync()
	r.dropGraphs()
	for p := range r.allocs {
		r.dev.ctx.Free(p)
	}
	r.allocs = map[cu.DevicePtr]bool{}
	for _, h := range []*cu.HostBuf{r.bufs.host, r.bufs.logitsHost} {
		if h != nil {
			h.Free()
		}
	}
	r.bufs = buffers{}
}

// ensure grows the pass buffers to hold n tokens, rows logits rows and
// extra visibility entries.
func (r *Runner) ensure(n, rows, extra int) error {
	b := &r.bufs
	if n <= b.capTok && rows <= b.capRows && extra <= b.capExtra {
		return nil
	}
	c := r.cfg
	capTok, capRows, capExtra := max(b.capTok, 64), max(b.capRows, 16), max(b.capExtra, 1024)
	for capTok < n {
		capTok *= 2
	}
	for capRows < rows {
		capRows *= 2
	}
	for capExtra < extra {
		capExtra *= 2
	}
	r.dev.stream.Sync()
	r.dropGraphs()
	for _, p := range []cu.DevicePtr{b.x, b.qkv, b.gu, b.xq, b.xds, b.logits, b.keys, b.pass} {
		r.free(p)
	}
	for _, h := range []*cu.HostBuf{b.host, b.logitsHost} {
		if h != nil {
			h.Free()
		}
	}
	*b = buffers{capTok: capTok, capRows: capRows, capExtra: capExtra}
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	maxCols := max(c.Embd, qDim, c.FF)
	var err error
	for _, a := range []struct {
		p *cu.DevicePtr
		n int
	}{
		{&b.x, capTok * c.Embd * 4}, {&b.qkv, capTok * (qDim + 2*kvDim) * 4}, {&b.gu, capTok * 2 * c.FF * 4},
		{&b.xq, capTok * maxCols}, {&b.xds, capTok * maxCols / 32 * 4},
		{&b.logits, capRows * c.Vocab * 4}, {&b.keys, capRows * 8}, {&b.pass, r.passBytes()},
	} {
		if *a.p, err = r.alloc(a.n); err != nil {
			return err
		}
	}
	if b.host, err = r.dev.ctx.HostAlloc(r.passBytes()); err != nil {
		return err
	}
	b.logitsHost, err = r.dev.ctx.HostAlloc(capRows * c.Vocab * 4)
	return err
}

// The pass buffer's layout.
func (r *Runner) passBytes() int {
	return r.rotOff() + 4*r.cfg.HeadDim*r.bufs.capTok
}
func (r *Runner) toksOff() int  { return 16 }
func (r *Runner) extraOff() int { return 16 + kernels.TokBytes*r.bufs.capTok }
func (r *Runner) rowsOff() int  { return r.extraOff() + 4*r.bufs.capExtra }
func (r *Runner) rotOff() int   { return (r.rowsOff() + 4*r.bufs.capRows + 7) &^ 7 }

// writePass fills the pinned staging copy of the pass: the header, a Tok
// per token (its cache, committed length, scratch index and visibility),
// the extra entries and the logits rows.
func (r *Runner) writePass(b *model.Batch) { r.packPass(r.bufs.host.Bytes(), b) }

// packPass lays the pass out in h (passBytes long) from r.plan and b.
func (r *Runner) packPass(h []byte, b *model.Batch) {
	p := &r.plan
	le := binary.LittleEndian
	le.PutUint32(h[0:], uint32(len(p.Tok)))
	le.PutUint32(h[4:], uint32(len(p.Rows)))
	for i, t := range p.Tok {
		c := p.Seqs[t.Seq].Cache.(*Cache)
		o := r.toksOff() + kernels.TokBytes*i
		le.PutUint64(h[o:], uint64(c.k))
		le.PutUint64(h[o+8:], uint64(c.v))
		for j, v := range []int{c.n, c.cap, t.K, t.Span, t.ExtraLo, t.ExtraHi, b.Pos[i], int(b.Tokens[i])} {
			le.PutUint32(h[o+16+4*j:], uint32(int32(v)))
		}
	}
	for i, e := range p.Extra {
		le.PutUint32(h[r.extraOff()+4*i:], uint32(e))
	}
	for i, row := range p.Rows {
		le.PutUint32(h[r.rowsOff()+4*i:], uint32(row))
	}
	// Each token's rotation, as the CPU pass computes it (ropeTables).
	rot, half := h[r.rotOff():], len(r.freq)
	for i, pos := range b.Pos {
		for j, f := range r.freq {
			sn, cs := math.Sincos(float64(pos) * f)
			o := 8 * (i*half + j)
			le.PutUint32(rot[o:], math.Float32bits(float32(cs)))
			le.PutUint32(rot[o+4:], math.Float32bits(float32(sn)))
		}
	}
}

// Forward runs the model over b on the GPU: Model.Forward's contract.
func (r *Runner) Forward(b *model.Batch, logits []float32) error {
	return r.forward(b, logits, nil, len(r.layers))
}

// ForwardArgmax runs the model over b and hands back the argmax of each
// logits row (model.ArgmaxRunner): the head's product kernel keeps only
// each row's argmax, so no logits are written and 8 bytes a row come back
// instead of Vocab floats.
func (r *Runner) ForwardArgmax(b *model.Batch, ids []int32) error {
	return r.forward(b, nil, ids, len(r.layers))
}

// ForwardPrefix is Forward through the first layers only (the early exit).
func (r *Runner) ForwardPrefix(b *model.Batch, logits []float32, layers int) error {
	if layers < 1 || layers > len(r.layers) {
		return fmt.Errorf("cuda: ForwardPrefix over %d layers of %d", layers, len(r.layers))
	}
	return r.forward(b, logits, nil, layers)
}

// forward runs the first layers over b and hands back the logits rows, or
// with ids non-nil each row's argmax alone.
func (r *Runner) forward(b *model.Batch, logits []float32, ids []int32, layers int) error {
	if r.dev == nil {
		return fmt.Errorf("cuda: runner is closed")
	}
	p := &r.plan
	room := len(logits)
	if ids != nil {
		room = len(ids) * r.cfg.Vocab
	}
	if err := p.Build(b, r.cfg.Vocab, room); err != nil {
		return err
	}
	for i, q := range p.Seqs {
		c, ok := q.Cache.(*Cache)
		if !ok || c == nil || c.r != r {
			return fmt.Errorf("cuda: sequence %d of the batch has a %T, not a cache of this runner", i, q.Cache)
		}
		if c.layers < layers {
			return fmt.Errorf("cuda: sequence %d's cache holds %d layers, the pass runs %d", i, c.layers, layers)
		}
	}
	n, rows := len(p.Tok), len(p.Rows)
	if n == 0 {
		return nil
	}
	leave, err := r.dev.ctx.Enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := r.ensure(n, rows, len(p.Extra)); err != nil {
		return err
	}
	if err := p.Reserve(); err != nil {
		return err
	}
	r.writePass(b)
	d := r.dev
	if err := d.ctx.HtoDAsync(r.bufs.pass, r.bufs.host, 0, r.passBytes(), d.stream); err != nil {
		return err
	}
	argmax := ids != nil && rows > 0
	if r.eager {
		err = r.launchPass(n, rows, layers, argmax)
	} else {
		err = r.runGraph(n, rows, layers, argmax)
	}
	if err != nil {
		return err
	}
	switch {
	case argmax:
		if err := d.ctx.DtoHAsync(r.bufs.logitsHost, 0, r.bufs.keys, rows*8, d.stream); err != nil {
			return err
		}
	case rows > 0:
		nb := rows * r.cfg.Vocab * 4
		if err := d.ctx.DtoHAsync(r.bufs.logitsHost, 0, r.bufs.logits, nb, d.stream); err != nil {
			return err
		}
	}
	if d.prof != nil {
		if err := d.prof.collect(d); err != nil {
			return err
		}
	}
	if err := d.stream.Sync(); err != nil {
		return err
	}
	if argmax {
		src := r.bufs.logitsHost.Bytes()
		for i := range rows {
			ids[i] = argmaxOfKey(binary.LittleEndian.Uint64(src[8*i:]))
		}
	} else if rows > 0 {
		// The pinned buffer holds little-endian float32s, as the host does:
		// one memmove, not a conversion per float (a 64-row verify pass
		// reads back 12 MB).
		src := r.bufs.logitsHost.Bytes()
		copy(logits[:rows*r.cfg.Vocab], unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), rows*r.cfg.Vocab))
	}
	return nil
}

// argmaxOfKey is the logits index a row's argmax key (kernels.cu,
// argmax_key) holds: the complement of its low half, or 0 for a row with
// no key (nothing above -inf).
func argmaxOfKey(k uint64) int32 {
	if k == 0 {
		return 0
	}
	return int32(^uint32(k))
}
