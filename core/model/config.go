package model

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
)

// Config is the shape of a model and every switch its forward pass reads.
type Config struct {
	Arch                             string
	Layers, Embd, Heads, KVHeads     int
	HeadDim, FF, Vocab, ContextTrain int
	RopeTheta, RMSEps                float32
	RopeNeox                         bool // rotate (x[i], x[i+d/2]); Llama GGUFs rotate adjacent pairs
	TiedOutput                       bool // the output head is token_embd

	// KVType is how KV caches store entries: a runtime's choice
	// ("kv_type"), not the file's; F16 unless SetKVType chose another.
	KVType kv.Type

	// Rope is the global layers' rotation scaling (linear, YaRN, LongRoPE
	// or none); RopeLocal the local (sliding-window) layers'. NoRopeEvery
	// > 0 leaves every NoRopeEvery-th layer (counting from 1) unrotated,
	// and NoRope leaves every layer so (Granite's rope.scaling.finetuned
	// false).
	Rope, RopeLocal RopeScaling
	NoRopeEvery     int
	NoRope          bool

	// EmbdScale multiplies the token embeddings (√Embd for Gemma, Granite's
	// embedding_scale); 0 means 1. GELU says the FFN gate is GELU (tanh form)
	// instead of SiLU. NoPreNorm: the blocks read the residual stream
	// unnormed (OLMo 2). PostNorms: each block's output is RMS-normed before
	// it joins the residual stream. QKNorm: queries and keys are RMS-normed
	// per head or whole before RoPE. ResidualScale (Granite) multiplies each
	// block's output before it joins the stream, LogitScale divides the
	// logits; 0 means 1 for both.
	EmbdScale     float32
	GELU          bool
	NoPreNorm     bool
	PostNorms     bool
	QKNorm        QKNorm
	ResidualScale float32
	LogitScale    float32
	// FusedGateUp: ffn_up holds the gate rows then the up rows (Phi-3).
	FusedGateUp bool

	// Local layers see only the SlidingWindow latest positions
	// (themselves included) and rotate with RopeThetaLocal: in each run of
	// SlidingPattern layers all but the last, or every layer when
	// SlidingPattern is 0 (then rotating as global ones do). A
	// SlidingWindow of 0 makes every layer global.
	// LogitSoftcap, when set, maps each logit z to c·tanh(z/c);
	// AttnSoftcap does the same to every scaled query·key score (Gemma 2).
	SlidingWindow  int
	SlidingPattern int
	RopeThetaLocal float32
	LogitSoftcap   float32
	AttnSoftcap    float32
	// AttnScale multiplies the query·key products: 1/√HeadDim unless the
	// file or family says otherwise.
	AttnScale float32
	// AttnTempScale, when set, multiplies each query by
	// 1 + AttnTempScale·ln(⌊pos/AttnTempFloor⌋ + 1) (Mistral 3's long-context
	// temperature).
	AttnTempScale float32
	AttnTempFloor int

	// What the file's tensors add to the plain layer (set as they load):
	// a fused QKV projection, attn_output or FFN biases, per-pair RoPE
	// frequency factors, attention sinks (a per-head logit in each
	// softmax's denominator).
	FusedQKV, OutputBias, FFNBias, RopeFactors, AttnSinks bool

	// MoE, when Experts > 0, makes every layer's FFN a mixture of experts.
	MoE MoE
}

// MoE is a mixture-of-experts FFN: a router scores the Experts experts for
// each token, the Used best run (SwiGLU FFNs of width FF, each with
// biases when Biases), and their outputs are summed, weighted as Gating
// and Normalize say.
type MoE struct {
	Experts, Used, FF int
	Gating            Gating
	Normalize         bool
	Biases            bool
	// SwigluOAI: the activation is gpt-oss's, SiLU(1.702·min(g, 7))-style
	// with both inputs clamped (see swigluOAI).
	SwigluOAI bool
	// SharedFF > 0: every token also runs a shared SwiGLU expert of this
	// width, its output weighted by sigmoid(ffn_gate_inp_shexp · x)
	// (Qwen2-MoE).
	SharedFF int
}

