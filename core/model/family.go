package model

// A family is what sets one GGUF architecture's forward pass apart from the
// plain Llama one. The pass (forward.go) reads these switches and the
// Config values they lead to; it has no branch per architecture. A new
// dense family is an entry here and, when it brings metadata of its own,
// a few lines in configure (config.go).
type family struct {
	// ropeNeox rotates (x[i], x[i+d/2]) instead of adjacent pairs.
	ropeNeox bool
	// gelu makes the FFN's gate GELU (tanh form) instead of SiLU.
	gelu bool
	// noPreNorm: the blocks read the residual stream itself (OLMo 2), not
	// an RMS-normed copy of it.
	noPreNorm bool
	// postNorms: each block's output is RMS-normed (post_attention_norm,
	// post_ffw_norm) before it joins the residual stream.
	postNorms bool
	// qkNorm is how queries and keys are RMS-normed before RoPE.
	qkNorm QKNorm
	// embdScaleSqrt multiplies the token embeddings by √Embd (Gemma).
	embdScaleSqrt bool
	// tiedOnly: the output head is always token_embd (Gemma 2 and 3 files
	// have no output.weight).
	tiedOnly bool
	// window is the sliding-window rule, when the family has one.
	window *windowRule
	// softcaps: the family reads the final-logit (and, where attnSoftcap
	// is set, the attention-score) soft-capping keys; attnSoftcap and
	// logitSoftcap are its defaults (0: none unless the file says so).
	softcaps                  bool
	attnSoftcap, logitSoftcap float32
	// queryScaleByEmbd: the 27B Gemma models (queryScaleLayers layers)
	// scale queries by 1/√(Embd/Heads) instead of 1/√HeadDim.
	queryScaleLayers int
	// noRopeEvery: every n-th layer (counting from 1) has no RoPE (SmolLM3).
	noRopeEvery int
	// granite: embedding, residual, attention and logit multipliers, and a
	// rope.scaling.finetuned that, false, turns RoPE off.
	granite bool
	// attnTemperature: Llama 4-style query temperature by position (Mistral 3).
	attnTemperature bool
	// fusedGateUp: ffn_up holds the gate's rows, then the up rows (Phi-3).
	fusedGateUp bool
	// ropeFactors names the per-dimension frequency-factor tensors the
	// family may carry: rope_freqs (Llama 3) and, for LongRoPE,
	// rope_factors_long / rope_factors_short.
	ropeFreqs, longRope bool
	// outBias, ffnBias: attn_output.bias and ffn_{gate,up,down}.bias may be
	// present.
	outBias, ffnBias bool
	// yarnKeys: the family reads the YaRN beta and log-multiplier keys.
	yarnKeys bool
	// moe makes the FFN a mixture of experts (see moeRule); nil: dense.
	moe *moeRule
	// sinks: each layer's attn_sinks holds one logit per query head that
	// joins its softmax's denominator (gpt-oss).
	sinks bool
	// ffnNorm names the FFN's pre-norm tensor when it is not ffn_norm
	// (gpt-oss calls it post_attention_norm).
	ffnNorm string
}

// moeRule is how a family's mixture-of-experts FFN routes each token: a
// router scores every expert, ExpertsUsed of them run, and their outputs
// are summed by weight. llama.cpp hard-wires these per architecture (it
// reads no gating or normalisation key for these families), and so does
// this table.
type moeRule struct {
	// optional: the file chooses, by expert_count, between the dense FFN
	// and experts (llama: Mixtral is a llama file with experts).
	optional bool
	// ffKey: the experts' width is expert_feed_forward_length; ffKeyOptional:
	// when absent it is feed_forward_length / expert_used_count (Qwen3-MoE).
	// Without ffKey it is feed_forward_length (Mixtral).
	ffKey, ffKeyOptional bool
	// gating is how the router's logits become the kept experts' weights.
	gating Gating
	// normalize divides the kept weights by their sum.
	normalize bool
	// biases: the router and every expert projection have biases (gpt-oss).
	biases bool
	// swigluOAI: the experts' activation is gpt-oss's clamped SwiGLU.
	swigluOAI bool
	// shared: besides the routed experts every token runs a shared expert
	// (ffn_{gate,up,down}_shexp, width expert_shared_feed_forward_length,
	// else feed_forward_length), its output scaled by
	// sigmoid(ffn_gate_inp_shexp · x) (Qwen2-MoE).
	shared bool
}

// Gating is how a mixture-of-experts router's logits become the weights of
// the experts a token runs.
type Gating uint8

