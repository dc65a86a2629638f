package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/spec"
)

// TestDraftCacheFollowsThePath drives a draft model's cache the way spine
// drafting does — extend the path a token at a time, then jump to what
// verification kept (a prefix of the spine plus a bonus token, a side leaf,
// or a path that shares little with the spine) — and checks every answer
// against a draft model that starts from an empty cache each time. A cache
// that kept a stale entry, or truncated one too few, answers differently;
// so does one whose catch-up passes (a long new context fed a few tokens a
// pass) lost or repeated a token. With a draft window, the reference is
// asked the context the windowed cache holds: its first DraftSink tokens
// and what followed the skipped ones.
func TestDraftCacheFollowsThePath(t *testing.T) {
	for _, window := range []int{0, 5} {
		t.Run(fmt.Sprintf("window=%d", window), func(t *testing.T) { draftCacheFollowsThePath(t, window) })
	}
	// A windowed draft changes what is proposed, never what is emitted.
	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	b := tinyBackend(t, path, path, `,"draft_window":3`)
	prompt := []int32{1, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27}
	plainOut := generate(t, b, prompt, sample.Params{}, draftNone, 24)
	specOut := generate(t, b, prompt, sample.Params{}, draftModel, 24)
	require.Equal(t, plainOut, specOut)
	require.Positive(t, b.drafts.model.dm.Step.Observations(), "the draft model drafted")

	// An absurd window is the whole context, and prices no overflowed lag.
	huge := tinyBackend(t, path, path, `,"draft_window":9223372036854775807`).drafts.model.dm
	require.LessOrEqual(t, huge.window, 64)
	require.Equal(t, len(prompt), huge.lag(&spec.Seq{Tokens: prompt, Prompt: len(prompt)}))

	cfg, err := loop.ParseConfig([]byte(`{"model_path":"` + path + `","draft_window":-1}`))
	require.NoError(t, err)
	_, err = newCPU(cfg)
	require.ErrorContains(t, err, `"draft_window"`)
}