// RopeScaling is how a layer's rotation departs from θ_i = base^(-2i/d):
// GGML's rope_ext parameters, which linear, YaRN and LongRoPE scaling all
// come down to. The zero value (FreqScale 0) means no scaling.
type RopeScaling struct {
	Kind      string  // "", "linear", "yarn", "longrope" (for messages)
	FreqScale float32 // positions are multiplied by this (1/factor); 0 means 1
	// ExtFactor mixes extrapolated and interpolated angles per dimension
	// (YaRN's ramp between the BetaFast and BetaSlow correction dims,
	// computed against OrigCtx); 0 turns the mix off.
	ExtFactor          float32
	BetaFast, BetaSlow float32
	OrigCtx            int
	// AttnFactor multiplies cos and sin (YaRN's magnitude correction, or
	// the file's rope.scaling.attn_factor); 0 means 1.
	AttnFactor float32
}

// Scaled reports whether the rotation departs from the plain one.
func (r RopeScaling) Scaled() bool {
	return (r.FreqScale != 0 && r.FreqScale != 1) || r.ExtFactor != 0 || (r.AttnFactor != 0 && r.AttnFactor != 1)
}

// ffnWidth is the width of one FFN's hidden rows: FF, or the widest of a
// routed expert's and the shared expert's.
func (c *Config) ffnWidth() int {
	if c.MoE.Experts > 0 {
		return max(c.MoE.FF, c.MoE.SharedFF)
	}
	return c.FF
}

// Local reports whether layer li attends only within the sliding window:
// in each run of SlidingPattern layers all but the last, or with no
// pattern (0) every layer.
func (c *Config) Local(li int) bool {
	return c.SlidingWindow > 0 && (c.SlidingPattern == 0 || li%c.SlidingPattern < c.SlidingPattern-1)
}

// Rotates reports whether layer li applies RoPE.
func (c *Config) Rotates(li int) bool {
	return !c.NoRope && (c.NoRopeEvery == 0 || (li+1)%c.NoRopeEvery != 0)
}

// Extras names what the forward pass of this model does beyond the plain
// Llama/Qwen2 one (for a device whose kernels only run that one): empty
// for SmolLM2, Llama 2 and Qwen2.
func (c *Config) Extras() []string {
	var x []string
	add := func(on bool, what string) {
		if on {
			x = append(x, what)
		}
	}
	add(c.GELU, "GELU")
	add(c.SlidingWindow > 0, "sliding-window attention")
	add(c.EmbdScale != 0, "embedding scale")
	add(c.LogitSoftcap != 0 || c.AttnSoftcap != 0, "soft-capping")
	add(c.Rope.Scaled() || c.RopeLocal.Scaled(), c.Rope.Kind+" RoPE scaling")
	add(c.NoRope || c.NoRopeEvery != 0, "layers without RoPE")
	add(c.NoPreNorm || c.PostNorms || c.QKNorm != QKNormNone, "extra norms")
	add(c.ResidualScale != 0 || c.LogitScale != 0, "residual and logit scales")
	add(c.FusedGateUp, "fused gate/up")
	add(c.AttnTempScale != 0, "attention temperature")
	add(c.AttnScale != float32(1/math.Sqrt(float64(c.HeadDim))), "attention scale")
	add(c.FusedQKV, "fused QKV")
	add(c.OutputBias || c.FFNBias, "output or FFN biases")
	add(c.RopeFactors, "RoPE frequency factors")
	add(c.AttnSinks, "attention sinks")
	add(c.MoE.Experts > 0, "mixture of experts")
	add(c.MoE.SharedFF > 0, "shared expert")
	return x
}

// maxContextTrain bounds context_length, which may size a KV cache (the
// engine's default context is min(context_length, 2048)): no model is
// trained on a billion tokens, so a larger value is a damaged field.
const maxContextTrain = 1 << 30

// meta reads an architecture's metadata keys and remembers which it read,
// so that readConfig can refuse the keys it did not (metadata that would
// change the computation must never be ignored).
type meta struct {
	f    *gguf.File
	arch string
	read map[string]bool
	errs []error
}

func (m *meta) fail(format string, args ...any) { m.errs = append(m.errs, fmt.Errorf(format, args...)) }

func (m *meta) has(key string) bool {
	m.read[m.arch+"."+key] = true
	_, ok := m.f.Lookup(m.arch + "." + key)
	return ok
}

// integer reads arch.key, of any integer type, into dst; an absent key
// takes def when def ≥ 0. Values outside [lo, hi] are errors.
func (m *meta) integer(key string, dst *int, def, lo, hi int) {
	m.read[m.arch+"."+key] = true
	v, err := m.f.IntRange(m.arch+"."+key, lo, hi)
	switch {
	case errors.Is(err, gguf.ErrKeyNotFound) && def >= 0:
		*dst = def
	case err != nil:
		m.errs = append(m.errs, err)
	default:
		*dst = v
	}
}

