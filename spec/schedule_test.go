package spec

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newSeqs(n int) []*Seq {
	seqs := make([]*Seq, n)
	for i := range seqs {
		seqs[i] = &Seq{Tokens: []int32{int32(i), int32(i + 1), int32(i + 2)}, Prompt: 2}
	}
	return seqs
}

// TestBaselineShapes checks each policy produces its documented trees.
func TestBaselineShapes(t *testing.T) {
	m := newToyDraft(16, 5)
	now := time.Unix(1000, 0)
	plan := func(cfg Config, seqs []*Seq) []*Tree {
		m.calls = nil
		s := &Scheduler{Config: cfg, Drafter: &BeamDrafter{Model: m}}
		trees, err := s.Plan(seqs, now)
		require.NoError(t, err)
		for _, tr := range trees {
			require.NoError(t, tr.Validate())
		}
		return trees
	}
	total := func(trees []*Tree) int {
		n := 0
		for _, tr := range trees {
			n += tr.Len()
		}
		return n
	}

	// Incremental: roots only, and no drafting at all.
	trees := plan(Config{Policy: Incremental, Budget: 64}, newSeqs(3))
	require.Equal(t, 3, total(trees))
	require.Empty(t, m.calls)

	// SpecInfer: the fixed ⟨1,1,3,1,1,1,1,1⟩ tree for everyone, whatever
	// the budget (its weakness under load).
	trees = plan(Config{Policy: SpecInfer, Budget: 8}, newSeqs(4))
	for _, tr := range trees {
		require.Equal(t, []int{1, 1, 1, 3, 3, 3, 3, 3, 3}, tr.Widths(nil))
	}
	trees = plan(Config{Policy: SpecInfer, Budget: 8, Branch: []int{2, 2}}, newSeqs(1))
	require.Equal(t, []int{1, 2, 4}, trees[0].Widths(nil))

	// EqualGreedy: ⌊B/n⌋ nodes each (root included), the most probable of
	// each request's own candidates.
	trees = plan(Config{Policy: EqualGreedy, Budget: 30}, newSeqs(4))
	for _, tr := range trees {
		require.Equal(t, 7, tr.Len())
	}

	// GlobalGreedy: B nodes in all, the top B−n across requests.
	trees = plan(Config{Policy: GlobalGreedy, Budget: 30}, newSeqs(4))
	require.Equal(t, 30, total(trees))

	// AdaServe with best-effort requests only behaves like GlobalGreedy.
	ada := plan(Config{Policy: AdaServe, Budget: 30}, newSeqs(4))
	require.Equal(t, 30, total(ada))
	for i := range ada {
		require.Equal(t, trees[i].Nodes, ada[i].Nodes)
	}

	// A request with speculation off gets its root alone; the others share
	// the budget.
	seqs := newSeqs(3)
	seqs[1].NoSpec = true
	trees = plan(Config{Policy: AdaServe, Budget: 24}, seqs)
	require.Equal(t, 1, trees[1].Len())
	require.Equal(t, 24, total(trees))
	for _, c := range m.calls {
		for _, q := range c {
			require.NotEqual(t, seqs[1].Tokens, q.Context, "the NoSpec sequence is never drafted")
		}
	}
	require.Len(t, m.calls[0], 2)
}

// TestSchedulerSLO: a request behind its SLO gets its A(r) first; a
// best-effort one only what is left.
func TestSchedulerSLO(t *testing.T) {
	m := newToyDraft(16, 6)
	now := time.Unix(1000, 0)
	seqs := newSeqs(2)
	// seqs[0]: 10 tokens in 1s against a 50ms SLO: far behind (A ≥ d+1).
	seqs[0].Tokens = append(seqs[0].Tokens, make([]int32, 9)...)
	seqs[0].SLO = 50 * time.Millisecond
	seqs[0].Start = now.Add(-time.Second)
	s := &Scheduler{Config: Config{Budget: 8, MaxDepth: 4, MaxWidth: 2, NMax: 6}, Drafter: &BeamDrafter{Model: m}}
	s.Timing.Observe(40 * time.Millisecond)
	trees, err := s.Plan(seqs, now)
	require.NoError(t, err)
	// Budget 8 − 2 roots = 6, all capped by NMax = 6 for the late request.
	require.Equal(t, 7, trees[0].Len())
	require.Equal(t, 1, trees[1].Len())

	// On schedule (A < 1): the root suffices; the budget goes to throughput.
	seqs[0].Start = now.Add(-100 * time.Millisecond)
	trees, err = s.Plan(seqs, now)
	require.NoError(t, err)
	require.Equal(t, 8, trees[0].Len()+trees[1].Len())
	require.Greater(t, trees[1].Len(), 1)
}

