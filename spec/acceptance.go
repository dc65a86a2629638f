package spec

// Acceptance calibrates a drafter's path probabilities against what
// verification accepts. A drafter's f(v) is a product of its own
// conditional probabilities, and drafters are often overconfident (an
// n-gram seen once proposes its continuation with probability 1) or
// underconfident (the Qwen2.5-Coder 0.5B draft model's paths were accepted
// 2–19% more often than its f said, more so deeper down). Acceptance
// keeps, per depth, decayed sums of the raw f of the verified nodes and of
// how many of them were accepted; Scale multiplies each node's f by their
// ratio, made non-increasing with depth so that a child never outranks its
// parent (selection by f must stay ancestor-closed), at most MaxRaise, and
// caps the product at 1.
//
// The zero value is ready and scales nothing until it has seen
// MinMass of predicted acceptances at a depth.
type Acceptance struct {
	acc, pred [acceptanceDepths]float64
}

const (
	acceptanceDepths = 16
	// CalibDepths is the length of a Factors slice that covers every
	// depth Acceptance tells apart (deeper nodes take the last factor).
	CalibDepths = acceptanceDepths + 1
	// acceptanceDecay per observed tree: the sums forget with a horizon of
	// about a hundred verified trees, so a change of prompt or drafter
	// regime shows within a few dozen iterations.
	acceptanceDecay = 0.99
	// MinMass is the predicted acceptances a depth needs before its ratio
	// is trusted.
	MinMass = 4.0
	// MaxRaise bounds how far an underconfident drafter's probabilities
	// are raised: a few lucky iterations must not make every path look
	// certain.
	MaxRaise = 1.5
)

// Factor is the multiplier of path probabilities at depth d ≥ 1: the
// smallest ratio of accepted to predicted over depths 1…d (a depth not
// trusted yet counts as 1), at most MaxRaise.
func (a *Acceptance) Factor(d int) float64 {
	if d < 1 {
		return 1 // the root
	}
	f := MaxRaise
	for i := 0; i < min(d, acceptanceDepths); i++ {
		f = min(f, a.ratio(i))
	}
	return f
}

// ratio is accepted over predicted at depth i+1, or 1 before that depth
// holds MinMass.
func (a *Acceptance) ratio(i int) float64 {
	if a.pred[i] < MinMass {
		return 1
	}
	return a.acc[i] / a.pred[i]
}

// Factors fills fs[d] with Factor(d) for every d < len(fs), keeping the
// running minimum instead of rescanning the shallower depths for each.
func (a *Acceptance) Factors(fs []float64) {
	f := MaxRaise
	for d := range fs {
		if d == 0 {
			fs[d] = 1 // the root
			continue
		}
		if i := d - 1; i < acceptanceDepths {
			f = min(f, a.ratio(i))
		}
		fs[d] = f
	}
}

// Calibrated is a raw path probability at depth d scaled by fs (as
// Factors filled it), at most 1.
func Calibrated(raw float64, d int, fs []float64) float64 {
	if len(fs) == 0 {
		return raw
	}
	return min(1, raw*fs[min(d, len(fs)-1)])
}

// Scale sets the path probability of every node below the root to its
// raw one times its depth's Factor, at most 1.
func (a *Acceptance) Scale(t *Tree) {
	var fs [CalibDepths]float64
	a.Factors(fs[:])
	for i := 1; i < len(t.Nodes); i++ {
		n := &t.Nodes[i]
		n.Prob = Calibrated(n.Raw, int(n.Depth), fs[:])
	}
}

// Observe records a verified tree and the accepted path (Result.Path: the
// root, then accepted nodes).
func (a *Acceptance) Observe(t *Tree, path []int) {
	if len(t.Nodes) < 2 {
		return
	}
	for d := range a.acc {
		a.acc[d] *= acceptanceDecay
		a.pred[d] *= acceptanceDecay
	}
	for i := 1; i < len(t.Nodes); i++ {
		a.pred[min(int(t.Nodes[i].Depth), acceptanceDepths)-1] += t.Nodes[i].Raw
	}
	for _, v := range path[1:] {
		a.acc[min(int(t.Nodes[v].Depth), acceptanceDepths)-1]++
	}
}