// float reads arch.key into dst; an absent key takes def when def > 0.
// The value must be positive and finite.
func (m *meta) float(key string, dst *float32, def float32) {
	m.read[m.arch+"."+key] = true
	v, err := m.f.Float32(m.arch + "." + key)
	switch {
	case errors.Is(err, gguf.ErrKeyNotFound) && def > 0:
		*dst = def
	case err != nil:
		m.errs = append(m.errs, err)
	case !(v > 0) || math.IsInf(float64(v), 1):
		m.fail("%s.%s is %g, want a positive finite number", m.arch, key, v)
	default:
		*dst = v
	}
}

// optFloat reads arch.key into dst only when the file has it.
func (m *meta) optFloat(key string, dst *float32) {
	if m.has(key) {
		m.float(key, dst, -1)
	}
}

// boolean reads arch.key, def when absent.
func (m *meta) boolean(key string, def bool) bool {
	m.read[m.arch+"."+key] = true
	v, err := m.f.Bool(m.arch + "." + key)
	switch {
	case errors.Is(err, gguf.ErrKeyNotFound):
		return def
	case err != nil:
		m.errs = append(m.errs, err)
		return def
	}
	return v
}

func (m *meta) str(key string) (string, bool) {
	m.read[m.arch+"."+key] = true
	v, err := m.f.String(m.arch + "." + key)
	switch {
	case errors.Is(err, gguf.ErrKeyNotFound):
		return "", false
	case err != nil:
		m.errs = append(m.errs, err)
		return "", false
	}
	return v, true
}

func (m *meta) err() error {
	if len(m.errs) == 0 {
		return nil
	}
	return fmt.Errorf("model: %w", errors.Join(m.errs...))
}

// perLayerTensors is how many tensors every layer has at least (two norms
// or two post-norms, a fused QKV and the output projection, and a fused
// gate/up and down), so the file's tensor count bounds the layer count.
const perLayerTensors = 6

