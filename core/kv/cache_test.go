package kv

import (
	"math/rand/v2"
	"testing"

	"github.com/lmstream/lmstream/core/quant"

	"github.com/stretchr/testify/require"
)

// fill writes a recognisable value into every (layer, head, dim) of the
// entry of position e: 1000·layer + 100·head + val, K negative of V.
func fill(c *Cache, e int, val float32) {
	for l := range c.layers {
		for h := 0; h < c.kvHeads; h++ {
			k, v := make([]uint16, c.headDim), c.V(l, h, e)[:c.headDim]
			for d := range k {
				v[d] = quant.F32ToF16(float32(1000*l+100*h) + val)
				k[d] = quant.F32ToF16(-(float32(1000*l+100*h) + val))
			}
			c.SetK(l, h, e, k)
		}
	}
}

func requireEntry(t *testing.T, c *Cache, e int, val float32) {
	t.Helper()
	for l := range c.layers {
		for h := 0; h < c.kvHeads; h++ {
			want := float32(1000*l+100*h) + val
			for d := 0; d < c.headDim; d++ {
				require.Equal(t, want, quant.F16ToF32(c.V(l, h, e)[d]), "entry %d layer %d head %d", e, l, h)
				require.Equal(t, -want, quant.F16ToF32(c.KRow(l, h, e, make([]uint16, c.headDim))[d]))
			}
		}
	}
}

func TestCommitKeepsChosenScratchInOrder(t *testing.T) {
	c := New(2, 3, 4, 10)
	require.Equal(t, 10, c.Cap())
	require.NoError(t, c.Reserve(2))
	fill(c, 0, 1)
	fill(c, 1, 2)
	require.NoError(t, c.Commit([]int{0, 1}))
	require.Equal(t, 2, c.Len())
	// A tree of 5 scratch entries; keep 1, 3, 4.
	require.NoError(t, c.Reserve(5))
	for k := 0; k < 5; k++ {
		fill(c, 2+k, float32(10+k))
	}
	require.NoError(t, c.Commit([]int{1, 3, 4}))
	require.Equal(t, 5, c.Len())
	for e, v := range []float32{1, 2, 11, 13, 14} {
		requireEntry(t, c, e, v)
	}
	require.Equal(t, 0, c.Pending())
	// Nothing kept.
	require.NoError(t, c.Reserve(2))
	require.NoError(t, c.Commit(nil))
	require.Equal(t, 5, c.Len())
}

func TestCacheErrors(t *testing.T) {
	c := New(1, 1, 2, 4)
	require.ErrorContains(t, c.Reserve(5), "cache overflow: 0 committed + 5 new tokens > capacity 4")
	require.NoError(t, c.Reserve(3))
	require.ErrorContains(t, c.Commit([]int{1, 0}), "not strictly increasing")
	require.ErrorContains(t, c.Commit([]int{0, 3}), "the last forward pass wrote 3")
	require.NoError(t, c.Commit([]int{0, 1, 2}))
	require.ErrorContains(t, c.Reserve(2), "3 committed + 2 new tokens > capacity 4")
	require.ErrorContains(t, c.Commit([]int{0}), "wrote 0")
	require.ErrorContains(t, c.Truncate(4), "Truncate(4) with 3 committed")
	require.NoError(t, c.Truncate(1))
	require.Equal(t, 1, c.Len())
	require.NoError(t, c.Truncate(0))
	require.Panics(t, func() { New(0, 1, 1, 1) })
}

func TestBytesRefusesBadAndOverflowingShapes(t *testing.T) {
	// A page of a layer: keys (KStride units a dimension) and values
	// (PageSize), 2 bytes a unit.
	n, err := Bytes(30, 3, 64, 2048) // the default model's cache
	require.NoError(t, err)
	require.Equal(t, int64(30*3*64*(KStride+PageSize)*2*2048/PageSize), n)
	n, err = Bytes(30, 3, 64, 1<<40) // fits an int64 (26 PB): a memory budget refuses it
	require.NoError(t, err)
	require.Equal(t, int64(30*3*64*(KStride+PageSize)*2)<<40/PageSize, n)
	for _, ctx := range []int{1 << 50, 1 << 60, 1<<63 - 1} {
		_, err := Bytes(30, 3, 64, ctx)
		require.ErrorContains(t, err, "overflows", "ctx %d", ctx)
		require.Panics(t, func() { New(30, 3, 64, ctx) }, "ctx %d", ctx)
	}
	_, err = Bytes(30, 3, 64, 0)
	require.ErrorContains(t, err, "bad cache shape")
	_, err = Bytes(30, -3, 64, 8)
	require.ErrorContains(t, err, "bad cache shape")
}

