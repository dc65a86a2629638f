package spec

import (
	"slices"
	"time"
)

// Scheduler ties one iteration's speculation together: it drafts candidate
// trees for the requests that speculate, computes each request's A(r) from
// its SLO and the Timing estimate, runs the configured selection and hands
// back the trees to verify. Not safe for concurrent use: the engine loop
// owns it.
//
// Per iteration the runtime does:
//
//	trees, err := sch.Plan(seqs, now)
//	// one forward pass over every tree (Tree.AppendBatch), then per seq:
//	spec.VerifyGreedy(trees[i], targets_i, &res)   // or VerifySample
//	// commit res.Path in the KV cache, emit res.Tokens, append them to
//	// seqs[i].Tokens (set seqs[i].Start at the first token)
//	sch.Observe(time.Since(iterationStart))
type Scheduler struct {
	Config  Config
	Drafter Drafter // nil: no speculation
	Timing  Timing
	// PlainCost, when set, prices a plain iteration of the sequences
	// (the forward pass over their roots: PassCost.Plain) and turns on
	// the SLO guard of AdaServe's policy (Guard); SpecTiming is what an
	// iteration that verified drafts took, as Timing is for every
	// iteration.
	PlainCost  func(seqs []*Seq) time.Duration
	SpecTiming Timing
	// Stats counts the drafted trees against what the target emitted
	// for them (ObserveEmitted).
	Stats DraftStats

	sel    Selector
	prune  []int
	pruned Tree
	cands  []Tree
	out    []Tree
	outP   []*Tree
	active []*Seq
	actT   []*Tree
	// standby and standT: the backed-off sequences a StandbyDrafter
	// may still draft for, and their trees.
	standby []*Seq
	standT  []*Tree
	reqs    []Candidate
	// asked[i]: the last Plan drafted for its sequence i (set with
	// active, and cleared with it).
	asked []bool
	keep  []bool // holdCatchUps' scratch
	// Held counts the sequences whose drafter's catch-up a Plan held
	// back (HoldCatchUps).
	Held int
}

// Plan drafts and selects for one iteration and returns the tree to verify
// for every sequence, in order. The trees are owned by the Scheduler until
// the next Plan.
func (s *Scheduler) Plan(seqs []*Seq, now time.Time) ([]*Tree, error) {
	n := len(seqs)
	if len(s.cands) < n {
		s.cands = append(s.cands, make([]Tree, n-len(s.cands))...)
		s.out = append(s.out, make([]Tree, n-len(s.out))...)
	}
	shape := s.Config.Shape(n)
	s.asked = slices.Grow(s.asked[:0], n)[:n]
	clear(s.asked)
	s.active, s.actT = s.active[:0], s.actT[:0]
	s.standby, s.standT = s.standby[:0], s.standT[:0]
	for i, q := range seqs {
		c := &s.cands[i]
		c.Reset(q.Tokens[len(q.Tokens)-1])
		if q.NoSpec || s.Drafter == nil || shape.depth() <= 0 {
			continue
		}
		if q.Payoff.Decide() {
			s.active = append(s.active, q)
			s.actT = append(s.actT, c)
			s.asked[i] = true
		} else if q.Payoff.BackingOff() {
			s.standby = append(s.standby, q)
			s.standT = append(s.standT, c)
		}
	}
	if len(s.active)+len(s.standby) > 0 && s.Config.Policy == AdaServe && s.PlainCost != nil &&
		Guard(seqs, s.active, now, s.PlainCost(seqs), s.SpecTiming.Estimate()) {
		s.active, s.actT = s.active[:0], s.actT[:0]
		clear(s.asked)
		s.standby, s.standT = s.standby[:0], s.standT[:0]
	}
	if len(s.active) > 0 && s.Config.Policy == AdaServe && s.PlainCost != nil {
		s.holdCatchUps(seqs, now)
	}
	if len(s.active) > 0 {
		if err := s.Drafter.Draft(s.active, shape, s.actT); err != nil {
			clear(s.asked) // nothing of this Plan is verified as drafted
			return nil, err
		}
	}
	if sd, ok := s.Drafter.(StandbyDrafter); ok && len(s.standby) > 0 {
		if err := sd.Standby(s.standby, shape, s.standT); err != nil {
			return nil, err
		}
	}
	for i, q := range seqs {
		s.limit(q, &s.cands[i])
	}
	for i, q := range seqs {
		if !s.asked[i] {
			continue
		}
		limit := shape.depth()
		if q.MaxDepth > 0 {
			limit = min(limit, q.MaxDepth)
		}
		s.Stats.ObserveDraft(&s.cands[i], limit)
	}
	tspec := s.Timing.Estimate()
	s.reqs = s.reqs[:0]
	for i, q := range seqs {
		r := Candidate{Tree: &s.cands[i], BestEffort: q.SLO <= 0}
		if !r.BestEffort {
			var l time.Duration
			if !q.Start.IsZero() {
				l = now.Sub(q.Start)
			}
			// l and o both start at the first token, as the TPOT that
			// SLO attainment is measured by does (see AfterFirst).
			r.Target = Target(l, tspec, q.SLO, q.AfterFirst())
		}
		s.reqs = append(s.reqs, r)
	}
	keep := s.sel.Select(&s.Config, shape.depth(), s.reqs)
	s.outP = s.outP[:0]
	for i := range seqs {
		s.cands[i].Subtree(keep[i], &s.out[i])
		s.outP = append(s.outP, &s.out[i])
	}
	return s.outP, nil
}