func TestTiming(t *testing.T) {
	var tm Timing
	require.Equal(t, time.Duration(0), tm.Estimate())
	tm.Observe(100 * time.Millisecond)
	require.Equal(t, 100*time.Millisecond, tm.Estimate())
	tm.Observe(200 * time.Millisecond)
	require.Equal(t, 120*time.Millisecond, tm.Estimate())
	for range 100 {
		tm.Observe(50 * time.Millisecond)
	}
	require.InDelta(t, float64(50*time.Millisecond), float64(tm.Estimate()), float64(time.Microsecond))
	require.Equal(t, 102, tm.Observations())
}

func TestCalibrate(t *testing.T) {
	rng := NewSplitMix(2)
	for _, knee := range []int{16, 48, 100, 200} {
		// A roofline: 20ms flat, then 0.2ms per token beyond the knee, with
		// a slight slope before it and ±2% noise.
		cost := func(n int) time.Duration {
			ms := 20 + 0.01*float64(n) + 0.2*float64(max(0, n-knee))
			return time.Duration(ms * (1 + 0.02*rng.Uniform()) * float64(time.Millisecond))
		}
		got := Calibrate(cost, 512)
		require.InDelta(t, knee, got, float64(knee)*0.2+4, "knee %d", knee)
	}
	flat := func(n int) time.Duration { return 20 * time.Millisecond }
	require.Equal(t, 512, Calibrate(flat, 512))
	require.Equal(t, 1, Calibrate(flat, 1))
}

