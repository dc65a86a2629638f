package cpu

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/runtime"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
)

// drafterKind names how a request's candidate trees are drafted.
type drafterKind int

const (
	draftNone drafterKind = iota
	draftNGram
	draftModel
	draftEarlyExit
)

var drafterNames = map[string]drafterKind{
	"none": draftNone, "ngram": draftNGram, "draft_model": draftModel, "early_exit": draftEarlyExit,
}

func (k drafterKind) String() string {
	for n, v := range drafterNames {
		if v == k {
			return n
		}
	}
	return "unknown"
}

func parseDrafter(where, name string) (drafterKind, error) {
	k, ok := drafterNames[name]
	if !ok {
		return 0, status.Errorf(status.InvalidRequest, `%s field "drafter": unknown drafter %q (want "ngram", "draft_model", "early_exit" or "none")`, where, name)
	}
	return k, nil
}

// specConfig is the speculation part of the runtime config.
type specConfig struct {
	drafter        drafterKind // the default for requests that name none
	draftModelPath string
	earlyExit      int // layers of the early-exit self-draft (0: a third of the model's)
	sched          spec.Config
	budgetGiven    bool
}

var policyNames = map[string]spec.Policy{
	"adaserve": spec.AdaServe, "incremental": spec.Incremental, "specinfer": spec.SpecInfer,
	"equal_greedy": spec.EqualGreedy, "global_greedy": spec.GlobalGreedy,
}

// DefaultDrafter is the drafter of requests that do not name one, when the
// runtime config does not set "drafter" either. See the package doc for why.
const DefaultDrafter = "ngram"

// MaxSpecBudget bounds "spec_budget": tokens of one verify pass, each
// needing a logits row of the vocabulary's size.
const MaxSpecBudget = 1024

// takeSpecConfig reads the speculation fields of the runtime config.
func takeSpecConfig(cfg *runtime.Config) (specConfig, error) {
	var sc specConfig
	drafter, policy, order := DefaultDrafter, "adaserve", "descending"
	budget, depth, width := 0, 8, 2
	minProb := 0.25
	for _, f := range []struct {
		key string
		dst any
	}{
		{"drafter", &drafter}, {"draft_model_path", &sc.draftModelPath}, {"early_exit_layers", &sc.earlyExit},
		{"spec_budget", &budget}, {"spec_max_depth", &depth}, {"spec_max_width", &width},
		{"spec_policy", &policy}, {"spec_order", &order}, {"spec_min_prob", &minProb},
	} {
		if _, err := cfg.Extra.Take(f.key, f.dst); err != nil {
			return sc, err
		}
	}
	var err error
	if sc.drafter, err = parseDrafter("config", drafter); err != nil {
		return sc, err
	}
	p, ok := policyNames[strings.ReplaceAll(strings.ToLower(policy), "-", "_")]
	if !ok {
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_policy": unknown policy %q (want "adaserve", "incremental", "specinfer", "equal_greedy" or "global_greedy")`, policy)
	}
	sc.sched.Policy = p
	switch strings.ToLower(order) {
	case "descending", "desc":
		sc.sched.Order = spec.Descending
	case "ascending", "asc":
		sc.sched.Order = spec.Ascending
	default:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_order": want "descending" or "ascending", got %q`, order)
	}
	switch {
	case budget < 0 || budget > MaxSpecBudget:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_budget" must be in [1, %d] (or 0: calibrate), got %d`, MaxSpecBudget, budget)
	case depth < 1 || depth > 64:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_max_depth" must be in [1, 64], got %d`, depth)
	case width < 1 || width > 64:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_max_width" must be in [1, 64], got %d`, width)
	case sc.earlyExit < 0:
		return sc, status.Errorf(status.InvalidRequest, `config field "early_exit_layers" must be positive, got %d`, sc.earlyExit)
	}
	if !(minProb >= 0 && minProb <= 1) { // NaN fails both
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_min_prob" must be in [0, 1], got %g`, minProb)
	}
	sc.sched.MinProb = minProb
	sc.sched.Budget, sc.budgetGiven = budget, budget > 0
	sc.sched.MaxDepth, sc.sched.MaxWidth = depth, width
	return sc, nil
}