// TestWindowedLayersKeepTheirWindow drives a cache whose layer 1 is local
// (window 5; layer 0 global) through random passes, tree commits and rewinds, and checks
// after each that every position some next token may see (the window
// before Len()) holds
// what was committed there, while the local layer's rows stay bounded.
func TestWindowedLayersKeepTheirWindow(t *testing.T) {
	const w, ctx = 5, 2000
	s := Shape{Layers: 2, KVHeads: 2, HeadDim: 4, Ctx: ctx, Window: []int{0, w}, MaxPass: 8}
	c := NewShape(s)
	require.Equal(t, 2*PageSize, s.Held(1)) // the window and a pass may straddle a page boundary
	require.Equal(t, ctx, s.Held(0))
	page, err := s.PageBytes()
	require.NoError(t, err)
	require.Zero(t, c.Bytes()) // nothing is held before the first Reserve
	r := rand.New(rand.NewPCG(1, 2))
	var committed []float32 // the value at each committed position
	next := float32(1)
	rewound := false
	for c.Len() < ctx-40 {
		if r.IntN(8) == 0 && c.Len() > 0 && !rewound {
			// A rewind by up to keep positions after a pass (a draft's)
			// always finds its window.
			n := c.Len() - 1 - r.IntN(min(c.Len(), keep))
			require.NoError(t, c.Truncate(n))
			committed = committed[:n]
			rewound = true
		} else {
			rewound = false
			n := 1 + r.IntN(8)
			if r.IntN(20) == 0 {
				n = 80 // beyond MaxPass: still within the local layer's two pages
			}
			require.NoError(t, c.Reserve(n))
			vals := make([]float32, n)
			for k := range n {
				vals[k] = next
				fill(c, c.Len()+k, next)
				next = next + 1 - 900*float32(int(next)/900) // float16 holds every value fill makes exactly
			}
			var keepIdx []int
			for k := range n {
				if r.IntN(2) == 0 {
					keepIdx = append(keepIdx, k)
				}
			}
			require.NoError(t, c.Commit(keepIdx))
			for _, k := range keepIdx {
				committed = append(committed, vals[k])
			}
		}
		require.Equal(t, len(committed), c.Len())
		for p := max(0, c.Len()-w+1); p < c.Len(); p++ {
			requireEntry(t, c, p, committed[p])
		}
		// The global layer holds the pages up to the pass's end, the
		// local one at most two.
		held := 0
		for _, p := range c.layers[1].pages {
			if p != nil {
				held++
			}
		}
		require.LessOrEqual(t, held, 2)
		require.LessOrEqual(t, c.Bytes(), int64(held+(c.Len()+80)/PageSize+1)*page)
	}
	require.Positive(t, c.Oldest())
	// A rewind past the kept history is an error that changes nothing;
	// Truncate(0) always works, and gives back every page.
	n := c.Len()
	require.ErrorContains(t, c.Truncate(c.Oldest()), "keeps positions from") // its window starts before the first page held
	require.Equal(t, n, c.Len())
	require.NoError(t, c.Truncate(0))
	require.Zero(t, c.Oldest())
	require.Zero(t, c.Bytes())
}

func TestShapeErrors(t *testing.T) {
	for _, s := range []Shape{
		{Layers: 2, KVHeads: 1, HeadDim: 1, Ctx: 8, Window: []int{1, 2, 3}},
		{Layers: 2, KVHeads: 1, HeadDim: 1, Ctx: 8, Window: []int{-1}},
		{Layers: 2, KVHeads: 1, HeadDim: 1, Ctx: 8, MaxPass: -1},
	} {
		_, err := s.Bytes()
		require.Error(t, err, "%+v", s)
		require.Panics(t, func() { NewShape(s) })
	}
	// Local layers shrink what an overflowing all-global shape would need.
	s := Shape{Layers: 2, KVHeads: 1, HeadDim: 1, Ctx: 1 << 62, Window: []int{4, 4}}
	n, err := s.Bytes()
	require.NoError(t, err)
	require.Equal(t, int64(2*2*2*(KStride+PageSize)), n) // two pages of each layer
	s.Window = []int{4}
	_, err = s.Bytes()
	require.ErrorContains(t, err, "overflows")
}

