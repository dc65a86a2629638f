package spec

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"testing"

	"github.com/lmstream/lmstream/internal/race"
	"github.com/stretchr/testify/require"
)

// ---- toy models -----------------------------------------------------------

// toy is a small-vocabulary language model whose next-token distribution is
// a deterministic function of the last two tokens of the context.
type toy struct {
	vocab int
	dists [][]float32 // [prev2*vocab+prev1] → distribution
	order [][]int32   // tokens by descending probability (ties: lower id)
}

// newToy makes a toy model; with zeros, some entries are exactly 0.
func newToy(vocab int, seed uint64, zeros bool) *toy {
	rng := NewSplitMix(seed)
	m := &toy{vocab: vocab}
	for range vocab * vocab {
		p := make([]float32, vocab)
		sum := 0.0
		w := make([]float64, vocab)
		for i := range w {
			w[i] = -math.Log(1 - rng.Uniform()) // exponential: a flat Dirichlet
			if i == 0 {
				w[i] *= 2
			}
			if zeros && rng.Uniform() < 0.2 {
				w[i] = 0
			}
			sum += w[i]
		}
		if sum == 0 {
			w[0], sum = 1, 1
		}
		for i := range p {
			p[i] = float32(w[i] / sum)
		}
		m.dists = append(m.dists, p)
		ord := make([]int32, vocab)
		for i := range ord {
			ord[i] = int32(i)
		}
		sort.SliceStable(ord, func(a, b int) bool { return p[ord[a]] > p[ord[b]] })
		m.order = append(m.order, ord)
	}
	return m
}

func (m *toy) ctx(a, b int32) int { return int(a)*m.vocab + int(b) }

// ---- shape enumeration ----------------------------------------------------

// shape is a canonical tree shape: children counts per node in breadth-first
// order.
type shape struct {
	kids   []int
	widths []int // nodes per depth below the root (the family key)
}

// enumerateShapes lists every canonical tree shape of depth ≤ maxDepth whose
// layers hold at most maxWidth nodes: exactly the shapes the scheduler can
// produce from beam candidate trees of depth maxDepth and width maxWidth
// (the beam keeps ≤ w nodes per layer, and selection keeps any
// ancestor-closed subset).
func enumerateShapes(maxDepth, maxWidth int) []shape {
	var out []shape
	var rec func(kids []int, layer int, widths []int, depth int)
	// layer: number of nodes in the last layer, whose child counts are not
	// yet fixed (they are the last `layer` entries to append).
	rec = func(kids []int, layer int, widths []int, depth int) {
		if depth == maxDepth {
			k := append(append([]int{}, kids...), make([]int, layer)...)
			out = append(out, shape{kids: k, widths: append([]int{}, widths...)})
			return
		}
		// Distribute c ≤ maxWidth children over the layer's nodes.
		var dist func(i, left int, counts []int)
		dist = func(i, left int, counts []int) {
			if i == layer {
				c := 0
				for _, x := range counts {
					c += x
				}
				k := append(append([]int{}, kids...), counts...)
				if c == 0 {
					out = append(out, shape{kids: append(k, make([]int, 0)...), widths: append([]int{}, widths...)})
					return
				}
				rec(k, c, append(append([]int{}, widths...), c), depth+1)
				return
			}
			for x := 0; x <= left; x++ {
				dist(i+1, left-x, append(counts, x))
			}
		}
		dist(0, maxWidth, nil)
	}
	rec(nil, 1, nil, 0)
	return out
}

func TestEnumerateShapes(t *testing.T) {
	// 1, 4, 35, 428, 5499 shapes up to depth 0..4 with layers ≤ 3 (counted
	// independently: Σ over child counts c of C(p+c−1, c) per layer).
	for d, want := range []int{1, 4, 35, 428, 5499} {
		require.Len(t, enumerateShapes(d, 3), want, "depth %d", d)
	}
}

// ---- sampling harness -------------------------------------------------------

type rule func(t *Tree, target Targets, rng Source, res *Result)

