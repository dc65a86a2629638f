package cuda

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/quant"
)

// Each kernel against its CPU twin in core/quant, on fresh random inputs,
// with the device memory poisoned first so an unwritten output shows.

// kernelRig is a loaded model's device (its kernels and stream) plus
// scratch allocations freed with it.
type kernelRig struct {
	t *testing.T
	r *Runner
}

func newRig(t *testing.T) *kernelRig {
	p := loadPair(t)
	leave, err := p.gpu.dev.ctx.Enter()
	require.NoError(t, err)
	t.Cleanup(leave)
	return &kernelRig{t: t, r: p.gpu}
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

// TestMatVecMatchesCPUDots: the mat-vec kernel over 1–13 tokens (a partial
// second tile) against quant's dot products on the same quantized inputs,
// for Q4_1 and Q8_0 weights, with bias and residual epilogues. The integer
// dot products are exact; only the float sum's order differs.
func TestMatVecMatchesCPUDots(t *testing.T) {
	k := newRig(t)
	rng := rand.New(rand.NewSource(4))
	rows, cols := 200, 576
	for _, typ := range []quant.Type{quant.Q4_1, quant.Q8_0} {
		for _, n := range []int{1, 3, 8, 13} {
			wf := randFloats(rng, rows*cols, 0.05)
			rb, _ := typ.RowBytes(cols)
			wraw := make([]byte, rows*rb)
			require.NoError(t, quant.Quantize(typ, wf, wraw))
			x := randFloats(rng, n*cols, 1)
			xq := make([]byte, n*cols/32*36)
			quant.QuantizeQ8_1(x, xq)
			bias, res := randFloats(rng, rows, 1), randFloats(rng, n*rows, 1)

			want := make([]float64, n*rows)
			for ti := 0; ti < n; ti++ {
				xa := xq[ti*cols/32*36 : (ti+1)*cols/32*36]
				var x80 []byte
				if typ == quant.Q8_0 { // Q8_0 activations: the Q8_1 blocks without s
					for b := 0; b < cols/32; b++ {
						x80 = append(x80, xa[b*36:b*36+2]...)
						x80 = append(x80, xa[b*36+4:b*36+36]...)
					}
				}
				for r := 0; r < rows; r++ {
					var d float32
					if typ == quant.Q4_1 {
						d = quant.DotQ4_1Q8_1Generic(wraw[r*rb:(r+1)*rb], xa)
					} else {
						d = quant.DotQ8_0Q8_0Generic(wraw[r*rb:(r+1)*rb], x80)
					}
					want[ti*rows+r] = float64(d) + float64(bias[r]) + float64(res[ti*rows+r])
				}
			}
			wq, ws, err := repack(typ, wraw, rows, cols)
			require.NoError(t, err)
			aq, ads := splitQ81(xq)
			out := k.poisoned(n * rows * 4)
			var w cu.ArgWriter
			for _, p := range []cu.DevicePtr{out, k.upload(f32Bytes(res)), k.upload(f32Bytes(bias)),
				k.upload(wq), k.upload(ws), k.upload(aq), k.upload(ads), k.passHeader(n, 0)} {
				w.Ptr(p)
			}
			for _, v := range []int{rows, cols, int(typ), 0, rows, 0} {
				w.I32(int32(v))
			}
			require.NoError(t, k.r.dev.launch(k.r.dev.k.matvec, [3]uint32{ceilDiv(rows, 4), ceilDiv(n, 8), 1}, [3]uint32{128, 1, 1}, w.Bytes()))
			got := k.read(out, n*rows*4)
			worst := 0.0
			for i, wv := range want {
				g := float64(math.Float32frombits(uint32(got[4*i]) | uint32(got[4*i+1])<<8 | uint32(got[4*i+2])<<16 | uint32(got[4*i+3])<<24))
				worst = max(worst, math.Abs(g-wv)/max(1, math.Abs(wv)))
			}
			t.Logf("%s n=%d: worst relative error %.2g", typ, n, worst)
			require.Less(t, worst, 1e-5, "%s n=%d", typ, n)
		}
	}
}