// calibrated caches the measured budget per model file and thread count, so
// that a process creating many runtimes (the tests) measures once.
var calibrated sync.Map // string -> int

// calibrate measures the knee of the forward pass's cost over N tokens (see
// spec.Calibrate), on a throwaway cache: about a second on two idle cores,
// often the longest part of creating a runtime. progress (may be nil)
// hears the share of the measuring done, by tokens run.
func calibrate(key string, m model.Runner, maxN int, progress func(float64)) int {
	if b, ok := calibrated.Load(key); ok {
		return b.(int)
	}
	c, err := m.NewCache(maxN + 1)
	if err != nil {
		return DefaultMinBudget
	}
	var bt model.Batch
	logits := make([]float32, m.Config().Vocab)
	total, done := maxN, 0 // the warm-up pass, then each size three times
	for _, n := range spec.CalibrationSizes(maxN) {
		total += 3 * n
	}
	cost := func(n int) time.Duration {
		defer func() {
			done += n
			if progress != nil {
				progress(min(1, float64(done)/float64(total)))
			}
		}()
		c.Truncate(0)
		bt.Tokens, bt.Cache, bt.Pos, bt.Parent, bt.Logits = bt.Tokens[:0], bt.Cache[:0], bt.Pos[:0], bt.Parent[:0], bt.Logits[:0]
		for i := range n {
			bt.Tokens = append(bt.Tokens, int32(i%m.Config().Vocab))
			bt.Cache = append(bt.Cache, c)
			bt.Pos = append(bt.Pos, i)
			bt.Parent = append(bt.Parent, i-1)
			bt.Logits = append(bt.Logits, i == n-1)
		}
		t := time.Now()
		m.Forward(&bt, logits)
		return time.Since(t)
	}
	cost(maxN) // warm the scratch buffers
	b := spec.Calibrate(cost, maxN)
	calibrated.Store(key, b)
	return b
}

// drafters dispatches each sequence to the drafter its request chose. The
// scheduler sees one Drafter; the kinds live beside the sequences.
type drafters struct {
	kind  map[*spec.Seq]drafterKind
	ngram spec.NGramDrafter
	model *modelDrafter // nil without a draft model
	early *modelDrafter // nil until an early-exit request comes
	seqs  [4][]*spec.Seq
	trees [4][]*spec.Tree
	errs  int // drafter failures (each cost one iteration's speculation)
}

func (d *drafters) Draft(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	for k := range d.seqs {
		d.seqs[k], d.trees[k] = d.seqs[k][:0], d.trees[k][:0]
	}
	for i, s := range seqs {
		k := d.kind[s]
		d.seqs[k] = append(d.seqs[k], s)
		d.trees[k] = append(d.trees[k], trees[i])
		trees[i].Reset(s.Tokens[len(s.Tokens)-1])
	}
	for k, ss := range d.seqs {
		if len(ss) == 0 {
			continue
		}
		var dr spec.Drafter
		switch {
		case drafterKind(k) == draftNGram:
			dr = &d.ngram
		case drafterKind(k) == draftModel && d.model != nil:
			dr = d.model
		case drafterKind(k) == draftEarlyExit && d.early != nil:
			dr = d.early
		default:
			continue
		}
		if err := dr.Draft(ss, shape, d.trees[k]); err != nil {
			// A drafter that fails costs its requests their speculation
			// this iteration, not their streams: verify the roots alone.
			for i, t := range d.trees[k] {
				t.Reset(ss[i].Tokens[len(ss[i].Tokens)-1])
			}
			d.errs++
		}
	}
	return nil
}

// modelDrafter drafts with a model — a separate GGUF sharing the target's
// vocabulary, or the target's own first layers — by beam search
// (spec.BeamDrafter over draftNet).
type modelDrafter struct {
	beam spec.BeamDrafter
	dm   *draftNet
}

