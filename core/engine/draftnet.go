package engine

import (
	"bytes"
	"fmt"
	"time"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/spec"
)

// draftState is a sequence's state in a draft model: its own KV cache and
// the tokens the cache holds (all committed). With a draft window the
// cache holds the sequence's tokens less skip of them after the first
// DraftSink (see draftNet.window); the cache's positions count what it
// holds.
type draftState struct {
	cache model.Cache
	toks  []int32
	skip  int
}

// DraftSink is how many leading tokens of a sequence a windowed draft
// cache keeps before its window: a model puts much of its attention on
// the first positions (StreamingLLM's "attention sinks"), and a context
// re-encoded without them predicts worse.
const DraftSink = 4

// view appends to dst the tokens of toks the cache is to hold: all of them,
// or without the skip tokens after the first DraftSink. ok is false where
// toks no longer reach past the skipped ones (a shorter sequence).
func (st *draftState) view(dst, toks []int32) (v []int32, ok bool) {
	if st.skip == 0 {
		return append(dst, toks...), true
	}
	if len(toks) < DraftSink+st.skip {
		return dst, false
	}
	return append(append(dst, toks[:DraftSink]...), toks[DraftSink+st.skip:]...), true
}

// held is how many leading tokens of toks the cache already holds: the
// common prefix that a sync keeps.
func (st *draftState) held(toks []int32) int {
	p := 0
	for p < len(st.toks) && p < len(toks) && st.toks[p] == toks[p] {
		p++
	}
	return p
}

// draftNet is spec.TopKDraftModel over a model.Runner (or its first
// layers). Each sequence keeps a KV cache of one path: its tokens and, after
// a spine step (spec.Shape.Spine), the drafted chain below its root. A query
// whose sequence is alone in the call is answered by syncing that cache to
// the query's Context followed by its Path — truncate to the longest common
// prefix, feed the rest, commit it — so a spine step feeds one token, and
// the next iteration's first step only feeds what verification did not
// take from the chain (the bonus token, or the accepted side leaf). Several
// queries of one sequence in a call (a beam or a fixed tree) are fed as the
// union of their paths below the committed root, in scratch, dropped after
// the call.
type draftNet struct {
	m      model.Runner
	layers int // > 0: the early exit, through m's first layers (m is a model.PrefixRunner)
	// headRows > 0 limits proposals to the token ids below it, computing
	// only those rows of the output head (m is a model.HeadRunner).
	headRows int
	// catchUp > 0 feeds a sequence's cache at most that many tokens in the
	// call's own pass: a longer catch-up (a new prompt) first runs in
	// passes of catchUp tokens, so that a local (sliding-window) layer of
	// the draft's cache needs room for its window and catchUp tokens, not
	// the whole prompt.
	catchUp int
	// window > 0 starts a sequence's cache with at most its first
	// DraftSink and last window tokens: feeding the draft model a whole
	// prompt costs a draft prefill on the iteration after the first
	// token (0.6–0.8 s for a 400-token prompt on the Qwen2.5-Coder 0.5B
	// on two cores), where the next tokens depend mostly on the recent
	// ones. The cache then grows with the sequence as before.
	window int
	// borrow, where set (the early exit, whose layers are the target's
	// first ones), commits to the draft cache dst the next n entries of
	// the target's own cache of s: the K/V the target computed for tokens
	// it committed, which a catch-up would compute again. It reports
	// false where it cannot (a cache of another device, a local layer
	// that no longer holds them); sync then feeds the tokens.
	borrow func(s *spec.Seq, dst model.Cache, n int) bool
	// sideFed says whether the current call ran a catch-up pass (its
	// time is then no draft step's).
	sideFed  bool
	side     model.Batch // a catch-up pass
	newCache func() (model.Cache, error)
	free     []model.Cache

	seqs   []*spec.Seq
	batch  model.Batch
	logits []float32
	qrow   []int   // per query: its batch index
	qfed   []int   // per query: tokens it fed to its cache (synced queries)
	rowOf  []int   // per batch entry: its logits row, or -1
	ident  []int   // 0, 1, 2, ...
	skip   []bool  // per sequence of the call: no room in its cache
	count  []int   // per sequence of the call: its queries
	full   []int32 // scratch: Context followed by Path
	owner  map[*spec.Seq]*draftState

	// Step is the measured duration of one call that fed one token a
	// query (one draft step), for the cost model; stepBy the duration of
	// a call by the tokens its pass ran, whose cost it grows with.
	Step   spec.Timing
	stepBy map[int]*spec.Timing
}

