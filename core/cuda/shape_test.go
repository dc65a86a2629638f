package cuda

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/model"
)

// TestMixtureOfExpertsIsRefused: the GPU kernels run dense FFNs only, so
// a model with experts is refused by name before anything is loaded.
func TestMixtureOfExpertsIsRefused(t *testing.T) {
	c := model.Config{Arch: "qwen3moe", Layers: 2, Embd: 128, Heads: 2, KVHeads: 1, HeadDim: 64, FF: 256,
		AttnScale: 0.125, MoE: model.MoE{Experts: 8, Used: 2, FF: 64}}
	require.ErrorContains(t, checkShape(c), "this qwen3moe model needs what the GPU kernels do not run yet (mixture of experts)")
	c.Arch, c.MoE.SharedFF = "qwen2moe", 192
	require.ErrorContains(t, checkShape(c), "this qwen2moe model needs what the GPU kernels do not run yet (mixture of experts, shared expert)")
	c.MoE = model.MoE{}
	require.NoError(t, checkShape(c))
}
