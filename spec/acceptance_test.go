package spec

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// An overconfident drafter: it claims every chain token with probability
// 0.9, while the target accepts each with probability 0.4. After enough
// verified chains the scaled f at depth d approaches the true 0.4^d, and
// it stays non-increasing down the chain.
func TestAcceptanceCalibratesOverconfidence(t *testing.T) {
	var a Acceptance
	const depth = 4
	tr := trainOnChains(&a, rand.New(rand.NewPCG(1, 2)), depth, 0.9, 0.4)
	want := 1.0
	for d := 1; d <= depth; d++ {
		want *= 0.4
		require.InDelta(t, want, tr.Nodes[d].Prob, 0.5*want, "depth %d", d) // uncalibrated: 0.9^d
		require.LessOrEqual(t, tr.Nodes[d].Prob, tr.Nodes[d-1].Prob)
	}
}

// A calibrated drafter is left alone, and nothing is scaled before the
// sums hold MinMass.
func TestAcceptanceLeavesCalibratedDrafters(t *testing.T) {
	var a Acceptance
	var tr Tree
	tr.Reset(0)
	tr.Add(0, 1, 0.5)
	a.Scale(&tr)
	require.Equal(t, 0.5, tr.Nodes[1].Prob)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		var tr Tree
		tr.Reset(0)
		tr.Add(0, 1, 0.5)
		a.Scale(&tr)
		path := []int{0}
		if rng.Float64() < 0.5 {
			path = append(path, 1)
		}
		a.Observe(&tr, path)
	}
	require.InDelta(t, 1, a.Factor(1), 0.15)
}

// An underconfident drafter: it claims every chain token with probability
// 0.6, while the target accepts each with probability 0.8. The scaled f
// rises toward what is accepted (depth 1: 0.8), never above MaxRaise times
// the raw f, never above 1, and stays non-increasing down the chain.
func TestAcceptanceRaisesUnderconfidence(t *testing.T) {
	var a Acceptance
	const depth = 4
	tr := trainOnChains(&a, rand.New(rand.NewPCG(5, 6)), depth, 0.6, 0.8)
	require.InDelta(t, 0.8, tr.Nodes[1].Prob, 0.08)
	for d := 1; d <= depth; d++ {
		n := tr.Nodes[d]
		require.Greater(t, n.Prob, n.Raw, "depth %d raised", d)
		require.LessOrEqual(t, n.Prob, MaxRaise*n.Raw+1e-12)
		require.LessOrEqual(t, n.Prob, tr.Nodes[d-1].Prob)
	}

	// A drafter whose every path is accepted is raised by MaxRaise at
	// most, and no probability passes 1.
	var b Acceptance
	for range 500 {
		var tr Tree
		tr.Reset(0)
		tr.Add(0, 1, 0.5)
		tr.Add(1, 2, 0.45)
		b.Scale(&tr)
		b.Observe(&tr, []int{0, 1, 2})
	}
	require.Equal(t, MaxRaise, b.Factor(1))
	var tr2 Tree
	tr2.Reset(0)
	tr2.Add(0, 1, 0.9)
	b.Scale(&tr2)
	require.Equal(t, 1.0, tr2.Nodes[1].Prob)
	require.Equal(t, 0.9, tr2.Nodes[1].Raw)
}

// trainOnChains has a observe 3000 verified chains of the given depth
// from a drafter that claims every token with probability claim, of which
// the target accepts each with probability accept, and returns one more
// chain as a now scales it.
func trainOnChains(a *Acceptance, rng *rand.Rand, depth int, claim, accept float64) *Tree {
	chain := func() *Tree {
		var tr Tree
		tr.Reset(0)
		p := 1.0
		for d := 1; d <= depth; d++ {
			p *= claim
			tr.Add(d-1, int32(d), p)
		}
		a.Scale(&tr)
		return &tr
	}
	for range 3000 {
		tr := chain()
		path := []int{0}
		for d := 1; d <= depth && rng.Float64() < accept; d++ {
			path = append(path, d)
		}
		a.Observe(tr, path)
	}
	return chain()
}

// TestFactorsEqualFactor: the running minimum of Factors is Factor at
// every depth, past the depths Acceptance tells apart too.
func TestFactorsEqualFactor(t *testing.T) {
	var a Acceptance
	trainOnChains(&a, rand.New(rand.NewPCG(7, 8)), 6, 0.7, 0.75)
	fs := make([]float64, CalibDepths+3)
	a.Factors(fs)
	for d, f := range fs {
		require.Equal(t, a.Factor(d), f, "depth %d", d)
	}
}
