package spec

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// figure5 builds the candidate trees of the AdaServe paper's worked example
// (arXiv 2501.12162, Figure 5): two requests, beam width 2, depth 3. Node
// names follow the figure: t0 is the root, t1,t2 depth 1, t3,t4 depth 2,
// t5,t6 depth 3; the numbers are the figure's approximate path
// probabilities (conditional probabilities in the comments).
//
//	r0: t0(1.0) ─ t1(0.7) ─ t3(0.42 = .7×.6) ─ t5(0.294 = .42×.7)
//	            │        └ t4(0.21 = .7×.3) ─ t6(0.126 = .21×.6)
//	            └ t2(0.2)
//	r1: t0(1.0) ─ t1(0.5) ─ t3(0.35 = .5×.7) ─ t5(0.14 = .35×.4)
//	            └ t2(0.4) ─ t4(0.24 = .4×.6) ─ t6(0.14 ≈ .24×.6)
//
// (Both depth-2 nodes of r0 descend from t1: its children 0.42 and 0.21
// beat anything under t2, whose path probability is 0.2. For r1's t6 the
// figure prints 0.14; we take .24×.6 = .144.)
//
// The returned maps give each figure name's index in our canonical
// breadth-first tree.
func figure5() (r0, r1 *Tree, n0, n1 map[string]int) {
	r0, r1 = &Tree{}, &Tree{}
	n0, n1 = map[string]int{"t0": 0}, map[string]int{"t0": 0}
	r0.Reset(100)
	n0["t1"] = r0.Add(0, 101, 0.7)
	n0["t2"] = r0.Add(0, 102, 0.2)
	n0["t3"] = r0.Add(n0["t1"], 103, 0.42)
	n0["t4"] = r0.Add(n0["t1"], 104, 0.21)
	n0["t5"] = r0.Add(n0["t3"], 105, 0.294)
	n0["t6"] = r0.Add(n0["t4"], 106, 0.126)
	r1.Reset(200)
	n1["t1"] = r1.Add(0, 201, 0.5)
	n1["t2"] = r1.Add(0, 202, 0.4)
	n1["t3"] = r1.Add(n1["t1"], 203, 0.35)
	n1["t4"] = r1.Add(n1["t2"], 204, 0.24)
	n1["t5"] = r1.Add(n1["t3"], 205, 0.14)
	n1["t6"] = r1.Add(n1["t4"], 206, 0.144)
	return
}

func names(keep []int, idx map[string]int) []string {
	inv := map[int]string{}
	for k, v := range idx {
		inv[v] = k
	}
	var out []string
	for _, v := range keep {
		out = append(out, inv[v])
	}
	return out
}