// stepAt is the measured draft pass over n tokens, the price of a step
// over n sequences; ok is false until stepSamples passes of that size
// were measured.
func (d *draftNet) stepAt(n int) (time.Duration, bool) {
	if t := d.stepBy[n]; t != nil && t.Observations() >= stepSamples {
		return t.Estimate(), true
	}
	return 0, false
}

// observePass records a draft pass over n tokens that took took; step
// says it fed one token a query (Step's sample).
func (d *draftNet) observePass(n int, step bool, took time.Duration) {
	if step {
		d.Step.Observe(took)
	}
	t := d.stepBy[n]
	if t == nil {
		if d.stepBy == nil {
			d.stepBy = map[int]*spec.Timing{}
		}
		t = &spec.Timing{}
		d.stepBy[n] = t
	}
	t.Observe(took)
}

func (d *draftNet) Vocab() int { return d.m.Config().Vocab }

// rowWidth is the floats of one logits row: the ids proposals come from.
func (d *draftNet) rowWidth() int {
	if d.headRows > 0 {
		return d.headRows
	}
	return d.Vocab()
}

func (d *draftNet) forward(b *model.Batch, logits []float32) error {
	switch {
	case d.layers > 0:
		return d.m.(model.PrefixRunner).ForwardPrefix(b, logits, d.layers)
	case d.headRows > 0:
		return d.m.(model.HeadRunner).ForwardHead(b, logits, d.headRows)
	}
	return d.m.Forward(b, logits)
}

// feed runs toks, the cache's next positions, through the draft in a pass
// of their own (no logits) and commits them.
func (d *draftNet) feed(c model.Cache, toks []int32) error {
	if err := d.forward(d.sideChain(c, toks, false), nil); err != nil {
		return err
	}
	for len(d.ident) < len(toks) {
		d.ident = append(d.ident, len(d.ident))
	}
	return c.Commit(d.ident[:len(toks)])
}

// sideChain fills the catch-up batch with toks as a chain at c's next
// positions, each with a logits row or none.
func (d *draftNet) sideChain(c model.Cache, toks []int32, logits bool) *model.Batch {
	b := &d.side
	b.Tokens, b.Cache, b.Pos, b.Parent, b.Logits = b.Tokens[:0], b.Cache[:0], b.Pos[:0], b.Parent[:0], b.Logits[:0]
	for i, tok := range toks {
		b.Tokens = append(b.Tokens, tok)
		b.Cache = append(b.Cache, c)
		b.Pos = append(b.Pos, c.Len()+i)
		b.Parent = append(b.Parent, i-1)
		b.Logits = append(b.Logits, logits)
	}
	return b
}

// lag is how many tokens the sequence's draft cache lacks: what its next
// sync feeds before drafting. A cache that borrows the target's entries
// (borrow) feeds only the root, which the target has not committed.
func (d *draftNet) lag(s *spec.Seq) int {
	if d.borrow != nil {
		return 1
	}
	if st := d.state(s); st != nil && len(st.toks) > 0 {
		if v, ok := st.view(d.full[:0], s.Tokens); ok {
			d.full = v
			return len(v) - st.held(v)
		}
	}
	// A new cache, or one that starts again (see sync).
	return len(s.Tokens) - d.newSkip(len(s.Tokens))
}

// newSkip is how many of a sequence's n tokens a new cache leaves out
// after the first DraftSink: all but the last window (none without one).
func (d *draftNet) newSkip(n int) int {
	if d.window <= 0 {
		return 0
	}
	return max(0, n-DraftSink-d.window)
}

// state returns the sequence's draft state (see ensureStates).
func (d *draftNet) state(s *spec.Seq) *draftState { return d.owner[s] }