// BenchmarkPlan measures one iteration of drafting (n-gram) plus AdaServe
// selection for 8 requests with B = 64, 4k-token contexts.
func BenchmarkPlan(b *testing.B) {
	rng := NewSplitMix(1)
	seqs := make([]*Seq, 8)
	for i := range seqs {
		var toks []int32
		var phrases [][]int32
		for len(toks) < 4096 {
			if len(phrases) > 0 && rng.Uint64()%3 != 0 {
				toks = append(toks, phrases[rng.Uint64()%uint64(len(phrases))]...)
				continue
			}
			p := make([]int32, 3+rng.Uint64()%10)
			for j := range p {
				p[j] = int32(rng.Uint64() % 2000)
			}
			phrases = append(phrases, p)
			toks = append(toks, p...)
		}
		seqs[i] = &Seq{Tokens: toks[:4096], Prompt: 512, SLO: time.Duration(20+10*i) * time.Millisecond}
	}
	now := time.Unix(1000, 0)
	for i, s := range seqs {
		s.Start = now.Add(-time.Duration(len(s.Tokens)-s.Prompt) * time.Duration(18+10*i) * time.Millisecond)
	}
	s := &Scheduler{Config: Config{Budget: 64}, Drafter: &NGramDrafter{}}
	s.Timing.Observe(30 * time.Millisecond)
	_, _ = s.Plan(seqs, now)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Plan(seqs, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelect measures the selection alone (8 requests, B = 64, beam
// candidate trees of depth 8 and width 4 — the shape Config.Shape gives).
func BenchmarkSelect(b *testing.B) {
	for _, pol := range []Policy{AdaServe, GlobalGreedy, EqualGreedy} {
		b.Run(fmt.Sprint(pol), func(b *testing.B) {
			m := newToyDraft(64, 3)
			seqs := newSeqs(8)
			cfg := Config{Policy: pol, Budget: 64}
			trees := make([]*Tree, 8)
			for i := range trees {
				trees[i] = &Tree{}
			}
			shape := cfg.Shape(8)
			if err := (&BeamDrafter{Model: m}).Draft(seqs, shape, trees); err != nil {
				b.Fatal(err)
			}
			reqs := make([]Candidate, 8)
			for i := range reqs {
				reqs[i] = Candidate{Tree: trees[i], Target: 1 + float64(i)*0.4}
			}
			var sel Selector
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				sel.Select(&cfg, shape.Depth, reqs)
			}
		})
	}
}

// BenchmarkBeamTree measures building beam candidate trees for 8 requests
// from precomputed draft distributions over a 49,152-token vocabulary
// (SmolLM2's): the top-k scans and beam bookkeeping, the model excluded.
func BenchmarkBeamTree(b *testing.B) {
	const vocab = 49152
	rng := NewSplitMix(4)
	row := make([]float32, vocab)
	for i := range row {
		row[i] = float32(rng.Uniform()) / vocab * 2
	}
	m := &rowModel{vocab: vocab, row: row}
	seqs := newSeqs(8)
	trees := make([]*Tree, 8)
	for i := range trees {
		trees[i] = &Tree{}
	}
	d := &BeamDrafter{Model: m}
	shape := (&Config{Budget: 64}).Shape(8)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := d.Draft(seqs, shape, trees); err != nil {
			b.Fatal(err)
		}
	}
}

type rowModel struct {
	vocab int
	row   []float32
}

func (m *rowModel) Vocab() int { return m.vocab }

func (m *rowModel) NextDistributions(qs []Query, out []float32) error {
	for i := range qs {
		copy(out[i*m.vocab:(i+1)*m.vocab], m.row)
	}
	return nil
}

// BenchmarkBeamTreeTopK is BenchmarkBeamTree with a TopKDraftModel: the
// beam and tree bookkeeping alone, for 8 requests, B = 64 (d = 8, w = 4).
func BenchmarkBeamTreeTopK(b *testing.B) {
	seqs := newSeqs(8)
	trees := make([]*Tree, 8)
	for i := range trees {
		trees[i] = &Tree{}
	}
	d := &BeamDrafter{Model: fixedTopK{}}
	shape := (&Config{Budget: 64}).Shape(8)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := d.Draft(seqs, shape, trees); err != nil {
			b.Fatal(err)
		}
	}
}

type fixedTopK struct{}

func (fixedTopK) Vocab() int                                 { return 49152 }
func (fixedTopK) NextDistributions([]Query, []float32) error { panic("unused") }
func (fixedTopK) NextTopK(qs []Query, k int, ids []int32, probs []float32) error {
	for i, q := range qs {
		for j := range k {
			ids[i*k+j] = int32(q.Node*7+j*131) % 49152
			probs[i*k+j] = 0.5 / float32(j+1+q.Depth)
		}
	}
	return nil
}

// tpotMetric is the TPOT that SLO attainment is judged by: the runtime's
// usage tpot_ms (core/loop, finishSlot: (last token − first token) /
// (generated − 1)), which core/engine's benchmarks compare with tpot_slo_ms.
// The first token is not an output token of the TPOT: its latency is TTFT.
func tpotMetric(first, last time.Time, generated int) time.Duration {
	return last.Sub(first) / time.Duration(generated-1)
}

