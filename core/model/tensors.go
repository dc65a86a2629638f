package model

import (
	"fmt"
	"sort"
	"strings"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
)

// load reads the configuration, then every tensor the family's layers
// name, and refuses a file holding any tensor it did not read: a tensor
// this package does not know may change what the model computes.
func load(f *gguf.File, progress func(float64)) (*Model, error) {
	m, err := readTensors(f, false)
	if err != nil {
		return nil, err
	}
	m.pack(progress, f.Release)
	return m, nil
}

// readTensors reads the configuration and the tensors (their data left in
// the file's mapping). With dry set nothing is copied or converted (the
// vectors stay nil): Measure sizes the matrices from it.
func readTensors(f *gguf.File, dry bool) (*Model, error) {
	cfg, fam, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	// cfg.Layers is bounded by the tensors the file holds, so this is a
	// few hundred bytes per layer the file can really have.
	m := &Model{cfg: cfg, layers: make([]layer, 0, cfg.Layers)}
	ld := &loader{f: f, dry: dry, used: make(map[string]bool, len(f.Tensors))}
	m.tokEmbd = ld.matrix("token_embd.weight", cfg.Embd, cfg.Vocab)
	m.outNorm = ld.vector("output_norm.weight", cfg.Embd)
	if _, ok := f.Tensor("output.weight"); ok && !fam.tiedOnly {
		m.output = ld.matrix("output.weight", cfg.Embd, cfg.Vocab)
	} else {
		m.cfg.TiedOutput = true
		m.output = m.tokEmbd
	}
	m.readRopeFactors(ld, fam)
	// The first missing or misshapen tensor ends the loop: nothing after
	// it is looked up, let alone allocated.
	for i := 0; i < cfg.Layers && ld.err == nil; i++ {
		m.layers = append(m.layers, ld.layer(&m.cfg, fam, i))
	}
	if ld.err == nil {
		ld.refuseUnused()
	}
	if ld.err != nil {
		return nil, ld.err
	}
	return m, nil
}

// layer reads layer i's tensors: Q, K and V separate or fused, each bias
// where the file has one, the norms the family places, the FFN's gate and
// up separate or fused (Phi-3), or its experts.
func (ld *loader) layer(c *Config, fam family, i int) layer {
	p := fmt.Sprintf("blk.%d.", i)
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim // checked not to overflow
	var l layer
	if !c.NoPreNorm {
		ffnNorm := "ffn_norm"
		if fam.ffnNorm != "" {
			ffnNorm = fam.ffnNorm
		}
		l.attnNorm = ld.vector(p+"attn_norm.weight", c.Embd)
		l.ffnNorm = ld.vector(p+ffnNorm+".weight", c.Embd)
	}
	if ld.has(p + "attn_qkv.weight") {
		c.FusedQKV = true
		qkv := ld.matrix(p+"attn_qkv.weight", c.Embd, qDim+2*kvDim)
		l.wq, l.wk, l.wv = qkv.rowsView(0, qDim), qkv.rowsView(qDim, qDim+kvDim), qkv.rowsView(qDim+kvDim, qDim+2*kvDim)
		if b := ld.optionalVector(p+"attn_qkv.bias", qDim+2*kvDim); b != nil {
			l.bq, l.bk, l.bv = b[:qDim:qDim], b[qDim:qDim+kvDim:qDim+kvDim], b[qDim+kvDim:]
		}
	} else {
		l.wq = ld.matrix(p+"attn_q.weight", c.Embd, qDim)
		l.wk = ld.matrix(p+"attn_k.weight", c.Embd, kvDim)
		l.wv = ld.matrix(p+"attn_v.weight", c.Embd, kvDim)
		l.bq = ld.optionalVector(p+"attn_q.bias", qDim)
		l.bk = ld.optionalVector(p+"attn_k.bias", kvDim)
		l.bv = ld.optionalVector(p+"attn_v.bias", kvDim)
	}
	l.wo = ld.matrix(p+"attn_output.weight", qDim, c.Embd)
	if fam.outBias {
		l.bo = ld.optionalVector(p+"attn_output.bias", c.Embd)
		c.OutputBias = c.OutputBias || ld.has(p+"attn_output.bias")
	}
	switch c.QKNorm {
	case QKNormPerHead:
		l.qNorm = ld.vector(p+"attn_q_norm.weight", c.HeadDim)
		l.kNorm = ld.vector(p+"attn_k_norm.weight", c.HeadDim)
	case QKNormWhole:
		l.qNorm = ld.vector(p+"attn_q_norm.weight", qDim)
		l.kNorm = ld.vector(p+"attn_k_norm.weight", kvDim)
	}
	if c.PostNorms {
		l.postAttnNorm = ld.vector(p+"post_attention_norm.weight", c.Embd)
		l.postFNorm = ld.vector(p+"post_ffw_norm.weight", c.Embd)
	}
	if fam.sinks {
		l.sinks = ld.vector(p+"attn_sinks.weight", c.Heads)
		c.AttnSinks = true
	}
	if c.MoE.Experts > 0 {
		l.moe = ld.experts(c, p)
	} else {
		ld.denseFFN(&l, c, fam, p)
	}
	return l
}