// readConfig reads the model's shape from the metadata and checks it
// against what the file holds before anything is sized by it: every
// dimension is positive, products of dimensions do not overflow, the
// layer count is bounded by the tensors present, the embedding width and
// vocabulary are token_embd's. (The layers' tensors are then checked
// against this shape one by one as they load.) Every key under the
// architecture's prefix must be one this package reads or knows to be
// harmless; any other is refused by name.
func readConfig(f *gguf.File) (Config, family, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return Config{}, family{}, fmt.Errorf("model: %w", err)
	}
	fam, ok := families[arch]
	if !ok {
		return Config{}, family{}, fmt.Errorf("model: architecture %q is not supported (%s)", arch, architectures)
	}
	c := Config{Arch: arch, RopeNeox: fam.ropeNeox, GELU: fam.gelu, NoPreNorm: fam.noPreNorm,
		PostNorms: fam.postNorms, QKNorm: fam.qkNorm, FusedGateUp: fam.fusedGateUp, NoRopeEvery: fam.noRopeEvery}
	m := &meta{f: f, arch: arch, read: map[string]bool{}}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return Config{}, family{}, errors.New("model: tensor token_embd.weight is missing")
	}
	if len(emb.Dims) != 2 {
		return Config{}, family{}, fmt.Errorf("model: tensor token_embd.weight has dims %v, want [embedding_length vocab]", emb.Dims)
	}
	c.Vocab = emb.Dims[1]
	// Every layer has perLayerTensors tensors besides token_embd, so the
	// file's tensor count bounds the layers before any is looked for: a
	// block_count of 2^31 fails here at once instead of after growing a
	// slice of layers toward it.
	m.integer("block_count", &c.Layers, -1, 1, math.MaxInt)
	if maxLayers := (len(f.Tensors) - 1) / perLayerTensors; len(m.errs) == 0 && c.Layers > maxLayers {
		m.fail("%s.block_count is %d but the file holds %d tensors, enough for at most %d layers of %d tensors",
			arch, c.Layers, len(f.Tensors), max(maxLayers, 0), perLayerTensors)
	}
	m.integer("embedding_length", &c.Embd, -1, 1, math.MaxInt)
	if len(m.errs) == 0 && c.Embd != emb.Dims[0] {
		m.fail("%s.embedding_length is %d but token_embd.weight rows have %d elements", arch, c.Embd, emb.Dims[0])
	}
	m.integer("attention.head_count", &c.Heads, -1, 1, math.MaxInt)
	m.integer("feed_forward_length", &c.FF, -1, 1, math.MaxInt)
	m.integer("context_length", &c.ContextTrain, 2048, 1, maxContextTrain)
	m.float("rope.freq_base", &c.RopeTheta, 10000)
	m.float("attention.layer_norm_rms_epsilon", &c.RMSEps, -1)
	if err := m.err(); err != nil {
		return Config{}, family{}, err
	}
	m.integer("attention.head_count_kv", &c.KVHeads, c.Heads, 1, c.Heads)
	if c.Embd%c.Heads != 0 && !m.has("attention.key_length") {
		m.fail("embedding_length %d is not a multiple of head_count %d", c.Embd, c.Heads)
	} else {
		m.integer("attention.key_length", &c.HeadDim, c.Embd/c.Heads, 1, math.MaxInt)
	}
	if len(m.errs) == 0 {
		// The attention widths size the scratch and the KV cache; each
		// must be a real product before the tensors are compared with it.
		for _, p := range []struct {
			name string
			n    int
		}{{"head_count", c.Heads}, {"head_count_kv", c.KVHeads}} {
			if hi, lo := bits.Mul64(uint64(p.n), uint64(c.HeadDim)); hi != 0 || lo > math.MaxInt32 {
				m.fail("%s %d × head dimension %d is too large", p.name, p.n, c.HeadDim)
			}
		}
		var rot int
		m.integer("rope.dimension_count", &rot, c.HeadDim, 1, math.MaxInt)
		if rot != c.HeadDim {
			m.fail("rope.dimension_count %d ≠ head dimension %d (partial rotary embeddings are not supported)", rot, c.HeadDim)
		}
		if c.HeadDim%2 != 0 {
			m.fail("head dimension %d is odd", c.HeadDim)
		}
		if c.Heads%c.KVHeads != 0 {
			m.fail("head_count %d is not a multiple of head_count_kv %d", c.Heads, c.KVHeads)
		}
		var vDim int
		m.integer("attention.value_length", &vDim, c.HeadDim, 1, math.MaxInt)
		if vDim != c.HeadDim {
			m.fail("attention.value_length %d ≠ key_length %d", vDim, c.HeadDim)
		}
	}
	if err := m.err(); err != nil {
		return Config{}, family{}, err
	}
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	configure(&c, fam, m)
	readMoE(&c, fam, m)
	refuseUnread(m)
	if err := m.err(); err != nil {
		return Config{}, family{}, err
	}
	return c, fam, nil
}

// configure reads the metadata the family's switches depend on.
func configure(c *Config, fam family, m *meta) {
	if fam.embdScaleSqrt {
		c.EmbdScale = float32(math.Sqrt(float64(c.Embd)))
	}
	if fam.queryScaleLayers > 0 && c.Layers == fam.queryScaleLayers {
		c.AttnScale = float32(1 / math.Sqrt(float64(c.Embd/c.Heads)))
	}
	if fam.granite {
		m.float("logit_scale", &c.LogitScale, -1)
		m.optFloat("residual_scale", &c.ResidualScale)
		m.optFloat("embedding_scale", &c.EmbdScale)
		m.optFloat("attention.scale", &c.AttnScale)
		c.NoRope = !m.boolean("rope.scaling.finetuned", true)
	}
	if fam.softcaps {
		c.LogitSoftcap, c.AttnSoftcap = fam.logitSoftcap, fam.attnSoftcap
		m.optFloat("final_logit_softcapping", &c.LogitSoftcap)
		if fam.attnSoftcap > 0 {
			m.optFloat("attn_logit_softcapping", &c.AttnSoftcap)
		}
	}
	c.Rope = readRopeScaling(c, fam, m)
	if w := fam.window; w != nil {
		def := w.defWindow
		if w.required {
			def = -1
		}
		m.integer("attention.sliding_window", &c.SlidingWindow, def, 0, maxContextTrain)
		if c.SlidingWindow > 0 && w.everyLayer {
			c.SlidingPattern = 0
		} else if c.SlidingWindow > 0 {
			m.integer("attention.sliding_window_pattern", &c.SlidingPattern, w.defPattern, 1, math.MaxInt)
			base := float32(10000)
			if w.localBaseGlobal {
				base = c.RopeTheta
			}
			m.float("rope.freq_base_swa", &c.RopeThetaLocal, base)
			c.RopeLocal = c.Rope
			if w.localUnscaled {
				c.RopeLocal.FreqScale = 1
			}
			if w.localNoYarn {
				c.RopeLocal.ExtFactor, c.RopeLocal.AttnFactor = 0, 1
			}
		}
	}
	if fam.attnTemperature && m.has("attention.temperature_scale") {
		m.float("attention.temperature_scale", &c.AttnTempScale, -1)
		c.AttnTempFloor = c.Rope.OrigCtx
		if c.AttnTempFloor <= 0 {
			m.fail("%s.attention.temperature_scale needs rope.scaling.original_context_length", c.Arch)
		}
	}
}