// TestTargetCountsTokensLikeTPOT pins A(r) to the attainment metric's
// convention (issue 14, item 2): l and o both start at the first token, so a
// request that gains exactly A(r) tokens ends the iteration exactly at its
// SLO, and one that gains ⌈A(r)⌉ every iteration meets it throughout. With
// o = every generated token (the first included) A(r) came out one token
// short and such a request missed its SLO.
func TestTargetCountsTokensLikeTPOT(t *testing.T) {
	const slo, iter = 50 * time.Millisecond, 50 * time.Millisecond
	now := time.Unix(1000, 0)
	s := &Scheduler{Config: Config{Budget: 8}}
	s.Timing.Observe(iter)
	target := func(q *Seq) float64 {
		_, err := s.Plan([]*Seq{q}, now)
		require.NoError(t, err)
		return s.reqs[0].Target
	}

	// 15 tokens in the second since the first: 14 after it. After this
	// iteration 1.05 s will have passed, worth 21 tokens after the first.
	q := &Seq{Tokens: make([]int32, 2+15), Prompt: 2, SLO: slo, Start: now.Add(-time.Second)}
	a := target(q)
	require.InDelta(t, 7, a, 1e-9)
	end := now.Add(iter)
	require.Equal(t, slo, tpotMetric(q.Start, end, q.Generated()+7), "A(r) tokens end exactly at the SLO")
	require.Greater(t, tpotMetric(q.Start, end, q.Generated()+6), slo, "one token fewer misses it")
	// Right after the first token, o is 0: a 50 ms iteration against a
	// 50 ms SLO needs exactly one token.
	q = &Seq{Tokens: make([]int32, 3), Prompt: 2, SLO: slo, Start: now}
	require.InDelta(t, 1, target(q), 1e-9)

	// A run where every iteration takes 50 ms against a 30 ms SLO, and the
	// request gets just enough tokens: ⌈A(r)⌉, and at least the bonus.
	run := func(targetOf func(q *Seq, now time.Time) float64) (worst time.Duration) {
		const slo = 30 * time.Millisecond
		now := time.Unix(2000, 0)
		q := &Seq{Tokens: make([]int32, 3), Prompt: 2, SLO: slo, Start: now}
		for range 200 {
			gain := max(1, int(math.Ceil(targetOf(q, now)-1e-9)))
			now = now.Add(iter)
			q.Tokens = append(q.Tokens, make([]int32, gain)...)
			worst = max(worst, tpotMetric(q.Start, now, q.Generated()))
		}
		return worst
	}
	worst := run(func(q *Seq, at time.Time) float64 { now = at; return target(q) })
	require.LessOrEqual(t, worst, 30*time.Millisecond, "a request given A(r) tokens meets its SLO")
	// The old count (o including the first token) falls a token short.
	worst = run(func(q *Seq, at time.Time) float64 { return Target(at.Sub(q.Start), iter, q.SLO, q.Generated()) })
	require.Greater(t, worst, 30*time.Millisecond)
}

