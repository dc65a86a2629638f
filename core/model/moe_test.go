package model

import (
	"bytes"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model/synth"
)

// synthData is the Set's model of that name, written (once a test
// binary: the files are a few tens of MB).
func synthData(t *testing.T, name string) []byte {
	t.Helper()
	vocab := vocabFile(t)
	synthMu.Lock()
	defer synthMu.Unlock()
	if data, ok := synthCache[name]; ok {
		return data
	}
	for _, spec := range synth.Set() {
		if spec.Name == name {
			data, err := synth.Write(spec, vocab)
			require.NoError(t, err)
			synthCache[name] = data
			return data
		}
	}
	t.Fatalf("no synthetic model %q", name)
	return nil
}

var (
	synthMu    sync.Mutex
	synthCache = map[string][]byte{}
)

// synthFile is synthData parsed.
func synthFile(t *testing.T, name string) *gguf.File {
	t.Helper()
	f, err := gguf.Parse(synthData(t, name))
	require.NoError(t, err)
	return f
}

// withKV rewrites f with metadata key set to v (nil drops it) and each
// tensor renamed or reshaped by edit (nil keeps them).
func withKV(t *testing.T, f *gguf.File, key string, v any, edit func(*gguf.Tensor) bool) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	set := false
	for _, kv := range f.KV {
		if kv.Key != key {
			require.NoError(t, w.AddKV(kv.Key, kv.Value))
		} else if v != nil {
			require.NoError(t, w.AddKV(key, v))
			set = true
		}
	}
	if !set && v != nil {
		require.NoError(t, w.AddKV(key, v))
	}
	for _, tn := range f.Tensors {
		if edit != nil && !edit(&tn) {
			continue
		}
		require.NoError(t, w.AddTensor(tn.Name, tn.Type, tn.Dims, tn.Data))
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	g, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return g
}

// TestExpertMetadataIsCheckedBeforeSizing is issue 52's bad input for
// mixtures of experts: every expert key out of range, or at odds with
// the tensors, fails at once with an error naming the key or tensor, and
// the failing load allocates next to nothing (an expert count of 2^31
// sizes nothing).
func TestExpertMetadataIsCheckedBeforeSizing(t *testing.T) {
	for _, tc := range []struct {
		file, key string
		val       any
		want      string
	}{
		{"qwen3moe", "qwen3moe.expert_count", uint32(1 << 31),
			"qwen3moe.expert_count is 2147483648 but the router blk.0.ffn_gate_inp.weight has dims [128 8], want [128 2147483648]"},
		{"qwen3moe", "qwen3moe.expert_count", uint64(1 << 62), "qwen3moe.expert_count is 4611686018427387904 but the router"},
		{"qwen3moe", "qwen3moe.expert_count", int32(-1), `"qwen3moe.expert_count": int32 -1 is out of the range [1,`},
		{"qwen3moe", "qwen3moe.expert_count", nil, `qwen3moe.expert_count`},
		{"qwen3moe", "qwen3moe.expert_count", uint32(0), `"qwen3moe.expert_count": uint32 0 is out of the range [1,`},
		{"qwen3moe", "qwen3moe.expert_used_count", uint32(9), `"qwen3moe.expert_used_count": uint32 9 is out of the range [1, 8]`},
		{"qwen3moe", "qwen3moe.expert_used_count", uint32(0), `"qwen3moe.expert_used_count": uint32 0 is out of the range [1, 8]`},
		{"qwen3moe", "qwen3moe.expert_used_count", nil, `qwen3moe.expert_used_count`},
		{"qwen3moe", "qwen3moe.expert_feed_forward_length", uint64(1 << 40),
			"tensor blk.0.ffn_gate_exps.weight has dims [128 64 8], the config wants [128 1099511627776 8]"},
		{"qwen3moe", "qwen3moe.expert_group_count", uint32(4), `"qwen3moe.expert_group_count": uint32 4 is out of the range [0, 1]`},
		{"qwen3moe", "qwen3moe.expert_weights_scale", float32(2.5), "metadata qwen3moe.expert_weights_scale: not supported for qwen3moe"},
		{"qwen3moe", "qwen3moe.expert_shared_feed_forward_length", uint32(64), "metadata qwen3moe.expert_shared_feed_forward_length: not supported"},
		{"llama-moe", "llama.expert_feed_forward_length", uint32(64), "metadata llama.expert_feed_forward_length: not supported for llama"},
		{"llama-moe", "llama.expert_count", uint32(0), "metadata llama.expert_used_count: not supported for llama"},
		// The shared expert's width: its own key, else feed_forward_length
		// (256 here), either checked against the tensors.
		{"qwen2moe", "qwen2moe.expert_shared_feed_forward_length", uint64(1 << 40),
			"tensor blk.0.ffn_gate_shexp.weight has dims [128 192], the config wants [128 1099511627776]"},
		{"qwen2moe", "qwen2moe.expert_shared_feed_forward_length", nil,
			"tensor blk.0.ffn_gate_shexp.weight has dims [128 192], the config wants [128 256]"},
		{"qwen2moe", "qwen2moe.expert_shared_feed_forward_length", uint32(0),
			`"qwen2moe.expert_shared_feed_forward_length": uint32 0 is out of the range [1,`},
		// llama.cpp's Qwen2-MoE never renormalises the kept weights nor
		// scales them, whatever a file says: a file that says so is refused.
		{"qwen2moe", "qwen2moe.expert_weights_norm", true, "metadata qwen2moe.expert_weights_norm: not supported"},
		{"qwen2moe", "qwen2moe.expert_weights_scale", float32(2), "metadata qwen2moe.expert_weights_scale: not supported"},
		{"gpt-oss", "gpt-oss.expert_feed_forward_length", nil, "gpt-oss.expert_feed_forward_length"},
		{"gpt-oss", "gpt-oss.attention.sliding_window", nil, "gpt-oss.attention.sliding_window"},
	} {
		f := withKV(t, synthFile(t, tc.file), tc.key, tc.val, nil)
		var err error
		n := allocated(func() { _, err = Load(f, 1) })
		require.ErrorContains(t, err, tc.want, "%s = %v", tc.key, tc.val)
		require.Less(t, n, uint64(1<<20), "%s = %v", tc.key, tc.val)
	}
}