// TestFigure5 reproduces the paper's worked example: budget 8, two requests
// with A_cap = 0.6 and 0.8. The SLO phase adds t1(0) (0.7 ≥ 0.6) to T0 and
// t1(1), t2(1) (0.5+0.4 ≥ 0.8) to T1; the throughput phase spends the
// remaining 3 slots (8 − 2 roots − 3) on t3(0)=0.42, t3(1)=0.35 and
// t5(0)=0.294, the most probable selectable nodes left.
func TestFigure5(t *testing.T) {
	wantSLO0, wantSLO1 := []string{"t0", "t1"}, []string{"t0", "t1", "t2"}
	want0, want1 := []string{"t0", "t1", "t3", "t5"}, []string{"t0", "t1", "t2", "t3"}

	// The figure counts only draft tokens toward A (A = 0.6 still takes a
	// node): ExcludeRoot, with the figure's numbers.
	// The paper's Algorithm 2 counts the root (n_acc starts at 1): the same
	// example is A = 1.6 and 1.8 there. Both must give the figure's trees,
	// in either SLO-phase order.
	for _, tc := range []struct {
		name        string
		exclude     bool
		a0, a1      float64
		order       Order
		wantAcc0    float64
		wantAcc1    float64
		wantBudget8 bool
	}{
		{"figure/descending", true, 0.6, 0.8, Descending, 0.7, 0.9, true},
		{"figure/ascending", true, 0.6, 0.8, Ascending, 0.7, 0.9, true},
		{"algorithm2/descending", false, 1.6, 1.8, Descending, 1.7, 1.9, true},
		{"algorithm2/ascending", false, 1.6, 1.8, Ascending, 1.7, 1.9, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r0, r1, n0, n1 := figure5()
			reqs := []Candidate{{Tree: r0, Target: tc.a0}, {Tree: r1, Target: tc.a1}}
			var s Selector

			// SLO phase alone: a budget of 2 roots + 3 leaves nothing for
			// throughput.
			cfg := Config{Budget: 5, ExcludeRoot: tc.exclude, Order: tc.order}
			keep := s.Select(&cfg, 3, reqs)
			require.Equal(t, wantSLO0, names(keep[0], n0))
			require.Equal(t, wantSLO1, names(keep[1], n1))
			// The SLO phase stops as soon as each target is reached.
			root := 1.0
			if tc.exclude {
				root = 0
			}
			require.InDelta(t, tc.wantAcc0, Expected(r0, keep[0])-1+root, 1e-12)
			require.InDelta(t, tc.wantAcc1, Expected(r1, keep[1])-1+root, 1e-12)

			// The full example: budget 8.
			cfg.Budget = 8
			keep = s.Select(&cfg, 3, reqs)
			require.Equal(t, want0, names(keep[0], n0))
			require.Equal(t, want1, names(keep[1], n1))
			require.Equal(t, 8, len(keep[0])+len(keep[1]))

			// The draft token trees handed to verification.
			var d0, d1 Tree
			require.True(t, r0.Subtree(keep[0], &d0))
			require.True(t, r1.Subtree(keep[1], &d1))
			require.NoError(t, d0.Validate())
			require.NoError(t, d1.Validate())
			require.Equal(t, []int{1, 1, 1, 1}, d0.Widths(nil)) // t0 → t1 → t3 → t5
			require.Equal(t, []int{1, 2, 1}, d1.Widths(nil))    // t0 → {t1 → t3, t2}
		})
	}
}

// TestSLOPhaseHonoursMinProb: a request far behind its SLO takes its most
// probable nodes in the SLO phase, but none below MinProb (a node that
// costs the pass more than it yields), however far its target is; with
// MinProb 0 (a flat curve) it takes them as the paper's algorithm does.
func TestSLOPhaseHonoursMinProb(t *testing.T) {
	r0, _, n0, _ := figure5()
	reqs := []Candidate{{Tree: r0, Target: 4}} // beyond any tree of depth 3: A_cap = 4
	var s Selector
	cfg := Config{Budget: 16, MinProb: 0.25}
	keep := s.Select(&cfg, 3, reqs)
	require.Equal(t, []string{"t0", "t1", "t3", "t5"}, names(keep[0], n0), "only the nodes at or above 0.25")
	cfg.MinProb = 0
	keep = s.Select(&cfg, 3, reqs)
	require.Len(t, keep[0], r0.Len(), "without a floor the SLO phase takes every node toward its target")
}

// TestSelectHonoursFloorsByPosition: Config.Floor prices each slot of the
// pass on its own. Figure 5's r0 alone (root, then 0.7, 0.42, 0.294,
// 0.21, 0.2, 0.126), MinProb 0.1, and a floor of 0.3 from the pass's 4th
// token on: every policy that selects takes the root, 0.7 and 0.42, then
// stops at 0.294, which would have paid for a 3rd token but not a 4th;
// AdaServe's SLO phase included. Bound stays false: what was left is below
// its slot's floor, not out of budget. Without the floors every node is
// above MinProb and taken.
func TestSelectHonoursFloorsByPosition(t *testing.T) {
	r0, _, n0, _ := figure5()
	var s Selector
	for _, policy := range []Policy{AdaServe, GlobalGreedy, EqualGreedy} {
		cfg := Config{Policy: policy, Budget: 16, MinProb: 0.1, Floor: []float64{0, 0, 0, 0, 0.3}}
		keep := s.Select(&cfg, 3, []Candidate{{Tree: r0, Target: 4}})
		require.Equal(t, []string{"t0", "t1", "t3"}, names(keep[0], n0), "%v", policy)
		require.False(t, s.Bound(), "%v", policy)
		cfg.Floor = nil
		keep = s.Select(&cfg, 3, []Candidate{{Tree: r0, Target: 4}})
		require.Len(t, keep[0], r0.Len(), "%v: without the floors every node, all above MinProb", policy)
	}
}