// TestSchedulerGuard: AdaServe puts speculation off for an iteration when
// its measured length would make a request miss that plain decoding keeps
// within its SLO, and only then.
func TestSchedulerGuard(t *testing.T) {
	now := time.Unix(1000, 0)
	seqs := newSeqs(2)
	// seqs[0] does not draft: 10 tokens out, against a 50 ms SLO.
	seqs[0].Tokens = append(seqs[0].Tokens, make([]int32, 9)...)
	seqs[0].SLO = 50 * time.Millisecond
	seqs[0].NoSpec = true
	s := &Scheduler{Config: Config{Policy: AdaServe, Budget: 8, MaxDepth: 4, MaxWidth: 2},
		Drafter: &BeamDrafter{Model: newToyDraft(16, 6)}, PlainCost: func([]*Seq) time.Duration { return 30 * time.Millisecond }}
	plan := func(l, tspec time.Duration) []*Tree {
		t.Helper()
		seqs[0].Start = now.Add(-l)
		s.SpecTiming = Timing{}
		s.SpecTiming.Observe(tspec)
		trees, err := s.Plan(seqs, now)
		require.NoError(t, err)
		require.Equal(t, 1, trees[0].Len())
		return trees
	}
	// Room for this iteration: 50 ms × 10 − 440 ms = 60 ms. Plain (30 ms)
	// fits, a speculative iteration (100 ms) does not: put off.
	trees := plan(440*time.Millisecond, 100*time.Millisecond)
	require.Equal(t, 1, trees[1].Len())
	require.Equal(t, 0, s.Drafted())
	// Speculation that fits the room goes ahead.
	trees = plan(440*time.Millisecond, 50*time.Millisecond)
	require.Greater(t, trees[1].Len(), 1)
	require.Equal(t, 1, s.Drafted())
	// One already behind (room 20 ms, less than plain's 30) is protected
	// too: plain decoding is its best way back.
	trees = plan(480*time.Millisecond, 100*time.Millisecond)
	require.Equal(t, 1, trees[1].Len())
	// Nor one with slack (room 160 ms).
	trees = plan(340*time.Millisecond, 100*time.Millisecond)
	require.Greater(t, trees[1].Len(), 1)
	// The baselines have no guard.
	s.Config.Policy = GlobalGreedy
	trees = plan(440*time.Millisecond, 100*time.Millisecond)
	require.Greater(t, trees[1].Len(), 1)
	// Nor without a price for plain decoding.
	s.Config.Policy, s.PlainCost = AdaServe, nil
	trees = plan(440*time.Millisecond, 100*time.Millisecond)
	require.Greater(t, trees[1].Len(), 1)

	// A drafting request is judged by what its speculation has emitted:
	// unmeasured, it is not protected; at 1.5 tokens an iteration the room
	// is 50 ms × 10.5 − 440 = 85 ms, short of 100; at 2.5, 135 ms.
	seqs[0].NoSpec = false
	seqs[0].Start = now.Add(-440 * time.Millisecond)
	require.False(t, Guard(seqs, seqs, now, 30*time.Millisecond, 100*time.Millisecond))
	seqs[0].Payoff.spec.Add(100*time.Millisecond, 1)
	seqs[0].Payoff.spec.Add(100*time.Millisecond, 2)
	require.InDelta(t, 1.0+1/1.7, seqs[0].Payoff.SpecTokens(), 1e-9) // decay 0.7: (0.7·1 + 2)/(0.7 + 1)
	require.True(t, Guard(seqs, seqs, now, 30*time.Millisecond, 100*time.Millisecond))
	seqs[0].Payoff.spec = Pace{}
	seqs[0].Payoff.spec.Add(100*time.Millisecond, 3)
	seqs[0].Payoff.spec.Add(100*time.Millisecond, 2)
	require.False(t, Guard(seqs, seqs, now, 30*time.Millisecond, 100*time.Millisecond))
	require.True(t, Guard(seqs, seqs[1:], now, 30*time.Millisecond, 100*time.Millisecond))
	// Behind (room 50 ms × 13 − 600 = 50), but at 4 tokens an iteration its
	// drafts are its faster way back (25 ms a token against 30).
	seqs[0].Start = now.Add(-600 * time.Millisecond)
	seqs[0].Payoff.spec = Pace{}
	seqs[0].Payoff.spec.Add(100*time.Millisecond, 4)
	require.False(t, Guard(seqs, seqs, now, 30*time.Millisecond, 100*time.Millisecond))
	seqs[0].Start = now.Add(-440 * time.Millisecond)
	// Nor is one without an SLO, or before its first token.
	seqs[0].SLO = 0
	require.False(t, Guard(seqs, seqs[1:], now, 30*time.Millisecond, 100*time.Millisecond))
	seqs[0].SLO, seqs[0].Start = 50*time.Millisecond, time.Time{}
	require.False(t, Guard(seqs, seqs[1:], now, 30*time.Millisecond, 100*time.Millisecond))
}

// TestSchedulerObserve: SpecTiming takes only the iterations whose trees
// held drafted nodes; Timing takes them all.
func TestSchedulerObserve(t *testing.T) {
	seqs := newSeqs(1)
	s := &Scheduler{Config: Config{Policy: AdaServe, Budget: 8, MaxDepth: 4, MaxWidth: 2}, Drafter: &BeamDrafter{Model: newToyDraft(16, 6)}}
	_, err := s.Plan(seqs, time.Unix(0, 0))
	require.NoError(t, err)
	s.Observe(80 * time.Millisecond)
	seqs[0].NoSpec = true
	_, err = s.Plan(seqs, time.Unix(0, 0))
	require.NoError(t, err)
	s.Observe(20 * time.Millisecond)
	require.Equal(t, 2, s.Timing.Observations())
	require.Equal(t, 1, s.SpecTiming.Observations())
	require.Equal(t, 80*time.Millisecond, s.SpecTiming.Estimate())
}