// denseFFN reads a layer's plain FFN: gate and up separate or fused
// (Phi-3), down, and the biases where the family allows them.
func (ld *loader) denseFFN(l *layer, c *Config, fam family, p string) {
	if c.FusedGateUp {
		up := ld.matrix(p+"ffn_up.weight", c.Embd, 2*c.FF)
		l.wGate, l.wUp = up.rowsView(0, c.FF), up.rowsView(c.FF, 2*c.FF)
	} else {
		l.wGate = ld.matrix(p+"ffn_gate.weight", c.Embd, c.FF)
		l.wUp = ld.matrix(p+"ffn_up.weight", c.Embd, c.FF)
	}
	l.wDown = ld.matrix(p+"ffn_down.weight", c.FF, c.Embd)
	if fam.ffnBias {
		l.bGate = ld.optionalVector(p+"ffn_gate.bias", c.FF)
		l.bUp = ld.optionalVector(p+"ffn_up.bias", c.FF)
		l.bDown = ld.optionalVector(p+"ffn_down.bias", c.Embd)
		c.FFNBias = c.FFNBias || ld.has(p+"ffn_gate.bias") || ld.has(p+"ffn_up.bias") || ld.has(p+"ffn_down.bias")
	}
}

// readRopeFactors reads the per-pair frequency factors: Llama 3's
// rope_freqs, or LongRoPE's short and long sets (the short ones apply
// until SetContext asks for more than the original context).
func (m *Model) readRopeFactors(ld *loader, fam family) {
	c := &m.cfg
	half := c.HeadDim / 2
	longRope := fam.longRope && (c.Rope.Kind == "longrope" || c.Arch == "phi3")
	switch {
	case fam.ropeFreqs && !longRope:
		m.ropeFactors = ld.optionalFactors("rope_freqs.weight", half)
	case longRope:
		m.ropeFactors = ld.optionalFactors("rope_factors_short.weight", half)
		m.longFactors = ld.optionalFactors("rope_factors_long.weight", half)
	}
	c.RopeFactors = ld.has("rope_freqs.weight") || ld.has("rope_factors_short.weight") || ld.has("rope_factors_long.weight")
	for _, fs := range [][]float32{m.ropeFactors, m.longFactors} {
		for j, v := range fs {
			if !(v > 0) || v > 1e30 {
				ld.fail(fmt.Errorf("model: rope frequency factor %d is %g, want a positive finite number", j, v))
				return
			}
		}
	}
}

// setRopes builds the layers' rotations with the given global factors.
func (m *Model) setRopes(factors []float32) {
	c := &m.cfg
	global := newRopeSpec(c.RopeTheta, c.HeadDim, c.Rope, factors)
	m.ropes = []*ropeSpec{&global}
	local := &global
	if c.SlidingWindow > 0 && c.SlidingPattern > 0 {
		l := newRopeSpec(c.RopeThetaLocal, c.HeadDim, c.RopeLocal, nil)
		local = &l
		m.ropes = append(m.ropes, local)
	}
	for li := range m.layers {
		switch {
		case !c.Rotates(li):
			m.layers[li].rope = nil
		case c.Local(li):
			m.layers[li].rope = local
		default:
			m.layers[li].rope = &global
		}
	}
}

// SetContext tells a model with LongRoPE factors the context it will run
// at: past the original context the long factors apply, as llama.cpp
// chooses them by the context it was created with. Caches filled before a
// change hold keys rotated the other way, so the engine calls this once,
// before its first pass. Other models ignore it.
// SetKVType makes the caches made from now on store entries as t (Q8_0
// needs a head dimension that is a multiple of 32: an error otherwise,
// changing nothing).
func (m *Model) SetKVType(t kv.Type) error {
	c := m.cfg
	c.KVType = t
	if _, err := c.KVShape(1, 0).PageBytes(); err != nil {
		return err
	}
	m.cfg.KVType = t
	return nil
}

func (m *Model) SetContext(ctx int) {
	if m.longFactors == nil {
		return
	}
	if ctx > m.cfg.Rope.OrigCtx {
		m.setRopes(m.longFactors)
	} else {
		m.setRopes(m.ropeFactors)
	}
}