// TestExpertTensorsAreChecked: a truncated expert tensor (its data cut off
// by the file's end, or one expert short), a missing router and a missing
// gpt-oss bias or sink, and a Qwen2-MoE shared-expert tensor misshapen or
// missing are each refused by name.
func TestExpertTensorsAreChecked(t *testing.T) {
	data := synthData(t, "qwen3moe")
	f, err := gguf.Parse(data)
	require.NoError(t, err)
	last := f.Tensors[len(f.Tensors)-1]
	require.Equal(t, "blk.1.ffn_down_exps.weight", last.Name, "the file's last tensor")
	_, err = gguf.Parse(data[:len(data)-len(last.Data)/3])
	require.ErrorContains(t, err, `tensor "blk.1.ffn_down_exps.weight": F32 data of 1024 rows of 256 bytes`)
	require.ErrorContains(t, err, "runs past the end of the file")

	for _, tc := range []struct {
		file string
		edit func(*gguf.Tensor) bool
		want string
	}{
		{"qwen3moe", func(tn *gguf.Tensor) bool {
			if tn.Name == "blk.1.ffn_up_exps.weight" {
				tn.Dims = []int{tn.Dims[0], tn.Dims[1], tn.Dims[2] - 1}
				tn.Data = tn.Data[:len(tn.Data)*7/8]
			}
			return true
		}, "tensor blk.1.ffn_up_exps.weight has dims [128 64 7], the config wants [128 64 8]"},
		{"qwen3moe", func(tn *gguf.Tensor) bool { return tn.Name != "blk.1.ffn_gate_inp.weight" },
			"tensor blk.1.ffn_gate_inp.weight is missing"},
		{"qwen3moe", func(tn *gguf.Tensor) bool { return tn.Name != "blk.0.ffn_gate_inp.weight" },
			"qwen3moe.expert_count is 8 but the file has no router tensor blk.0.ffn_gate_inp.weight"},
		{"gpt-oss", func(tn *gguf.Tensor) bool { return tn.Name != "blk.0.ffn_down_exps.bias" },
			"tensor blk.0.ffn_down_exps.bias is missing"},
		{"gpt-oss", func(tn *gguf.Tensor) bool { return tn.Name != "blk.1.attn_sinks.weight" },
			"tensor blk.1.attn_sinks.weight is missing"},
		{"llama-moe", func(tn *gguf.Tensor) bool { return tn.Name != "blk.0.ffn_gate_exps.weight" },
			"tensor blk.0.ffn_gate_exps.weight is missing"},
		// The shared expert's tensors, each of the wrong shape or missing.
		{"qwen2moe", func(tn *gguf.Tensor) bool {
			if tn.Name == "blk.1.ffn_down_shexp.weight" {
				tn.Dims = []int{tn.Dims[1], tn.Dims[0]}
			}
			return true
		}, "tensor blk.1.ffn_down_shexp.weight has dims [128 192], the config wants [192 128]"},
		{"qwen2moe", func(tn *gguf.Tensor) bool {
			if tn.Name == "blk.0.ffn_gate_inp_shexp.weight" {
				tn.Dims = []int{tn.Dims[0], 1, 1}
			}
			return true
		}, "tensor blk.0.ffn_gate_inp_shexp.weight has dims [128 1 1], the config wants [128]"},
		{"qwen2moe", func(tn *gguf.Tensor) bool {
			if tn.Name == "blk.1.ffn_up_shexp.weight" {
				tn.Dims = []int{tn.Dims[0], tn.Dims[1] / 2}
				tn.Data = tn.Data[:len(tn.Data)/2]
			}
			return true
		}, "tensor blk.1.ffn_up_shexp.weight has dims [128 96], the config wants [128 192]"},
		{"qwen2moe", func(tn *gguf.Tensor) bool { return tn.Name != "blk.0.ffn_gate_inp_shexp.weight" },
			"tensor blk.0.ffn_gate_inp_shexp.weight is missing"},
	} {
		g := withKV(t, synthFile(t, tc.file), "general.name", "edited", tc.edit)
		_, err := Load(g, 1)
		require.ErrorContains(t, err, tc.want)
	}
	// A shared expert in a family that has none is not run: refused by name.
	_, err = Load(withChanges(t, synthFile(t, "qwen3moe"), nil, map[string][]float32{"blk.0.ffn_gate_inp_shexp.weight": filled(128, 1)}), 1)
	require.ErrorContains(t, err, "the file holds tensors this package does not run: blk.0.ffn_gate_inp_shexp.weight")
}

