// Package model is the forward pass of Llama-family transformers (Llama,
// SmolLM, TinyLlama, Qwen2, Gemma 3) read from GGUF files, over a general batch of
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
	"math"
	"math/bits"

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

	// Gemma 3 (zero for the other families).
	//
	// EmbdScale multiplies the token embeddings (√Embd). GELU says the FFN
	// gate is GELU (tanh form) instead of SiLU. The layers alternate local
	// and global attention: in each run of SlidingPattern layers all but
	// the last are local, seeing only the SlidingWindow latest positions
	// (themselves included) and rotating with RopeThetaLocal; a
	// SlidingWindow of 0 makes every layer global. LogitSoftcap, when set,
	// maps each logit z to c·tanh(z/c). Each layer also normalizes its
	// queries and keys per head, and the attention and FFN outputs before
	// they join the residual stream (the norms' tensors; see layer).
	EmbdScale      float32
	GELU           bool
	SlidingWindow  int
	SlidingPattern int
	RopeThetaLocal float32
	LogitSoftcap   float32
	// AttnScale multiplies the query·key products: 1/√HeadDim but for
	// Gemma 3 27B, whose scale comes from Embd/Heads.
	AttnScale float32
}

// Local reports whether layer li attends only within the sliding window.
func (c *Config) Local(li int) bool {
	return c.SlidingWindow > 0 && c.SlidingPattern > 0 && li%c.SlidingPattern < c.SlidingPattern-1
}

// matrix is a weight matrix as the file stores it (rows of cols elements of
// type typ, row-major) and, prepared once at load, in the layout of
// quant.Prepack that the batched kernels read (for the types with a packed
// layout on this CPU a transposed copy of the same size; other types keep
// reading data).
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
	// Gemma 3's extra norms (nil otherwise): per-head RMSNorm of queries
	// and keys before RoPE, and RMSNorm of the attention and FFN outputs
	// before each joins the residual stream. llama.cpp's converter stores
	// Gemma's norm weights with the 1 of its (1+w) convention already
	// added (llama.cpp multiplies by the stored weight as is), so every
	// norm here is a plain x/rms(x)·w.
	qNorm, kNorm            []float32
	postAttnNorm, postFNorm []float32
	// window is how many latest positions the layer's attention sees
	// (0: all of them).
	window int
}

// Model is a loaded model. Forward is not safe for concurrent use (it owns
// the scratch buffers); everything else only reads.
type Model struct {
	cfg      Config
	tokEmbd  matrix
	outNorm  []float32
	output   matrix
	head     *matrix // during ForwardHead: the output head's first rows
	headView matrix  // that view, kept for the next call
	layers   []layer
	ropeFreq []float64 // theta_i = base^(-2i/headDim), i < headDim/2
	// ropeLocal is ropeFreq from RopeThetaLocal (local layers), nil when
	// every layer uses ropeFreq.
	ropeLocal []float64
	pool      *quant.Pool
	arena     *quant.Arena // the packed weights; freed by Close
	closed    bool
	s         scratch
}

// Load reads the model of a GGUF file and checks its configuration and
// every tensor's shape against each other before sizing anything by them.
// threads < 1 means GOMAXPROCS.
//
// The model keeps its own copy of every weight byte the forward pass reads
// (see pack), so once Load returns nothing reads the file's tensor data:
// the file may be truncated, rewritten or deleted under a running model
// without a fault. While Load reads it, a fault on a page the file lost is
// caught (gguf.File.Guard) and, like a file whose size or modification time
// changed meanwhile, is an error.
func Load(f *gguf.File, threads int) (*Model, error) {
	return LoadWithProgress(f, threads, nil)
}

