package kv

import (
	"testing"

	"github.com/lmstream/lmstream/core/quant"

	"github.com/stretchr/testify/require"
)

// fill writes a recognisable value into every (layer, head, dim) of entry e:
// 1000·layer + 100·head + val, K negative of V.
func fill(c *Cache, e int, val float32) {
	for l := 0; l < c.layers; l++ {
		for h := 0; h < c.kvHeads; h++ {
			k, v := c.K(l, h)[e*c.headDim:(e+1)*c.headDim], c.V(l, h)[e*c.headDim:(e+1)*c.headDim]
			for d := range k {
				v[d] = quant.F32ToF16(float32(1000*l+100*h) + val)
				k[d] = quant.F32ToF16(-(float32(1000*l+100*h) + val))
			}
		}
	}
}

func requireEntry(t *testing.T, c *Cache, e int, val float32) {
	t.Helper()
	for l := 0; l < c.layers; l++ {
		for h := 0; h < c.kvHeads; h++ {
			want := float32(1000*l+100*h) + val
			for d := 0; d < c.headDim; d++ {
				require.Equal(t, want, quant.F16ToF32(c.V(l, h)[e*c.headDim+d]), "entry %d layer %d head %d", e, l, h)
				require.Equal(t, -want, quant.F16ToF32(c.K(l, h)[e*c.headDim+d]))
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
	n, err := Bytes(30, 3, 64, 2048) // the default model's cache
	require.NoError(t, err)
	require.Equal(t, int64(30*3*64*2048*4), n)
	n, err = Bytes(30, 3, 64, 1<<40) // fits an int64 (25 PB): a memory budget refuses it
	require.NoError(t, err)
	require.Equal(t, int64(30*3*64*4)<<40, n)
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