func (m *modelDrafter) Draft(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	m.dm.seqs = seqs
	defer func() { m.dm.seqs = nil }()
	return m.beam.Draft(seqs, shape, trees)
}

// draftState is a sequence's state in a draft model: its own KV cache,
// which holds the sequence's tokens up to and including the last root.
type draftState struct {
	cache model.Cache
}

// draftNet is spec.TopKDraftModel over a model.Runner (or its first
// layers). Each sequence keeps a KV cache of every emitted token; a Draft's
// first call catches it up (the new tokens, ending with the root, committed
// at once: they are final), and each later call feeds the union of its
// queries' paths below the root as a tree, attending to the committed
// context through Parent = -1 and to its ancestors in the batch.
type draftNet struct {
	m        model.Runner
	layers   int // > 0: the early exit, through m's first layers (m is a model.PrefixRunner)
	newCache func() (model.Cache, error)
	free     []model.Cache

	seqs   []*spec.Seq
	batch  model.Batch
	logits []float32
	qrow   []int   // per query: its batch index
	rowOf  []int   // per batch entry: its logits row, or -1
	ident  []int   // 0, 1, 2, ...
	skip   []bool  // per sequence of the call: no room in its cache
	sorted []int32 // scratch for top-k
	owner  map[*spec.Seq]*draftState
}

func (d *draftNet) Vocab() int { return d.m.Config().Vocab }

func (d *draftNet) forward(logits []float32) error {
	if d.layers > 0 {
		return d.m.(model.PrefixRunner).ForwardPrefix(&d.batch, logits, d.layers)
	}
	return d.m.Forward(&d.batch, logits)
}

// state returns the sequence's draft state (see ensureStates).
func (d *draftNet) state(s *spec.Seq) *draftState { return d.owner[s] }

// ensureStates gives every queried sequence a draft cache, taking one from
// the pool or reserving a new one (which can fail on a device short of
// memory: the drafter then fails this iteration, not the streams).
func (d *draftNet) ensureStates(queries []spec.Query) error {
	for _, q := range queries {
		s := d.seqs[q.Seq]
		if d.owner[s] != nil {
			continue
		}
		var c model.Cache
		if n := len(d.free); n > 0 {
			c, d.free = d.free[n-1], d.free[:n-1]
			c.Truncate(0)
		} else {
			var err error
			if c, err = d.newCache(); err != nil {
				return fmt.Errorf("draft cache: %w", err)
			}
		}
		d.owner[s] = &draftState{cache: c}
	}
	return nil
}

// release returns a finished sequence's cache to the pool.
func (d *draftNet) release(s *spec.Seq) {
	if st := d.owner[s]; st != nil {
		d.free = append(d.free, st.cache)
		delete(d.owner, s)
	}
}

func (d *draftNet) add(c model.Cache, tok int32, pos, parent int, logits bool) int {
	b := &d.batch
	b.Tokens = append(b.Tokens, tok)
	b.Cache = append(b.Cache, c)
	b.Pos = append(b.Pos, pos)
	b.Parent = append(b.Parent, parent)
	b.Logits = append(b.Logits, logits)
	return len(b.Tokens) - 1
}

func (d *draftNet) NextDistributions(queries []spec.Query, out []float32) error {
	return fmt.Errorf("draft model: only top-k queries are supported")
}

