package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lagDraft is a CatchUpDrafter over a BeamDrafter: lag per sequence, a
// pass priced 1 ms a token (known up to known tokens), and the sequences
// each Draft call drafted for.
type lagDraft struct {
	BeamDrafter
	lag     map[*Seq]int
	known   int
	drafted []*Seq
}

func (d *lagDraft) Draft(seqs []*Seq, shape Shape, trees []*Tree) error {
	d.drafted = append(d.drafted[:0], seqs...)
	return d.BeamDrafter.Draft(seqs, shape, trees)
}

func (d *lagDraft) Lag(s *Seq) int { return d.lag[s] }

func (d *lagDraft) LagPrice(n int) (time.Duration, bool) {
	return time.Duration(n) * time.Millisecond, n <= d.known
}

// HoldCatchUps keeps the catch-ups that fit the batch's tightest margin
// (slack less the iteration), shortest first, and holds the rest; lags
// within CatchUpFloor are not catch-ups.
func TestHoldCatchUps(t *testing.T) {
	now := time.Unix(1000, 0)
	seqs := newSeqs(4)
	d := &lagDraft{lag: map[*Seq]int{}, known: 1000}
	// seqs[3] is the tight one: 10 tokens out against a 50 ms SLO, 300 ms
	// since its first, so its slack is 50·10 − 300 = 200 ms, and with a
	// 60 ms iteration its margin is 140 ms.
	tight := seqs[3]
	tight.Tokens = append(tight.Tokens, make([]int32, 9)...)
	tight.SLO, tight.Start = 50*time.Millisecond, now.Add(-300*time.Millisecond)
	d.lag[seqs[0]], d.lag[seqs[1]], d.lag[seqs[2]] = 90, 40, CatchUpFloor
	const iter = 60 * time.Millisecond
	keep, held := HoldCatchUps(d, seqs, seqs[:3], now, iter, nil)
	// 40 tokens (40 ms) fit; 40+90 = 130 ms fits too.
	require.Equal(t, []bool{true, true, true}, keep)
	require.Zero(t, held)
	// 110 + 40 = 150 ms does not: the longer is held, the shorter kept.
	d.lag[seqs[0]] = 110
	keep, held = HoldCatchUps(d, seqs, seqs[:3], now, iter, keep)
	require.Equal(t, []bool{false, true, true}, keep)
	require.Equal(t, 1, held)
	// Behind its SLO (slack 50·10 − 520 = −20 ms): every catch-up held,
	// the ordinary feed of a drafting iteration not.
	tight.Start = now.Add(-520 * time.Millisecond)
	keep, held = HoldCatchUps(d, seqs, seqs[:3], now, iter, keep)
	require.Equal(t, []bool{false, false, true}, keep)
	require.Equal(t, 2, held)
	// A price not known yet holds nothing.
	d.known = 30
	keep, held = HoldCatchUps(d, seqs, seqs[:3], now, iter, keep)
	require.Equal(t, []bool{true, true, true}, keep)
	require.Zero(t, held)
	d.known = 1000
	// Nor without a sequence with an SLO and its first token.
	tight.Start = time.Time{}
	keep, held = HoldCatchUps(d, seqs, seqs[:3], now, iter, keep)
	require.Equal(t, []bool{true, true, true}, keep)
	require.Zero(t, held)
	tight.SLO, tight.Start = 0, now.Add(-520*time.Millisecond)
	_, held = HoldCatchUps(d, seqs, seqs[:3], now, iter, keep)
	require.Zero(t, held)
}

// Under AdaServe (with its SLO guard on) Plan drafts only for the
// sequences whose catch-up the batch can wait for: a held one verifies
// its root alone, is not counted as drafted for, and the Scheduler counts
// it. The baselines hold nothing.
func TestSchedulerHoldsCatchUps(t *testing.T) {
	now := time.Unix(1000, 0)
	seqs := newSeqs(3)
	tight := seqs[2]
	tight.Tokens = append(tight.Tokens, make([]int32, 9)...)
	tight.SLO, tight.Start, tight.NoSpec = 50*time.Millisecond, now.Add(-300*time.Millisecond), true
	d := &lagDraft{BeamDrafter: BeamDrafter{Model: newToyDraft(16, 6)}, lag: map[*Seq]int{seqs[0]: 200, seqs[1]: 20}, known: 1000}
	s := &Scheduler{Config: Config{Policy: AdaServe, Budget: 16, MaxDepth: 4, MaxWidth: 2}, Drafter: d,
		PlainCost: func([]*Seq) time.Duration { return 10 * time.Millisecond }}
	s.SpecTiming.Observe(60 * time.Millisecond) // margin 140 ms: 20 tokens fit, 220 do not
	trees, err := s.Plan(seqs, now)
	require.NoError(t, err)
	require.Equal(t, []*Seq{seqs[1]}, d.drafted)
	require.Equal(t, 1, trees[0].Len())
	require.Greater(t, trees[1].Len(), 1)
	require.False(t, s.DraftedFor(0))
	require.True(t, s.DraftedFor(1))
	require.Equal(t, 1, s.Drafted())
	require.Equal(t, 1, s.Held)
	require.Equal(t, 1, s.Stats.Asked, "only the drafted sequence's tree is counted")

	// With room for it, it catches up.
	tight.Start = now.Add(-100 * time.Millisecond) // margin 340 ms
	_, err = s.Plan(seqs, now)
	require.NoError(t, err)
	require.Equal(t, []*Seq{seqs[0], seqs[1]}, d.drafted)
	require.Equal(t, 1, s.Held)

	tight.Start = now.Add(-300 * time.Millisecond)
	for _, p := range []Policy{GlobalGreedy, EqualGreedy} {
		s.Config.Policy = p
		_, err = s.Plan(seqs, now)
		require.NoError(t, err)
		require.Equal(t, []*Seq{seqs[0], seqs[1]}, d.drafted, "%v holds nothing", p)
	}
	s.Config.Policy, s.PlainCost = AdaServe, nil
	_, err = s.Plan(seqs, now)
	require.NoError(t, err)
	require.Equal(t, []*Seq{seqs[0], seqs[1]}, d.drafted, "nor AdaServe without its guard")
	require.Equal(t, 1, s.Held)
}