// standbyDraft is a StandbyDrafter over a BeamDrafter that records which
// sequences each call drafted for; its standby trees are one node deep.
type standbyDraft struct {
	BeamDrafter
	drafted, standby []*Seq
}

func (d *standbyDraft) Draft(seqs []*Seq, shape Shape, trees []*Tree) error {
	d.drafted = append(d.drafted[:0], seqs...)
	return d.BeamDrafter.Draft(seqs, shape, trees)
}

func (d *standbyDraft) Standby(seqs []*Seq, shape Shape, trees []*Tree) error {
	d.standby = append(d.standby[:0], seqs...)
	for i, s := range seqs {
		trees[i].Reset(s.Tokens[len(s.Tokens)-1])
		trees[i].Add(0, 7, 0.9)
	}
	return nil
}

// TestSchedulerStandby: a request whose speculation is backed off is
// drafted for by Standby (and only then: not while it measures plain
// decoding first, not with speculation off), and AdaServe's guard holds
// its tree back as it does the others'.
func TestSchedulerStandby(t *testing.T) {
	now := time.Unix(1000, 0)
	seqs := newSeqs(3)
	d := &standbyDraft{BeamDrafter: BeamDrafter{Model: newToyDraft(16, 6)}}
	s := &Scheduler{Config: Config{Policy: GlobalGreedy, Budget: 16, MaxDepth: 4, MaxWidth: 2}, Drafter: d}
	// seqs[0] speculates, seqs[1] is backing off, seqs[2] measures plain
	// decoding first.
	seqs[1].Payoff = Payoff{PlainPrior: time.Millisecond, off: 3}
	seqs[1].Payoff.plain.n = plainFirst
	seqs[2].Payoff = Payoff{PlainPrior: time.Millisecond}
	trees, err := s.Plan(seqs, now)
	require.NoError(t, err)
	require.Equal(t, []*Seq{seqs[0]}, d.drafted)
	require.Equal(t, []*Seq{seqs[1]}, d.standby)
	require.Greater(t, trees[0].Len(), 1)
	require.Equal(t, 2, trees[1].Len(), "the standby tree is verified")
	require.Equal(t, 1, trees[2].Len())
	require.True(t, seqs[1].Payoff.BackingOff())
	require.False(t, seqs[2].Payoff.BackingOff(), "measuring plain decoding is not a back-off")

	// Speculation off: no standby either.
	seqs[1].NoSpec = true
	d.standby = nil
	_, err = s.Plan(seqs, now)
	require.NoError(t, err)
	require.Empty(t, d.standby)
	seqs[1].NoSpec = false

	// A drafter without Standby leaves backed-off requests bare.
	s.Drafter = &BeamDrafter{Model: newToyDraft(16, 6)}
	trees, err = s.Plan(seqs, now)
	require.NoError(t, err)
	require.Equal(t, 1, trees[1].Len())

	// AdaServe's guard, when it puts speculation off, puts standby off
	// too: seqs[0] has 10 ms of room, plain takes 5 and speculation 30.
	s.Drafter = d
	s.Config.Policy, s.PlainCost = AdaServe, func([]*Seq) time.Duration { return 5 * time.Millisecond }
	s.SpecTiming.Observe(30 * time.Millisecond)
	seqs[0].SLO, seqs[0].Start = 10*time.Millisecond, now.Add(-90*time.Millisecond)
	seqs[0].Tokens = append(seqs[0].Tokens, make([]int32, 9)...)
	seqs[0].NoSpec = true
	seqs[1].Payoff.off = 3
	d.standby = nil
	trees, err = s.Plan(seqs, now)
	require.NoError(t, err)
	require.Empty(t, d.standby)
	require.Equal(t, 1, trees[1].Len())
}
