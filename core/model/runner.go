package model

import (
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
)

// Cache is one sequence's K/V cache as the code above the model sees it:
// committed entries, and the scratch entries a forward pass writes after
// them (see kv.Cache, the CPU's, for the full contract). Each device keeps
// its entries in its own memory; a Batch names caches of the runner that
// runs it.
type Cache interface {
	// Len is the number of committed entries.
	Len() int
	// Cap is the number of positions the cache holds (committed plus scratch).
	Cap() int
	// Reserve makes room for n scratch entries after the committed ones.
	Reserve(n int) error
	// Commit keeps the given scratch entries, strictly increasing, as the
	// next committed ones and drops the rest.
	Commit(scratch []int) error
	// Truncate drops committed entries from n on (and any scratch).
	Truncate(n int) error
}

// Runner runs forward passes of one model on one device. The engine's
// batching, speculation, sampling and verification are written against it
// once, for every device. Methods are called from one goroutine at a time.
type Runner interface {
	Config() Config
	// NewCache reserves a cache for one sequence of up to ctx tokens.
	NewCache(ctx int) (Cache, error)
	// Forward has Model.Forward's contract: the logits of the tokens with
	// Logits[i] set, one Vocab-row each in batch order, and each token's K/V
	// in its cache's scratch.
	Forward(b *Batch, logits []float32) error
	// Close frees what the runner holds on its device.
	Close() error
}

// PrefixRunner is a Runner that can also run the model's first layers alone
// (the early-exit self-draft; see Model.ForwardPrefix).
type PrefixRunner interface {
	Runner
	ForwardPrefix(b *Batch, logits []float32, layers int) error
	// NewPrefixCache reserves a cache for the first layers alone.
	NewPrefixCache(ctx, layers int) (Cache, error)
}

// HeadRunner is a Runner that can compute logits for the first token ids
// only (see Model.ForwardHead): what a draft model uses to skip most of
// its output head.
type HeadRunner interface {
	Runner
	ForwardHead(b *Batch, logits []float32, rows int) error
}

// ArgmaxRunner is a Runner that can hand back each logits row's argmax
// (the lowest id among equal maxima, NaN ignored, as greedy sampling
// picks) instead of the row: for a pass whose every row is decoded
// greedily, what a GPU copies back shrinks from Vocab floats a row to one
// id.
type ArgmaxRunner interface {
	Runner
	// ForwardArgmax is Forward with ids[r] the argmax of logits row r.
	ForwardArgmax(b *Batch, ids []int32) error
}

// PagedRunner is a Runner whose caches take their memory as their
// sequences grow, from a page pool the runtime shares between every cache
// of its models and bounds (the CPU's kv.Pool).
type PagedRunner interface {
	Runner
	// WithPages is the runner with its caches' pages from pool.
	WithPages(pool *kv.Pool) Runner
}

// CPU is the Runner of a Model on the CPU. Its caches take their pages
// from Pages (nil: the heap, without a limit).
type CPU struct {
	*Model
	Pages *kv.Pool
}

// WithPages is r with its caches' pages from pool.
func (r CPU) WithPages(pool *kv.Pool) Runner {
	r.Pages = pool
	return r
}

// NewCache makes a CPU cache (kv.Cache) of up to ctx positions.
func (r CPU) NewCache(ctx int) (Cache, error) { return r.NewCachePass(ctx, 0) }

// NewCachePass makes a CPU cache whose local layers hold passes of up to
// maxPass tokens (Model.NewCachePass).
func (r CPU) NewCachePass(ctx, maxPass int) (Cache, error) {
	return kv.NewIn(r.Pages, r.Model.Config().KVShape(ctx, maxPass)), nil
}

// NewPrefixCache makes a CPU cache of the first layers.
func (r CPU) NewPrefixCache(ctx, layers int) (Cache, error) {
	c := r.Model.Config()
	s := c.KVShape(ctx, 0)
	s.Layers = layers
	if len(s.Window) > layers {
		s.Window = s.Window[:layers]
	}
	return kv.NewIn(r.Pages, s), nil
}

// Close stops the model's threads and frees its weights (Model.Close).
func (r CPU) Close() error {
	r.Model.Close()
	return nil
}

// ReadConfig reads a model's shape from its GGUF metadata, for runners that
// load the weights themselves (Load does this and more for the CPU).
// Every tensor is checked as Load checks it (none is read), so the
// Config's tensor flags say what the file holds.
func ReadConfig(f *gguf.File) (Config, error) {
	m, err := readTensors(f, true)
	if err != nil {
		return Config{}, err
	}
	return m.cfg, nil
}

// RopeFrequencies are the rotation frequencies base^(-2i/HeadDim) of each
// pair, in float64 as the CPU pass computes its angles.
func RopeFrequencies(c Config) []float64 { return ropeFrequencies(c.RopeTheta, c.HeadDim) }