func draftCacheFollowsThePath(t *testing.T, window int) {
	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	b := tinyBackend(t, path, path, fmt.Sprintf(`,"draft_window":%d`, window))
	kept := b.drafts.model.dm
	require.Equal(t, window, kept.window)
	kept.catchUp = 3 // a new request catches up in passes of 3 tokens; fresh ones in one
	r := rand.New(rand.NewPCG(3, 4))
	seq := &spec.Seq{Tokens: []int32{1, 5, 9, 13}, Prompt: 3}
	const k = 4
	ask := func(d *draftNet, q spec.Query) ([]int32, []float32) {
		d.seqs = []*spec.Seq{seq}
		defer func() { d.seqs = nil }()
		ids, probs := make([]int32, k), make([]float32, k)
		require.NoError(t, d.NextTopK([]spec.Query{q}, k, ids, probs))
		return ids, probs
	}
	skipped, restarted, belowWindow := 0, 0, 0
	for iter := 0; iter < 60; iter++ {
		// One iteration: the root's query, then a spine of 1–4 steps.
		var spine []int32
		for depth := 0; depth <= 1+r.IntN(4); depth++ {
			q := spec.Query{Seq: 0, Depth: depth, Context: seq.Tokens, Path: spine}
			lag := kept.lag(seq)
			var had []int32 // what the cache held before
			before := kept.state(seq)
			fresh0 := before == nil || before.cache.Len() == 0 || len(seq.Tokens) < DraftSink+before.skip
			if before != nil && before.cache.Len() > 0 && len(seq.Tokens) < DraftSink+before.skip {
				belowWindow++
			}
			if !fresh0 {
				had = slices.Clone(before.toks)
			}
			ids, probs := ask(kept, q)
			st := kept.state(seq)
			view, ok := st.view(nil, seq.Tokens)
			require.True(t, ok)
			if depth == 0 {
				// lag prices the catch-up: the tokens of the held
				// context the cache lacked, all of a new cache's.
				kept := 0
				for kept < len(had) && kept < len(view) && had[kept] == view[kept] {
					kept++
				}
				require.Equal(t, len(view)-kept, lag, "iteration %d", iter)
				if fresh0 {
					require.Equal(t, max(0, len(seq.Tokens)-DraftSink-window)*min(1, window), st.skip, "a new cache's window")
				}
			}
			if st.skip > 0 {
				skipped++
			}
			fresh := &draftNet{m: kept.m, owner: map[*spec.Seq]*draftState{}, newCache: kept.newCache}
			wantIDs, wantProbs := ask(fresh, spec.Query{Seq: 0, Depth: depth, Context: view, Path: spine})
			require.Equal(t, wantIDs, ids, "iteration %d depth %d", iter, depth)
			require.InDeltaSlice(t, wantProbs, probs, 1e-5)
			spine = append(spine, ids[0])
			require.Equal(t, len(view)+len(spine)-1, st.cache.Len(), "the cache holds the path but its last token")
			require.Equal(t, st.toks, append(append([]int32(nil), view...), spine[:len(spine)-1]...))
		}
		// Verification keeps a prefix of the spine, maybe a side leaf
		// instead of the next spine token, then the bonus token.
		acc := r.IntN(len(spine))
		seq.Tokens = append(seq.Tokens, spine[:acc]...)
		if r.IntN(2) == 0 {
			seq.Tokens = append(seq.Tokens, int32(3+r.IntN(37)))
		}
		seq.Tokens = append(seq.Tokens, int32(3+r.IntN(37)))
		if len(seq.Tokens) > 40 {
			// A new request in the same state: little in common, and
			// a context that takes a few steps to catch up with.
			// Half the time a new request with its own state, half the
			// time the same state rewound to a few tokens (which may no
			// longer reach past a windowed cache's skipped ones).
			seq.Tokens = seq.Tokens[:1+r.IntN(3)]
			n := 2 + r.IntN(12)
			if r.IntN(2) == 0 {
				kept.release(seq)
				n = 2 + r.IntN(20)
			}
			for range n {
				seq.Tokens = append(seq.Tokens, int32(3+r.IntN(37)))
			}
			seq.Prompt = len(seq.Tokens) - 1
			restarted++
		}
	}
	require.Positive(t, kept.Step.Observations(), "single-token steps are timed for the cost model")
	require.NotEmpty(t, kept.side.Tokens, "a catch-up ran in passes of its own")
	require.Positive(t, restarted)
	if window > 0 {
		require.Positive(t, skipped, "some caches started from a window")
		require.Positive(t, belowWindow, "some rewound below their window")
	}
}

// TestDraftVocab: "draft_vocab" limits the draft model's proposals to the
// lowest ids (only those rows of its head are computed), and a negative
// value is refused.
func TestDraftVocab(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 7, 4)
	b := tinyBackend(t, path, path, `,"draft_vocab":32`)
	d := b.drafts.model.dm
	require.Equal(t, 32, d.headRows)
	seq := &spec.Seq{Tokens: []int32{1, 40, 50, 60}, Prompt: 3}
	d.seqs = []*spec.Seq{seq}
	ids, probs := make([]int32, 8), make([]float32, 8)
	require.NoError(t, d.NextTopK([]spec.Query{{Seq: 0, Context: seq.Tokens}}, 8, ids, probs))
	sum := float32(0)
	for i, id := range ids {
		require.Less(t, id, int32(32))
		require.Positive(t, probs[i])
		sum += probs[i]
	}
	require.LessOrEqual(t, sum, float32(1.0001))
	// The greedy output is the target's whatever the draft proposes.
	plainOut := generate(t, b, []int32{1, 40, 50, 60}, sample.Params{}, draftNone, 24)
	specOut := generate(t, b, []int32{1, 40, 50, 60}, sample.Params{}, draftModel, 24)
	require.Equal(t, plainOut, specOut)

	cfg, err := loop.ParseConfig([]byte(`{"model_path":"` + path + `","draft_vocab":-1}`))
	require.NoError(t, err)
	_, err = newCPU(cfg)
	require.ErrorContains(t, err, `"draft_vocab"`)
}