// ensureStates gives every queried sequence a draft cache, taking one from
// the pool or reserving a new one (which can fail on a device short of
// memory: the drafter then fails this iteration, not the streams).
func (d *draftNet) ensureStates(queries []spec.Query) error {
	for _, q := range queries {
		if _, err := d.stateFor(d.seqs[q.Seq]); err != nil {
			return err
		}
	}
	return nil
}

// stateFor returns the sequence's draft state, giving it one first (a
// cache from the pool, or a new one).
func (d *draftNet) stateFor(s *spec.Seq) (*draftState, error) {
	if st := d.owner[s]; st != nil {
		return st, nil
	}
	var c model.Cache
	if n := len(d.free); n > 0 {
		c, d.free = d.free[n-1], d.free[:n-1]
		c.Truncate(0)
	} else {
		var err error
		if c, err = d.newCache(); err != nil {
			return nil, fmt.Errorf("draft cache: %w", err)
		}
	}
	st := &draftState{cache: c}
	d.owner[s] = st
	return st, nil
}

// reprice measures a draft step over n sequences again and makes it the
// step's price (stepBy[n]), forgetting what was measured before: as many
// passes as a price needs (stepSamples), each of n tokens with a logits
// row apiece, as a step over n sequences has, fed to s's cache past what
// it holds and dropped after (nothing is committed, so the cache and what
// the drafter knows of it stay as they were).
func (d *draftNet) reprice(s *spec.Seq, n int) error {
	st, err := d.stateFor(s)
	if err != nil {
		return err
	}
	c := st.cache
	if n <= 0 || c.Len()+n > c.Cap() {
		return fmt.Errorf("draft cache: no room for %d tokens", n)
	}
	toks := make([]int32, n) // any ids: a step's cost does not depend on them
	for i := range toks {
		toks[i] = s.Tokens[len(s.Tokens)-1]
	}
	b := d.sideChain(c, toks, true)
	if v := n * d.rowWidth(); cap(d.logits) < v {
		d.logits = make([]float32, v)
	}
	t := &spec.Timing{}
	for range stepSamples {
		start := time.Now()
		err := d.forward(b, d.logits[:n*d.rowWidth()])
		took := time.Since(start)
		if err == nil {
			err = c.Commit(nil) // keep none of the scratch
		}
		if err != nil {
			return err
		}
		t.Observe(took)
	}
	if d.stepBy == nil {
		d.stepBy = map[int]*spec.Timing{}
	}
	d.stepBy[n] = t
	return nil
}

