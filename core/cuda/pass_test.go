package cuda

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
)

// TestPassPacking checks the pass buffer the kernels read, without a GPU:
// two sequences, one prefilling a chain and one verifying a branching tree,
// packed into the header, the Tok records, the extra visibility entries,
// the logits rows and the rotations, as kernels.cu's structs lay them out.
func TestPassPacking(t *testing.T) {
	r := &Runner{cfg: model.Config{Vocab: 100, HeadDim: 8, RopeTheta: 10000}}
	r.freq = model.RopeFrequencies(r.cfg)
	r.bufs.capTok, r.bufs.capRows, r.bufs.capExtra = 64, 16, 1024
	a := &Cache{r: r, k: 0x1000, v: 0x2000, cap: 32, n: 5, layers: 1}
	c := &Cache{r: r, k: 0x3000, v: 0x4000, cap: 32, n: 0, layers: 1}
	b := &model.Batch{}
	add := func(cache model.Cache, tok int32, pos, parent int, logits bool) {
		b.Tokens, b.Cache, b.Pos = append(b.Tokens, tok), append(b.Cache, cache), append(b.Pos, pos)
		b.Parent, b.Logits = append(b.Parent, parent), append(b.Logits, logits)
	}
	// Sequence a: a tree root (pos 5), children 0 → 1 and 0 → 2.
	add(a, 7, 5, -1, true)
	add(c, 11, 0, -1, false) // sequence c: a 2-token chain
	add(a, 8, 6, 0, true)
	add(c, 12, 1, 1, true)
	add(a, 9, 6, 0, true)
	require.NoError(t, r.plan.Build(b, 100, 4*100))
	h := make([]byte, r.passBytes())
	r.packPass(h, b)
	le := binary.LittleEndian
	i32 := func(o int) int { return int(int32(le.Uint32(h[o:]))) }
	require.Equal(t, 5, i32(0), "Pass.n")
	require.Equal(t, 4, i32(4), "Pass.nrows")
	type tok struct {
		k, v                                    uint64
		len, cap, slot, span, xlo, xhi, pos, id int
	}
	var got []tok
	for i := range 5 {
		o := r.toksOff() + kernels.TokBytes*i
		got = append(got, tok{le.Uint64(h[o:]), le.Uint64(h[o+8:]), i32(o + 16), i32(o + 20), i32(o + 24), i32(o + 28),
			i32(o + 32), i32(o + 36), i32(o + 40), i32(o + 44)})
	}
	require.Equal(t, []tok{
		{0x1000, 0x2000, 5, 32, 0, 1, 0, 0, 5, 7},  // root: span [0, 1)
		{0x3000, 0x4000, 0, 32, 0, 1, 0, 0, 0, 11}, // chain head
		{0x1000, 0x2000, 5, 32, 1, 2, 0, 0, 6, 8},  // first child extends the span
		{0x3000, 0x4000, 0, 32, 1, 2, 0, 0, 1, 12}, // chain
		{0x1000, 0x2000, 5, 32, 2, 1, 0, 1, 6, 9},  // second child: span [0, 1) plus scratch 2
	}, got)
	require.Equal(t, 2, i32(r.extraOff()), "the second child sees its own entry through extra")
	for i, want := range []int{0, 2, 3, 4} {
		require.Equal(t, want, i32(r.rowsOff()+4*i), "logits row %d", i)
	}
	rot := r.rotOff()
	for i, pos := range b.Pos {
		for j, f := range r.freq {
			sn, cs := math.Sincos(float64(pos) * f)
			o := rot + 8*(i*len(r.freq)+j)
			require.Equal(t, float32(cs), math.Float32frombits(le.Uint32(h[o:])))
			require.Equal(t, float32(sn), math.Float32frombits(le.Uint32(h[o+4:])))
		}
	}
}

// TestNoGPUIsABackendError: on a machine without the driver, a "cuda"
// runtime is refused at creation with LMS_ERR_BACKEND, naming the library
// and every place it looked.
func TestNoGPUIsABackendError(t *testing.T) {
	if _, _, err := cu.Open(nil); err == nil {
		t.Skip("this machine has a CUDA driver")
	}
	_, err := loop.New([]byte(`{"backend":"cuda","model_path":"` + testModel(t) + `"}`))
	require.Error(t, err)
	require.Equal(t, status.Backend, status.CodeOf(err))
	require.Contains(t, err.Error(), "libcuda.so.1")
	require.Contains(t, err.Error(), "/usr/lib/x86_64-linux-gnu/libcuda.so.1")
}