// Bound says whether the budget (EqualGreedy: the quota) left a node worth
// verifying out. Figure 5's trees have 12 nodes besides their 2 roots: a
// budget of 8 leaves 6 out, 14 takes them all. With MinProb 0.3 five
// nodes are worth it (0.7, 0.42; 0.5, 0.4, 0.35): a budget of 5 (3 after
// the roots) is bound, one of 7 is not, as what it leaves out (0.294 and
// less) is below the floor. The policies that do not select never are.
func TestSelectorBound(t *testing.T) {
	r0, r1, _, _ := figure5()
	reqs := []Candidate{{Tree: r0, Target: 1.6}, {Tree: r1, Target: 1.8}}
	var s Selector
	for _, tc := range []struct {
		policy  Policy
		budget  int
		minProb float64
		bound   bool
	}{
		{AdaServe, 8, 0, true}, {AdaServe, 14, 0, false}, {AdaServe, 64, 0, false},
		{GlobalGreedy, 8, 0, true}, {GlobalGreedy, 14, 0, false},
		{EqualGreedy, 8, 0, true}, {EqualGreedy, 14, 0, false}, // quota 14/2 − 1 = 6 nodes each
		{GlobalGreedy, 5, 0.3, true}, {GlobalGreedy, 7, 0.3, false},
		{AdaServe, 5, 0.3, true}, {AdaServe, 7, 0.3, false},
		{SpecInfer, 2, 0, false}, {Incremental, 2, 0, false},
	} {
		cfg := Config{Policy: tc.policy, Budget: tc.budget, MinProb: tc.minProb}
		s.Select(&cfg, 3, reqs)
		require.Equal(t, tc.bound, s.Bound(), "%v, budget %d, floor %v", tc.policy, tc.budget, tc.minProb)
	}
}

// randomTree builds a random canonical tree with random (not necessarily
// monotone) path probabilities.
func randomTree(rng *SplitMix, maxDepth, maxWidth int, monotone bool) *Tree {
	t := &Tree{}
	t.Reset(int32(rng.Uint64() % 50))
	layer := []int{0}
	for d := 0; d < maxDepth && len(layer) > 0; d++ {
		var next []int
		for _, p := range layer {
			k := int(rng.Uint64() % uint64(maxWidth+1))
			for range k {
				prob := rng.Uniform()
				if monotone {
					prob *= t.Nodes[p].Prob
				}
				next = append(next, t.Add(p, int32(rng.Uint64()%50), prob))
			}
		}
		layer = next
	}
	return t
}

