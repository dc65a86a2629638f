// Package model is the forward pass of decoder-only transformers read from
// GGUF files (the Llama, Mistral, Qwen, Gemma, Phi, Granite, OLMo, SmolLM and
// gpt-oss families, dense or with experts), over a general batch of tokens
// from any number of sequences with a tree attention mask: the one pass
// serves chunked prefill, decoding and the verification of speculative
// token trees.
//
// The files read top to bottom: family.go (what sets each architecture
// apart), config.go (the metadata, every key accounted for), tensors.go
// (the weights, every tensor accounted for), load.go (packing), forward.go
// (the pass), attention.go (masked grouped-query attention), rope.go (RoPE
// and its scalings), ops.go (norms and the small vector kernels).
package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
)

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
	attnNorm, ffnNorm []float32 // nil when the family has no pre-norms (OLMo 2)
	wq, wk, wv, wo    matrix
	bq, bk, bv, bo    []float32 // each nil when the file has no such bias
	wGate, wUp, wDown matrix    // unused (zero) in a layer of experts
	bGate, bUp, bDown []float32
	// moe is the layer's mixture of experts, nil for a dense FFN.
	moe *experts
	// sinks is one logit per query head that joins the denominator of the
	// head's softmax (nil: none).
	sinks []float32
	// qNorm and kNorm RMS-normalize queries and keys before RoPE, per head
	// or over the whole projection (Config.QKNorm); postAttnNorm and
	// postFNorm RMS-normalize the attention and FFN outputs before each
	// joins the residual stream. nil where the family has none.
	// llama.cpp's converter stores Gemma's norm weights with the 1 of its
	// (1+w) convention already added (llama.cpp multiplies by the stored
	// weight as is), so every norm here is a plain x/rms(x)·w.
	qNorm, kNorm            []float32
	postAttnNorm, postFNorm []float32
	// window is how many latest positions the layer's attention sees
	// (0: all of them).
	window int
	// rope is the layer's rotation (nil: the layer has no RoPE).
	rope *ropeSpec
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
	// ropes are the distinct rotations the layers use (global, local);
	// each layer points at its own. ropeFactors are the file's
	// per-pair frequency factors for the global layers (nil: none), and
	// longFactors LongRoPE's for contexts past the original one
	// (SetContext chooses).
	ropes                    []*ropeSpec
	ropeFactors, longFactors []float32
	pool                     *quant.Pool
	arena                    *quant.Arena // the packed weights; freed by Close
	closed                   bool
	s                        scratch
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
	m.setRopes(m.ropeFactors)
	for li := range m.layers {
		if m.cfg.Local(li) {
			m.layers[li].window = m.cfg.SlidingWindow
		}
	}
	m.pool = quant.NewPool(threads)
	return m, nil
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
//
// release (gguf.File.Release) is told each source once it is copied, so
// that the file's pages leave the resident set as the copies fill it: the
// load's peak memory is about the model's, not twice it.
func (m *Model) pack(progress func(float64), release func([]byte)) {
	var all []*matrix
	for i := range m.layers {
		all = append(all, m.layers[i].matrices()...)
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
		src := w.data
		if unpacked(w) {
			w.data = own.copy(w.data)
		}
		w.packed = quant.PrepackIn(arena, w.typ, w.data, w.rows, w.cols)
		release(src)
		report(len(src))
	}
	if embdShared {
		m.tokEmbd.data = m.output.data
	} else {
		src := m.tokEmbd.data
		m.tokEmbd.data = own.copy(src)
		release(src)
	}
	report(len(m.tokEmbd.data))
	if progress != nil {
		progress(1)
	}
	if m.cfg.TiedOutput {
		m.tokEmbd.packed = m.output.packed
	}
}

// matrices are the layer's weight matrices in the order a pass reads them.
func (l *layer) matrices() []*matrix {
	all := []*matrix{&l.wq, &l.wk, &l.wv, &l.wo}
	if l.moe != nil {
		return append(all, l.moe.matrices()...)
	}
	return append(all, &l.wGate, &l.wUp, &l.wDown)
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
