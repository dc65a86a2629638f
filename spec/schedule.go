package spec

import "time"

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
//	sch.Timing.Observe(time.Since(iterationStart))
type Scheduler struct {
	Config  Config
	Drafter Drafter // nil: no speculation
	Timing  Timing

	sel    Selector
	prune  []int
	pruned Tree
	cands  []Tree
	out    []Tree
	outP   []*Tree
	active []*Seq
	actT   []*Tree
	reqs   []Candidate
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
	s.active, s.actT = s.active[:0], s.actT[:0]
	for i, q := range seqs {
		c := &s.cands[i]
		c.Reset(q.Tokens[len(q.Tokens)-1])
		if !q.NoSpec && s.Drafter != nil && shape.depth() > 0 && q.Payoff.Decide() {
			s.active = append(s.active, q)
			s.actT = append(s.actT, c)
		}
	}
	if len(s.active) > 0 {
		if err := s.Drafter.Draft(s.active, shape, s.actT); err != nil {
			return nil, err
		}
	}
	for i, q := range seqs {
		s.limit(q, &s.cands[i])
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
