package spec

// DraftStats counts how a drafter's candidate trees fared against the
// target, before selection cut them: what a simulator's acceptance model
// (sim.Acceptance: a share of iterations with drafts, a chance that a
// proposed node has children, and per depth the chance that the target's
// next token is the k-th drafted child) is fitted from. The Scheduler
// keeps one (Scheduler.Stats); a backend reports what each sequence
// emitted (Scheduler.ObserveEmitted).
//
// The zero value is ready. Depths past StatDepths−1 count as the last.
type DraftStats struct {
	// Asked is how many times the drafter was asked for a sequence's
	// tree, Drafted how many of those trees held a drafted node.
	Asked, Drafted int
	// Spine counts, by depth, the nodes of the first-child chain (each
	// node's most probable child: a drafter that goes on at all goes on
	// there) that the tree's depth limit left room below, and Continued
	// those of them with children.
	Spine, Continued [StatDepths]int
	// Offered[d][k] counts the nodes at depth d that the target's tokens
	// reached (the root, and every node whose path the target emitted)
	// with a k-th drafted child, and Took[d][k] how often the target's
	// next token there was that child. A beam drafter drafts a node's
	// second child only where its path is among the layer's likeliest, so
	// the share that counts is of the times the child was there.
	Offered, Took [StatDepths][StatRanks]int
	// Proposed[d][k] counts the drafted k-th children of nodes at depth
	// d, and Believed[d][k] sums the conditional probability the drafter
	// gave them (a child's path probability over its parent's, as
	// calibrated for selection): what selection believed, beside what
	// the target took. A drafter that believes less than it gets
	// verifies shorter trees than its acceptance would earn.
	Proposed [StatDepths][StatRanks]int
	Believed [StatDepths][StatRanks]float64
}

const (
	// StatDepths is how many depths DraftStats tells apart.
	StatDepths = 16
	// StatRanks is how many children of a node DraftStats tells apart.
	StatRanks = 4
)

func statDepth(d int32) int { return min(int(d), StatDepths-1) }

// ObserveDraft counts the candidate tree t, drafted for a sequence whose
// tree may reach depth limit (nodes at the limit cannot have children, so
// they say nothing of whether the drafter goes on). Only the first-child
// chain counts towards Spine: a beam drafter expands a depth's most
// probable nodes only, so a node off that chain may lack children because
// the beam passed it by, not because the drafter had nothing.
func (s *DraftStats) ObserveDraft(t *Tree, limit int) {
	s.Asked++
	if t.Len() > 1 {
		s.Drafted++
	}
	for i, n := range t.Nodes[1:] {
		p := t.Nodes[n.Parent]
		d, k := statDepth(p.Depth), i+1-int(p.FirstChild)
		if k >= StatRanks || p.Prob <= 0 {
			continue
		}
		s.Proposed[d][k]++
		s.Believed[d][k] += n.Prob / p.Prob
	}
	for v := t.Nodes[0]; v.Children > 0; {
		v = t.Nodes[v.FirstChild]
		if int(v.Depth) >= limit {
			return
		}
		d := statDepth(v.Depth)
		s.Spine[d]++
		if v.Children > 0 {
			s.Continued[d]++
		}
	}
}

// ObserveEmitted walks the candidate tree t (as ObserveDraft saw it)
// along the tokens the target emitted for it, the bonus token last: at
// each node reached that has drafted children, which of them the target's
// token was, if any. The walk stops at the first token no child holds.
// Children past the StatRanks-th count as offered nowhere.
func (s *DraftStats) ObserveEmitted(t *Tree, tokens []int32) {
	v := 0
	for _, tok := range tokens {
		n := t.Nodes[v]
		if n.Children == 0 {
			return
		}
		d := statDepth(n.Depth)
		for k := range min(int(n.Children), StatRanks) {
			s.Offered[d][k]++
		}
		c := t.Child(v, tok)
		if c < 0 {
			return
		}
		if k := c - int(n.FirstChild); k < StatRanks {
			s.Took[d][k]++
		}
		v = c
	}
}

// Add is s and o counted together.
func (s DraftStats) Add(o DraftStats) DraftStats {
	s.Asked += o.Asked
	s.Drafted += o.Drafted
	for d := range StatDepths {
		s.Spine[d] += o.Spine[d]
		s.Continued[d] += o.Continued[d]
		for k := range StatRanks {
			s.Offered[d][k] += o.Offered[d][k]
			s.Took[d][k] += o.Took[d][k]
			s.Proposed[d][k] += o.Proposed[d][k]
			s.Believed[d][k] += o.Believed[d][k]
		}
	}
	return s
}

// Sub is what s counted after earlier, a reading of the same counts.
func (s DraftStats) Sub(earlier DraftStats) DraftStats {
	s.Asked -= earlier.Asked
	s.Drafted -= earlier.Drafted
	for d := range StatDepths {
		s.Spine[d] -= earlier.Spine[d]
		s.Continued[d] -= earlier.Continued[d]
		for k := range StatRanks {
			s.Offered[d][k] -= earlier.Offered[d][k]
			s.Took[d][k] -= earlier.Took[d][k]
			s.Proposed[d][k] -= earlier.Proposed[d][k]
			s.Believed[d][k] -= earlier.Believed[d][k]
		}
	}
	return s
}