func TestSelectProperties(t *testing.T) {
	rng := NewSplitMix(7)
	var s Selector
	policies := []Policy{AdaServe, Incremental, SpecInfer, EqualGreedy, GlobalGreedy}
	for iter := range 3000 {
		n := 1 + int(rng.Uint64()%8)
		monotone := iter%2 == 0
		reqs := make([]Candidate, n)
		for i := range reqs {
			reqs[i] = Candidate{
				Tree:       randomTree(rng, 1+int(rng.Uint64()%5), 1+int(rng.Uint64()%4), monotone),
				Target:     rng.Uniform()*7 - 1,
				BestEffort: rng.Uint64()%4 == 0,
			}
		}
		cfg := Config{
			Policy:      policies[rng.Uint64()%uint64(len(policies))],
			Budget:      int(rng.Uint64() % 80),
			NMax:        int(rng.Uint64() % 10),
			Order:       Order(rng.Uint64() % 2),
			ExcludeRoot: rng.Uint64()%2 == 0,
		}
		depth := 5
		keep := s.Select(&cfg, depth, reqs)
		require.Len(t, keep, n)
		total := 0
		for i, k := range keep {
			tr := reqs[i].Tree
			require.Equal(t, 0, k[0], "root always kept")
			in := map[int]bool{}
			for j, v := range k {
				if j > 0 {
					require.Greater(t, v, k[j-1], "ascending, no duplicates")
					require.True(t, in[int(tr.Nodes[v].Parent)], "ancestor-closed: %v parent of %d missing in %v (%v)", cfg.Policy, v, k, tr.Nodes)
				}
				in[v] = true
			}
			var sub Tree
			require.True(t, tr.Subtree(k, &sub))
			require.NoError(t, sub.Validate())
			total += len(k)
		}
		switch cfg.Policy {
		case Incremental:
			require.Equal(t, n, total)
		case SpecInfer:
		default:
			require.LessOrEqual(t, total, max(cfg.Budget, n), "budget respected (%v)", cfg.Policy)
		}
		if cfg.Policy == GlobalGreedy && monotone {
			// With monotone probabilities GlobalGreedy is exactly the
			// top-(B−n) non-root nodes by probability.
			var all, sel []float64
			for i, k := range keep {
				for v := 1; v < reqs[i].Tree.Len(); v++ {
					all = append(all, reqs[i].Tree.Nodes[v].Prob)
				}
				for _, v := range k[1:] {
					sel = append(sel, reqs[i].Tree.Nodes[v].Prob)
				}
			}
			sortDesc(all)
			sortDesc(sel)
			m := min(len(all), max(0, cfg.Budget-n))
			require.ElementsMatch(t, all[:m], sel)
		}
	}
}

func sortDesc(a []float64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] > a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// TestSelectSLOPhase checks the SLO phase against brute force on monotone
// trees: each request with an SLO gets the fewest nodes reaching its capped
// target (when budget and NMax allow), and requests are served in order.
func TestSelectSLOPhase(t *testing.T) {
	rng := NewSplitMix(11)
	var s Selector
	for range 2000 {
		tr := randomTree(rng, 4, 3, true)
		a := rng.Uniform() * 6
		// Budget: the root plus exactly the minimal node count, so the
		// throughput phase has nothing left to add.
		cfg := Config{Budget: 1 + minNodes(tr, min(a, 5)-1)}
		keep := s.Select(&cfg, 4, []Candidate{{Tree: tr, Target: a}})
		need := min(a, 5.0)
		want := minNodes(tr, need-1)
		require.Equal(t, want, len(keep[0])-1, "fewest nodes for A=%v", a)
	}
	// Order: with a budget for one extra node only, Descending serves the
	// request furthest behind, Ascending the closest.
	mk := func() *Tree { tr := &Tree{}; tr.Reset(1); tr.Add(0, 2, 0.9); return tr }
	reqs := []Candidate{{Tree: mk(), Target: 1.5}, {Tree: mk(), Target: 1.8}}
	keep := s.Select(&Config{Budget: 3, Order: Descending}, 1, reqs)
	require.Equal(t, [][]int{{0}, {0, 1}}, keep)
	keep = s.Select(&Config{Budget: 3, Order: Ascending}, 1, reqs)
	require.Equal(t, [][]int{{0, 1}, {0}}, keep)
	// Best-effort requests only get throughput leftovers.
	reqs = []Candidate{{Tree: mk(), BestEffort: true}, {Tree: mk(), Target: 1.5}}
	keep = s.Select(&Config{Budget: 3}, 1, reqs)
	require.Equal(t, [][]int{{0}, {0, 1}}, keep)
	// NMax caps the SLO phase; the leftovers go to throughput.
	deep := &Tree{}
	deep.Reset(1)
	p := 0
	for i := range 4 {
		p = deep.Add(p, int32(i), 0.5)
	}
	reqs = []Candidate{{Tree: deep, Target: 4}, {Tree: mk(), BestEffort: true}}
	keep = s.Select(&Config{Budget: 5, NMax: 2}, 4, reqs)
	require.Equal(t, [][]int{{0, 1, 2}, {0, 1}}, keep)
}