// TestDraftSkipsStepsThatCannotPay: when the measured draft step of a
// batch size costs more than a certain node could earn (stop probability
// ≥ 1), the drafter leaves the trees bare without running the draft model
// (its nodes would all be cut); until stepSamples steps of that size were
// measured, whenever the step pays, and with "spec_adaptive": false, it
// drafts.
func TestDraftSkipsStepsThatCannotPay(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	b := tinyBackend(t, path, path, `,"spec_adaptive":true`)
	m := b.drafts.model
	require.False(t, m.always)
	seqs := []*spec.Seq{{Tokens: []int32{1, 5, 9, 13}, Prompt: 3}}
	shape := spec.Shape{Depth: 3, Width: 1}
	draft := func() (drafted bool) {
		var tr spec.Tree
		tr.Reset(seqs[0].Tokens[len(seqs[0].Tokens)-1])
		before := m.dm.Step.Observations()
		require.NoError(t, m.Draft(seqs, shape, []*spec.Tree{&tr}))
		return m.dm.Step.Observations() > before
	}
	// A token worth less than any step: no node can pay, but the step of
	// this batch size is measured first.
	m.plain, m.marginal = time.Nanosecond, time.Nanosecond
	for i := 0; ; i++ {
		_, measured := m.dm.stepAt(len(seqs))
		if measured {
			break
		}
		require.Less(t, i, stepSamples, "every draft measures at least one step")
		require.True(t, draft(), "the step of this size not yet measured: it drafts")
	}
	require.GreaterOrEqual(t, m.dm.stepBy[len(seqs)].Observations(), stepSamples)
	require.False(t, draft(), "the step cannot pay")
	require.False(t, draft())
	// Tokens priced far above the step: drafting pays again.
	m.plain, m.marginal = time.Hour, 0
	require.True(t, draft(), "a cheap step: it drafts")

	// A batch size never measured is priced from the target's curve,
	// scaled by the draft's measured cost at the nearest size: where that
	// price cannot pay, it skips without running the draft model, and
	// the new sequence's draft cache never catches up with its prompt.
	step1, _ := m.dm.stepAt(1)
	m.at = func(n int) time.Duration { return time.Duration(n) * time.Second }
	prior, ok := m.priorStep(4)
	require.True(t, ok)
	// priorStep scales through a float64 ratio and truncates: step1·4 s/1 s
	// may come back a nanosecond short (63.083 µs for 63.084 in one CI run).
	require.InDelta(t, float64(4*step1), float64(prior), 1, "the size-1 ratio, times T(4)")
	seqs = append(seqs, &spec.Seq{Tokens: []int32{2, 6, 10, 14, 18, 22}, Prompt: 5})
	m.plain, m.marginal = step1, 0 // pays at size 1, not at twice the step
	draft2 := func() (drafted bool) {
		trees := []*spec.Tree{{}, {}}
		for i, s := range seqs {
			trees[i].Reset(s.Tokens[len(s.Tokens)-1])
		}
		before := m.dm.Step.Observations()
		require.NoError(t, m.Draft(seqs, shape, trees))
		return m.dm.Step.Observations() > before
	}
	require.False(t, draft2(), "the prior price of two sequences cannot pay")
	require.Nil(t, m.dm.state(seqs[1]), "no catch-up for a step not taken")
	m.plain = time.Hour
	require.True(t, draft2(), "a price that pays: it drafts, and measures")

	// "spec_adaptive": false drafts whatever it costs.
	seqs = seqs[:1]
	m.plain, m.marginal, m.always = time.Nanosecond, time.Nanosecond, true
	require.True(t, draft(), "spec_adaptive false: it drafts")
}

// TestDraftPassesArePricedByTheirTokens: with several streams a draft
// call's pass usually carries a catch-up (what a sequence emitted since its
// last draft) besides the step, and a spine stopped after one step has no
// other call. Those passes are timed by their tokens, so such a load gets
// priced; timing only the calls that fed one token a query left it
// unpriced for good, and the drafter drafted where no step could pay.
func TestDraftPassesArePricedByTheirTokens(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	b := tinyBackend(t, path, path, `,"spec_adaptive":true`)
	m := b.drafts.model
	seq := &spec.Seq{Tokens: []int32{1, 5, 9, 13}, Prompt: 3}
	for i := range 12 {
		// Two tokens emitted since the last draft, then a one-step spine.
		seq.Tokens = append(seq.Tokens, int32(3+i%30), int32(4+i%29))
		var tr spec.Tree
		tr.Reset(seq.Tokens[len(seq.Tokens)-1])
		require.NoError(t, m.Draft([]*spec.Seq{seq}, spec.Shape{Depth: 1, Width: 1}, []*spec.Tree{&tr}))
	}
	priced := 0
	for n := range m.dm.stepBy {
		if _, ok := m.dm.stepAt(n); ok {
			priced++
			require.Greater(t, n, 1, "every call fed a catch-up")
		}
	}
	require.Positive(t, priced, "passes with a catch-up price their size")
}

