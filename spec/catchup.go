package spec

import (
	"slices"
	"time"
)

// CatchUpDrafter is a Drafter that first feeds a sequence's context to a
// model of its own before it can draft for it: a draft model's KV cache
// reading a new request's prompt, or what the target emitted while it did
// not draft. That feed is a pass the whole iteration waits for. On the
// Qwen2.5-Coder 0.5B on two cores a new request's window (132 tokens at
// most) is 0.2–0.3 s, four or five of the 1.5B's decode steps, paid by
// every request of the batch.
type CatchUpDrafter interface {
	Drafter
	// Lag is how many tokens the next Draft would feed s's model before
	// drafting for it.
	Lag(s *Seq) int
	// LagPrice is what a pass feeding n tokens takes; ok is false while
	// it is not known.
	LagPrice(n int) (d time.Duration, ok bool)
}

// CatchUpFloor is the lag a drafting iteration feeds as part of its
// steps: what one verified tree can emit (DefaultMaxDepth accepted and
// the bonus token). The measured draft steps hold its price; only a lag
// beyond it is a catch-up of its own.
const CatchUpFloor = DefaultMaxDepth + 1

// HoldCatchUps is AdaServe's SLO guard applied to a drafter's catch-ups
// (CatchUpDrafter). Of the sequences about to be drafted for (drafting, a
// subset of seqs), those whose lag is beyond CatchUpFloor would make the
// iteration last their catch-up's price longer, and every sequence of it
// waits that long. Their catch-ups are kept, the shortest first, while
// their joint price (one pass over all their lags) fits in the margin the
// iteration leaves every sequence of seqs that has an SLO and its first
// token: its slack (Seq.Slack) less t, the iteration's expected duration.
// A sequence whose catch-up does not fit decodes plainly this iteration
// and is asked again at the next: it catches up when the batch has the
// slack to wait for it. A sequence already behind its SLO leaves no
// margin, as Guard protects it too; without a sequence with an SLO
// (best effort only) nothing is held. It reports which of drafting keep
// drafting, in order, in keep (resized to len(drafting)), and how many
// were held.
//
// The price is LagPrice's for the lags together, so a held catch-up is
// only ever the one that would have pushed the pass past the margin; a
// price not known yet (no pass of that size measured) holds nothing.
func HoldCatchUps(d CatchUpDrafter, seqs, drafting []*Seq, now time.Time, t time.Duration, keep []bool) ([]bool, int) {
	keep = slices.Grow(keep[:0], len(drafting))[:len(drafting)]
	for i := range keep {
		keep[i] = true
	}
	type lagging struct{ i, lag int }
	var late []lagging
	for i, s := range drafting {
		if l := d.Lag(s); l > CatchUpFloor {
			late = append(late, lagging{i, l})
		}
	}
	if len(late) == 0 {
		return keep, 0
	}
	margin, bound := time.Duration(0), false
	for _, s := range seqs {
		if s.SLO <= 0 || s.Start.IsZero() {
			continue
		}
		if m := s.Slack(now) - t; !bound || m < margin {
			margin, bound = m, true
		}
	}
	if !bound {
		return keep, 0
	}
	slices.SortStableFunc(late, func(a, b lagging) int { return a.lag - b.lag })
	fed, held := 0, 0
	for _, l := range late {
		if held == 0 {
			price, ok := d.LagPrice(fed + l.lag)
			if !ok {
				return keep, 0
			}
			if price <= margin {
				fed += l.lag
				continue
			}
		}
		// Longer lags than one that did not fit do not fit either.
		keep[l.i] = false
		held++
	}
	return keep, held
}