// minNodes is the fewest non-root nodes whose probabilities sum to at least
// need (all of them when they cannot): on a monotone tree the greedy prefix.
func minNodes(t *Tree, need float64) int {
	var ps []float64
	for _, n := range t.Nodes[1:] {
		ps = append(ps, n.Prob)
	}
	sortDesc(ps)
	sum := 0.0
	for i, p := range ps {
		if sum >= need {
			return i
		}
		sum += p
	}
	return len(ps)
}

func TestShapeAndTarget(t *testing.T) {
	cfg := Config{Budget: 64, MaxDepth: 8, MaxWidth: 4}
	require.Equal(t, Shape{Depth: 8, Width: 4}, cfg.Shape(1))
	require.Equal(t, Shape{Depth: 8, Width: 4}, cfg.Shape(8))   // 64/8 = 8
	require.Equal(t, Shape{Depth: 4, Width: 3}, cfg.Shape(20))  // ⌈3.2⌉, ⌊3.2⌋
	require.Equal(t, Shape{Depth: 1, Width: 1}, cfg.Shape(100)) // never below 1
	require.Equal(t, Shape{}, cfg.Shape(0))
	inc := Config{Policy: Incremental, Budget: 64}
	require.Equal(t, 0, inc.Shape(3).depth())
	si := Config{Policy: SpecInfer, Budget: 64}
	require.Equal(t, DefaultBranch, si.Shape(3).Branch)

	// A(r): 10 tokens in 1s with a 100ms SLO and a 50ms iteration: 0.5.
	require.InDelta(t, 0.5, Target(time.Second, 50*time.Millisecond, 100*time.Millisecond, 10), 1e-12)
	// Ahead of schedule: negative.
	require.Less(t, Target(time.Second, 50*time.Millisecond, 100*time.Millisecond, 20), 0.0)
	require.Equal(t, "adaserve", AdaServe.String())
}

// AdaServe and GlobalGreedy must part ways where the budget is short and
// the SLOs differ: an urgent request whose draft is less certain than a
// relaxed one's gets its nodes from AdaServe's SLO phase, while global
// greedy selection spends the whole budget on the relaxed request's more
// probable nodes and leaves the urgent one plain decoding.
func TestAdaServeServesUrgentGlobalGreedyDoesNot(t *testing.T) {
	chain := func(p float64) *Tree {
		tr := &Tree{}
		tr.Reset(1)
		v := 0
		for i := range 3 {
			v = tr.Add(v, int32(10+i), math.Pow(p, float64(i+1)))
		}
		return tr
	}
	reqs := []Candidate{
		{Tree: chain(0.95), Target: 0.5}, // relaxed: ahead of its SLO
		{Tree: chain(0.6), Target: 2.5},  // urgent: needs 1.5 tokens beyond its root
	}
	var s Selector
	// Budget 5: the two roots and three draft nodes.
	keep := s.Select(&Config{Budget: 5, Policy: GlobalGreedy}, 3, reqs)
	require.Equal(t, [][]int{{0, 1, 2, 3}, {0}}, keep, "global greedy: all three to the most probable nodes")
	keep = s.Select(&Config{Budget: 5, Policy: AdaServe}, 3, reqs)
	require.Equal(t, [][]int{{0}, {0, 1, 2, 3}}, keep,
		"adaserve: the urgent request takes 0.6+0.36+0.216 (still short of its target; NMax ⌊1.2·5/2⌋ = 3 allows them), nothing is left")
	require.GreaterOrEqual(t, Expected(reqs[1].Tree, keep[1]), 2.0)
}