// rowsView is rows [lo, hi) of a matrix the file stores whole (a fused
// QKV or gate/up projection).
func (w matrix) rowsView(lo, hi int) matrix {
	if w.data == nil && w.rows == 0 {
		return matrix{}
	}
	rb := 0
	if w.rows > 0 {
		rb = len(w.data) / w.rows
	}
	v := w
	v.rows = hi - lo
	if w.data != nil {
		v.data = w.data[lo*rb : hi*rb : hi*rb]
	}
	return v
}

// loader fetches tensors, remembers the first error and which tensors it
// read.
type loader struct {
	f    *gguf.File
	dry  bool
	used map[string]bool
	err  error
}

func (ld *loader) fail(err error) {
	if ld.err == nil {
		ld.err = err
	}
}

func (ld *loader) has(name string) bool {
	_, ok := ld.f.Tensor(name)
	return ok
}

func (ld *loader) tensor(name string, dims ...int) *gguf.Tensor {
	if ld.err != nil {
		return nil
	}
	t, ok := ld.f.Tensor(name)
	if !ok {
		ld.err = fmt.Errorf("model: tensor %s is missing", name)
		return nil
	}
	ld.used[name] = true
	same := len(t.Dims) == len(dims)
	for i := 0; same && i < len(dims); i++ {
		same = t.Dims[i] == dims[i]
	}
	if !same {
		ld.err = fmt.Errorf("model: tensor %s has dims %v, the config wants %v", name, t.Dims, dims)
		return nil
	}
	return t
}

// matrixTypes are the weight types the matmul kernels take.
var matrixTypes = map[quant.Type]bool{
	quant.F32: true, quant.F16: true, quant.BF16: true, quant.Q4_0: true, quant.Q4_1: true, quant.Q5_0: true,
	quant.Q5_1: true, quant.Q8_0: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true,
	quant.Q2_K: true, quant.Q3_K: true, quant.IQ4_NL: true, quant.IQ4_XS: true, quant.MXFP4: true,
	quant.IQ3_S: true, quant.IQ3_XXS: true, quant.IQ2_XXS: true, quant.IQ2_XS: true, quant.IQ2_S: true,
}

func (ld *loader) matrix(name string, cols, rows int) matrix {
	return ld.matrixOf(name, ld.tensor(name, cols, rows), cols, rows)
}

// matrixOf is tensor t (already checked to hold rows×cols elements) as a
// matrix, when its type has kernels and its blocks are valid.
func (ld *loader) matrixOf(name string, t *gguf.Tensor, cols, rows int) matrix {
	if t == nil {
		return matrix{}
	}
	if !matrixTypes[t.Type] {
		ld.err = fmt.Errorf("model: tensor %s has type %s, which has no matmul kernel", name, t.Type)
		return matrix{}
	}
	// Blocks the format defines as invalid (an MXFP4 NaN exponent) would
	// be read as some arbitrary number; the file is refused instead.
	if err := quant.Validate(t.Type, t.Data); err != nil {
		ld.err = fmt.Errorf("model: tensor %s: %w", name, err)
		return matrix{}
	}
	return matrix{typ: t.Type, data: t.Data, rows: rows, cols: cols}
}

func (ld *loader) vector(name string, n int) []float32 {
	if ld.dry {
		ld.tensor(name, n)
		return nil
	}
	return ld.readVector(name, n)
}

// readVector is vector even in a dry run: for the few values that are
// checked at load (RoPE factors), which Measure must refuse as Load does.
func (ld *loader) readVector(name string, n int) []float32 {
	t := ld.tensor(name, n)
	if t == nil {
		return nil
	}
	v := make([]float32, n)
	if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
		ld.err = fmt.Errorf("model: tensor %s: %w", name, err)
	}
	return v
}

func (ld *loader) optionalVector(name string, n int) []float32 {
	if !ld.has(name) {
		return nil
	}
	return ld.vector(name, n)
}

func (ld *loader) optionalFactors(name string, n int) []float32 {
	if !ld.has(name) {
		return nil
	}
	return ld.readVector(name, n)
}

// refuseUnused fails on the tensors no part of the model read.
func (ld *loader) refuseUnused() {
	var unused []string
	for _, t := range ld.f.Tensors {
		if !ld.used[t.Name] {
			unused = append(unused, t.Name)
		}
	}
	if len(unused) == 0 {
		return
	}
	sort.Strings(unused)
	more := ""
	if len(unused) > 8 {
		more = fmt.Sprintf(" and %d more", len(unused)-8)
		unused = unused[:8]
	}
	ld.fail(fmt.Errorf("model: the file holds tensors this package does not run: %s%s", strings.Join(unused, ", "), more))
}
