package engine

import (
	"time"

	"github.com/lmstream/lmstream/spec"
)

// modelDrafter drafts with a model — a separate GGUF sharing the target's
// vocabulary, or the target's own first layers — by beam search
// (spec.BeamDrafter over draftNet).
//
// Unless the shape is a fixed tree, it drafts a spine (spec.Shape.Spine):
// each step is one single-token pass of the draft model per sequence. It
// stops a sequence's spine where one more step no longer pays for itself
// (spec.StopProb), pricing the step at the draft model's measured step and
// the verified token at the target's cost curve (plain and marginal, set
// by the backend for the iteration's load).
//
// Where even a certain node could not pay for the step that drafts it
// (the stop probability is 1 or more: with several sequences a draft step
// costs a batched pass while a verified token is worth a share of one),
// it skips the step and leaves the trees bare. The step is priced from
// measured draft passes of as many tokens as it has sequences
// (draftNet.stepAt), once stepSamples of them were measured. It does not
// probe by drafting again later, which would first feed the draft model
// every token the skipped iterations emitted, a stall of a prompt's
// prefill; every repriceEvery skipped calls it times the step again on
// scratch instead (repriced), so that a price measured under contention
// does not bench it for good. Nor does a sequence catch up where the
// catch-up cannot pay (payingCatchUps).
type modelDrafter struct {
	beam spec.BeamDrafter
	dm   *draftNet

	plain, marginal time.Duration
	// at is the target's forward cost curve (nil without one): it prices
	// a draft step of a batch size not measured yet (see priorStep).
	at    func(int) time.Duration
	keepS []*spec.Seq // scratch of payingCatchUps
	keepT []*spec.Tree
	// skipped counts, per batch size, the calls the model sat out because
	// a step did not pay (see repriced).
	skipped map[int]int
	// always drafts even where no node can pay ("spec_adaptive": false,
	// which makes requests speculate where it does not pay, as the
	// simulator does and as tests of what speculation emits need).
	always bool
}

// stepSamples is how many draft steps of a batch size are measured before
// their price may stop drafting at that size (one can be an outlier).
const stepSamples = 3

func (m *modelDrafter) Draft(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	n := len(seqs)
	stop, priced := m.stopProb(n)
	if shape.Branch == nil && !m.always {
		if stop >= 1 && m.repriced(seqs[0], n) {
			stop, priced = m.stopProb(n)
		}
		if stop >= 1 {
			return nil
		}
		seqs, trees = m.payingCatchUps(seqs, trees, stop)
		if len(seqs) == 0 {
			return nil
		}
		if len(seqs) != n {
			stop, priced = m.stopProb(len(seqs)) // a smaller batch's step
		}
	}
	m.dm.seqs = seqs
	defer func() { m.dm.seqs = nil }()
	if shape.Branch == nil {
		shape.Spine = true
		// Every node is charged the whole step over all len(seqs)
		// sequences, though the step serves them all. Charging each
		// layer's step to the spines still drafting it instead (and
		// keeping the most probable spines whose sum pays) was tried: on
		// the Qwen pair with 4 streams it drafted 1.43–1.62 tokens a pass
		// and ran at 0.85× plain, against 0.97× here, most likely because
		// what drafting costs beyond the steps (each draft cache catching
		// up on what the target emitted) is not priced.
		if priced {
			shape.StopProb = stop
			if stop >= 1 && !m.always {
				return nil
			}
		} else if m.dm.Step.Observations() > 0 {
			// A batch size not drafted yet: draft (and so measure it),
			// cutting nodes at the price of the steps measured so far.
			shape.StopProb = spec.StopProb(m.dm.Step.Estimate(), m.marginal, m.plain)
		}
	}
	if err := m.beam.Draft(seqs, shape, trees); err != nil {
		return err
	}
	if shape.Spine && shape.StopProb > 0 {
		// Each request's gate weighs what its tree's steps cost against
		// the tokens verification accepts of it (spec.Payoff.Priced).
		for i, s := range seqs {
			s.Payoff.Priced(trees[i].Depth(), shape.StopProb)
		}
	}
	return nil
}

// repriceEvery is how many calls over n sequences the model sits out,
// their measured step being too dear to pay, before that step is measured
// again (draftNet.reprice): the measurement that benched it may have been
// a moment of contention, and a model that does not draft is not measured
// again (NOTES.md, "repricing"). A re-measurement costs stepSamples draft
// passes, under 1% of the calls it follows.
const repriceEvery = 256