// LoadWithProgress is Load telling progress (when not nil) the share of
// the weights read and packed so far, in [0, 1], never decreasing, on the
// calling goroutine: once per tensor as pack copies it (that copy is what
// reads the file, and what takes the time), 1 last.
func LoadWithProgress(f *gguf.File, threads int, progress func(fraction float64)) (*Model, error) {
	var m *Model
	err := f.Guard(func() (err error) {
		m, err = load(f, progress)
		return err
	})
	var fault *gguf.FaultError
	if errors.As(err, &fault) {
		return nil, fmt.Errorf("model: loading the weights: %w", err)
	}
	if err != nil {
		return nil, err
	}
	// Bytes read from a file that changed meanwhile may be two files' mix.
	if err := f.Unchanged(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m.ropeFreq = ropeFrequencies(m.cfg.RopeTheta, m.cfg.HeadDim)
	if m.cfg.RopeThetaLocal > 0 && m.cfg.RopeThetaLocal != m.cfg.RopeTheta {
		m.ropeLocal = ropeFrequencies(m.cfg.RopeThetaLocal, m.cfg.HeadDim)
	}
	for li := range m.layers {
		if m.cfg.Local(li) {
			m.layers[li].window = m.cfg.SlidingWindow
		}
	}
	m.pool = quant.NewPool(threads)
	return m, nil
}

// perLayerTensors is how many tensors every layer has at least (norms,
// attention and feed-forward matrices; biases are optional).
const perLayerTensors = 9

// maxContextTrain bounds context_length, which may size a KV cache (the
// cpu backend's default context is min(context_length, 2048)): no model is
// trained on a billion tokens, so a larger value is a damaged field.
const maxContextTrain = 1 << 30

func load(f *gguf.File, progress func(float64)) (*Model, error) {
	cfg, err := readConfig(f)
	if err != nil {
		return nil, err
	}
	// cfg.Layers is bounded by the tensors the file holds, so this is a
	// few hundred bytes per layer the file can really have.
	m := &Model{cfg: cfg, layers: make([]layer, 0, cfg.Layers)}
	ld := loader{f: f}
	m.tokEmbd = ld.matrix("token_embd.weight", cfg.Embd, cfg.Vocab)
	m.outNorm = ld.vector("output_norm.weight", cfg.Embd)
	if _, ok := f.Tensor("output.weight"); ok {
		m.output = ld.matrix("output.weight", cfg.Embd, cfg.Vocab)
	} else {
		m.cfg.TiedOutput = true
		m.output = m.tokEmbd
	}
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim // checked not to overflow
	// The first missing or misshapen tensor ends the loop: nothing after
	// it is looked up, let alone allocated.
	for i := 0; i < cfg.Layers && ld.err == nil; i++ {
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
		if cfg.Arch == "gemma3" {
			l.qNorm = ld.vector(p+"attn_q_norm.weight", cfg.HeadDim)
			l.kNorm = ld.vector(p+"attn_k_norm.weight", cfg.HeadDim)
			l.postAttnNorm = ld.vector(p+"post_attention_norm.weight", cfg.Embd)
			l.postFNorm = ld.vector(p+"post_ffw_norm.weight", cfg.Embd)
		}
		m.layers = append(m.layers, l)
	}
	if ld.err != nil {
		return nil, ld.err
	}
	m.pack(progress)
	return m, nil
}

// readConfig reads the model's shape from the metadata and checks it
// against what the file holds before anything is sized by it: every
// dimension is positive, products of dimensions do not overflow, the
// layer count is bounded by the tensors present, the embedding width and
// vocabulary are token_embd's. (The layers' tensors are then checked
// against this shape one by one as they load.)
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
	case "gemma3":
		c.RopeNeox, c.GELU = true, true
	default:
		return Config{}, fmt.Errorf("model: architecture %q is not supported (llama, qwen2, gemma3)", arch)
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// integer reads arch.key, of any integer type, into dst; an absent key
	// takes def when def ≥ 0. Values outside [1, hi] are errors.
	integer := func(key string, dst *int, def, hi int) {
		v, err := f.IntRange(arch+"."+key, 1, hi)
		switch {
		case errors.Is(err, gguf.ErrKeyNotFound) && def >= 0:
			*dst = def
		case err != nil:
			errs = append(errs, err)
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
		case !(v > 0) || math.IsInf(float64(v), 1):
			fail("%s.%s is %g, want a positive finite number", arch, key, v)
		default:
			*dst = v
		}
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return Config{}, errors.New("model: tensor token_embd.weight is missing")
	}
	if len(emb.Dims) != 2 {
		return Config{}, fmt.Errorf("model: tensor token_embd.weight has dims %v, want [embedding_length vocab]", emb.Dims)
	}
	c.Vocab = emb.Dims[1]
	// Every layer has perLayerTensors tensors besides token_embd, so the
	// file's tensor count bounds the layers before any is looked for: a
	// block_count of 2^31 fails here at once instead of after growing a
	// slice of layers toward it.
	integer("block_count", &c.Layers, -1, math.MaxInt)
	if maxLayers := (len(f.Tensors) - 1) / perLayerTensors; len(errs) == 0 && c.Layers > maxLayers {
		fail("%s.block_count is %d but the file holds %d tensors, enough for at most %d layers of %d tensors",
			arch, c.Layers, len(f.Tensors), max(maxLayers, 0), perLayerTensors)
	}
	integer("embedding_length", &c.Embd, -1, math.MaxInt)
	if len(errs) == 0 && c.Embd != emb.Dims[0] {
		fail("%s.embedding_length is %d but token_embd.weight rows have %d elements", arch, c.Embd, emb.Dims[0])
	}
	integer("attention.head_count", &c.Heads, -1, math.MaxInt)
	integer("feed_forward_length", &c.FF, -1, math.MaxInt)
	integer("context_length", &c.ContextTrain, 2048, maxContextTrain)
	float("rope.freq_base", &c.RopeTheta, 10000)
	float("attention.layer_norm_rms_epsilon", &c.RMSEps, -1)
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("model: %w", errors.Join(errs...))
	}
	integer("attention.head_count_kv", &c.KVHeads, c.Heads, c.Heads)
	if c.Embd%c.Heads != 0 {
		fail("embedding_length %d is not a multiple of head_count %d", c.Embd, c.Heads)
	} else {
		integer("attention.key_length", &c.HeadDim, c.Embd/c.Heads, math.MaxInt)
	}
	if len(errs) == 0 {
		// The attention widths size the scratch and the KV cache; each
		// must be a real product before the tensors are compared with it.
		for _, p := range []struct {
			name string
			n    int
		}{{"head_count", c.Heads}, {"head_count_kv", c.KVHeads}} {
			if hi, lo := bits.Mul64(uint64(p.n), uint64(c.HeadDim)); hi != 0 || lo > math.MaxInt32 {
				fail("%s %d × head dimension %d is too large", p.name, p.n, c.HeadDim)
			}
		}
		var rot int
		integer("rope.dimension_count", &rot, c.HeadDim, math.MaxInt)
		if rot != c.HeadDim {
			fail("rope.dimension_count %d ≠ head dimension %d (partial rotary embeddings are not supported)", rot, c.HeadDim)
		}
		if c.HeadDim%2 != 0 {
			fail("head dimension %d is odd", c.HeadDim)
		}
		if c.Heads%c.KVHeads != 0 {
			fail("head_count %d is not a multiple of head_count_kv %d", c.Heads, c.KVHeads)
		}
		var vDim int
		integer("attention.value_length", &vDim, c.HeadDim, math.MaxInt)
		if vDim != c.HeadDim {
			fail("attention.value_length %d ≠ key_length %d", vDim, c.HeadDim)
		}
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("model: %w", errors.Join(errs...))
	}
	c.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	if arch == "gemma3" {
		gemma3Config(&c, integer, float)
		// Soft-capping is optional: only a present key is read.
		if _, ok := f.Lookup(arch + ".final_logit_softcapping"); ok {
			float("final_logit_softcapping", &c.LogitSoftcap, -1)
		}
		if len(errs) > 0 {
			return Config{}, fmt.Errorf("model: %w", errors.Join(errs...))
		}
	}
	return c, nil
}

