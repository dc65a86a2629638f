package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
	"github.com/lmstream/lmstream/core/model"
)

// TestAttentionGroup: a block takes the largest share of a kv head's query
// heads that divides them and an instance has.
func TestAttentionGroup(t *testing.T) {
	for share, want := range map[int]int{1: 1, 2: 2, 3: 3, 5: 5, 6: 6, 7: 7, 8: 8, 9: 3, 10: 5, 11: 1, 12: 6, 16: 8, 32: 8} {
		require.Equal(t, want, attentionGroup(share), "share %d", share)
	}
}

// TestAttentionFor: the instance and grid a pass's attention launches
// with, for SmolLM2-135M (9 heads of 64 on 3 kv heads), Qwen2.5-Coder-1.5B
// (12 of 128 on 2) and head dimensions between the instances'.
func TestAttentionFor(t *testing.T) {
	k := &kernelSet{attention: map[attentionShape]*cu.Function{}}
	for _, hd := range kernels.AttentionHeadDims {
		for g := 1; g <= kernels.AttentionMaxGroup; g++ {
			k.attention[attentionShape{hd, g}] = &cu.Function{}
		}
	}
	shapeOf := func(f *cu.Function) attentionShape {
		for s, g := range k.attention {
			if g == f {
				return s
			}
		}
		t.Fatal("no such instance")
		return attentionShape{}
	}
	from := kernels.AttentionGroupFrom
	for _, c := range []struct {
		heads, kv, hd, n int
		shape            attentionShape
		grid             [3]uint32
	}{
		{9, 3, 64, 1, attentionShape{64, 1}, [3]uint32{1, 9, 1}},
		{9, 3, 64, from - 1, attentionShape{64, 1}, [3]uint32{uint32(from - 1), 9, 1}},
		{9, 3, 64, from, attentionShape{64, 3}, [3]uint32{uint32(from), 3, 1}},
		{12, 2, 128, 64, attentionShape{128, 6}, [3]uint32{64, 2, 1}},
		{4, 4, 32, 64, attentionShape{64, 1}, [3]uint32{64, 4, 1}},
		{8, 1, 96, 64, attentionShape{128, 8}, [3]uint32{64, 1, 1}},
	} {
		cfg := &model.Config{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd}
		f, grid, smem := k.attentionFor(cfg, c.n, from)
		require.Equal(t, c.shape, shapeOf(f), "%+v", c)
		require.Equal(t, c.grid, grid, "%+v", c)
		require.Equal(t, kernels.AttentionWarps*32*c.shape.hd*2, smem, "%+v", c)
	}
}