// TestFill: Fill commits rows of 0.1 after what is committed, leaves the
// committed ones as they were, and a pass's scratch follows it as usual;
// it refuses to overflow, and fills a local layer's window too.
func TestFill(t *testing.T) {
	c := New(2, 3, 4, 10)
	require.NoError(t, c.Reserve(1))
	fill(c, 0, 7)
	require.NoError(t, c.Commit([]int{0}))
	require.NoError(t, c.Fill(6))
	require.Equal(t, 7, c.Len())
	requireEntry(t, c, 0, 7)
	for l := range c.layers {
		for h := range c.kvHeads {
			keys, _ := c.Entries(l, h, 1, 7)
			for _, x := range keys {
				require.InDelta(t, 0.1, quant.F16ToF32(x), 1e-4)
			}
			for _, x := range c.V(l, h, 1)[:6*c.headDim] {
				require.InDelta(t, 0.1, quant.F16ToF32(x), 1e-4)
			}
		}
	}
	require.Zero(t, c.Pending())
	require.NoError(t, c.Reserve(1))
	fill(c, 7, 3)
	require.NoError(t, c.Commit([]int{0}))
	requireEntry(t, c, 7, 3)
	require.ErrorContains(t, c.Fill(3), "cache overflow: 8 committed + 3 new tokens > capacity 10")
	require.Equal(t, 8, c.Len())

	// A local layer of window 8 in a cache of 400: it gives back the
	// pages behind its window as the fills run past them.
	w := NewShape(Shape{Layers: 2, KVHeads: 1, HeadDim: 16, Ctx: 400, Window: []int{8, 0}})
	require.NoError(t, w.Fill(300))
	require.Equal(t, 300, w.Len())
	require.InDelta(t, 0.1, quant.F16ToF32(w.KRow(0, 0, 299, make([]uint16, 16))[0]), 1e-4)
	require.Zero(t, w.Oldest())
	require.NoError(t, w.Fill(10))
	require.Equal(t, 256, w.Oldest()) // the local layer gave back its first page
	require.InDelta(t, 0.1, quant.F16ToF32(w.V(0, 0, 309)[0]), 1e-4)
}

// A cache of a model's first layers takes the entries a whole model's
// cache committed (the early exit catching up from the target), in
// stretches, each entry as the source holds it; what it cannot take is an
// error that changes nothing.
func TestAppendFromCopiesTheFirstLayers(t *testing.T) {
	const w = 5
	src := NewShape(Shape{Layers: 3, KVHeads: 2, HeadDim: 4, Ctx: 1000, Window: []int{0, w, 0}, MaxPass: 8})
	for e := range 600 {
		require.NoError(t, src.Reserve(1))
		fill(src, e, float32(e+1))
		require.NoError(t, src.Commit([]int{0}))
	}
	dst := NewShape(Shape{Layers: 2, KVHeads: 2, HeadDim: 4, Ctx: 400, Window: []int{0, w}, MaxPass: 8})
	// The source's local layer has moved on: the first positions are gone,
	// as Oldest says (copies from there on still work).
	require.Positive(t, src.Oldest())
	require.ErrorContains(t, dst.AppendFrom(src, 3), "keeps positions from")
	require.Zero(t, dst.Len())

	// From a source whose layers all hold everything, in two stretches.
	src = NewShape(Shape{Layers: 3, KVHeads: 2, HeadDim: 4, Ctx: 400})
	require.NoError(t, src.Reserve(30))
	for e := range 30 {
		fill(src, e, float32(e+1))
	}
	require.NoError(t, src.Commit(seqIdx(30)))
	require.Zero(t, src.Oldest())
	require.NoError(t, dst.AppendFrom(src, 12))
	require.NoError(t, dst.AppendFrom(src, 18))
	require.Equal(t, 30, dst.Len())
	for e := max(0, 30-w+1); e < 30; e++ {
		requireEntry(t, dst, e, float32(e+1))
	}
	for e := range 30 { // the global layer holds them all
		for h := range 2 {
			require.Equal(t, float32(100*h+e+1), quant.F16ToF32(dst.V(0, h, e)[0]))
		}
	}
	require.ErrorContains(t, dst.AppendFrom(src, 1), "the source holds 30")
	require.ErrorContains(t, src.AppendFrom(dst, 0), "a cache of 3 layers")
	require.Equal(t, 30, dst.Len())
}

func seqIdx(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
