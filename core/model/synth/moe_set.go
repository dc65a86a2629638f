package synth

import "github.com/lmstream/lmstream/core/quant"

// moeSpecs are the mixture-of-experts models of the Set: Qwen3-MoE (8
// experts, 2 a token, each half the embedding wide, near Qwen3-30B-A3B's
// 768 of 2048), Qwen2-MoE (the same with a gated shared expert), a Llama file with experts (Mixtral: 4 experts, 2 a token,
// the experts' width feed_forward_length), and gpt-oss (4 experts, 2 a
// token, experts with biases, attention sinks, every other layer local,
// YaRN) twice: with MXFP4 experts as gpt-oss ships, whose Q8_0
// activations make the comparison noisier, and all in float32, which
// checks the rest of the architecture as closely as the other families.
func moeSpecs() []Spec {
	with := func(s Spec, f func(*Spec)) Spec { f(&s); return s }
	return []Spec{
		with(float32Shape("qwen3moe", "qwen3moe", 13), func(s *Spec) {
			s.Experts, s.ExpertsUsed, s.ExpertFF = 8, 2, 64
		}),
		// Qwen2-MoE: a shared expert of its own width (neither the
		// routed experts' nor feed_forward_length), and Qwen 2's Q/K/V
		// biases.
		with(float32Shape("qwen2moe", "qwen2moe", 16), func(s *Spec) {
			s.Experts, s.ExpertsUsed, s.ExpertFF, s.SharedFF = 8, 2, 64, 192
			s.QKVBias = true
		}),
		with(float32Shape("llama-moe", "llama", 14), func(s *Spec) {
			s.Experts, s.ExpertsUsed, s.ExpertFF = 4, 2, s.FF
		}),
		with(float32Shape("gpt-oss", "gpt-oss", 15), func(s *Spec) {
			s.Experts, s.ExpertsUsed, s.ExpertFF, s.ExpertWeights = 4, 2, 64, quant.MXFP4
			s.QKVBias, s.OutBias = true, true
			s.KV = map[string]any{"attention.sliding_window": uint32(8), "rope.scaling.type": "yarn",
				"rope.scaling.factor": float32(4), "rope.scaling.original_context_length": uint32(32)}
		}),
		with(float32Shape("gpt-oss-f32", "gpt-oss", 15), func(s *Spec) {
			s.Experts, s.ExpertsUsed, s.ExpertFF = 4, 2, 64
			s.QKVBias, s.OutBias = true, true
			s.KV = map[string]any{"attention.sliding_window": uint32(8), "rope.scaling.type": "yarn",
				"rope.scaling.factor": float32(4), "rope.scaling.original_context_length": uint32(32)}
		}),
	}
}

// BenchMoE is a Qwen3-MoE-shaped model for measuring speed and memory, not
// for golden data: Qwen3-30B-A3B's embedding (2048), expert width (768),
// head dimension (128), 8 experts a token, but 64 experts and 8 layers
// instead of 128 and 48, so that its Q4_K file (1.5 GB) fits beside
// llama.cpp's copy on a 24 GB machine.
func BenchMoE() Spec {
	return Spec{Name: "qwen3moe-bench", Arch: "qwen3moe", Weights: quant.Q4_K, Embed: quant.Q4_K,
		Layers: 8, Embd: 2048, Heads: 16, KVHeads: 4, FF: 6144, Seed: 52, Context: 4096,
		Experts: 64, ExpertsUsed: 8, ExpertFF: 768}
}