// alwaysAccept is a deliberately wrong rule: the acceptance test is always
// true (the public implementation's bug), so the first child always wins.
func alwaysAccept(t *Tree, target Targets, rng Source, res *Result) {
	res.reset()
	node := 0
	for t.Nodes[node].Children > 0 {
		node = int(t.Nodes[node].FirstChild)
		res.Path = append(res.Path, node)
		res.Tokens = append(res.Tokens, t.Nodes[node].Token)
	}
	res.Tokens = append(res.Tokens, sampleExcluding(target(node), nil, 1, rng.Uniform()))
}

// noRenormalise is a subtler wrong rule: it accepts with p(x) but, on
// rejection, neither removes x from p nor renormalises.
func noRenormalise(t *Tree, target Targets, rng Source, res *Result) {
	res.reset()
	node := 0
	for {
		p := target(node)
		n := t.Nodes[node]
		next := -1
		for c := n.FirstChild; c < n.FirstChild+n.Children; c++ {
			if rng.Uniform() < p.Prob(t.Nodes[c].Token) {
				next = int(c)
				break
			}
		}
		if next < 0 {
			res.Tokens = append(res.Tokens, sampleExcluding(p, nil, 1, rng.Uniform()))
			return
		}
		res.Path = append(res.Path, next)
		res.Tokens = append(res.Tokens, t.Nodes[next].Token)
		node = next
	}
}

// prebuilt is a shape instantiated at one context: the draft picks each
// node's children (its most probable tokens there), and every node knows
// the target's context index after its path.
type prebuilt struct {
	tree   Tree
	nodeCx []int
	target Targets
}

type harness struct {
	target, draft *toy
	dists         []Dist
}

func (h *harness) build(s shape, a, b int32) *prebuilt {
	pb := &prebuilt{}
	pb.tree.Reset(b)
	last2 := [][2]int32{{a, b}}
	for i := 0; i < len(s.kids); i++ {
		cx := last2[i]
		ord := h.draft.order[h.draft.ctx(cx[0], cx[1])]
		for j := 0; j < s.kids[i]; j++ {
			tok := ord[j]
			pb.tree.Add(i, tok, 0.5)
			last2 = append(last2, [2]int32{cx[1], tok})
		}
	}
	for _, cx := range last2 {
		pb.nodeCx = append(pb.nodeCx, h.target.ctx(cx[0], cx[1]))
	}
	pb.target = func(node int) Dist { return h.dists[pb.nodeCx[node]] }
	return pb
}

// sample draws n pairs (first two emitted tokens) for one shape from the
// starting context (a, b), running as many iterations as needed, and adds
// them to counts[t1*V+t2].
func (h *harness) sample(s shape, a, b int32, n int, r rule, rng Source, counts []int) {
	var cache [64]*prebuilt
	get := func(x, y int32) *prebuilt {
		k := h.target.ctx(x, y)
		if cache[k] == nil {
			cache[k] = h.build(s, x, y)
		}
		return cache[k]
	}
	var res Result
	first := get(a, b)
	for range n {
		r(&first.tree, first.target, rng, &res)
		t1 := res.Tokens[0]
		var t2 int32
		if len(res.Tokens) >= 2 {
			t2 = res.Tokens[1]
		} else {
			nx := get(b, t1)
			r(&nx.tree, nx.target, rng, &res)
			t2 = res.Tokens[0]
		}
		counts[int(t1)*h.target.vocab+int(t2)]++
	}
}

// exact is the target's joint distribution of the next two tokens after
// (a, b).
func (h *harness) exact(a, b int32) []float64 {
	v := h.target.vocab
	out := make([]float64, v*v)
	p1 := h.target.dists[h.target.ctx(a, b)]
	for t1 := range v {
		p2 := h.target.dists[h.target.ctx(b, int32(t1))]
		for t2 := range v {
			out[t1*v+t2] = float64(p1[t1]) * float64(p2[t2])
		}
	}
	return out
}

// ---- chi-square ---------------------------------------------------------------

// gammaQ is the regularized upper incomplete gamma function Q(a, x).
func gammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	front := math.Exp(-x + a*math.Log(x) - lg)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 10000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if term < sum*1e-15 {
				break
			}
		}
		return math.Max(0, 1-sum*front)
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	hh := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		hh *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return front * hh
}