// TestDraftSkipsCatchUpsThatCannotPay: a sequence whose draft cache lags
// by more than drafting could still save (at most half the plain decoding
// of the tokens it may still emit, less where a drafted node costs more
// than half a token's worth) is left to plain decoding; one that is nearly
// caught up, or has room to earn the catch-up back, or no known end,
// drafts.
func TestDraftSkipsCatchUpsThatCannotPay(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	b := tinyBackend(t, path, path, `,"spec_adaptive":true`)
	m := b.drafts.model
	// A draft pass costs 2 ms a token (the size-1 pass measured, scaled by
	// a target curve of 1 ms a token); a plain token is worth 1 ms.
	for range stepSamples {
		m.dm.observePass(1, true, 2*time.Millisecond)
	}
	m.at = func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	m.plain = time.Millisecond
	toks := make([]int32, 100)
	for i := range toks {
		toks[i] = int32(1 + i%30)
	}
	nearEnd := &spec.Seq{Tokens: toks, Prompt: 50, MaxDepth: 9}      // 200 ms of catch-up for 10 tokens
	farFromEnd := &spec.Seq{Tokens: toks, Prompt: 50, MaxDepth: 999} // for 1000 tokens (500 ms at most saved)
	unbounded := &spec.Seq{Tokens: toks, Prompt: 50}                 // no known end
	caughtUp := &spec.Seq{Tokens: toks, Prompt: 50, MaxDepth: 9}     // 2 tokens behind: 4 ms against 5
	lastToken := &spec.Seq{Tokens: toks, Prompt: 50, MaxNodes: 1}    // one token left
	m.dm.owner[caughtUp] = &draftState{toks: toks[:98]}
	seqs := []*spec.Seq{nearEnd, farFromEnd, unbounded, caughtUp, lastToken}
	trees := make([]*spec.Tree, len(seqs))
	for i := range trees {
		trees[i] = &spec.Tree{}
	}
	keptS, keptT := m.payingCatchUps(seqs, trees, 0)
	require.Equal(t, []*spec.Seq{farFromEnd, unbounded, caughtUp}, keptS)
	require.Equal(t, []*spec.Tree{trees[1], trees[2], trees[3]}, keptT)

	// Where a drafted node costs 0.7 of a token's worth, drafting saves at
	// most 0.3 of the plain time left: 300 ms still earns farFromEnd's
	// catch-up back, 3 ms no longer caughtUp's 4.
	keptS, _ = m.payingCatchUps(seqs, trees, 0.7)
	require.Equal(t, []*spec.Seq{farFromEnd, unbounded}, keptS)
	// At 0.9, 100 ms is short of farFromEnd's 200.
	keptS, _ = m.payingCatchUps(seqs, trees, 0.9)
	require.Equal(t, []*spec.Seq{unbounded}, keptS)
}

// TestSavingShare: the share of the plain time left that drafting can save
// is what a node's cost leaves of its token's worth, capped at maxSaving.
func TestSavingShare(t *testing.T) {
	require.Equal(t, maxSaving, savingShare(0))
	require.Equal(t, maxSaving, savingShare(0.4))
	require.InDelta(t, 0.25, savingShare(0.75), 1e-12)
	require.Zero(t, savingShare(1))
	require.Zero(t, savingShare(1.3))
}

