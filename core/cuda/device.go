package cuda

import (
	"fmt"
	"os"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
	"github.com/lmstream/lmstream/core/cuda/nvrtc"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/quant"
)

// Options choose the GPU and where its libraries come from.
type Options struct {
	Device      int      // CUDA device ordinal
	NVRTCPath   string   // an NVRTC library or folder; "" searches (see nvrtc.Open)
	DriverPaths []string // libcuda candidates; nil: the usual places
}

// device is one GPU with the kernels loaded and a stream to queue them on.
type device struct {
	ctx    *cu.Context
	stream *cu.Stream
	mod    *cu.Module
	nv     *nvrtc.NVRTC
	where  string // what was loaded from where, for messages
	k      kernelSet
	prof   *profiler // nil unless profiling
	// dependent: a pass launches each kernel after its first with
	// programmatic dependent launch (cu.Context.LaunchDependent), where the
	// driver and device have it and LMSTREAM_CUDA_PDL is not "0".
	dependent bool
}

type kernelSet struct {
	embed, rmsnormQuant, quant, ropeStore, kvCommit *cu.Function
	// attention holds each instance of the attention kernel, by the head
	// dimension it is written for and the query heads a block takes.
	attention map[attentionShape]*cu.Function
	// products holds each weight type's product kernels by kind, each
	// indexed by argmax (0: the plain product, 1: its kernels.Argmax
	// variant).
	products [productKinds][2]map[quant.Type]*cu.Function
}

// productKind is one of a weight type's product kernels.
type productKind int

const (
	matVec       productKind = iota // matvec_<type> (kernels.MatVec)
	matMul1                         // mma1_<type>: 8-token tiles (kernels.MatMul1)
	matMul                          // mma_<type>: 32-token tiles (kernels.MatMul)
	productKinds                    // how many
)

// names is the kernel name of each weight type of the kind.
func (kind productKind) names() map[uint32]string {
	return [productKinds]map[uint32]string{kernels.MatVec, kernels.MatMul1, kernels.MatMul}[kind]
}

// launch is the kind's grid and block over rows output rows and nt tokens.
func (kind productKind) launch(rows, nt int) (grid, block [3]uint32) {
	switch kind {
	case matVec:
		return [3]uint32{ceilDiv(rows, kernels.MatVecWarps), ceilDiv(nt, kernels.MatVecTokens), 1}, [3]uint32{32 * kernels.MatVecWarps, 1, 1}
	case matMul1:
		return [3]uint32{ceilDiv(rows, kernels.MatMulRows), ceilDiv(nt, 8), 1}, [3]uint32{32 * kernels.MatMulWarps, 1, 1}
	default:
		return [3]uint32{ceilDiv(rows, kernels.MatMulRows), ceilDiv(nt, kernels.MatMulTokens), 1}, [3]uint32{32 * kernels.MatMulWarps, 1, 1}
	}
}

// product is the kind's kernel of weight type typ (with argmax, its
// variant for a greedy pass's head).
func (k *kernelSet) product(kind productKind, typ quant.Type, argmax bool) *cu.Function {
	v := 0
	if argmax {
		v = 1
	}
	return k.products[kind][v][typ]
}

// mul picks the product kernel of weight type typ for a pass of nt tokens
// and its launch shape over rows output rows: the mat-vec up to vecMax
// tokens (kernels.MatVecMax by default), the tensor cores beyond; with
// argmax, their variant for a greedy pass's head.
func (k *kernelSet) mul(typ quant.Type, rows, nt, vecMax int, argmax bool) (f *cu.Function, grid, block [3]uint32) {
	kind := matMul
	switch {
	case nt <= vecMax:
		kind = matVec
	case nt <= kernels.MatMul1Max:
		kind = matMul1
	}
	grid, block = kind.launch(rows, nt)
	return k.product(kind, typ, argmax), grid, block
}

// attentionShape picks an attention kernel: the head dimension it is
// written for (one of kernels.AttentionHeadDims) and the query heads of
// one kv head each block takes.
type attentionShape struct{ hd, group int }

// attentionFor is the attention kernel for a pass of n tokens of model c,
// its grid and its dynamic shared memory: a block per (token, query head)
// for passes of fewer than groupFrom tokens, else a block per (token, the
// largest share of a kv head's query heads an instance takes). A token's
// output is the same bits either way (kernels.cu, attention_t).
func (k *kernelSet) attentionFor(c *model.Config, n, groupFrom int) (f *cu.Function, grid [3]uint32, smem int) {
	hd := kernels.AttentionHeadDims[len(kernels.AttentionHeadDims)-1]
	for _, d := range kernels.AttentionHeadDims {
		if c.HeadDim <= d {
			hd = d
			break
		}
	}
	g := 1
	if n >= groupFrom {
		g = attentionGroup(c.Heads / c.KVHeads)
	}
	return k.attention[attentionShape{hd, g}], [3]uint32{uint32(n), uint32(c.Heads / g), 1}, kernels.AttentionSharedBytes(hd)
}