// chiSquare tests observed counts against exact probabilities. Cells whose
// expected count is below 5 are pooled into one; an observation in a cell of
// probability 0 is an immediate rejection (p = 0). It returns the statistic,
// the degrees of freedom and the p-value.
func chiSquare(counts []int, probs []float64) (stat float64, df int, p float64) {
	n := 0
	for _, c := range counts {
		n += c
	}
	var poolO, poolE float64
	cells := 0
	for i, c := range counts {
		e := probs[i] * float64(n)
		if probs[i] == 0 {
			if c > 0 {
				return math.Inf(1), 0, 0
			}
			continue
		}
		if e < 5 {
			poolO += float64(c)
			poolE += e
			continue
		}
		stat += (float64(c) - e) * (float64(c) - e) / e
		cells++
	}
	if poolE > 0 {
		stat += (poolO - poolE) * (poolO - poolE) / poolE
		cells++
	}
	df = cells - 1
	if df < 1 {
		return stat, df, 1
	}
	return stat, df, gammaQ(float64(df)/2, stat/2)
}

func TestChiSquareImplementation(t *testing.T) {
	// Textbook critical values: P(χ²_df > x) = 0.05.
	for _, c := range []struct {
		df int
		x  float64
	}{{1, 3.841459}, {4, 9.487729}, {24, 36.415029}, {100, 124.342113}} {
		require.InDelta(t, 0.05, gammaQ(float64(c.df)/2, c.x/2), 1e-5, "df %d", c.df)
	}
	// Exact counts pass, a shifted cell fails.
	probs := []float64{0.5, 0.25, 0.25}
	_, _, p := chiSquare([]int{5000, 2500, 2500}, probs)
	require.InDelta(t, 1, p, 1e-9)
	_, _, p = chiSquare([]int{5300, 2400, 2300}, probs)
	require.Less(t, p, 1e-6)
	_, _, p = chiSquare([]int{1, 0, 0, 9999}, []float64{0, 0.5, 0.5, 0}) // impossible cell hit
	require.Equal(t, 0.0, p)
}

// ---- the distribution-preservation test ---------------------------------------

type familyResult struct {
	widths []int
	shapes int
	n      int
	stat   float64
	df     int
	p      float64
}

// runFamilies samples every shape of every family (shapes grouped by their
// layer widths) with the given rule, at least perFamily samples per family
// spread evenly over its shapes, and tests each family's pooled joint
// distribution of the first two emitted tokens against the exact target.
func runFamilies(h *harness, shapes []shape, perFamily int, r rule, seed uint64) []familyResult {
	fam := map[string][]shape{}
	var keys []string
	for _, s := range shapes {
		k := fmt.Sprint(s.widths)
		if fam[k] == nil {
			keys = append(keys, k)
		}
		fam[k] = append(fam[k], s)
	}
	sort.Strings(keys)
	out := make([]familyResult, len(keys))
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fi := range next {
				ss := fam[keys[fi]]
				// A starting context per family, so that families see
				// different trees; the exact target depends on it.
				a, b := int32(fi%h.target.vocab), int32((fi/h.target.vocab)%h.target.vocab)
				rng := NewSplitMix(seed ^ uint64(fi+1)*0x9e3779b97f4a7c15)
				counts := make([]int, h.target.vocab*h.target.vocab)
				per := (perFamily + len(ss) - 1) / len(ss)
				for _, s := range ss {
					h.sample(s, a, b, per, r, rng, counts)
				}
				stat, df, p := chiSquare(counts, h.exact(a, b))
				out[fi] = familyResult{widths: ss[0].widths, shapes: len(ss), n: per * len(ss), stat: stat, df: df, p: p}
			}
		}()
	}
	for fi := range keys {
		next <- fi
	}
	close(next)
	wg.Wait()
	return out
}

