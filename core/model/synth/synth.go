// Package synth writes small synthetic GGUF models of every architecture
// the forward pass runs: random weights at realistic scales under a real
// vocabulary (copied from a model file the project has), deterministic for
// a given Spec. Real weights for most families are not available to the
// tests; these files are what llama.cpp's golden logits are recorded on
// (testdata/families), and what the tests compare the forward pass with.
//
// The tensor names and metadata keys are GGUF's (llama.cpp's converter
// writes them the same way). This package describes each family's tensors
// on its own, apart from core/model's loader, so that the two check each
// other.
package synth

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/quant"
)

// Spec is one synthetic model.
type Spec struct {
	Name                             string     // names the golden data
	Arch                             string     // general.architecture
	Weights                          quant.Type // the layer matrices (and an untied head)
	Embed                            quant.Type // token_embd
	Layers, Embd, Heads, KVHeads, FF int
	Seed                             uint64
	Tied                             bool // no output.weight: the head is token_embd (always for Gemma)
	// Tensors beyond the family's plain set.
	FusedQKV, QKVBias, OutBias, FFNBias bool
	RopeFreqs                           bool // rope_freqs.weight (Llama 3)
	LongRope                            bool // rope_factors_short/long.weight
	// Experts > 0 makes every FFN a mixture of Experts experts of width
	// ExpertFF, ExpertsUsed of them per token, stored as ExpertWeights
	// (F32, the zero value, means Weights).
	Experts, ExpertsUsed, ExpertFF int
	ExpertWeights                  quant.Type
	// SharedFF > 0 adds a shared expert of that width to every layer's
	// experts, with its sigmoid gate vector (Qwen2-MoE).
	SharedFF int
	// KV is extra metadata under the architecture's prefix (the key
	// without it), written after the shape.
	KV map[string]any
	// Context is the context the golden data ran at (llama.cpp's n_ctx).
	Context int
}

// HeadDim is Embd/Heads.
func (s Spec) HeadDim() int { return s.Embd / s.Heads }

// family is what a Spec's architecture puts in each layer.
type family struct {
	qkNorm     string // "", "head" or "whole"
	postNorms  bool
	noPreNorm  bool
	fusedUp    bool
	tiedOnly   bool
	untiedOnly bool   // output.weight always (gpt-oss)
	ffnNorm    string // the FFN's pre-norm when not ffn_norm
	// expertFF: the file names the experts' width
	// (expert_feed_forward_length); expertBiases: router and experts have
	// biases; sinks: attn_sinks per layer (gpt-oss).
	expertFF, expertBiases, sinks bool
}

var families = map[string]family{
	"llama": {}, "mistral3": {}, "smollm3": {}, "granite": {}, "qwen2": {},
	"qwen3":    {qkNorm: "head"},
	"olmo2":    {qkNorm: "whole", postNorms: true, noPreNorm: true},
	"phi3":     {fusedUp: true},
	"gemma2":   {postNorms: true, tiedOnly: true},
	"gemma3":   {qkNorm: "head", postNorms: true, tiedOnly: true},
	"qwen3moe": {qkNorm: "head", expertFF: true},
	"qwen2moe": {expertFF: true},
	"gpt-oss":  {untiedOnly: true, ffnNorm: "post_attention_norm", expertFF: true, expertBiases: true, sinks: true},
}