const (
	// GatingSoftmax: softmax over every expert's logit; the largest
	// ExpertsUsed probabilities are kept (Mixtral, Qwen3-MoE).
	GatingSoftmax Gating = iota
	// GatingSoftmaxKept: the ExpertsUsed largest logits are kept and the
	// softmax runs over them alone (gpt-oss).
	GatingSoftmaxKept
)

// QKNorm is where a family RMS-normalizes its queries and keys.
type QKNorm uint8

const (
	QKNormNone    QKNorm = iota
	QKNormPerHead        // each head's vector, with a HeadDim weight (Qwen 3, Gemma 3)
	QKNormWhole          // the whole projection, with an Embd / KV-width weight (OLMo 2)
)

// windowRule is a family's sliding-window attention: in each run of
// pattern layers all but the last are local; where the file names no
// window, defWindow (0: the family has no window then).
type windowRule struct {
	defWindow, defPattern int
	// localUnscaled: local layers rotate without the file's frequency
	// scaling (Gemma 3, OLMo 2); Gemma 2 scales them like the rest.
	localUnscaled bool
	// localNoYarn: local layers take no YaRN extrapolation mix (OLMo 2).
	localNoYarn bool
	// localBaseGlobal: without rope.freq_base_swa, local layers rotate
	// with the global base (Gemma 2, OLMo 2, gpt-oss) rather than 10,000
	// (Gemma 3).
	localBaseGlobal bool
	// required: the file must name the window (gpt-oss).
	required bool
	// everyLayer: every layer is local, rotating as the global ones do
	// (Phi-3; there is no pattern key).
	everyLayer bool
}

// families lists the architectures this package runs.
var families = map[string]family{
	"llama": {ropeFreqs: true, longRope: true, outBias: true, ffnBias: true,
		moe: &moeRule{optional: true, normalize: true}},
	"mistral3": {ropeFreqs: true, longRope: true, outBias: true, ffnBias: true, yarnKeys: true, attnTemperature: true},
	"smollm3":  {ffnBias: true, noRopeEvery: 4},
	"granite":  {ropeFreqs: true, longRope: true, outBias: true, ffnBias: true, granite: true},
	"qwen2":    {ropeNeox: true},
	"qwen3":    {ropeNeox: true, qkNorm: QKNormPerHead},
	"qwen3moe": {ropeNeox: true, qkNorm: QKNormPerHead, moe: &moeRule{ffKey: true, ffKeyOptional: true, normalize: true}},
	// Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B): Qwen 2's attention, experts
	// whose kept softmax weights are not renormalised, and a gated shared
	// expert.
	"qwen2moe": {ropeNeox: true, moe: &moeRule{ffKey: true, ffKeyOptional: true, shared: true}},
	"olmo2": {ropeNeox: true, noPreNorm: true, postNorms: true, qkNorm: QKNormWhole,
		window: &windowRule{defPattern: 4, localUnscaled: true, localNoYarn: true, localBaseGlobal: true}},
	// Phi-3's window is applied on every layer, as its authors'
	// reference (transformers) does; llama.cpp turns it off (NOTES.md).
	"phi3": {ropeNeox: true, fusedGateUp: true, longRope: true, window: &windowRule{everyLayer: true}},
	"gemma2": {ropeNeox: true, gelu: true, postNorms: true, embdScaleSqrt: true, tiedOnly: true,
		window: &windowRule{defWindow: 4096, defPattern: 2, localBaseGlobal: true}, softcaps: true, attnSoftcap: 50, logitSoftcap: 30, queryScaleLayers: 46},
	"gemma3": {ropeNeox: true, gelu: true, postNorms: true, qkNorm: QKNormPerHead, embdScaleSqrt: true, tiedOnly: true,
		window: &windowRule{defPattern: 6, localUnscaled: true}, softcaps: true, queryScaleLayers: 62},
	// gpt-oss: every other layer local (the window a required key), YaRN
	// on every layer alike, sinks, and experts with biases. Its converter
	// writes the YaRN betas (32 and 1, what llama.cpp assumes without
	// reading them), so they are read rather than refused.
	"gpt-oss": {ropeNeox: true, outBias: true, sinks: true, ffnNorm: "post_attention_norm", yarnKeys: true,
		window: &windowRule{required: true, defPattern: 2, localBaseGlobal: true},
		moe:    &moeRule{ffKey: true, gating: GatingSoftmaxKept, biases: true, swigluOAI: true}},
}

// architectures is the list for error messages.
const architectures = "llama, mistral3, smollm3, granite, qwen2, qwen2moe, qwen3, qwen3moe, olmo2, phi3, gemma2, gemma3, gpt-oss"
