package engine

import (
	"errors"
	"time"

	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
)

// Step builds one batch from every slot — the next prompt chunk of those
// still prefilling, the token tree of those decoding (the newest token as
// its root, and what the drafter proposed and the scheduler selected below
// it; the root alone without speculation) — runs one forward pass, verifies
// each tree against the target's logits, commits the accepted path in the
// KV cache and hands back the accepted burst. Under "vllm" (serving.Preempt)
// an iteration with a prompt to prefill runs only prompt chunks: the
// decoding sequences get no tokens until every prompt is in.
func (b *Backend) Step(slots []*loop.Slot, res []loop.StepResult) {
	t0 := time.Now()
	preempt, trees := b.draft(slots, t0)
	t1 := time.Now()

	b.allotPrefill(slots, b.prefillBudget(slots, t0))
	nLogits := b.fillBatch(slots, trees, preempt)
	logits, ids, err := b.forward(slots, nLogits)
	if err != nil {
		for i := range slots {
			res[i].Err = status.Errorf(status.Backend, "forward pass: %v", err)
		}
		return
	}
	t2 := time.Now()
	charge := b.speculationCharge(slots, len(b.buf.batch.Tokens), t0, t1, t2)
	vocab := b.model.Config().Vocab
	// Nothing above changed a sequence: the forward pass wrote only cache
	// scratch, the drafters only their own state. From here on, state
	// moves (a panic above is retry-safe).
	for i, s := range slots {
		q := s.State.(*sequence)
		switch {
		case q.starved != nil:
			res[i].Err, q.starved = q.starved, nil
		case q.decoding && b.buf.rows[i] < 0:
			// preempted by a prefill, or sitting out: nothing ran
		case !q.decoding:
			b.prefilled(s, q, rowsOf(logits, b.buf.rows[i], 1, vocab), ids, b.buf.rows[i], t2, &res[i])
		default:
			b.decoded(q, rowsOf(logits, b.buf.rows[i], q.tree.Len(), vocab), ids, b.buf.rows[i], charge, t0, &res[i])
		}
	}
	b.observeStep(t0, t1, t2, time.Now())
}

// draft readies this iteration's decoding sequences (b.seqs: none when a
// prefill preempts them, less those sitting out) and drafts and selects
// their trees.
func (b *Backend) draft(slots []*loop.Slot, now time.Time) (preempt bool, trees []*spec.Tree) {
	bt := &b.buf.batch
	bt.Tokens, bt.Cache, bt.Pos, bt.Parent, bt.Logits = bt.Tokens[:0], bt.Cache[:0], bt.Pos[:0], bt.Parent[:0], bt.Logits[:0]
	b.buf.rows = b.buf.rows[:0]

	preempt = b.preempting(slots)
	b.seqs = b.seqs[:0]
	for _, s := range slots {
		q := s.State.(*sequence)
		q.idle = false
		if q.decoding && !preempt {
			b.limit(s, q)
			b.seqs = append(b.seqs, &q.seq)
		}
	}
	b.promptFloor(slots, now)
	b.sitOut(slots, now)
	trees = b.plan(now)
	b.pruneTrees(slots, trees)
	return preempt, trees
}

// fillBatch lays every slot's tokens of this iteration into b.buf.batch —
// its prompt chunk (allotPrefill), or its tree, in the order the slots
// come — notes in b.buf.rows each slot's first logits row (-1: none), and
// returns how many logits rows the pass makes.
func (b *Backend) fillBatch(slots []*loop.Slot, trees []*spec.Tree, preempt bool) int {
	bt := &b.buf.batch
	nLogits, di := 0, 0
	var starved []*loop.Slot
	for _, s := range slots {
		q := s.State.(*sequence)
		q.batched = 0
		row := -1
		if !q.decoding {
			if q.chunk > 0 && !b.reserve(q, q.chunk) {
				q.chunk = 0 // waits for pages
				starved = append(starved, s)
			}
			end := q.prefill + q.chunk
			for i := q.prefill; i < end; i++ {
				parent := -1
				if i > q.prefill {
					parent = len(bt.Tokens) - 1 // a chain: each prompt token follows the previous one
				}
				bt.Tokens = append(bt.Tokens, s.Prompt[i])
				bt.Cache = append(bt.Cache, q.cache)
				bt.Pos = append(bt.Pos, i)
				bt.Parent = append(bt.Parent, parent)
				bt.Logits = append(bt.Logits, i == len(s.Prompt)-1)
				q.batched++
			}
			if end == len(s.Prompt) {
				row = nLogits
				nLogits++
			}
		} else if !preempt && !q.idle {
			// Every node of the tree, root included, gets logits: the
			// root's give the first token, each node's the one after it.
			q.tree, q.planned = trees[di], di
			di++
			if !b.reserve(q, q.tree.Len()) {
				starved = append(starved, s) // waits for pages: sits this iteration out
				b.buf.rows = append(b.buf.rows, -1)
				continue
			}
			off := len(bt.Tokens)
			bt.Tokens, bt.Parent, bt.Pos = q.tree.AppendBatch(bt.Tokens, bt.Parent, bt.Pos, off, q.cache.Len())
			for range q.tree.Len() {
				bt.Cache = append(bt.Cache, q.cache)
				bt.Logits = append(bt.Logits, true)
			}
			q.batched = q.tree.Len()
			row = nLogits
			nLogits += q.tree.Len()
		}
		b.buf.rows = append(b.buf.rows, row)
	}
	b.timings.PageWaits += len(starved)
	if len(bt.Tokens) == 0 && len(starved) > 0 {
		b.starve(starved)
	}
	return nLogits
}