// gemma3Config reads Gemma 3's extra metadata. Where the file is silent
// the defaults are the ones the reference implementation (and llama.cpp)
// assume: a window pattern of 6 (five local layers, then a global one),
// local RoPE base 10,000. The 27B model (62 layers) scales queries by
// Embd/Heads instead of the head dimension.
func gemma3Config(c *Config, integer func(string, *int, int, int), float func(string, *float32, float32)) {
	c.EmbdScale = float32(math.Sqrt(float64(c.Embd)))
	var window int
	integer("attention.sliding_window", &window, 0, maxContextTrain)
	if window > 0 {
		c.SlidingWindow = window
		integer("attention.sliding_window_pattern", &c.SlidingPattern, 6, math.MaxInt)
		float("rope.freq_base_swa", &c.RopeThetaLocal, 10000)
	}
	if c.Layers == 62 {
		c.AttnScale = float32(1 / math.Sqrt(float64(c.Embd/c.Heads)))
	}
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
		quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K,
		quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4:
	default:
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

// pack prepares every matmul weight for quant.MatMulPacked, in one arena
// laid out in the order a forward pass reads them (layer by layer, then the
// head), so that the ~90 MB streamed per pass sit on huge pages and run
// sequentially through memory.
//
// It also makes the model independent of the file's mapping. A matrix that
// gets a packed copy (where the CPU has packed kernels for its type)
// is read only from that copy from now on. Every other matrix, and the
// token embedding rows the forward pass looks up, is copied into one block
// of the model's own, in the same order. Before, those were read from the
// mapping on every pass, by the quant pool's worker goroutines among
// others, where a page lost to a truncated file is a SIGBUS that no
// goroutine of ours can recover; the price is that those weights live in
// anonymous memory instead of the page cache (the same resident size, not
// shared with other processes mapping the file).
func (m *Model) pack(progress func(float64)) {
	var all []*matrix
	for i := range m.layers {
		l := &m.layers[i]
		all = append(all, &l.wq, &l.wk, &l.wv, &l.wo, &l.wGate, &l.wUp, &l.wDown)
	}
	all = append(all, &m.output)
	unpacked := func(w *matrix) bool { return quant.PackedSize(w.typ, w.rows, w.cols) == 0 }
	packedSize, ownSize := 0, 0
	for _, w := range all {
		if unpacked(w) {
			ownSize += len(w.data) + ownAlign
		} else {
			packedSize += quant.PackedSize(w.typ, w.rows, w.cols)
		}
	}
	// A tied head that stays unpacked is token_embd itself: one copy
	// serves the lookups and the head.
	embdShared := m.cfg.TiedOutput && unpacked(&m.output)
	if !embdShared {
		ownSize += len(m.tokEmbd.data) + ownAlign
	}
	own := ownedBytes{buf: make([]byte, 0, ownSize)}
	arena := quant.NewArena(packedSize)
	m.arena = arena
	// Progress counts the source bytes each tensor's copy reads.
	total, done := len(m.tokEmbd.data), 0
	for _, w := range all {
		total += len(w.data)
	}
	report := func(n int) {
		done += n
		if progress != nil && total > 0 {
			progress(min(1, float64(done)/float64(total)))
		}
	}
	for _, w := range all {
		n := len(w.data)
		if unpacked(w) {
			w.data = own.copy(w.data)
		}
		w.packed = quant.PrepackIn(arena, w.typ, w.data, w.rows, w.cols)
		report(n)
	}
	if embdShared {
		m.tokEmbd.data = m.output.data
	} else {
		m.tokEmbd.data = own.copy(m.tokEmbd.data)
	}
	report(len(m.tokEmbd.data))
	if progress != nil {
		progress(1)
	}
	if m.cfg.TiedOutput {
		m.tokEmbd.packed = m.output.packed
	}
}

// ownAlign is the alignment of each copy in ownedBytes: a cache line, as
// the kernels' rows start on one in the file too (GGUF aligns to 32).
const ownAlign = 64

// ownedBytes hands out aligned copies from one preallocated block.
type ownedBytes struct{ buf []byte }

func (o *ownedBytes) copy(b []byte) []byte {
	start := (len(o.buf) + ownAlign - 1) &^ (ownAlign - 1)
	if start+len(b) > cap(o.buf) { // unreachable: the block was sized for every copy
		panic("model: owned weight block too small")
	}
	o.buf = append(o.buf[:start], b...)
	return o.buf[start:len(o.buf):len(o.buf)]
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

// attnScale is the factor of the query·key products.
func (m *Model) attnScale() float32 {
	if m.cfg.AttnScale != 0 {
		return m.cfg.AttnScale
	}
	return float32(1 / math.Sqrt(float64(m.cfg.HeadDim)))
}

// Config returns the model's shape.
func (m *Model) Config() Config { return m.cfg }

// SetThreads sets the number of threads Forward uses (< 1: GOMAXPROCS).
func (m *Model) SetThreads(n int) { m.pool.SetThreads(n) }

// NewCache reserves a K/V cache for one sequence of up to ctx tokens
// (committed plus the scratch of one batch). Its local layers hold their
// window and a pass of a few tokens; a longer pass grows them once (see
// NewCachePass to reserve for it up front).
func (m *Model) NewCache(ctx int) *kv.Cache { return m.NewCachePass(ctx, 0) }

// NewCachePass is NewCache with the local layers sized for passes of up to
// maxPass tokens (a prefill chunk, a verify tree).
func (m *Model) NewCachePass(ctx, maxPass int) *kv.Cache {
	return kv.NewShape(m.cfg.KVShape(ctx, maxPass))
}
