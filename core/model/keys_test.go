package model

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/quant"
)

// withChanges rewrites a model file with extra (or replaced) metadata and
// extra tensors, the rest byte for byte.
func withChanges(t *testing.T, f *gguf.File, kv map[string]any, tensors map[string][]float32) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, p := range f.KV {
		if _, replaced := kv[p.Key]; replaced || p.Key == gguf.AlignmentKey {
			continue
		}
		require.NoError(t, w.AddKV(p.Key, p.Value))
	}
	for k, v := range kv {
		require.NoError(t, w.AddKV(k, v))
	}
	for _, ts := range f.Tensors {
		require.NoError(t, w.AddTensor(ts.Name, ts.Type, ts.Dims, ts.Data))
	}
	for name, x := range tensors {
		data := make([]byte, 4*len(x))
		require.NoError(t, quant.Quantize(quant.F32, x, data))
		require.NoError(t, w.AddTensor(name, quant.F32, []int{len(x)}, data))
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	out, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return out
}

func filled(n int, v float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v
	}
	return x
}

// TestEveryKeyAndTensorIsRunOrRefused writes metadata keys and tensors
// that change a model's computation into a copy of the default model
// (SmolLM2, llama): each is either run (the logits change, as they do in
// llama.cpp, whose arithmetic for them the family golden tests check) or
// refused with an error naming it. None may load and be ignored.
func TestEveryKeyAndTensorIsRunOrRefused(t *testing.T) {
	if raceEnabled {
		t.Skip("too slow under -race")
	}
	base := vocabFile(t)
	logits := func(f *gguf.File) []float32 {
		m, err := Load(f, 2)
		require.NoError(t, err)
		defer m.Close()
		return run(t, m, new(Batch).chain(m.NewCache(64), []int32{1, 504, 3458, 282, 4649, 314, 1345, 30, 378, 2270}, false))[0]
	}
	plain := logits(base)
	half := 32 // SmolLM2's head dimension is 64
	changed := []struct {
		name    string
		kv      map[string]any
		tensors map[string][]float32
	}{
		{"linear RoPE scaling", map[string]any{"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float32(4)}, nil},
		{"YaRN", map[string]any{"llama.rope.scaling.type": "yarn", "llama.rope.scaling.factor": float32(4),
			"llama.rope.scaling.original_context_length": uint32(4)}, nil},
		{"rope.scaling.attn_factor", map[string]any{"llama.rope.scaling.attn_factor": float32(1.3)}, nil},
		{"rope_freqs", nil, map[string][]float32{"rope_freqs.weight": filled(half, 4)}},
		{"attn_output.bias", nil, map[string][]float32{"blk.3.attn_output.bias": filled(576, 0.5)}},
		{"ffn_down.bias", nil, map[string][]float32{"blk.3.ffn_down.bias": filled(576, 0.5)}},
		{"attn_q.bias", nil, map[string][]float32{"blk.3.attn_q.bias": filled(576, 0.5)}},
	}
	for _, c := range changed {
		got := logits(withChanges(t, base, c.kv, c.tensors))
		d := 0.0
		for i := range got {
			d = math.Max(d, math.Abs(float64(got[i]-plain[i])))
		}
		require.Greater(t, d, 1e-3, "%s: loaded but the logits did not change", c.name)
	}
	refused := []struct {
		name, want string
		kv         map[string]any
		tensors    map[string][]float32
	}{
		{"a key llama does not read", "llama.attention.sliding_window", map[string]any{"llama.attention.sliding_window": uint32(8)}, nil},
		{"a key only Granite reads", "llama.attention.scale", map[string]any{"llama.attention.scale": float32(0.3)}, nil},
		{"experts", "llama.expert_count", map[string]any{"llama.expert_count": uint32(8), "llama.expert_used_count": uint32(2)}, nil},
		{"non-RMS LayerNorm", "llama.attention.layer_norm_epsilon", map[string]any{"llama.attention.layer_norm_epsilon": float32(1e-5)}, nil},
		{"partial rotary", "rope.dimension_count", map[string]any{"llama.rope.dimension_count": uint32(32)}, nil},
		{"pooling", "llama.pooling_type", map[string]any{"llama.pooling_type": uint32(1)}, nil},
		{"non-causal attention", "llama.attention.causal", map[string]any{"llama.attention.causal": false}, nil},
		{"final soft-capping", "llama.final_logit_softcapping", map[string]any{"llama.final_logit_softcapping": float32(30)}, nil},
		{"an unknown scaling", `"dynamic"`, map[string]any{"llama.rope.scaling.type": "dynamic"}, nil},
		{"a zero rope factor", "rope.scaling.factor is 0", map[string]any{"llama.rope.scaling.factor": float32(0)}, nil},
		{"a NaN rope factor", "rope.scaling.factor is NaN", map[string]any{"llama.rope.scaling.factor": float32(math.NaN())}, nil},
		{"a zero rope_freqs entry", "rope frequency factor", nil, map[string][]float32{"rope_freqs.weight": filled(half, 0)}},
		{"attention sinks", "blk.0.attn_sinks.weight", nil, map[string][]float32{"blk.0.attn_sinks.weight": filled(9, 1)}},
		{"an output bias", "output.bias", nil, map[string][]float32{"output.bias": filled(49152, 1)}},
		{"Q/K norms llama has not", "blk.0.attn_q_norm.weight", nil, map[string][]float32{"blk.0.attn_q_norm.weight": filled(64, 1)}},
	}
	for _, c := range refused {
		f := withChanges(t, base, c.kv, c.tensors)
		_, err := Load(f, 1)
		require.Error(t, err, c.name)
		require.ErrorContains(t, err, c.want, c.name)
		_, err = Measure(f)
		require.ErrorContains(t, err, c.want, "%s: Measure must refuse what Load refuses", c.name)
	}
}