// TestDraftModelIsRepricedAfterSittingOut: a draft model whose measured
// step is too dear to pay sits the calls out, and every repriceEvery of
// them measures the step again, as scratch: a price measured in a moment
// of contention does not bench the model for good, and the re-measurement
// leaves the sequence's draft cache as it was.
func TestDraftModelIsRepricedAfterSittingOut(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	b := tinyBackend(t, path, path, `,"spec_adaptive":true`)
	m := b.drafts.model
	for range stepSamples {
		m.dm.observePass(1, true, 10*time.Second) // a step timed under contention
	}
	m.plain = time.Second
	s := &spec.Seq{Tokens: []int32{1, 5, 9, 13, 17, 21}, Prompt: 4}
	tr := &spec.Tree{}
	draft := func() int {
		tr.Reset(s.Tokens[len(s.Tokens)-1])
		require.NoError(t, m.Draft([]*spec.Seq{s}, spec.Shape{Depth: 4, Width: 2}, []*spec.Tree{tr}))
		return tr.Len()
	}
	for i := 1; i < repriceEvery; i++ {
		require.Equal(t, 1, draft(), "call %d: 10 s a step against a token worth 1 s", i)
	}
	require.Equal(t, 10*time.Second, m.dm.stepBy[1].Estimate())
	require.Nil(t, m.dm.state(s), "sitting out touched no cache")

	// The repriceEvery-th call measures the step again (the tiny model's,
	// far under a second) and drafts.
	require.Greater(t, draft(), 1)
	require.Less(t, m.dm.stepBy[1].Estimate(), time.Second)

	// Re-measuring on a cache that holds a context leaves it holding it.
	st := m.dm.state(s)
	held := st.cache.Len()
	require.Positive(t, held)
	for range stepSamples {
		m.dm.observePass(1, true, 10*time.Second)
	}
	require.NoError(t, m.dm.reprice(s, 1))
	require.Equal(t, held, st.cache.Len())
	require.Less(t, m.dm.stepBy[1].Estimate(), time.Second)
	// A re-measurement that does not fit the cache fails and prices nothing.
	require.Error(t, m.dm.reprice(s, st.cache.Cap()))
	require.Nil(t, m.dm.stepBy[st.cache.Cap()])
	require.Equal(t, held, st.cache.Len())
}

// TestDraftersReportTheirLag: the scheduler sees the backend's drafters as
// a spec.CatchUpDrafter, so AdaServe can hold back a catch-up the batch
// cannot wait for (spec.HoldCatchUps): a model-drafted sequence lags by
// what its draft cache lacks (a new one: its whole context, within the
// window), an n-gram one by nothing, and a pass is priced as the draft
// model prices its passes (unknown before any was measured).
func TestDraftersReportTheirLag(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	b := tinyBackend(t, path, path, `,"spec_adaptive":true`)
	cd, ok := b.sched.Drafter.(spec.CatchUpDrafter)
	require.True(t, ok)
	toks := make([]int32, 30)
	for i := range toks {
		toks[i] = int32(1 + i%29)
	}
	byModel := &spec.Seq{Tokens: toks, Prompt: 20}
	byIndex := &spec.Seq{Tokens: toks, Prompt: 20}
	b.drafts.kind[byModel], b.drafts.kind[byIndex] = draftModel, draftNGram
	require.Equal(t, 30, cd.Lag(byModel))
	require.Zero(t, cd.Lag(byIndex))
	b.drafts.model.dm.owner[byModel] = &draftState{toks: toks[:27]}
	require.Equal(t, 3, cd.Lag(byModel), "a cache three tokens behind")

	m := b.drafts.model
	_, ok = cd.LagPrice(30)
	require.False(t, ok, "no pass measured yet")
	for range stepSamples {
		m.dm.observePass(1, true, 2*time.Millisecond)
	}
	m.at = func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	price, ok := cd.LagPrice(30)
	require.True(t, ok)
	require.Equal(t, 60*time.Millisecond, price, "the target's 30 ms at the draft's measured ratio of 2")

	noModel := tinyBackend(t, path, "", "")
	_, ok = noModel.sched.Drafter.(spec.CatchUpDrafter).LagPrice(30)
	require.False(t, ok)
}

// softmaxTopK picks a row's k largest logits (the lower id first among
// equals) and gives their softmax probabilities as float64 arithmetic
// does, to float32 precision, over a vocabulary-sized row (its SIMD
// exponential covers whole blocks of 16 and the tail alike).
func TestSoftmaxTopKMatchesTheSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{1, 3, 17, 49152 + 5} {
		row := make([]float32, size)
		for i := range row {
			row[i] = float32(r.NormFloat64() * 4)
		}
		if size > 10 {
			row[7] = row[2] // a tie: id 2 ranks first
			row[2] += 30    // and both lead
			row[7] += 30
		}
		var z float64
		mx := slices.Max(row)
		for _, v := range row {
			z += math.Exp(float64(v - mx))
		}
		order := make([]int, size)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(row[b], row[a]) })
		want := slices.Clone(row)
		const k = 4
		ids, probs := make([]int32, k), make([]float32, k)
		softmaxTopK(row, k, ids, probs)
		for j := range k {
			if j >= size {
				require.Zero(t, probs[j])
				continue
			}
			require.Equal(t, int32(order[j]), ids[j], "rank %d of %d", j, size)
			p := math.Exp(float64(want[order[j]]-mx)) / z
			require.InDelta(t, p, float64(probs[j]), 2e-6*p+1e-9, "rank %d of %d", j, size)
		}
	}
}