// reserve takes the pages the n tokens a slot puts in this iteration's
// pass will write (the pass would take them anyway; taking them here lets
// a slot that cannot get them wait instead of failing the pass). It
// reports false when the page pool is exhausted; other errors are the
// pass's to report.
func (b *Backend) reserve(q *sequence, n int) bool {
	err := q.cache.Reserve(n)
	return !errors.Is(err, kv.ErrFull)
}

// starve ends one of the slots that could not get pages when no slot
// could: the one whose cache holds the most, whose pages then let the
// others go on. While some slot runs, the others wait for the pages its
// end will give back.
func (b *Backend) starve(starved []*loop.Slot) {
	var pick *sequence
	var most int64 = -1
	for _, s := range starved {
		q := s.State.(*sequence)
		if c, ok := q.cache.(*kv.Cache); ok && c.Bytes() > most {
			pick, most = q, c.Bytes()
		}
	}
	if pick != nil {
		b.timings.PageEnds++
		pick.starved = status.Errorf(status.Capacity, "the KV cache memory (%s) is taken by the other sequences; its limit is what the memory budget leaves (\"memory_budget_bytes\")",
			loop.FormatBytes(b.pages.Limit()))
	}
}

// forward runs b.buf.batch through the target: logits rows of the vocabulary,
// or, where every row is decoded greedily and the runner can, each row's
// argmax alone (ids), which a device runner hands back instead of the rows.
func (b *Backend) forward(slots []*loop.Slot, nLogits int) (logits []float32, ids []int32, err error) {
	vocab := b.model.Config().Vocab
	if ar, ok := b.model.(model.ArgmaxRunner); ok && nLogits > 0 && b.allRawArgmax(slots) {
		if cap(b.buf.ids) < nLogits {
			b.buf.ids = make([]int32, nLogits)
		}
		ids = b.buf.ids[:nLogits]
		return nil, ids, ar.ForwardArgmax(&b.buf.batch, ids)
	}
	if cap(b.buf.logits) < nLogits*vocab {
		b.buf.logits = make([]float32, nLogits*vocab)
	}
	logits = b.buf.logits[:nLogits*vocab]
	return logits, nil, b.model.Forward(&b.buf.batch, logits)
}

// allRawArgmax reports whether every slot that gets logits this step picks
// its tokens as the plain argmax of them (sample.Sampler.RawArgmax, and no
// grammar constraining it) and needs nothing else from them (no logprobs).
func (b *Backend) allRawArgmax(slots []*loop.Slot) bool {
	for i, s := range slots {
		q := s.State.(*sequence)
		if b.buf.rows[i] >= 0 && (q.con != nil || q.logprobs || !q.sampler.RawArgmax()) {
			return false // a constrained row is masked before its argmax; logprobs need the row
		}
	}
	return true
}

// rowsOf is n logits rows of the vocabulary's width from row on (nil when
// the pass made ids instead).
func rowsOf(logits []float32, row, n, vocab int) []float32 {
	if logits == nil || row < 0 {
		return nil
	}
	return logits[row*vocab : (row+n)*vocab]
}

