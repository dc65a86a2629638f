// Package model is the forward pass of Llama-family transformers (Llama,
// SmolLM, TinyLlama, Qwen2) read from GGUF files, over a general batch of
// tokens from any number of sequences with a tree attention mask: the one
// pass serves chunked prefill, decoding and the verification of speculative
// token trees.
//
// The files read top to bottom: load.go (configuration and weights),
// forward.go (the pass), attention.go (masked grouped-query attention), ops.go
// (norms, RoPE, the small vector kernels).
package model

import (
	"errors"
	"fmt"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
)

// Config is the shape of a model.
type Config struct {
	Arch                             string
	Layers, Embd, Heads, KVHeads     int
	HeadDim, FF, Vocab, ContextTrain int
	RopeTheta, RMSEps                float32
	RopeNeox                         bool // Qwen2-style rotate-half; Llama GGUFs rotate adjacent pairs
	TiedOutput                       bool // the output head is token_embd
}

// matrix is a weight matrix as the file stores it (rows of cols elements of
// type typ, row-major) and, prepared once at load, in the layout of
// quant.Prepack that the batched kernels read (for Q4_1 and Q8_0 a
// transposed copy of the same size; other types keep reading data).
type matrix struct {
	typ        quant.Type
	data       []byte
	rows, cols int
	packed     *quant.Packed
}

type layer struct {
	attnNorm, ffnNorm []float32
	wq, wk, wv, wo    matrix
	bq, bk, bv        []float32 // nil when the model has no bias (Llama)
	wGate, wUp, wDown matrix
}

// Model is a loaded model. Forward is not safe for concurrent use (it owns
// the scratch buffers); everything else only reads.
type Model struct {
	cfg      Config
	tokEmbd  matrix
	outNorm  []float32
	output   matrix
	layers   []layer
	ropeFreq []float64 // theta_i = base^(-2i/headDim), i < headDim/2
	pool     *quant.Pool
	arena    *quant.Arena // the packed weights; freed by Close
	closed   bool
	s        scratch
}

// Load reads the model of a GGUF file and checks every tensor's shape
// against the configuration in its metadata. The weights stay in the file's
// mapping (f must stay open while the model is used); only the norm weights
// and biases are converted to float32. threads < 1 means GOMAXPROCS.
func Load(f *gguf.File, threads int) (*Model, error) {
	cfg, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg}
	ld := loader{f: f}
	m.tokEmbd = ld.matrix("token_embd.weight", cfg.Embd, cfg.Vocab)
	m.outNorm = ld.vector("output_norm.weight", cfg.Embd)
	if _, ok := f.Tensor("output.weight"); ok {
		m.output = ld.matrix("output.weight", cfg.Embd, cfg.Vocab)
	} else {
		m.cfg.TiedOutput = true
		m.output = m.tokEmbd
	}
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	for i := 0; i < cfg.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		l := layer{
			attnNorm: ld.vector(p+"attn_norm.weight", cfg.Embd),
			wq:       ld.matrix(p+"attn_q.weight", cfg.Embd, qDim),
			wk:       ld.matrix(p+"attn_k.weight", cfg.Embd, kvDim),
			wv:       ld.matrix(p+"attn_v.weight", cfg.Embd, kvDim),
			wo:       ld.matrix(p+"attn_output.weight", qDim, cfg.Embd),
			ffnNorm:  ld.vector(p+"ffn_norm.weight", cfg.Embd),
			wGate:    ld.matrix(p+"ffn_gate.weight", cfg.Embd, cfg.FF),
			wUp:      ld.matrix(p+"ffn_up.weight", cfg.Embd, cfg.FF),
			wDown:    ld.matrix(p+"ffn_down.weight", cfg.FF, cfg.Embd),
			bq:       ld.optionalVector(p+"attn_q.bias", qDim),
			bk:       ld.optionalVector(p+"attn_k.bias", kvDim),
			bv:       ld.optionalVector(p+"attn_v.bias", kvDim),
		}
		m.layers = append(m.layers, l)
	}
	if ld.err != nil {
		return nil, ld.err
	}
	m.pack()
	m.ropeFreq = ropeFrequencies(cfg.RopeTheta, cfg.HeadDim)
	m.pool = quant.NewPool(threads)
	return m, nil
}

