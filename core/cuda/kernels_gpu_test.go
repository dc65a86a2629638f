package cuda

import (
	"bytes"
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

// product runs kernel kind of weight type typ over rows rows and n tokens
// with arguments a (with a.amax set, the kernel's argmax variant) and
// reads back a.out (n rows of a.ld floats).
func (k *kernelRig) product(kind productKind, typ quant.Type, rows, n int, a *matVecArgs) []byte {
	grid, block := kind.launch(rows, n)
	var w cu.ArgWriter
	require.NoError(k.t, k.r.dev.launch(k.r.dev.k.product(kind, typ, a.amax != 0), grid, block, pack(&w, a)))
	return k.read(a.out, n*int(a.ld)*4)
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
// partial second) and 24 (three), and its tensor-core kernels (8- and
// 32-token tiles) over N = 5 to 100
// (partial and whole tiles), 203 rows (a partial block of rows) of
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
// The columns outside the slice must stay unwritten, and every kernel's
// outputs must be the mat-vec's bits (the products' one sum order).
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
					n    int
					kind productKind
				}{{1, matVec}, {2, matVec}, {3, matVec}, {4, matVec}, {5, matVec}, {6, matVec}, {7, matVec}, {8, matVec},
					{13, matVec}, {24, matVec},
					{5, matMul1}, {8, matMul1}, {9, matMul1}, {13, matMul1}, {24, matMul1}, {40, matMul1}, {64, matMul1},
					{5, matMul}, {13, matMul}, {40, matMul}, {64, matMul}, {100, matMul}} {
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
					head := n%2 == 1 // the head's matvec counts the pass's logits rows
					a := &matVecArgs{out: k.poisoned(n * ld * 4), res: k.upload(f32Bytes(res)), bias: k.upload(f32Bytes(bias)), wq: dq, ws: ds,
						xq: k.upload(aq), xds: k.upload(ads), pass: k.passHeader(n, 0), rows: int32(rows), cols: int32(cols), ld: int32(ld)}
					if head {
						a.head, a.pass = 1, k.passHeader(64, n)
					}
					ref := k.product(matVec, typ, rows, n, a)
					f := k.r.dev.k.product(run.kind, typ, false)
					a.out = k.poisoned(n * ld * 4)
					got := k.product(run.kind, typ, rows, n, a)
					require.Equal(t, ref, got, "%s (%s) raw=%v grid=%v n=%d: not the mat-vec's bits", typ, f.Name(), raw, grid, n)
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

// TestHeadKeepsTheArgmax: given argmax keys (amax), every product kernel
// writes no logits and leaves each token's key at the argmax of the logits
// the mat-vec writes without it — of equal logits the lowest row, as the
// CPU's greedy sampler picks: rows 3 and 201 are made copies of token 0's
// best row, in other blocks of rows than it.
func TestHeadKeepsTheArgmax(t *testing.T) {
	k := newRig(t)
	rng := rand.New(rand.NewSource(5))
	rows, cols, n := 203, 768, 40
	for _, typ := range matVecTypes {
		x := randFloats(rng, n*cols, 1)
		var aq, ads []byte
		for tk := 0; tk < n; tk++ {
			a := deviceActs(x[tk*cols : (tk+1)*cols])
			aq, ads = append(aq, a.q...), append(ads, a.ds...)
		}
		xq, xds := k.upload(aq), k.upload(ads)
		args := func(wraw []byte, nt int) *matVecArgs {
			wq, ws, err := repack(typ, wraw, rows, cols)
			require.NoError(t, err)
			return &matVecArgs{out: k.poisoned(nt * rows * 4), wq: k.upload(wq), ws: k.upload(ws), xq: xq, xds: xds,
				pass: k.passHeader(64, nt), rows: int32(rows), cols: int32(cols), head: 1, ld: int32(rows)}
		}
		best := func(logits []byte, tk int) (int, float32) {
			bi, bv := 0, float32(math.Inf(-1))
			for r := 0; r < rows; r++ {
				if v := f32At(logits, tk*rows+r); v > bv {
					bi, bv = r, v
				}
			}
			return bi, bv
		}
		wraw := randWeights(rng, typ, rows, cols, false)
		m, _ := best(k.product(matVec, typ, rows, n, args(wraw, n)), 0)
		rb, err := typ.RowBytes(cols)
		require.NoError(t, err)
		for _, c := range []int{3, 201} {
			copy(wraw[c*rb:(c+1)*rb], wraw[m*rb:(m+1)*rb])
		}
		logits := k.product(matVec, typ, rows, n, args(wraw, n))
		want := make([]int32, n)
		for tk := range want {
			bi, _ := best(logits, tk)
			want[tk] = int32(bi)
		}
		_, top := best(logits, 0)
		require.Equal(t, top, f32At(logits, 201), "%s: row 201 is a copy of token 0's best row", typ)
		require.Equal(t, int32(min(3, m)), want[0], "%s: token 0's best rows tie", typ)
		for _, run := range []struct {
			n    int
			kind productKind
		}{{1, matVec}, {3, matVec}, {8, matVec}, {13, matVec}, {5, matMul1}, {40, matMul1}, {5, matMul}, {13, matMul}, {40, matMul}} {
			a := args(wraw, run.n)
			a.amax = k.upload(make([]byte, 8*run.n))
			out := k.product(run.kind, typ, rows, run.n, a)
			name := k.r.dev.k.product(run.kind, typ, true).Name()
			require.Equal(t, bytes.Repeat([]byte{0xff}, len(out)), out, "%s n=%d: logits written", name, run.n)
			keys := k.read(a.amax, 8*run.n)
			for tk := 0; tk < run.n; tk++ {
				require.Equal(t, want[tk], argmaxOfKey(binary.LittleEndian.Uint64(keys[8*tk:])), "%s n=%d token %d", name, run.n, tk)
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
