package cuda

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
	"github.com/lmstream/lmstream/core/quant"
)

// Each kernel against its CPU twin in core/quant, on fresh random inputs,
// with the device memory poisoned first so an unwritten output shows.

// kernelRig is a device (its kernels and stream) plus scratch allocations
// freed with it: no model, so the kernel tests need none.
type kernelRig struct {
	t *testing.T
	r *Runner
}

func newRig(t *testing.T) *kernelRig {
	dev, err := openDevice(Options{})
	if err != nil {
		skipOrFail(t, err)
	}
	r := &Runner{dev: dev, allocs: map[cu.DevicePtr]bool{}}
	t.Cleanup(func() { r.Close() })
	t.Logf("device: %s", dev.where)
	leave, err := dev.ctx.Enter()
	require.NoError(t, err)
	t.Cleanup(leave)
	return &kernelRig{t: t, r: r}
}

func (k *kernelRig) upload(b []byte) cu.DevicePtr {
	p, err := k.r.alloc(len(b))
	require.NoError(k.t, err)
	require.NoError(k.t, k.r.dev.ctx.HtoD(p, b))
	return p
}

func (k *kernelRig) poisoned(n int) cu.DevicePtr {
	p, err := k.r.alloc(n)
	require.NoError(k.t, err)
	require.NoError(k.t, k.r.dev.ctx.Memset(p, 0xff, n))
	return p
}

func (k *kernelRig) read(p cu.DevicePtr, n int) []byte {
	require.NoError(k.t, k.r.dev.stream.Sync())
	b := make([]byte, n)
	require.NoError(k.t, k.r.dev.ctx.DtoH(b, p))
	return b
}

// passHeader is a device Pass{n, nrows}.
func (k *kernelRig) passHeader(n, nrows int) cu.DevicePtr {
	var w cu.ArgWriter
	w.I32(int32(n))
	w.I32(int32(nrows))
	return k.upload(w.Bytes())
}

func randFloats(rng *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * scale
	}
	return x
}

// splitQ81 turns CPU Q8_1 blocks (d, s halves, 32 int8s) into the device's
// activation arrays (int8s apart from the half2 (d, s)).
func splitQ81(b []byte) (qs, ds []byte) {
	for i := 0; i+36 <= len(b); i += 36 {
		ds = append(ds, b[i:i+4]...)
		qs = append(qs, b[i+4:i+36]...)
	}
	return qs, ds
}

// TestQuantKernelIsTheCPUQuantizer: the device's activation quantization
// (quant, plain) gives exactly quant.QuantizeQ8_1's bytes.
func TestQuantKernelIsTheCPUQuantizer(t *testing.T) {
	k := newRig(t)
	rng := rand.New(rand.NewSource(3))
	n, dim := 5, 1536
	x := randFloats(rng, n*dim, 3)
	x[7] = 0 // a block with a zero, and one all zero
	for i := 64; i < 96; i++ {
		x[i] = 0
	}
	want := make([]byte, n*dim/32*36)
	quant.QuantizeQ8_1(x, want)
	wq, wds := splitQ81(want)
	qs, ds := k.poisoned(n*dim), k.poisoned(n*dim/32*4)
	var w cu.ArgWriter
	for _, p := range []cu.DevicePtr{k.upload(f32Bytes(x)), qs, ds, k.passHeader(n, 0)} {
		w.Ptr(p)
	}
	w.I32(int32(dim))
	w.I32(0) // plain, not SwiGLU
	require.NoError(t, k.r.dev.launch(k.r.dev.k.quant, [3]uint32{ceilDiv(dim/32, 8), uint32(n), 1}, [3]uint32{256, 1, 1}, w.Bytes()))
	require.Equal(t, wq, k.read(qs, n*dim), "int8 quants")
	require.Equal(t, wds, k.read(ds, n*dim/32*4), "(d, d·Σq) halves")
}

