package engine

import (
	"time"

	"github.com/lmstream/lmstream/spec"
)

// Timings splits the time of the iterations that decoded something.
type Timings struct {
	Iterations int
	// Plan is drafting plus selection, Forward the target's pass (prefill
	// chunks and trees together), Verify the walk over each tree, the KV
	// commit and the penalty bookkeeping.
	Plan, Forward, Verify time.Duration
	// Decoding counts the decoding sequences of those iterations, one per
	// sequence and iteration, and SatOut those of them that sat the
	// iteration out (spec.SitOut): SatOut/Decoding is the share the
	// AdaServe simulator counts as Run.SatOut over its request-iterations.
	Decoding, SatOut int
	// Roots times the iterations that ran nothing but one token for each
	// of n decoding sequences (no prompt chunk, no drafted node), by n
	// (up to MaxRootBatch): a batch of sequences as the engine runs it,
	// each reading its own cache, beside the cost curve's chain of n
	// tokens in one sequence.
	Roots [MaxRootBatch + 1]RootPasses
	// Drafts counts the drafted trees against what the target emitted for
	// them (spec.DraftStats): the acceptance a simulator replays the
	// engine's requests with (sim.FitAcceptance).
	Drafts spec.DraftStats
	// Held counts the sequences whose draft model's catch-up the
	// scheduler held back (spec.HoldCatchUps), as the simulator's
	// Run.Held does.
	Held int
	// PageWaits counts the slot-iterations that waited for KV pages (the
	// page pool at its limit), and PageEnds the sequences ended for want
	// of them (Backend.starve).
	PageWaits, PageEnds int
}

// MaxRootBatch is the largest batch Timings.Roots keeps apart.
const MaxRootBatch = 64

// RootPasses is how many root-only iterations of one batch size ran and
// how long their phases took in all (as Timings splits them).
type RootPasses struct {
	Count                 int
	Plan, Forward, Verify time.Duration
}

// Total is the iterations' whole time, from planning to verification.
func (r RootPasses) Total() time.Duration { return r.Plan + r.Forward + r.Verify }

// sub is r less earlier.
func (r RootPasses) sub(earlier RootPasses) RootPasses {
	return RootPasses{r.Count - earlier.Count, r.Plan - earlier.Plan, r.Forward - earlier.Forward, r.Verify - earlier.Verify}
}

// Add is r and more together.
func (r RootPasses) Add(more RootPasses) RootPasses {
	return RootPasses{r.Count + more.Count, r.Plan + more.Plan, r.Forward + more.Forward, r.Verify + more.Verify}
}

// Since is what ran after earlier, a reading of the same backend's
// Timings taken before t.
func (t Timings) Since(earlier Timings) Timings {
	t.Iterations -= earlier.Iterations
	t.Plan -= earlier.Plan
	t.Forward -= earlier.Forward
	t.Verify -= earlier.Verify
	t.Decoding -= earlier.Decoding
	t.SatOut -= earlier.SatOut
	for n := range t.Roots {
		t.Roots[n] = t.Roots[n].sub(earlier.Roots[n])
	}
	t.Drafts = t.Drafts.Sub(earlier.Drafts)
	t.Held -= earlier.Held
	return t
}

func (t *Timings) add(plan, fwd, ver time.Duration) {
	t.Iterations++
	t.Plan += plan
	t.Forward += fwd
	t.Verify += ver
}