// NextTopK runs the draft model once over every query's context and writes
// each query's k most probable next tokens (softmax over the full row).
func (d *draftNet) NextTopK(queries []spec.Query, k int, ids []int32, probs []float32) error {
	if err := d.ensureStates(queries); err != nil {
		return err
	}
	b := &d.batch
	b.Tokens, b.Cache, b.Pos, b.Parent, b.Logits = b.Tokens[:0], b.Cache[:0], b.Pos[:0], b.Parent[:0], b.Logits[:0]
	d.qrow = d.qrow[:0]
	d.skip = append(d.skip[:0], make([]bool, len(d.seqs))...)
	first := len(queries) > 0 && queries[0].Depth == 0
	if first {
		// Catch each sequence up with its new tokens; the root's logits
		// answer the query.
		for _, q := range queries {
			c := d.state(d.seqs[q.Seq]).cache
			if c.Len() >= len(q.Context) || len(q.Context) > c.Cap()-1 {
				d.skip[q.Seq] = true
				d.qrow = append(d.qrow, -1)
				continue
			}
			for i := c.Len(); i < len(q.Context); i++ {
				parent := -1
				if i > c.Len() {
					parent = len(b.Tokens) - 1
				}
				d.add(c, q.Context[i], i, parent, i == len(q.Context)-1)
			}
			d.qrow = append(d.qrow, len(b.Tokens)-1)
		}
	} else {
		// The union of the paths, as a tree below the committed root.
		start := 0
		for qi, q := range queries {
			c := d.state(d.seqs[q.Seq]).cache
			if qi == 0 || queries[qi-1].Seq != q.Seq {
				start = len(b.Tokens)
			}
			if d.skip[q.Seq] || c.Len()+len(b.Tokens)-start+len(q.Path) > c.Cap() {
				d.skip[q.Seq] = true
				d.qrow = append(d.qrow, -1)
				continue
			}
			parent := -1
			for j, tok := range q.Path {
				found := -1
				for e := start; e < len(b.Tokens); e++ {
					if b.Parent[e] == parent && b.Tokens[e] == tok && b.Pos[e] == c.Len()+j {
						found = e
						break
					}
				}
				if found < 0 {
					found = d.add(c, tok, c.Len()+j, parent, false)
				}
				parent = found
			}
			b.Logits[parent] = true
			d.qrow = append(d.qrow, parent)
		}
	}
	d.rowOf = d.rowOf[:0]
	nl := 0
	for _, l := range b.Logits {
		if l {
			d.rowOf = append(d.rowOf, nl)
			nl++
		} else {
			d.rowOf = append(d.rowOf, -1)
		}
	}
	v := d.Vocab()
	if cap(d.logits) < nl*v {
		d.logits = make([]float32, nl*v)
	}
	logits := d.logits[:nl*v]
	if len(b.Tokens) > 0 {
		if err := d.forward(logits); err != nil {
			return err
		}
	}
	// Keep the caught-up context; drop the paths' scratch.
	if first {
		for _, q := range queries {
			if d.skip[q.Seq] {
				continue
			}
			c := d.state(d.seqs[q.Seq]).cache
			n := len(q.Context) - c.Len()
			for len(d.ident) < n {
				d.ident = append(d.ident, len(d.ident))
			}
			if err := c.Commit(d.ident[:n]); err != nil {
				return err
			}
		}
	} else {
		for _, q := range queries {
			d.state(d.seqs[q.Seq]).cache.Commit(nil)
		}
	}
	for qi := range queries {
		if d.qrow[qi] < 0 {
			continue // probabilities stay 0: nothing proposed
		}
		row := logits[d.rowOf[d.qrow[qi]]*v : (d.rowOf[d.qrow[qi]]+1)*v]
		softmaxTopK(row, k, ids[qi*k:(qi+1)*k], probs[qi*k:(qi+1)*k])
	}
	return nil
}

// softmaxTopK writes the k most probable tokens of a logits row, by
// descending probability, and their softmax probabilities.
func softmaxTopK(row []float32, k int, ids []int32, probs []float32) {
	mx := row[0]
	for _, v := range row {
		mx = max(mx, v)
	}
	var z float64
	for _, v := range row {
		z += math.Exp(float64(v - mx))
	}
	n := 0
	for i, v := range row {
		if n == k && v <= row[ids[n-1]] {
			continue
		}
		if n < k {
			n++
		}
		j := n - 1
		for ; j > 0 && row[ids[j-1]] < v; j-- {
			ids[j] = ids[j-1]
		}
		ids[j] = int32(i)
	}
	for j := range n {
		probs[j] = float32(math.Exp(float64(row[ids[j]]-mx)) / z)
	}
	for j := n; j < k; j++ {
		probs[j] = 0
	}
}
