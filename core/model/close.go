package model

import (
	"errors"

	"github.com/lmstream/lmstream/core/internal/sat"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
)

var errClosed = errors.New("model: used after Close")

// Close stops the model's worker pool and returns its packed weights to the
// OS. A Model holds both until then: the pool's workers are goroutines, and
// the last job they ran keeps the weights that job read reachable, so a
// model that is merely dropped is never collected. Forward and
// ForwardPrefix return an error afterwards. The caller must make sure no
// Forward is running (the runtime calls it from its engine goroutine, after
// the last step). Calling it twice is harmless.
func (m *Model) Close() {
	if m == nil || m.closed {
		return
	}
	m.closed = true
	m.pool.Close()
	// The packed copies point into the arena: drop them with it, so that
	// nothing can reach the unmapped memory.
	for i := range m.layers {
		for _, w := range m.layers[i].matrices() {
			w.packed = nil
		}
	}
	m.output.packed, m.tokEmbd.packed = nil, nil
	m.headView = matrix{}
	m.arena.Free()
	m.arena = nil
	m.s = scratch{}
}

// PackedBytes is the size of the model's packed-weight arena (0 where the
// CPU has no packed kernels, or after Close).
func (m *Model) PackedBytes() int64 { return int64(m.arena.Size()) }

// Footprint is what loading a model's file will reserve, known before the
// weights are packed.
type Footprint struct {
	Config Config
	// Packed is the arena Load fills with the packed weights (0 when this
	// CPU reads the stored layout).
	Packed int64
	// Vectors is the float32 copies of the norm weights and biases.
	Vectors int64
}

// Measure reads a model's configuration and adds up the memory Load will
// allocate, without allocating it, so that a runtime can refuse a model
// that does not fit before reserving anything. It mirrors Load's list of
// matrices (pack packs exactly these). It stops at the first missing
// tensor: Load reports that one.
func Measure(f *gguf.File) (Footprint, error) {
	m, err := readTensors(f, true)
	if err != nil {
		return Footprint{}, err
	}
	fp := Footprint{Config: m.cfg}
	packed := func(w *matrix) { fp.Packed += int64(quant.PackedSize(w.typ, w.rows, w.cols)) }
	vec := func(n int) { fp.Vectors += int64(n) * 4 }
	vec(m.cfg.Embd)
	for i := range m.layers {
		for _, w := range m.layers[i].matrices() {
			packed(w)
		}
		// The vectors a layer may hold: norms, biases, Q/K norms, sinks,
		// the experts' biases.
		vec(4*m.cfg.Embd + 2*m.cfg.Heads*m.cfg.HeadDim + 4*m.cfg.KVHeads*m.cfg.HeadDim + 2*m.cfg.FF + m.cfg.Heads)
		if e := m.cfg.MoE; e.Biases {
			vec(e.Experts * (1 + 2*e.FF + m.cfg.Embd))
		}
		if m.cfg.MoE.SharedFF > 0 {
			vec(m.cfg.Embd) // the shared expert's gate vector
		}
	}
	packed(&m.output) // tied: the head is the embedding
	return fp, nil
}

// KVShape is the shape of a KV cache of ctx positions whose passes take at
// most maxPass tokens: the local (sliding-window) layers keep about their
// window and a pass, the global ones every position.
func (c Config) KVShape(ctx, maxPass int) kv.Shape {
	s := kv.Shape{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Ctx: ctx, MaxPass: maxPass, Type: c.KVType}
	for li := range c.Layers {
		if c.Local(li) {
			if s.Window == nil {
				s.Window = make([]int, c.Layers)
			}
			s.Window[li] = c.SlidingWindow
		}
	}
	return s
}

// KVBytes is the memory of one KV cache of ctx positions for this shape
// whose passes take at most maxPass tokens (see KVShape, kv.Shape.Bytes),
// or an error when it does not fit in an int64.
func (c Config) KVBytes(ctx, maxPass int) (int64, error) {
	return c.KVShape(ctx, maxPass).Bytes()
}

// ScratchBytes estimates the buffers Forward grows to for a batch of
// `tokens` tokens of which `logitRows` want logits: the float32 activations
// of every token (residual, normed copy, Q, K, V, attention output,
// projection, gate, up), their quantized copies, the RoPE tables and the
// logits. It saturates at math.MaxInt64 instead of overflowing.
func (c Config) ScratchBytes(tokens, logitRows int) int64 {
	qDim, kvDim, ff := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim, c.ffnWidth()
	perToken := int64(3*c.Embd+2*qDim+2*kvDim+2*ff)*4 + // float32 activations
		int64(max(c.Embd, ff))*2 + // quantized matmul inputs (≤ 9 bits a value, rounded up)
		int64(c.HeadDim)*4 // cos and sin tables
	if x := c.MoE; x.Experts > 0 {
		// Router logits; each kept expert's output, weight and index; one
		// expert's down rows and gathered, quantized inputs and hidden rows.
		perToken += int64(x.Experts+x.Used*(c.Embd+2)+c.Embd)*4 + int64(c.Embd+ff)*2
		if x.SharedFF > 0 {
			perToken += 4 // the shared expert's gate (its rows reuse gate, up and the down rows)
		}
	}
	return sat.Add(sat.Mul(int64(tokens), perToken), sat.Mul(int64(logitRows), int64(c.Vocab)*4))
}