// holdCatchUps takes out of this Plan's drafting the sequences whose
// drafter would first have to catch up for longer than the batch can wait
// (HoldCatchUps), at the price of what speculative iterations have been
// taking; a drafter that never catches up (not a CatchUpDrafter) holds
// none.
func (s *Scheduler) holdCatchUps(seqs []*Seq, now time.Time) {
	cd, ok := s.Drafter.(CatchUpDrafter)
	if !ok {
		return
	}
	t := s.SpecTiming.Estimate()
	if t <= 0 {
		t = s.Timing.Estimate()
	}
	var held int
	s.keep, held = HoldCatchUps(cd, seqs, s.active, now, t, s.keep)
	if held == 0 {
		return
	}
	s.Held += held
	k, kept := 0, 0
	for i := range seqs {
		if !s.asked[i] {
			continue
		}
		if s.keep[k] {
			s.active[kept], s.actT[kept] = s.active[k], s.actT[k]
			kept++
		} else {
			s.asked[i] = false
		}
		k++
	}
	s.active, s.actT = s.active[:kept], s.actT[:kept]
}

// Observe records how long the iteration of the last Plan took, in
// Timing and, when its trees held drafted nodes, in SpecTiming.
func (s *Scheduler) Observe(d time.Duration) {
	s.Timing.Observe(d)
	for _, t := range s.outP {
		if t.Len() > 1 {
			s.SpecTiming.Observe(d)
			return
		}
	}
}

// ObserveEmitted counts in Stats what the target emitted for sequence i
// of the last Plan (its accepted tokens, then the bonus token), where
// that Plan drafted for it.
func (s *Scheduler) ObserveEmitted(i int, tokens []int32) {
	if i < len(s.asked) && s.asked[i] {
		s.Stats.ObserveEmitted(&s.cands[i], tokens)
	}
}

// DraftedFor says whether the last Plan's drafter proposed a node for its
// sequence i (a draft model that did so had to read its context first).
func (s *Scheduler) DraftedFor(i int) bool {
	return i < len(s.asked) && s.asked[i] && s.cands[i].Len() > 1
}

// Drafted is how many sequences the last Plan drafted for.
func (s *Scheduler) Drafted() int { return len(s.active) }

// Bound is whether the last Plan's selection was bound by the budget
// (Selector.Bound).
func (s *Scheduler) Bound() bool { return s.sel.Bound() }

// Guard is AdaServe's selection made to hold where speculation lengthens
// the iteration. The paper's setting is a GPU whose verify pass costs
// about the same at 1 and at 64 tokens, so A(r) is computed with one
// t_spec whatever is selected. On a CPU the draft model's steps and the
// larger verify pass make a speculative iteration longer than a plain one,
// and every request in it waits that long for its token. A request that does not
// draft gains nothing from that time, and one near its SLO falls behind
// it: on the engine it was the urgent requests that speculation made
// miss (TPOT 67 ms against an SLO of 56 and 49 plain).
//
// So speculation is put off for an iteration that would leave a request
// behind its SLO and at a slower pace than plain decoding gives it. A
// request with an SLO whose first token is out, o tokens after it and l
// since it, that gets g tokens from an iteration of length t, is within
// its SLO after it if t ≤ SLO·(o+g) − l (as PrefillChunk reasons), and its
// pace is t/g against plain/1 when it decodes plainly. Under speculation
// g is 1 for a request that does not draft and, for one that drafts, what
// its speculative iterations have been emitting (Payoff.SpecTokens; a
// drafter that keeps missing makes its own request slower too). Guard
// reports whether tspec (what speculative iterations have taken) breaks
// that bound for any such request while tspec/g > plain (the plain
// iteration's price). A request already behind is protected as well: its
// TPOT is an average, and plain decoding is its best way back. tspec ≤ 0
// (none measured yet) never holds speculation back, nor does a drafting
// request whose speculation was not measured yet.
func Guard(seqs, drafting []*Seq, now time.Time, plain, tspec time.Duration) bool {
	if tspec <= plain || plain <= 0 {
		return false
	}
	for _, q := range seqs {
		if q.SLO <= 0 || q.Start.IsZero() {
			continue
		}
		g := 1.0
		if slices.Contains(drafting, q) {
			if g = q.Payoff.SpecTokens(); g <= 0 {
				continue
			}
		}
		o, l := float64(q.AfterFirst()), float64(now.Sub(q.Start))
		if float64(tspec) > float64(q.SLO)*(o+g)-l && float64(tspec) > g*float64(plain) {
			return true
		}
	}
	return false
}

// limit prunes a candidate tree to the sequence's MaxDepth and MaxNodes.
// The breadth-first order lists nodes by depth, so a prefix of it is
// ancestor-closed.
func (s *Scheduler) limit(q *Seq, t *Tree) {
	n := t.Len()
	if q.MaxNodes > 0 {
		n = min(n, q.MaxNodes)
	}
	if q.MaxDepth > 0 {
		for n > 1 && int(t.Nodes[n-1].Depth) > q.MaxDepth {
			n--
		}
	}
	if n == t.Len() {
		return
	}
	s.prune = s.prune[:0]
	for i := range max(n, 1) {
		s.prune = append(s.prune, i)
	}
	t.Subtree(s.prune, &s.pruned)
	t.Nodes = append(t.Nodes[:0], s.pruned.Nodes...)
}