// Write builds the file. vocab is a model file whose tokenizer.* metadata
// the synthetic model takes (its vocabulary size sets the embedding's).
func Write(s Spec, vocab *gguf.File) ([]byte, error) {
	fam, ok := families[s.Arch]
	if !ok {
		return nil, fmt.Errorf("synth: unknown architecture %q", s.Arch)
	}
	toks, err := vocab.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, fmt.Errorf("synth: the vocabulary file: %w", err)
	}
	nv := len(toks)
	w := gguf.NewWriter()
	var errs []error
	add := func(k string, v any) {
		if err := w.AddKV(k, v); err != nil {
			errs = append(errs, err)
		}
	}
	a := s.Arch + "."
	add("general.architecture", s.Arch)
	// Not the spec's name: llama.cpp gives some vocabularies special
	// handling by the model's name (one with "phi3" in it, say).
	add("general.name", "lmstream synthetic model")
	add(a+"block_count", uint32(s.Layers))
	add(a+"context_length", uint32(4096))
	add(a+"embedding_length", uint32(s.Embd))
	add(a+"feed_forward_length", uint32(s.FF))
	add(a+"attention.head_count", uint32(s.Heads))
	add(a+"attention.head_count_kv", uint32(s.KVHeads))
	add(a+"rope.freq_base", float32(10000))
	add(a+"attention.layer_norm_rms_epsilon", float32(1e-5))
	if s.Experts > 0 {
		add(a+"expert_count", uint32(s.Experts))
		add(a+"expert_used_count", uint32(s.ExpertsUsed))
		if fam.expertFF {
			add(a+"expert_feed_forward_length", uint32(s.ExpertFF))
		}
		if s.SharedFF > 0 {
			add(a+"expert_shared_feed_forward_length", uint32(s.SharedFF))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.KV)) {
		add(a+k, s.KV[k])
	}
	for _, kv := range vocab.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			add(kv.Key, kv.Value)
		}
	}
	if len(errs) > 0 {
		return nil, errs[0]
	}

	r := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	normal := func(sd float64) func() float32 { return func() float32 { return float32(r.NormFloat64() * sd) } }
	near1 := func() float32 { return float32(1 + 0.1*r.NormFloat64()) }
	tensor := func(name string, typ quant.Type, gen func() float32, dims ...int) {
		if err != nil {
			return
		}
		n := 1
		for _, d := range dims {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = gen()
		}
		var data []byte
		if data, err = encode(typ, x, dims[0]); err == nil {
			err = w.AddTensor(name, typ, dims, data)
		}
	}
	hd := s.HeadDim()
	qd, kvd := s.Heads*hd, s.KVHeads*hd
	mat := func(cols int, scale float64) func() float32 { return normal(scale / math.Sqrt(float64(cols))) }
	// Embeddings small beside what the layers add: with a tied head the
	// logits would otherwise mostly repeat the input token.
	// Gemma multiplies them by √Embd.
	embSD := 0.25
	if fam.tiedOnly {
		embSD /= math.Sqrt(float64(s.Embd))
	}
	tensor("token_embd.weight", s.Embed, normal(embSD), s.Embd, nv)
	tensor("output_norm.weight", quant.F32, near1, s.Embd)
	if (!s.Tied || fam.untiedOnly) && !fam.tiedOnly {
		tensor("output.weight", s.Weights, mat(s.Embd, 2), s.Embd, nv)
	}
	if s.RopeFreqs {
		// Llama 3's factors: 1 for the fast pairs, rising to 8 for the slow.
		f := 0
		tensor("rope_freqs.weight", quant.F32, func() float32 { f++; return float32(1 + 7*float64(f-1)/float64(hd/2-1)) }, hd/2)
	}
	if s.LongRope {
		f := 0
		tensor("rope_factors_short.weight", quant.F32, func() float32 { f++; return float32(1 + 0.5*float64(f-1)/float64(hd/2)) }, hd/2)
		f = 0
		tensor("rope_factors_long.weight", quant.F32, func() float32 { f++; return float32(1 + 3*float64(f-1)/float64(hd/2)) }, hd/2)
	}
	for l := 0; l < s.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if !fam.noPreNorm {
			ffnNorm := "ffn_norm"
			if fam.ffnNorm != "" {
				ffnNorm = fam.ffnNorm
			}
			tensor(p+"attn_norm.weight", quant.F32, near1, s.Embd)
			tensor(p+ffnNorm+".weight", quant.F32, near1, s.Embd)
		}
		if fam.sinks {
			tensor(p+"attn_sinks.weight", quant.F32, normal(1), s.Heads)
		}
		// Queries and keys a little larger than 1/√n, so attention is
		// not uniform.
		if s.FusedQKV {
			tensor(p+"attn_qkv.weight", s.Weights, mat(s.Embd, 2), s.Embd, qd+2*kvd)
			if s.QKVBias {
				tensor(p+"attn_qkv.bias", quant.F32, normal(0.2), qd+2*kvd)
			}
		} else {
			tensor(p+"attn_q.weight", s.Weights, mat(s.Embd, 2), s.Embd, qd)
			tensor(p+"attn_k.weight", s.Weights, mat(s.Embd, 2), s.Embd, kvd)
			tensor(p+"attn_v.weight", s.Weights, mat(s.Embd, 1), s.Embd, kvd)
			if s.QKVBias {
				tensor(p+"attn_q.bias", quant.F32, normal(0.2), qd)
				tensor(p+"attn_k.bias", quant.F32, normal(0.2), kvd)
				tensor(p+"attn_v.bias", quant.F32, normal(0.2), kvd)
			}
		}
		tensor(p+"attn_output.weight", s.Weights, mat(qd, 1), qd, s.Embd)
		if s.OutBias {
			tensor(p+"attn_output.bias", quant.F32, normal(0.1), s.Embd)
		}
		switch fam.qkNorm {
		case "head":
			tensor(p+"attn_q_norm.weight", quant.F32, near1, hd)
			tensor(p+"attn_k_norm.weight", quant.F32, near1, hd)
		case "whole":
			tensor(p+"attn_q_norm.weight", quant.F32, near1, qd)
			tensor(p+"attn_k_norm.weight", quant.F32, near1, kvd)
		}
		if fam.postNorms {
			tensor(p+"post_attention_norm.weight", quant.F32, near1, s.Embd)
			tensor(p+"post_ffw_norm.weight", quant.F32, near1, s.Embd)
		}
		if s.Experts > 0 {
			writeExperts(s, fam, p, tensor, normal, mat)
			continue
		}
		if fam.fusedUp {
			tensor(p+"ffn_up.weight", s.Weights, mat(s.Embd, 1), s.Embd, 2*s.FF)
		} else {
			tensor(p+"ffn_gate.weight", s.Weights, mat(s.Embd, 1), s.Embd, s.FF)
			tensor(p+"ffn_up.weight", s.Weights, mat(s.Embd, 1), s.Embd, s.FF)
		}
		tensor(p+"ffn_down.weight", s.Weights, mat(s.FF, 1), s.FF, s.Embd)
		if s.FFNBias {
			tensor(p+"ffn_gate.bias", quant.F32, normal(0.1), s.FF)
			tensor(p+"ffn_up.bias", quant.F32, normal(0.1), s.FF)
			tensor(p+"ffn_down.bias", quant.F32, normal(0.1), s.Embd)
		}
	}
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeExperts writes layer p's router (float32, scaled so that routing
// is decisive but not one-sided) and its experts' 3-D tensors: Experts
// slabs of ExpertFF rows (gate, up) or Embd rows (down).
func writeExperts(s Spec, fam family, p string, tensor func(string, quant.Type, func() float32, ...int),
	normal func(float64) func() float32, mat func(int, float64) func() float32) {
	wt := s.ExpertWeights
	if wt == quant.F32 {
		wt = s.Weights
	}
	n, ff := s.Experts, s.ExpertFF
	tensor(p+"ffn_gate_inp.weight", quant.F32, mat(s.Embd, 2), s.Embd, n)
	tensor(p+"ffn_gate_exps.weight", wt, mat(s.Embd, 1), s.Embd, ff, n)
	tensor(p+"ffn_up_exps.weight", wt, mat(s.Embd, 1), s.Embd, ff, n)
	tensor(p+"ffn_down_exps.weight", wt, mat(ff, 1), ff, s.Embd, n)
	if fam.expertBiases {
		tensor(p+"ffn_gate_inp.bias", quant.F32, normal(0.5), n)
		tensor(p+"ffn_gate_exps.bias", quant.F32, normal(0.1), ff, n)
		tensor(p+"ffn_up_exps.bias", quant.F32, normal(0.1), ff, n)
		tensor(p+"ffn_down_exps.bias", quant.F32, normal(0.1), s.Embd, n)
	}
	if sff := s.SharedFF; sff > 0 {
		// The gate's dot product with a normed row is about N(0, 1):
		// the sigmoid spreads over (0, 1) instead of saturating.
		tensor(p+"ffn_gate_inp_shexp.weight", quant.F32, mat(s.Embd, 1), s.Embd)
		tensor(p+"ffn_gate_shexp.weight", wt, mat(s.Embd, 1), s.Embd, sff)
		tensor(p+"ffn_up_shexp.weight", wt, mat(s.Embd, 1), s.Embd, sff)
		tensor(p+"ffn_down_shexp.weight", wt, mat(sff, 1), sff, s.Embd)
	}
}

// encode stores x (rows of cols values) as typ.
func encode(typ quant.Type, x []float32, cols int) ([]byte, error) {
	rb, err := typ.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	data := make([]byte, rb*(len(x)/cols))
	if typ == quant.F32 {
		for i, v := range x {
			b := math.Float32bits(v)
			data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
		}
		return data, nil
	}
	return data, quant.Quantize(typ, x, data)
}