// TestRouteToken: the gating rules on numbers worked by hand.
func TestRouteToken(t *testing.T) {
	e1 := float32(1 / (1 + math.Exp(-1))) // e³/(e³+e²)
	for _, tc := range []struct {
		name   string
		moe    MoE
		logits []float32
		sel    []int32
		w      []float32
	}{
		// Mixtral, Qwen3-MoE: softmax over all, the best two renormalized.
		{"softmax, normalized", MoE{Gating: GatingSoftmax, Normalize: true}, []float32{1, 3, 2, 0}, []int32{1, 2}, []float32{e1, 1 - e1}},
		// Without normalisation the kept probabilities stay as they are.
		{"softmax", MoE{Gating: GatingSoftmax}, []float32{0, 0, 0, 0}, []int32{0, 1}, []float32{0.25, 0.25}},
		// gpt-oss: the best two logits, softmax over them alone.
		{"softmax of the kept", MoE{Gating: GatingSoftmaxKept}, []float32{1, 3, 2, -50}, []int32{1, 2}, []float32{e1, 1 - e1}},
		// Equal values: the lower index first.
		{"ties", MoE{Gating: GatingSoftmaxKept}, []float32{2, 5, 5, 5}, []int32{1, 2}, []float32{0.5, 0.5}},
	} {
		x := tc.moe
		x.Experts, x.Used = len(tc.logits), len(tc.sel)
		sel, w := make([]int32, x.Used), make([]float32, x.Used)
		routeToken(x, slices.Clone(tc.logits), sel, w, make([]bool, x.Experts))
		require.Equal(t, tc.sel, sel, tc.name)
		require.InDeltaSlice(t, tc.w, w, 1e-6, tc.name)
	}
	// NaN logits (a damaged router) still pick distinct, valid experts.
	nan := float32(math.NaN())
	sel := make([]int32, 3)
	routeToken(MoE{Experts: 4, Used: 3}, []float32{nan, 1, nan, 0}, sel, make([]float32, 3), make([]bool, 4))
	slices.Sort(sel)
	require.Equal(t, 3, len(slices.Compact(sel)))
	require.True(t, sel[0] >= 0 && sel[2] < 4, "%v", sel)
}

