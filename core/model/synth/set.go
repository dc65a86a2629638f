package synth

import "github.com/lmstream/lmstream/core/quant"

// Prompt is the token ids every golden run feeds (ids of the SmolLM2
// vocabulary, which the Set's files take), 24 of them: past the sliding
// windows and the original contexts the Set's files name, so that those
// features change the logits.
var Prompt = []int32{
	504, 3458, 282, 4649, 314, 1345, 30, 378, 2270, 12468, 3479, 281,
	260, 11307, 8886, 28, 284, 2367, 1229, 14004, 4051, 351, 3046, 30,
}

// Generate is how many greedy tokens the golden runs record.
const Generate = 32

// goldenContext is the context the golden runs use.
const goldenContext = 128

// float32Shape is the shape of the float files: heads of 64 (the grouped
// attention kernels' width), a small FFN.
func float32Shape(name, arch string, seed uint64) Spec {
	return Spec{Name: name, Arch: arch, Weights: quant.F32, Embed: quant.F32,
		Layers: 2, Embd: 128, Heads: 2, KVHeads: 1, FF: 256, Seed: seed, Context: goldenContext}
}

// Set is the synthetic models golden data is recorded for: each family,
// and each metadata key or tensor that changes a family's computation, in
// float32 weights.
func Set() []Spec {
	with := func(s Spec, f func(*Spec)) Spec { f(&s); return s }
	return append([]Spec{
		with(float32Shape("llama-rope-freqs", "llama", 1), func(s *Spec) { s.RopeFreqs, s.Tied = true, true }),
		with(float32Shape("llama-linear", "llama", 2), func(s *Spec) {
			s.KV = map[string]any{"rope.scaling.type": "linear", "rope.scaling.factor": float32(4)}
		}),
		with(float32Shape("llama-biases", "llama", 3), func(s *Spec) {
			s.FusedQKV, s.QKVBias, s.OutBias, s.FFNBias = true, true, true, true
		}),
		with(float32Shape("qwen2-yarn", "qwen2", 4), func(s *Spec) {
			s.QKVBias = true
			s.KV = map[string]any{"rope.scaling.type": "yarn", "rope.scaling.factor": float32(4),
				"rope.scaling.original_context_length": uint32(32)}
		}),
		with(float32Shape("mistral3", "mistral3", 5), func(s *Spec) {
			s.KV = map[string]any{"rope.scaling.type": "yarn", "rope.scaling.factor": float32(2),
				"rope.scaling.original_context_length": uint32(8), "rope.scaling.yarn_beta_fast": float32(16),
				"rope.scaling.yarn_beta_slow": float32(2), "rope.scaling.yarn_log_multiplier": float32(0.5),
				"attention.temperature_scale": float32(0.3)}
		}),
		float32Shape("qwen3", "qwen3", 6),
		with(float32Shape("gemma2", "gemma2", 7), func(s *Spec) {
			s.KV = map[string]any{"attention.sliding_window": uint32(8), "attn_logit_softcapping": float32(5),
				"final_logit_softcapping": float32(10), "attention.key_length": uint32(64), "attention.value_length": uint32(64)}
		}),
		with(float32Shape("gemma3-linear", "gemma3", 8), func(s *Spec) {
			s.KV = map[string]any{"attention.sliding_window": uint32(8), "attention.sliding_window_pattern": uint32(2),
				"rope.scaling.type": "linear", "rope.scaling.factor": float32(8),
				"attention.key_length": uint32(64), "attention.value_length": uint32(64)}
		}),
		with(float32Shape("phi3-longrope", "phi3", 9), func(s *Spec) {
			s.FusedQKV, s.LongRope = true, true
			s.KV = map[string]any{"rope.scaling.attn_factor": float32(1.19), "rope.scaling.original_context_length": uint32(16)}
		}),
		with(float32Shape("granite", "granite", 10), func(s *Spec) {
			s.KV = map[string]any{"logit_scale": float32(8), "residual_scale": float32(0.22),
				"embedding_scale": float32(12), "attention.scale": float32(0.0625)}
		}),
		float32Shape("olmo2", "olmo2", 11),
		with(float32Shape("smollm3", "smollm3", 12), func(s *Spec) { s.Layers = 4 }),
	}, moeSpecs()...)
}

// QuantTypes are the weight types QuantSet covers.
var QuantTypes = []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q4_K, quant.Q5_K, quant.Q6_K,
	quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4, quant.F16, quant.BF16,
	quant.IQ3_S, quant.IQ3_XXS, quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S}

// QuantSet is one model per weight type (Qwen 3's shape, widths that
// every block size divides), for golden data on the quantized kernels.
func QuantSet() []Spec {
	var set []Spec
	for i, wt := range QuantTypes {
		set = append(set, Spec{Name: "qwen3-" + wt.String(), Arch: "qwen3", Weights: wt, Embed: quant.Q8_0,
			Layers: 2, Embd: 256, Heads: 4, KVHeads: 2, FF: 512, Seed: 100 + uint64(i), Context: goldenContext})
	}
	return set
}