// attentionGroup is the most query heads of a kv head's share (of
// share heads) that one attention block can take: the largest divisor
// of share up to kernels.AttentionMaxGroup.
func attentionGroup(share int) int {
	for g := min(share, kernels.AttentionMaxGroup); g > 1; g-- {
		if share%g == 0 {
			return g
		}
	}
	return 1
}

// openDevice opens the driver and NVRTC, compiles the kernels for the
// device's architecture (or takes them from the cubin cache) and loads them.
func openDevice(o Options) (*device, error) {
	d, driverPath, err := cu.Open(o.DriverPaths)
	if err != nil {
		return nil, err
	}
	ver, err := d.Version()
	if err != nil {
		return nil, err
	}
	ctx, err := cu.NewContext(d, o.Device)
	if err != nil {
		return nil, err
	}
	dev := &device{ctx: ctx}
	fail := func(err error) (*device, error) {
		dev.close()
		return nil, err
	}
	leave, err := ctx.Enter()
	if err != nil {
		return fail(err)
	}
	defer leave()
	if dev.nv, err = nvrtc.OpenForDriver(o.NVRTCPath, ver); err != nil {
		return fail(err)
	}
	cubin, err := dev.nv.CompileCached(kernels.Source, kernels.Name, ctx.Arch(), nil)
	if err != nil {
		return fail(fmt.Errorf("cuda: compiling the kernels for %s: %w", ctx.Arch(), err))
	}
	if dev.mod, err = ctx.LoadModule(cubin); err != nil {
		return fail(err)
	}
	for name, f := range map[string]**cu.Function{
		"embed": &dev.k.embed, "rmsnorm_quant": &dev.k.rmsnormQuant, "quant": &dev.k.quant,
		"rope_store": &dev.k.ropeStore, "kv_commit": &dev.k.kvCommit,
	} {
		if *f, err = dev.mod.Function(name); err != nil {
			return fail(err)
		}
	}
	dev.k.attention = map[attentionShape]*cu.Function{}
	for _, hd := range kernels.AttentionHeadDims {
		for g := 1; g <= kernels.AttentionMaxGroup; g++ {
			f, err := dev.mod.Function(kernels.Attention(hd, g))
			if err == nil {
				err = f.SetMaxDynamicShared(kernels.AttentionSharedBytes(hd))
			}
			if err != nil {
				return fail(err)
			}
			dev.k.attention[attentionShape{hd, g}] = f
		}
	}
	for kind := range productKinds {
		for v, variant := range []func(string) string{func(n string) string { return n }, kernels.Argmax} {
			set := map[quant.Type]*cu.Function{}
			for typ, name := range kind.names() {
				if set[quant.Type(typ)], err = dev.mod.Function(variant(name)); err != nil {
					return fail(err)
				}
			}
			dev.k.products[kind][v] = set
		}
	}
	if dev.stream, err = ctx.NewStream(); err != nil {
		return fail(err)
	}
	dev.dependent = ctx.CanLaunchDependent() && os.Getenv("LMSTREAM_CUDA_PDL") != "0"
	dev.where = fmt.Sprintf("%s (%s, driver %s, %s)", ctx.Name(), ctx.Arch(), driverPath, dev.nv.Found())
	return dev, nil
}

func (d *device) close() {
	if d.ctx == nil {
		return
	}
	if leave, err := d.ctx.Enter(); err == nil {
		if d.stream != nil {
			d.stream.Sync()
			d.stream.Destroy()
		}
		if d.mod != nil {
			d.mod.Unload()
		}
		leave()
	}
	d.ctx.Close()
	d.ctx = nil
}

// launch queues kernel f with the packed argument struct args.
func (d *device) launch(f *cu.Function, grid, block [3]uint32, args []byte) error {
	return d.launchShared(f, grid, block, 0, args, false)
}

// launchShared is launch with smem bytes of dynamic shared memory, and
// with dependent (and d.dependent) a programmatic dependent launch.
func (d *device) launchShared(f *cu.Function, grid, block [3]uint32, smem int, args []byte, dependent bool) error {
	if d.prof != nil {
		if err := d.prof.mark(d, f.Name()); err != nil {
			return err
		}
	}
	if dependent && d.dependent {
		return d.ctx.LaunchDependent(f, grid, block, smem, d.stream, args)
	}
	return d.ctx.Launch(f, grid, block, smem, d.stream, args)
}

func ceilDiv(a, b int) uint32 { return uint32((a + b - 1) / b) }