// TestExpertsBatchInvariant: a token's logits do not depend on the rest of
// the batch, though the batch's tokens are grouped by expert: the prompt
// in one pass gives every row bit for bit what it gives one token a pass
// (with float32 experts and with MXFP4 ones, whose activations are
// quantized).
func TestExpertsBatchInvariant(t *testing.T) {
	for _, name := range []string{"qwen3moe", "qwen2moe", "gpt-oss"} {
		m, err := Load(synthFile(t, name), 2)
		require.NoError(t, err)
		whole := run(t, m, new(Batch).chain(m.NewCache(64), synth.Prompt, true))
		c := m.NewCache(64)
		for i, tok := range synth.Prompt {
			row := run(t, m, new(Batch).chain(c, []int32{tok}, true))[0]
			commitAll(t, c)
			require.Equal(t, whole[i], row, "%s: position %d", name, i)
		}
		m.Close()
	}
}

// TestExpertsConfig: a mixture of experts is what its Config says (for a
// runner that cannot run one: the CUDA runner refuses every Extra), and
// Measure counts its experts as Load packs them.
func TestExpertsConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		moe    MoE
		extras []string
	}{
		{"qwen3moe", MoE{Experts: 8, Used: 2, FF: 64, Normalize: true}, []string{"mixture of experts"}},
		{"qwen2moe", MoE{Experts: 8, Used: 2, FF: 64, SharedFF: 192}, []string{"mixture of experts", "shared expert"}},
		{"llama-moe", MoE{Experts: 4, Used: 2, FF: 256, Normalize: true}, []string{"mixture of experts"}},
		{"gpt-oss", MoE{Experts: 4, Used: 2, FF: 64, Gating: GatingSoftmaxKept, Biases: true, SwigluOAI: true},
			[]string{"attention sinks", "mixture of experts", "sliding-window attention", "yarn RoPE scaling"}},
	} {
		f := synthFile(t, tc.name)
		fp, err := Measure(f)
		require.NoError(t, err)
		require.Equal(t, tc.moe, fp.Config.MoE, tc.name)
		for _, x := range tc.extras {
			require.Contains(t, fp.Config.Extras(), x, tc.name)
		}
		m, err := Load(f, 1)
		require.NoError(t, err)
		require.Equal(t, m.Config(), fp.Config)
		require.LessOrEqual(t, fp.Packed, m.PackedBytes()+2<<20, tc.name)
		require.GreaterOrEqual(t, fp.Packed, m.PackedBytes(), tc.name)
		m.Close()
	}
}

// TestGptOssYarnBetas: gpt-oss files carry the YaRN betas their converter
// finds in the model's config (32 and 1): those load and change nothing,
// and other values are applied, not ignored.
func TestGptOssYarnBetas(t *testing.T) {
	logits := func(f *gguf.File) []float32 {
		m, err := Load(f, 2)
		require.NoError(t, err)
		defer m.Close()
		return run(t, m, new(Batch).chain(m.NewCache(64), synth.Prompt, false))[0]
	}
	base := synthFile(t, "gpt-oss-f32")
	plain := logits(base)
	same := withKV(t, withKV(t, base, "gpt-oss.rope.scaling.yarn_beta_fast", float32(32), nil),
		"gpt-oss.rope.scaling.yarn_beta_slow", float32(1), nil)
	require.True(t, slices.Equal(plain, logits(same)), "the betas llama.cpp assumes changed the logits")
	// A smaller slow beta moves the YaRN ramp's upper end from pair 6 to
	// pair 11 of 32 (this file's original context is 32).
	other := logits(withKV(t, base, "gpt-oss.rope.scaling.yarn_beta_slow", float32(0.25), nil))
	require.False(t, slices.Equal(plain, other), "yarn_beta_slow 0.25 loaded but changed nothing")
}