// release returns a finished sequence's cache to the pool, emptied: its
// pages go back to the runtime's page pool at once.
func (d *draftNet) release(s *spec.Seq) {
	if st := d.owner[s]; st != nil {
		st.cache.Truncate(0)
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

// sync adds to the batch what the sequence's cache lacks of Context
// followed by Path, after truncating the cache to their common prefix, and
// returns the batch index of the path's last token and how many tokens it
// fed (-1, 0 when the cache cannot hold the path).
func (d *draftNet) sync(st *draftState, q spec.Query) (int, int) {
	c := st.cache
	if c.Len() > 0 && len(q.Context) < DraftSink+st.skip {
		// The sequence no longer reaches past the skipped tokens: start
		// the cache again.
		if c.Truncate(0) != nil {
			return -1, 0
		}
	}
	if c.Len() == 0 {
		// A new (or emptied) cache chooses its window.
		st.toks, st.skip = st.toks[:0], d.newSkip(len(q.Context))
	}
	full, _ := st.view(d.full[:0], q.Context) // reaches past skip: checked above
	full = append(full, q.Path...)
	d.full = full
	if len(full) == 0 || len(full) > c.Cap() {
		return -1, 0
	}
	p := min(st.held(full), len(full)-1) // the last token is fed for its logits
	if p < c.Len() {
		if err := c.Truncate(p); err != nil {
			// A local layer no longer holds the window before p (it keeps
			// only a few positions behind its window): feed it all again.
			p = 0
			if err := c.Truncate(0); err != nil {
				return -1, 0
			}
		}
		st.toks = st.toks[:p]
	}
	if d.borrow != nil && st.skip == 0 {
		// Positions below the root's are the tokens the target has
		// committed (Seq.Committed), its K/V at those positions ours.
		if n := len(q.Context) - 1 - p; n > 0 && d.borrow(d.seqs[q.Seq], c, n) {
			st.toks = append(st.toks, full[p:p+n]...)
			p += n
		}
	}
	for d.catchUp > 0 && len(full)-p > d.catchUp {
		if err := d.feed(c, full[p:p+d.catchUp]); err != nil {
			return -1, 0
		}
		d.sideFed = true
		st.toks = append(st.toks, full[p:p+d.catchUp]...)
		p += d.catchUp
	}
	parent := -1
	for i := p; i < len(full); i++ {
		parent = d.add(c, full[i], i, parent, i == len(full)-1)
	}
	st.toks = append(st.toks, full[p:]...)
	return parent, len(full) - p
}

// NextTopK runs the draft model once over every query's context and writes
// each query's k most probable next tokens (softmax over the full row).
func (d *draftNet) NextTopK(queries []spec.Query, k int, ids []int32, probs []float32) error {
	start := time.Now()
	defer func() {
		// Every call's pass is timed by its tokens: a step over n
		// sequences feeds one token each, and the first step of an
		// iteration also feeds what the sequences emitted since their
		// last draft. Timing only the calls that fed one token a query
		// left several streams unpriced for good: their first calls
		// always carry a catch-up, and a spine stopped after one step
		// has no other. A call that ran a separate catch-up pass
		// (sideFed) is not a step's price.
		if !d.sideFed && len(d.batch.Tokens) > 0 {
			d.observePass(len(d.batch.Tokens), len(d.batch.Tokens) <= len(queries), time.Since(start))
		}
	}()
	d.sideFed = false
	if err := d.ensureStates(queries); err != nil {
		return err
	}
	d.layQueries(queries)
	nl := d.markRows()
	v := d.rowWidth()
	if cap(d.logits) < nl*v {
		d.logits = make([]float32, nl*v)
	}
	logits := d.logits[:nl*v]
	if len(d.batch.Tokens) > 0 {
		if err := d.forward(&d.batch, logits); err != nil {
			// The synced tokens never reached the caches: forget them.
			for qi, q := range queries {
				if n := d.qfed[qi]; n > 0 {
					st := d.state(d.seqs[q.Seq])
					st.toks = st.toks[:len(st.toks)-n]
				}
			}
			return err
		}
	}
	// Keep the synced paths; drop the unions' scratch.
	if err := d.keepSynced(queries); err != nil {
		return err
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

// layQueries lays NextTopK's queries into d.batch: a sequence with one
// query syncs its cache to the query's path (d.sync), one with several
// gets the union of their paths as a tree in scratch below its committed
// cache. d.qrow is each query's logits node (-1: none, the sequence
// skipped), d.qfed the tokens it synced.
func (d *draftNet) layQueries(queries []spec.Query) {
	b := &d.batch
	b.Tokens, b.Cache, b.Pos, b.Parent, b.Logits = b.Tokens[:0], b.Cache[:0], b.Pos[:0], b.Parent[:0], b.Logits[:0]
	d.qrow, d.qfed = d.qrow[:0], d.qfed[:0]
	d.skip = append(d.skip[:0], make([]bool, len(d.seqs))...)
	d.count = append(d.count[:0], make([]int, len(d.seqs))...)
	for _, q := range queries {
		d.count[q.Seq]++
	}
	start0 := 0
	for qi, q := range queries {
		st := d.state(d.seqs[q.Seq])
		c := st.cache
		if d.count[q.Seq] == 1 || q.Depth == 0 {
			// One path: sync the cache to it (a root's query has no path,
			// so the roots of a beam's first step sync to their context).
			row, fed := d.sync(st, q)
			d.qrow, d.qfed = append(d.qrow, row), append(d.qfed, fed)
			if row < 0 {
				d.skip[q.Seq] = true
			}
			continue
		}
		// The union of the paths, as a tree in scratch below the cache's
		// committed root (synced by the step of the roots).
		d.qfed = append(d.qfed, 0)
		if qi == 0 || queries[qi-1].Seq != q.Seq {
			start0 = len(b.Tokens)
		}
		if d.skip[q.Seq] || c.Len() != len(q.Context)-st.skip || c.Len()+len(b.Tokens)-start0+len(q.Path) > c.Cap() {
			d.skip[q.Seq] = true
			d.qrow = append(d.qrow, -1)
			continue
		}
		parent := -1
		for j, tok := range q.Path {
			found := -1
			for e := start0; e < len(b.Tokens); e++ {
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

// markRows numbers the logits rows of d.batch (d.rowOf, -1 for a node
// without logits) and returns how many there are.
func (d *draftNet) markRows() int {
	b := &d.batch
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
	return nl
}

// keepSynced commits what each query synced into its sequence's cache;
// the unions' scratch entries are dropped.
func (d *draftNet) keepSynced(queries []spec.Query) error {
	for qi, q := range queries {
		c := d.state(d.seqs[q.Seq]).cache
		n := d.qfed[qi]
		for len(d.ident) < n {
			d.ident = append(d.ident, len(d.ident))
		}
		if err := c.Commit(d.ident[:n]); err != nil {
			return err
		}
	}
	return nil
}

// softmaxTopK writes the k most probable tokens of a logits row, by
// descending probability (ties: the lower id), and their softmax
// probabilities. It overwrites the row with its unnormalised softmax
// weights: one pass of comparisons finds the top k, whose first is the
// maximum, and the normaliser runs on the SIMD exponential (model.ExpSum).
func softmaxTopK(row []float32, k int, ids []int32, probs []float32) {
	if k <= 0 || len(row) == 0 {
		return
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
	z := model.ExpSum(row, row[ids[0]])
	for j := range n {
		probs[j] = row[ids[j]] / z
	}
	for j := n; j < k; j++ {
		probs[j] = 0
	}
}

// loadDraftModel opens the draft model and checks that it shares the
// target's vocabulary, piece for piece. The target's own file is shared,
// not loaded twice.
func (b *Backend) loadDraftModel(path, targetPath string, threads int) (*draftNet, error) {
	m := b.model
	if path != targetPath {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, status.Errorf(status.Model, "draft model %s: %v", path, err)
		}
		var dm model.Runner
		tok, err := tokenizer.FromGGUF(f)
		if err == nil {
			dm, err = b.open(f, threads)
		}
		if err == nil {
			if dm, err = withPages(dm, b.pages, b.kvType); err != nil {
				dm.Close()
			}
		}
		if err != nil {
			f.Close()
			return nil, status.Errorf(status.Model, "draft model %s: %v", path, err)
		}
		m = dm
		if err := sameVocabulary(b.tok, tok, m.Config().Vocab); err != nil {
			m.Close()
			f.Close()
			return nil, status.Errorf(status.Model, "draft model %s cannot draft for %s: %v", path, targetPath, err)
		}
		b.draftFile = f
	}
	ctx := b.context
	d := &draftNet{m: m, catchUp: b.prefillChunk, window: min(b.spec.draftWindow, ctx), owner: map[*spec.Seq]*draftState{},
		newCache: func() (model.Cache, error) { return m.NewCache(ctx) }}
	if _, ok := m.(model.HeadRunner); ok && b.spec.draftVocab > 0 && b.spec.draftVocab < m.Config().Vocab {
		d.headRows = max(16, b.spec.draftVocab/16*16)
	}
	return d, nil
}

// sameVocabulary checks that a draft model's tokens are the target's.
func sameVocabulary(target, draft *tokenizer.Tokenizer, draftOutputs int) error {
	if draft.Size() != target.Size() || draftOutputs != target.Size() {
		return fmt.Errorf("its vocabulary has %d tokens (%d outputs), the target's %d", draft.Size(), draftOutputs, target.Size())
	}
	for id := int32(0); int(id) < target.Size(); id++ {
		if !bytes.Equal(target.Piece(id), draft.Piece(id)) {
			return fmt.Errorf("token %d is %q in the draft model but %q in the target", id, draft.Piece(id), target.Piece(id))
		}
	}
	return nil
}