// readRopeScaling turns the rope.scaling.* keys into the global layers'
// RopeScaling, as llama.cpp derives its rope_ext parameters from them.
func readRopeScaling(c *Config, fam family, m *meta) RopeScaling {
	r := RopeScaling{Kind: "linear", FreqScale: 1, AttnFactor: 1, BetaFast: 32, BetaSlow: 1, OrigCtx: c.ContextTrain}
	if kind, ok := m.str("rope.scaling.type"); ok {
		r.Kind = kind
	}
	switch r.Kind {
	case "none", "linear", "yarn":
	case "longrope":
		if !fam.longRope {
			m.fail("%s.rope.scaling.type longrope is not supported for %s", c.Arch, c.Arch)
		}
	default:
		m.fail("%s.rope.scaling.type %q is not supported (none, linear, yarn, longrope)", c.Arch, r.Kind)
	}
	var factor float32
	if m.has("rope.scaling.factor") {
		m.float("rope.scaling.factor", &factor, -1)
	} else if m.has("rope.scale_linear") {
		m.float("rope.scale_linear", &factor, -1)
	}
	if factor != 0 && r.Kind != "none" {
		r.FreqScale = 1 / factor
	}
	m.integer("rope.scaling.original_context_length", &r.OrigCtx, c.ContextTrain, 1, maxContextTrain)
	var ropeAttn float32 = 1
	m.optFloat("rope.scaling.attn_factor", &ropeAttn)
	var logMul float32
	if fam.yarnKeys {
		m.optFloat("rope.scaling.yarn_beta_fast", &r.BetaFast)
		m.optFloat("rope.scaling.yarn_beta_slow", &r.BetaSlow)
		if m.has("rope.scaling.yarn_log_multiplier") {
			m.float("rope.scaling.yarn_log_multiplier", &logMul, -1)
		}
	}
	if r.Kind == "yarn" {
		r.ExtFactor = 1
		f := 1 / r.FreqScale
		mscale := func(scale, m float32) float32 {
			if scale <= 1 {
				return 1
			}
			return 0.1*m*float32(math.Log(float64(scale))) + 1
		}
		a := mscale(f, 1)
		if logMul != 0 {
			a = mscale(f, 1) / mscale(f, logMul)
		}
		// rope_ext multiplies by 1 + 0.1·ln(factor) wherever the mix is on;
		// GGML's caller divides it out again, and so does this.
		r.AttnFactor = a / (1 + 0.1*float32(math.Log(float64(f))))
	}
	r.AttnFactor *= ropeAttn
	return r
}

// harmlessKeys are keys under an architecture's prefix that do not change
// what the forward pass computes.
var harmlessKeys = map[string]bool{
	"vocab_size":             true,
	"rope.scaling.finetuned": true, // only Granite reads it, and it does
}

// refuseUnread fails on every key under the architecture's prefix that
// configure did not read and that is not known to be harmless, and on
// harmless-looking keys whose value would change the computation.
func refuseUnread(m *meta) {
	var unread []string
	prefix := m.arch + "."
	for _, kv := range m.f.KV {
		k, ok := strings.CutPrefix(kv.Key, prefix)
		if !ok || m.read[kv.Key] || harmlessKeys[k] {
			continue
		}
		switch k {
		case "attention.causal":
			if b, err := m.f.Bool(kv.Key); err == nil && b {
				continue
			}
		case "pooling_type":
			if v, err := m.f.Int(kv.Key); err == nil && v == 0 {
				continue
			}
		case "expert_count", "expert_used_count", "expert_group_count", "expert_group_used_count":
			// A dense family's file may say it has no experts.
			if v, err := m.f.Int(kv.Key); err == nil && v == 0 {
				continue
			}
		}
		unread = append(unread, kv.Key)
	}
	if len(unread) > 0 {
		sort.Strings(unread)
		m.fail("metadata %s: not supported for %s (each would change the computation)", strings.Join(unread, ", "), m.arch)
	}
}