func f32At(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

// TestMatVecMatchesCPUDots: each weight type's mat-vec kernel (Q4_1, Q8_0,
// Q5_0, Q4_K, Q6_K) on realistic (quant.Quantize) and raw random blocks,
// normal and grid activations, over N = 1–8 tokens (one tile), 13 (a
// partial second) and 24 (three), and its tensor-core kernel over N = 9
// to 100 (partial and whole 32-token tiles), 203 rows (a partial block of rows) of
// 768, writing a slice of rows 211 wide (as a fused product's pieces do)
// with bias and residual epilogues, against:
//
//   - the Go twin of the kernel (weights_test.go): the same integer sums,
//     so only the float32 sum's order differs: within 1e-5 of the terms'
//     magnitudes;
//   - quant.MatMul with the pure-Go kernels, on the activations quantized
//     as the CPU quantizes them for the type. For Q4_1, Q5_0 and Q8_0 those
//     are the device's own blocks (1e-5 again); for the K-quants the CPU's
//     are Q8_K (one scale per 256 values), so the two dot products differ by
//     Σ|w|·|x_device − x_cpu| at most, which the test computes per row and
//     adds to the tolerance (on grid activations it is zero).
//
// The columns outside the slice must stay unwritten.
func TestMatVecMatchesCPUDots(t *testing.T) {
	k := newRig(t)
	defer quant.UseSIMD(quant.UseSIMD(false))
	rng := rand.New(rand.NewSource(4))
	rows, cols, ld := 203, 768, 211
	for _, typ := range matVecTypes {
		for _, raw := range []bool{false, true} {
			wraw := randWeights(rng, typ, rows, cols, raw)
			wf := make([]float32, rows*cols)
			require.NoError(t, quant.Dequantize(typ, wraw, wf))
			wq, ws, err := repack(typ, wraw, rows, cols)
			require.NoError(t, err)
			dq, ds := k.upload(wq), k.upload(ws)
			for _, grid := range []bool{false, true} {
				worstTwin, worstCPU := 0.0, 0.0
				for _, run := range []struct {
					n  int
					mm bool // the tensor-core kernel, else the mat-vec
				}{{1, false}, {2, false}, {3, false}, {4, false}, {5, false}, {6, false}, {7, false}, {8, false},
					{13, false}, {24, false}, {5, true}, {8, true}, {9, true}, {13, true}, {24, true}, {40, true}, {64, true}, {100, true}} {
					n := run.n
					x := randFloats(rng, n*cols, 1)
					if grid {
						x = gridActs(rng, n, cols)
					}
					// The CPU's activations and product.
					at := quant.ActType(typ)
					rb, _ := at.RowBytes(cols)
					xc := make([]byte, n*rb)
					quant.QuantizeActs(at, x, n, cols, xc)
					xcf := make([]float32, n*cols)
					require.NoError(t, quant.Dequantize(at, xc, xcf))
					cpu := make([]float32, n*rows)
					quant.MatMul(typ, wraw, rows, cols, xc, n, cpu, nil)
					// The device's.
					var aq, ads []byte
					tokActs := make([]acts, n)
					for tk := range tokActs {
						tokActs[tk] = deviceActs(x[tk*cols : (tk+1)*cols])
						aq, ads = append(aq, tokActs[tk].q...), append(ads, tokActs[tk].ds...)
					}
					bias, res := randFloats(rng, rows, 1), randFloats(rng, n*ld, 1)
					out := k.poisoned(n * ld * 4)
					head := n%2 == 1 // the head's matvec counts the pass's logits rows
					a := &matVecArgs{out: out, res: k.upload(f32Bytes(res)), bias: k.upload(f32Bytes(bias)), wq: dq, ws: ds,
						xq: k.upload(aq), xds: k.upload(ads), pass: k.passHeader(n, 0), rows: int32(rows), cols: int32(cols), ld: int32(ld)}
					if head {
						a.head, a.pass = 1, k.passHeader(64, n)
					}
					var w cu.ArgWriter
					f, grid, block := k.r.dev.k.mul(typ, rows, n)
					if !run.mm {
						f, grid = k.r.dev.k.matvec[typ], [3]uint32{ceilDiv(rows, kernels.MatVecWarps), ceilDiv(n, kernels.MatVecTokens), 1}
						block = [3]uint32{32 * kernels.MatVecWarps, 1, 1}
					}
					require.NoError(t, k.r.dev.launch(f, grid, block, pack(&w, a)))
					got := k.read(out, n*ld*4)
					for tk := 0; tk < n; tk++ {
						for r := 0; r < ld; r++ {
							g := f32At(got, tk*ld+r)
							if r >= rows {
								require.Equal(t, uint32(0xffffffff), math.Float32bits(g), "%s: token %d column %d outside the slice was written", typ, tk, r)
								continue
							}
							v, mag := twinRow(typ, wq, ws, r, cols, tokActs[tk])
							extra := float64(bias[r]) + float64(res[tk*ld+r])
							mag += math.Abs(float64(bias[r])) + math.Abs(float64(res[tk*ld+r]))
							bound := 0.0
							for e := 0; e < cols; e++ {
								xd := tokActs[tk].d(e/32) * float64(tokActs[tk].x(e))
								bound += math.Abs(float64(wf[r*cols+e])) * math.Abs(xd-float64(xcf[tk*cols+e]))
							}
							dTwin := math.Abs(float64(g) - (v + extra))
							dCPU := math.Abs(float64(g) - (float64(cpu[tk*rows+r]) + extra))
							worstTwin, worstCPU = max(worstTwin, dTwin/mag), max(worstCPU, dCPU/(mag+bound))
							require.LessOrEqual(t, dTwin, 1e-5*mag, "%s (%s) raw=%v grid=%v n=%d token %d row %d: %g, twin %g",
								typ, f.Name(), raw, grid, n, tk, r, g, v+extra)
							require.LessOrEqual(t, dCPU, 1e-5*mag+bound, "%s (%s) raw=%v grid=%v n=%d token %d row %d: %g, CPU %g (activation bound %g)",
								typ, f.Name(), raw, grid, n, tk, r, g, float64(cpu[tk*rows+r])+extra, bound)
						}
					}
				}
				t.Logf("%s raw=%v grid=%v: worst |Δ| against the twin %.2g of the terms' magnitudes, against quant.MatMul %.2g of magnitudes + activation bound",
					typ, raw, grid, worstTwin, worstCPU)
			}
		}
	}
}

// TestEmbedMatchesDequantize: the embed kernel gathers token rows of every
// embedding type bit for bit as quant.Dequantize expands them (the kernel
// rounds each product as Go does, with no fused multiply-add).
func TestEmbedMatchesDequantize(t *testing.T) {
	k := newRig(t)
	rng := rand.New(rand.NewSource(5))
	vocab, dim := 37, 768
	ids := []int{0, 36, 5, 5, 17, 1, 30}
	for _, typ := range append([]quant.Type{quant.F32}, matVecTypes...) {
		for _, raw := range []bool{false, true} {
			if typ == quant.F32 && raw {
				continue
			}
			var table []byte
			if typ == quant.F32 {
				table = f32Bytes(randFloats(rng, vocab*dim, 1))
			} else {
				table = randWeights(rng, typ, vocab, dim, raw)
			}
			want := make([]float32, vocab*dim)
			require.NoError(t, quant.Dequantize(typ, table, want))
			qs, sc, err := repack(typ, table, vocab, dim)
			require.NoError(t, err)
			var scales cu.DevicePtr
			if len(sc) > 0 {
				scales = k.upload(sc)
			}
			toks := make([]byte, kernels.TokBytes*len(ids))
			for i, id := range ids {
				binary.LittleEndian.PutUint32(toks[kernels.TokBytes*i+44:], uint32(id)) // Tok.id
			}
			out := k.poisoned(len(ids) * dim * 4)
			var w cu.ArgWriter
			a := &embedArgs{out: out, pass: k.passHeader(len(ids), 0), toks: k.upload(toks), qs: k.upload(qs), scales: scales,
				typ: int32(typ), dim: int32(dim)}
			require.NoError(t, k.r.dev.launch(k.r.dev.k.embed, [3]uint32{uint32(len(ids)), 1, 1}, [3]uint32{256, 1, 1}, pack(&w, a)))
			got := k.read(out, len(ids)*dim*4)
			for i, id := range ids {
				for e := 0; e < dim; e++ {
					require.Equal(t, math.Float32bits(want[id*dim+e]), math.Float32bits(f32At(got, i*dim+e)),
						"%s raw=%v token %d element %d", typ, raw, id, e)
				}
			}
		}
	}
}