// prefilled commits a prefilling slot's chunk and, once its whole prompt
// is in, samples its first token from raw, its last prompt token's logits
// row, or takes ids[row] where the pass made only argmaxes.
func (b *Backend) prefilled(s *loop.Slot, q *sequence, raw []float32, ids []int32, row int, now time.Time, res *loop.StepResult) {
	for len(b.buf.ident) < q.batched {
		b.buf.ident = append(b.buf.ident, len(b.buf.ident))
	}
	if err := q.cache.Commit(b.buf.ident[:q.batched]); err != nil {
		res.Err = status.Errorf(status.Internal, "kv cache: %v", err)
		return
	}
	q.prefill = q.cache.Len()
	if q.prefill < len(s.Prompt) {
		return // more prompt next iteration; no token yet
	}
	q.decoding = true
	var tok int32
	if ids != nil {
		tok = ids[row]
	} else {
		var ok bool
		if tok, ok = q.first(raw); !ok {
			res.Err = errStuck
			return
		}
	}
	q.sampler.Accept(tok)
	q.con.accept(tok)
	q.next = tok
	q.seq.Tokens = append(q.seq.Tokens, tok)
	q.seq.Start = now
	q.out = append(q.out[:0], tok)
	res.Tokens = q.out
	res.Logprobs = q.logprobsOf([]int{0}, q.out)
	res.ContextFull = q.cache.Len()+1 >= q.cache.Cap()
}

// first samples a sequence's first token from the prefill's last row raw,
// masked by its grammar (false: no token can continue it), measuring the
// row for its logprobs.
func (q *sequence) first(raw []float32) (int32, bool) {
	switch {
	case q.con != nil && q.logprobs:
		// The logprobs are of the masked row, so it is made whole.
		row, ok := q.con.logits(q.con.state, raw)
		if !ok {
			return 0, false
		}
		q.measure(0, row, raw)
		return q.sampler.Sample(row), true
	case q.con != nil:
		return q.con.sample(q.con.state, raw, q.sampler)
	default:
		if q.logprobs {
			q.measure(0, raw, raw)
		}
		return q.sampler.Sample(raw), true
	}
}

// decoded verifies a decoding sequence's tree against its logits rows
// (or ids from row on, where the pass made only argmaxes), commits the
// accepted path and hands back its tokens, and tells the drafters and the
// scheduler how the tree did (charge prices it).
func (b *Backend) decoded(q *sequence, rows []float32, ids []int32, row int, charge passCharge, t0 time.Time, res *loop.StepResult) {
	if ids != nil {
		b.verifyArgmax(q, ids[row:row+q.tree.Len()])
	} else if !b.verify(q, rows) {
		res.Err = errStuck
		return
	}
	for _, tok := range q.res.Tokens {
		q.con.accept(tok)
	}
	if err := q.cache.Commit(q.res.Path); err != nil {
		res.Err = status.Errorf(status.Internal, "kv cache: %v", err)
		return
	}
	q.out = append(q.out[:0], q.res.Tokens...)
	q.next = q.out[len(q.out)-1]
	q.seq.Tokens = append(q.seq.Tokens, q.out...)
	res.Tokens = q.out
	res.Logprobs = q.logprobsOf(q.res.Path, q.out)
	if !q.seq.NoSpec && b.sched.Drafter != nil && b.spec.sched.Policy != spec.Incremental {
		took := charge.of(q, time.Since(t0))
		if used := b.drafts.usedBy(&q.seq, q.kind); used == q.kind || q.tree.Len() < 2 {
			// A tree the n-gram index drafted in the place of the
			// request's model (drafters.ngramFirst, Standby) stood in
			// because it beat the model, or plain decoding: the
			// request's gate judges the model's own iterations.
			q.seq.Payoff.Observe(took, len(q.res.Tokens), q.tree.Len() > 1)
		}
		if q.tree.Len() > 1 {
			b.drafts.observe(&q.seq, q.kind, took, len(q.res.Tokens))
		}
		b.drafts.accept[b.drafts.usedBy(&q.seq, q.kind)].Observe(q.tree, q.res.Path)
		b.sched.ObserveEmitted(q.planned, q.res.Tokens)
		res.DraftProposed = q.tree.Len() - 1
		res.DraftAccepted = q.res.Accepted()
		res.VerifyPasses = 1
	}
	// The sequence (prompt and generated tokens) never outgrows the
	// context: the bonus token would take the last entry when fed back.
	res.ContextFull = q.cache.Len()+1 >= q.cache.Cap()
}

// observeStep tells the scheduler how long an iteration that decoded took
// and adds its phases (t0 planning, t1 forward pass, t2 verification, t3
// done) to the timings.
func (b *Backend) observeStep(t0, t1, t2, t3 time.Time) {
	if len(b.seqs) == 0 {
		return
	}
	b.sched.Observe(t3.Sub(t0))
	b.timings.add(t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
	b.timings.Decoding += len(b.seqs) + len(b.iter.idle)
	b.timings.SatOut += len(b.iter.idle)
	if n := len(b.seqs); len(b.buf.batch.Tokens) == n && n <= MaxRootBatch {
		b.timings.Roots[n] = b.timings.Roots[n].Add(RootPasses{1, t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)})
	}
}