// TestSamplingPreservesDistribution runs the real VerifySample over every
// tree shape the scheduler can produce up to depth 4 and width 3 (5,499
// shapes in 121 families of equal layer widths), on a vocabulary-5 target
// whose distribution depends on the last two tokens (with exact zeros), with
// trees drafted by a different toy model. Each family gets ≥100,000 samples
// of the first two emitted tokens (more iterations are run when one emits a
// single token), tested with a chi-square against the exact joint target
// distribution at a Bonferroni-corrected level. The same test must reject
// two wrong rules.
func TestSamplingPreservesDistribution(t *testing.T) {
	perFamily := 100_000
	if race.Enabled || testing.Short() {
		perFamily = 4_000 // the race detector makes sampling ~10× slower
	}
	h := &harness{target: newToy(5, 1, true), draft: newToy(5, 2, false)}
	for _, d := range h.target.dists {
		h.dists = append(h.dists, Dist{P: d})
	}
	shapes := enumerateShapes(4, 3)
	require.Len(t, shapes, 5499)

	const alpha = 1e-3 // family-wise error rate
	res := runFamilies(h, shapes, perFamily, VerifySample, 42)
	threshold := alpha / float64(len(res))
	minP, total := 1.0, 0
	for _, f := range res {
		total += f.n
		minP = min(minP, f.p)
		require.GreaterOrEqual(t, f.p, threshold, "family %v (%d shapes, %d samples): χ²=%.1f df=%d p=%.3g", f.widths, f.shapes, f.n, f.stat, f.df, f.p)
		require.GreaterOrEqual(t, f.n, perFamily)
	}
	t.Logf("VerifySample: %d families, %d samples, smallest p = %.3g (Bonferroni threshold %.3g)", len(res), total, minP, threshold)

	// The same test rejects deliberately wrong rules in every family that
	// has a draft node (the root-only family cannot tell: no candidates).
	for _, wrong := range []struct {
		name string
		r    rule
	}{{"always-accept", alwaysAccept}, {"no-renormalise", noRenormalise}} {
		res := runFamilies(h, shapes, perFamily, wrong.r, 43)
		rejected := 0
		var missed []string
		for _, f := range res {
			if len(f.widths) == 0 {
				continue
			}
			if f.p < threshold {
				rejected++
			} else {
				missed = append(missed, fmt.Sprintf("%v (χ²=%.1f df=%d p=%.3g)", f.widths, f.stat, f.df, f.p))
			}
		}
		t.Logf("%s: rejected in %d/%d families with draft nodes", wrong.name, rejected, len(res)-1)
		if perFamily >= 100_000 || wrong.name == "always-accept" {
			require.Empty(t, missed, "%s not rejected", wrong.name)
		} else {
			// With the reduced sample count of race builds the subtle rule
			// is only caught in most families.
			require.GreaterOrEqual(t, rejected, (len(res)-1)*3/4, "%s rejected too rarely; missed %v", wrong.name, missed)
		}
	}
}

// TestGreedyMatchesPlainGreedy decodes with VerifyGreedy over random trees
// (random shapes; tokens from the draft's favourites, the target's argmax or
// noise) and checks the output is token-identical to plain greedy decoding.
func TestGreedyMatchesPlainGreedy(t *testing.T) {
	target, draft := newToy(7, 3, true), newToy(7, 4, false)
	dist := func(a, b int32) Dist { return Dist{P: target.dists[target.ctx(a, b)]} }
	rng := NewSplitMix(5)
	for trial := range 200 {
		start := []int32{int32(trial % 7), int32(trial / 7 % 7)}
		// Plain greedy.
		want := append([]int32{}, start...)
		for len(want) < 60 {
			n := len(want)
			want = append(want, Argmax(dist(want[n-2], want[n-1])))
		}
		// Speculative greedy.
		got := append([]int32{}, start...)
		var res Result
		var tr Tree
		iters := 0
		for len(got) < 60 {
			iters++
			n := len(got)
			tr.Reset(got[n-1])
			ctx := [][2]int32{{got[n-2], got[n-1]}}
			for i := 0; i < tr.Len() && tr.Len() < 16; i++ {
				k := int(rng.Uint64() % 4)
				used := map[int32]bool{}
				for j := 0; j < k; j++ {
					var tok int32
					switch rng.Uint64() % 3 {
					case 0:
						tok = draft.order[draft.ctx(ctx[i][0], ctx[i][1])][j]
					case 1:
						tok = Argmax(dist(ctx[i][0], ctx[i][1]))
					default:
						tok = int32(rng.Uint64() % 7)
					}
					if used[tok] {
						continue
					}
					used[tok] = true
					tr.Add(i, tok, 0.5)
					ctx = append(ctx, [2]int32{ctx[i][1], tok})
				}
			}
			require.NoError(t, tr.Validate())
			VerifyGreedy(&tr, func(node int) Dist { return dist(ctx[node][0], ctx[node][1]) }, &res)
			require.Equal(t, 0, res.Path[0])
			require.Len(t, res.Tokens, len(res.Path))
			for i := 1; i < len(res.Path); i++ {
				require.Equal(t, res.Path[i-1], int(tr.Nodes[res.Path[i]].Parent))
				require.Equal(t, tr.Nodes[res.Path[i]].Token, res.Tokens[i-1])
			}
			got = append(got, res.Tokens...)
		}
		require.Equal(t, want, got[:60], "trial %d", trial)
		require.Less(t, iters, 58, "speculation accepted something")
	}
}