func readConfig(f *gguf.File) (Config, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return Config{}, fmt.Errorf("model: %w", err)
	}
	c := Config{Arch: arch}
	switch arch {
	case "llama":
	case "qwen2":
		c.RopeNeox = true
	default:
		return Config{}, fmt.Errorf("model: architecture %q is not supported (llama, qwen2)", arch)
	}
	var errs []error
	integer := func(key string, dst *int, def int) {
		v, err := f.Int(arch + "." + key)
		switch {
		case errors.Is(err, gguf.ErrKeyNotFound) && def >= 0:
			*dst = def
		case err != nil:
			errs = append(errs, err)
		case v < 1:
			errs = append(errs, fmt.Errorf("%s.%s is %d", arch, key, v))
		default:
			*dst = v
		}
	}
	float := func(key string, dst *float32, def float32) {
		v, err := f.Float32(arch + "." + key)
		switch {
		case errors.Is(err, gguf.ErrKeyNotFound) && def > 0:
			*dst = def
		case err != nil:
			errs = append(errs, err)
		case !(v > 0):
			errs = append(errs, fmt.Errorf("%s.%s is %g", arch, key, v))
		default:
			*dst = v
		}
	}
	integer("block_count", &c.Layers, -1)
	integer("embedding_length", &c.Embd, -1)
	integer("attention.head_count", &c.Heads, -1)
	integer("feed_forward_length", &c.FF, -1)
	integer("context_length", &c.ContextTrain, 2048)
	float("rope.freq_base", &c.RopeTheta, 10000)
	float("attention.layer_norm_rms_epsilon", &c.RMSEps, -1)
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("model: %w", errors.Join(errs...))
	}
	integer("attention.head_count_kv", &c.KVHeads, c.Heads)
	if c.Embd%c.Heads != 0 {
		errs = append(errs, fmt.Errorf("embedding_length %d is not a multiple of head_count %d", c.Embd, c.Heads))
	} else {
		integer("attention.key_length", &c.HeadDim, c.Embd/c.Heads)
	}
	if len(errs) == 0 {
		var rot int
		integer("rope.dimension_count", &rot, c.HeadDim)
		if rot != c.HeadDim {
			errs = append(errs, fmt.Errorf("rope.dimension_count %d ≠ head dimension %d (partial rotary embeddings are not supported)", rot, c.HeadDim))
		}
		if c.HeadDim%2 != 0 {
			errs = append(errs, fmt.Errorf("head dimension %d is odd", c.HeadDim))
		}
		if c.Heads%c.KVHeads != 0 {
			errs = append(errs, fmt.Errorf("head_count %d is not a multiple of head_count_kv %d", c.Heads, c.KVHeads))
		}
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("model: %w", errors.Join(errs...))
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return Config{}, errors.New("model: tensor token_embd.weight is missing")
	}
	if len(emb.Dims) != 2 {
		return Config{}, fmt.Errorf("model: tensor token_embd.weight has dims %v, want [%d vocab]", emb.Dims, c.Embd)
	}
	c.Vocab = emb.Dims[1]
	return c, nil
}

// loader fetches tensors and remembers the first error.
type loader struct {
	f   *gguf.File
	err error
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

func (ld *loader) matrix(name string, cols, rows int) matrix {
	t := ld.tensor(name, cols, rows)
	if t == nil {
		return matrix{}
	}
	switch t.Type {
	case quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1,
		quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K:
	default:
		ld.err = fmt.Errorf("model: tensor %s has type %s, which has no matmul kernel", name, t.Type)
		return matrix{}
	}
	return matrix{typ: t.Type, data: t.Data, rows: rows, cols: cols}
}

// pack prepares every matmul weight for quant.MatMulPacked, in one arena
// laid out in the order a forward pass reads them (layer by layer, then the
// head), so that the ~90 MB streamed per pass sit on huge pages and run
// sequentially through memory.
func (m *Model) pack() {
	var all []*matrix
	for i := range m.layers {
		l := &m.layers[i]
		all = append(all, &l.wq, &l.wk, &l.wv, &l.wo, &l.wGate, &l.wUp, &l.wDown)
	}
	all = append(all, &m.output)
	size := 0
	for _, w := range all {
		size += quant.PackedSize(w.typ, w.rows, w.cols)
	}
	arena := quant.NewArena(size)
	m.arena = arena
	for _, w := range all {
		w.packed = quant.PrepackIn(arena, w.typ, w.data, w.rows, w.cols)
	}
	if m.cfg.TiedOutput {
		m.tokEmbd.packed = m.output.packed
	}
}

func (ld *loader) vector(name string, n int) []float32 {
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
	if _, ok := ld.f.Tensor(name); !ok {
		return nil
	}
	return ld.vector(name, n)
}

// Config returns the model's shape.
func (m *Model) Config() Config { return m.cfg }

// SetThreads sets the number of threads Forward uses (< 1: GOMAXPROCS).
func (m *Model) SetThreads(n int) { m.pool.SetThreads(n) }

// NewCache reserves a K/V cache for one sequence of up to ctx tokens
// (committed plus the scratch of one batch).
func (m *Model) NewCache(ctx int) *kv.Cache {
	return kv.New(m.cfg.Layers, m.cfg.KVHeads, m.cfg.HeadDim, ctx)
}
