package spec

// Acceptance calibrates a drafter's path probabilities against what
// verification accepts. A drafter's f(v) is a product of its own
// conditional probabilities, and drafters are often overconfident: an
// n-gram seen once proposes its continuation with probability 1, a small
// draft model is surer of itself than the target agrees with. Acceptance
// keeps, per depth, decayed sums of the raw f of the verified nodes and of
// how many of them were accepted; Scale multiplies each node's f by their
// ratio, made non-increasing with depth so that a child never outranks its
// parent (selection by f must stay ancestor-closed). It only lowers
// probabilities: a drafter that is underconfident keeps its own.
//
// The zero value is ready and scales nothing until it has seen
// MinMass of predicted acceptances at a depth.
type Acceptance struct {
	acc, pred [acceptanceDepths]float64
}

const (
	acceptanceDepths = 16
	// acceptanceDecay per observed tree: the sums forget with a horizon of
	// about a hundred verified trees, so a change of prompt or drafter
	// regime shows within a few dozen iterations.
	acceptanceDecay = 0.99
	// MinMass is the predicted acceptances a depth needs before its ratio
	// is trusted.
	MinMass = 4.0
)

// Factor is the multiplier of path probabilities at depth d ≥ 1: at most
// 1, and never more than at depth d−1.
func (a *Acceptance) Factor(d int) float64 {
	f := 1.0
	for i := 0; i < min(d, acceptanceDepths); i++ {
		if a.pred[i] >= MinMass {
			f = min(f, a.acc[i]/a.pred[i])
		}
	}
	return f
}

// Scale multiplies the path probability of every node below the root by
// its depth's Factor.
func (a *Acceptance) Scale(t *Tree) {
	var fs [acceptanceDepths + 1]float64
	for d := range fs {
		fs[d] = a.Factor(d)
	}
	for i := 1; i < len(t.Nodes); i++ {
		t.Nodes[i].Prob *= fs[min(int(t.Nodes[i].Depth), acceptanceDepths)]
	}
}

// Observe records a verified tree (its probabilities as Scale left them)
// and the accepted path (Result.Path: the root, then accepted nodes).
func (a *Acceptance) Observe(t *Tree, path []int) {
	if len(t.Nodes) < 2 {
		return
	}
	for d := range a.acc {
		a.acc[d] *= acceptanceDecay
		a.pred[d] *= acceptanceDecay
	}
	var fs [acceptanceDepths + 1]float64
	for d := range fs {
		fs[d] = a.Factor(d)
	}
	for i := 1; i < len(t.Nodes); i++ {
		d := min(int(t.Nodes[i].Depth), acceptanceDepths)
		if fs[d] > 0 {
			a.pred[d-1] += t.Nodes[i].Prob / fs[d] // the drafter's raw f
		}
	}
	for _, v := range path[1:] {
		a.acc[min(int(t.Nodes[v].Depth), acceptanceDepths)-1]++
	}
}