// TestSparseDistEquivalent: a sparse distribution verifies exactly like the
// dense one (same random stream, same output).
func TestSparseDistEquivalent(t *testing.T) {
	target := newToy(6, 9, true)
	rng := NewSplitMix(3)
	for range 500 {
		tr := randomTree(rng, 3, 3, true)
		for i := range tr.Nodes {
			tr.Nodes[i].Token %= 6
		}
		dense := func(node int) Dist { return Dist{P: target.dists[node%len(target.dists)]} }
		sparse := func(node int) Dist {
			var d Dist
			for id, p := range target.dists[node%len(target.dists)] {
				if p > 0 {
					d.IDs = append(d.IDs, int32(id))
					d.P = append(d.P, p)
				}
			}
			// Shuffle-free but reversed order: order must not matter.
			for a, b := 0, len(d.IDs)-1; a < b; a, b = a+1, b-1 {
				d.IDs[a], d.IDs[b] = d.IDs[b], d.IDs[a]
				d.P[a], d.P[b] = d.P[b], d.P[a]
			}
			return d
		}
		seed := rng.Uint64()
		var r1, r2 Result
		VerifyGreedy(tr, dense, &r1)
		VerifyGreedy(tr, sparse, &r2)
		require.Equal(t, r1.Tokens, r2.Tokens)
		VerifySample(tr, dense, NewSplitMix(seed), &r1)
		VerifySample(tr, sparse, NewSplitMix(seed), &r2)
		require.Equal(t, r1.Path, r2.Path)
		// The bonus may differ: the scan order differs. Its support may not.
		require.Greater(t, dense(r1.Path[len(r1.Path)-1]).Prob(r1.Bonus()), 0.0)
		require.Greater(t, sparse(r2.Path[len(r2.Path)-1]).Prob(r2.Bonus()), 0.0)
	}
}

// TestVerifySampleEdgeCases: children with zero probability are never
// accepted, duplicates are harmless, a certain child is always accepted, and
// the bonus never repeats a rejected sibling.
func TestVerifySampleEdgeCases(t *testing.T) {
	var tr Tree
	tr.Reset(0)
	tr.Add(0, 1, 1) // p = 0
	tr.Add(0, 2, 1) // p = 0.5
	tr.Add(0, 2, 1) // duplicate
	tr.Add(0, 3, 1) // p = 0.5
	p := Dist{P: []float32{0, 0, 0.5, 0.5}}
	rng := NewSplitMix(1)
	var res Result
	seen := map[int32]int{}
	for range 20000 {
		VerifySample(&tr, func(int) Dist { return p }, rng, &res)
		require.NotEqual(t, int32(1), res.Tokens[0])
		seen[res.Tokens[0]]++
		if res.Accepted() == 0 {
			t.Fatalf("with tokens 2 and 3 covering all the mass, one must be accepted")
		}
	}
	require.InDelta(t, 0.5, float64(seen[2])/20000, 0.02)
	// Certain child: p = δ3.
	q := Dist{IDs: []int32{3}, P: []float32{1}}
	VerifySample(&tr, func(n int) Dist { return q }, rng, &res)
	require.Equal(t, []int32{3, 3}, res.Tokens)
	require.Equal(t, []int{0, 4}, res.Path)
}