// repriced counts a call the model sits out for the price of a step over
// n sequences and, every repriceEvery of them, measures that step again on
// s's draft cache; it reports whether it did.
func (m *modelDrafter) repriced(s *spec.Seq, n int) bool {
	if m.skipped == nil {
		m.skipped = map[int]int{}
	}
	m.skipped[n]++
	return m.skipped[n]%repriceEvery == 0 && m.dm.reprice(s, n) == nil
}

// stopProb is the path probability below which a draft step over n
// sequences does not pay (spec.StopProb): priced is false while no step of
// that batch size was measured and none can be estimated (priorStep), and
// stop is then 0.
func (m *modelDrafter) stopProb(n int) (stop float64, priced bool) {
	step, ok := m.dm.stepAt(n)
	if !ok {
		step, ok = m.priorStep(n)
	}
	if !ok {
		return 0, false
	}
	return spec.StopProb(step, m.marginal, m.plain), true
}

// maxSaving is the largest share of a stream's remaining decode time
// speculation is taken to save. The best measured on a real pair is about
// a third (Qwen2.5-Coder 1.5B/0.5B, whole-file rewrites, 1.5x plain), so
// half is generous.
const maxSaving = 0.5

// savingShare is the share of the plain decoding time left that drafting
// can still save where a drafted node costs stop of a token's worth (the
// step and its verification: stop = StopProb): a node saves at most its
// token's worth less its cost, 1 − stop of the worth, and never more than
// maxSaving. Where stop is near 1 (on two cores, the 0.5B's step over two
// streams against the 1.5B's plain token), drafting saves next to nothing
// whatever its acceptance, so paying the draft cache's catch-up for it is
// a loss.
func savingShare(stop float64) float64 { return min(maxSaving, max(0, 1-stop)) }

// payingCatchUps keeps the sequences (and their trees) whose draft cache
// can catch up for less than what drafting could still save them: the
// draft pass over the tokens the cache lacks, against savingShare(stop)
// of the plain decoding of the tokens max_tokens and the cache still
// allow (Seq.MaxDepth; a sequence without that bound is kept). A request
// that drafted while it was alone, stopped when other streams made a step
// too dear, and is alone again near its end would otherwise feed the draft
// model its whole answer so far (hundreds of milliseconds on the Qwen
// pair) to draft its last few tokens; and a request that starts beside
// another would feed it its prompt for a step that barely pays.
func (m *modelDrafter) payingCatchUps(seqs []*spec.Seq, trees []*spec.Tree, stop float64) ([]*spec.Seq, []*spec.Tree) {
	if m.plain <= 0 {
		return seqs, trees
	}
	share := savingShare(stop)
	m.keepS, m.keepT = m.keepS[:0], m.keepT[:0]
	for i, s := range seqs {
		// Tokens the request may still emit: a tree of depth d emits at
		// most d+1 (limit sets MaxDepth so, or MaxNodes to 1 at the end).
		left := 0
		switch {
		case s.MaxDepth > 0:
			left = s.MaxDepth + 1
		case s.MaxNodes == 1:
			left = 1
		}
		if left > 0 {
			lag := m.dm.lag(s)
			if cost, ok := m.passPrice(lag); ok && cost.Seconds() > share*float64(left)*m.plain.Seconds() {
				continue
			}
		}
		m.keepS, m.keepT = append(m.keepS, s), append(m.keepT, trees[i])
	}
	return m.keepS, m.keepT
}

// passPrice is a draft pass over n tokens: measured (stepAt), else the
// prior (priorStep).
func (m *modelDrafter) passPrice(n int) (time.Duration, bool) {
	if t, ok := m.dm.stepAt(n); ok {
		return t, true
	}
	return m.priorStep(n)
}

// priorStep prices a draft step over n sequences before any was measured:
// the target's pass over n tokens scaled by the draft's measured cost
// relative to the target's at the nearest batch size measured (same
// kernels, so the two curves have one shape). Without it, every new batch
// size would be drafted stepSamples times to learn that it does not pay,
// and each of those steps first feeds the draft model every sequence's
// prompt: on two cores with eight streams, seconds of draft work for
// nothing. ok is false before any size was measured, or without a curve.
func (m *modelDrafter) priorStep(n int) (time.Duration, bool) {
	if m.at == nil {
		return 0, false
	}
	best := -1
	for k, t := range m.dm.stepBy {
		if t.Observations() >= stepSamples && (best < 0 || abs(k-n) < abs(best-n) || abs(k-n) == abs(best-n) && k < best) {
			best = k
		}
	}
	if best < 0 || m.at(best) <= 0 {
		return 0, false
	}
	ratio := float64(m.dm.stepBy[best].Estimate()) / float64(m.at(best))
	return time.Duration(ratio * float64(m.at(n))), true
}

func abs(x int) int { return max(x, -x) }