// TestEarlyExitBorrowsTheTargetsEntries: the early exit's cache takes the
// K/V of the tokens the target committed from the target's own cache (the
// early exit's layers are its first ones) instead of computing them again.
// It answers as an early exit that fed the whole context, holds exactly
// the target's entries, runs no catch-up pass, and prices its catch-up at
// the root alone; a sequence without a target cache to borrow from is fed
// as before.
func TestEarlyExitBorrowsTheTargetsEntries(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	b := tinyBackend(t, path, path, "")
	early := b.drafts.early.dm
	require.NotNil(t, early.borrow)
	target, err := b.model.NewCache(64)
	require.NoError(t, err)
	seq := &spec.Seq{Tokens: []int32{1, 5, 9, 13, 17, 21, 25}, Prompt: 4}
	commit := func(toks []int32) { // the target's pass over its next tokens
		var bt model.Batch
		for i, tok := range toks {
			bt.Tokens, bt.Cache = append(bt.Tokens, tok), append(bt.Cache, target)
			bt.Pos, bt.Parent, bt.Logits = append(bt.Pos, target.Len()+i), append(bt.Parent, i-1), append(bt.Logits, false)
		}
		require.NoError(t, b.model.Forward(&bt, nil))
		require.NoError(t, target.Commit(seqInts(len(toks))))
	}
	const k = 4
	ask := func(d *draftNet, s *spec.Seq) ([]int32, []float32) {
		d.seqs = []*spec.Seq{s}
		defer func() { d.seqs = nil }()
		ids, probs := make([]int32, k), make([]float32, k)
		require.NoError(t, d.NextTopK([]spec.Query{{Seq: 0, Context: s.Tokens}}, k, ids, probs))
		return ids, probs
	}
	commit(seq.Tokens[:len(seq.Tokens)-1]) // the prompt and first token; the root is not committed
	b.drafts.target[seq] = target
	for round := range 3 {
		require.Equal(t, 1, early.lag(seq))
		ids, probs := ask(early, seq)
		require.False(t, early.sideFed, "round %d: no catch-up pass", round)
		fresh := &draftNet{m: early.m, layers: early.layers, owner: map[*spec.Seq]*draftState{}, newCache: early.newCache}
		wantIDs, wantProbs := ask(fresh, &spec.Seq{Tokens: seq.Tokens, Prompt: seq.Prompt})
		require.Equal(t, wantIDs, ids, "round %d", round)
		require.InDeltaSlice(t, wantProbs, probs, 1e-4)
		c, tc := early.state(seq).cache.(*kv.Cache), target.(*kv.Cache)
		require.Equal(t, len(seq.Tokens), c.Len())
		for h := range 2 {
			wantK, wantV := tc.Entries(0, h, 0, tc.Len()) // the target's committed rows
			gotK, gotV := c.Entries(0, h, 0, tc.Len())
			require.Equal(t, wantK, gotK)
			require.Equal(t, wantV, gotV)
		}
		// Verification accepts two tokens and a bonus one.
		seq.Tokens = append(seq.Tokens, ids[0], ids[1], int32(3+round))
		commit(seq.Tokens[target.Len() : len(seq.Tokens)-1])
	}

	// Nothing to borrow from: fed, and the same answer.
	alone := &spec.Seq{Tokens: slices.Clone(seq.Tokens), Prompt: seq.Prompt}
	ids, _ := ask(early, alone)
	require.True(t, early.sideFed || early.state(alone).cache.Len() == len(alone.Tokens))
	wantIDs, _ := ask(&draftNet{m: early.m, layers: early.layers, owner: map[*spec.Seq]*draftState{}, newCache: early.newCache}, alone)
	require.Equal(t, wantIDs, ids)
}

func seqInts(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
