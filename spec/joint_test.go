package spec

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/lmstream/lmstream/internal/race"
	"github.com/stretchr/testify/require"
)

// The joint-distribution tests of verification (issue 14, item 5).
//
// TestSamplingPreservesDistribution histograms the first two emitted tokens
// only, so a verifier that is wrong from depth 2 on passes it. Here every
// emitted position up to D = tree depth + 1 (the deepest accepted path plus
// its bonus token) is histogrammed jointly and compared with the exact
// target joint distribution, on a target whose next-token distribution
// depends on the whole prefix: an error at any depth changes the joint.

// ---- a prefix-dependent toy language model --------------------------------

// prefixModel's next-token distribution is a pseudo-random function of the
// whole context (a flat Dirichlet seeded by a hash of the tokens), so every
// position has its own conditional distribution.
type prefixModel struct {
	vocab int
	seed  uint64
	zeros float64 // chance that a token gets probability exactly 0
	ties  float64 // chance that the two most probable tokens tie exactly
	memo  map[string][]float32
}

func newPrefixModel(vocab int, seed uint64, zeros, ties float64) *prefixModel {
	return &prefixModel{vocab: vocab, seed: seed, zeros: zeros, ties: ties, memo: map[string][]float32{}}
}

func ctxKey(ctx []int32) string {
	b := make([]byte, len(ctx))
	for i, t := range ctx {
		b[i] = byte(t)
	}
	return string(b)
}

func (m *prefixModel) dist(ctx []int32) []float32 {
	k := ctxKey(ctx)
	if p, ok := m.memo[k]; ok {
		return p
	}
	h := NewSplitMix(m.seed)
	for _, t := range ctx {
		h = NewSplitMix(h.Uint64() ^ uint64(t+1)*0x9e3779b97f4a7c15)
	}
	rng := NewSplitMix(h.Uint64())
	w := make([]float64, m.vocab)
	nonzero := 0
	for i := range w {
		w[i] = -math.Log(1 - rng.Uniform()) // exponential: a flat Dirichlet
		if rng.Uniform() < m.zeros {
			w[i] = 0
		} else {
			nonzero++
		}
	}
	if nonzero == 0 {
		w[rng.Uint64()%uint64(m.vocab)] = 1
	}
	if rng.Uniform() < m.ties {
		// An exact tie between the two largest weights: greedy must break
		// it towards the lower id.
		a, b := -1, -1
		for i := range w {
			switch {
			case a < 0 || w[i] > w[a]:
				a, b = i, a
			case b < 0 || w[i] > w[b]:
				b = i
			}
		}
		if b >= 0 && w[b] > 0 {
			w[b] = w[a]
		}
	}
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	p := make([]float32, m.vocab)
	for i := range p {
		p[i] = float32(w[i] / sum)
	}
	m.memo[k] = p
	return p
}

// reversed proposes the target's least likely tokens first (zeros
// included): a draft whose distributions differ as much as they can from
// the target's.
func reversed(m *prefixModel) func([]int32) []float32 {
	return func(ctx []int32) []float32 {
		p := m.dist(ctx)
		q := make([]float32, len(p))
		sum := float32(0)
		for i, x := range p {
			q[i] = 1.05 - x
			sum += q[i]
		}
		for i := range q {
			q[i] /= sum
		}
		return q
	}
}

// fnDraft is a DraftModel over a distribution function of the full context,
// so that the package's real BeamDrafter builds the trees.
type fnDraft struct {
	vocab int
	f     func([]int32) []float32
}

func (d fnDraft) Vocab() int { return d.vocab }

func (d fnDraft) NextDistributions(qs []Query, out []float32) error {
	for i, q := range qs {
		ctx := append(append([]int32{}, q.Context...), q.Path...)
		copy(out[i*d.vocab:(i+1)*d.vocab], d.f(ctx))
	}
	return nil
}

// ---- tree builders ------------------------------------------------------------

// builder grows the draft tree for a context (the context's last token is
// the root). It must be a deterministic function of the context: the
// verifier's exactness argument treats the candidates as fixed.
type builder func(ctx []int32, tr *Tree)

// beamBuilder drafts with BeamDrafter: Shape.Branch gives a fixed tree,
// Depth and Width a beam, whose shape then depends on the context.
func beamBuilder(d fnDraft, shape Shape) builder {
	bd := &BeamDrafter{Model: d}
	return func(ctx []int32, tr *Tree) {
		seq := &Seq{Tokens: ctx}
		if err := bd.Draft([]*Seq{seq}, shape, []*Tree{tr}); err != nil {
			panic(err)
		}
	}
}

// handBuilder builds a fixed irregular shape, kids[i] being the number of
// children of node i in breadth-first order; a node's children are the
// draft's most probable tokens after its path, except that dup lists node
// indices whose last child repeats its first sibling's token (a duplicate
// sibling, which verification must treat as already rejected).
func handBuilder(f func([]int32) []float32, kids []int, dup map[int]bool) builder {
	return func(ctx []int32, tr *Tree) {
		tr.Reset(ctx[len(ctx)-1])
		paths := [][]int32{ctx}
		for i := 0; i < len(kids) && i < tr.Len(); i++ {
			q := f(paths[i])
			order := make([]int32, len(q))
			for j := range order {
				order[j] = int32(j)
			}
			// by descending draft probability, ties to the lower id
			for a := 1; a < len(order); a++ {
				for b := a; b > 0 && q[order[b]] > q[order[b-1]]; b-- {
					order[b], order[b-1] = order[b-1], order[b]
				}
			}
			for j := range kids[i] {
				tok := order[j]
				if dup[i] && j == kids[i]-1 && j > 0 {
					tok = order[0]
				}
				tr.Add(i, tok, 0.5)
				paths = append(paths, append(append([]int32{}, paths[i]...), tok))
			}
		}
	}
}

// ---- the cases ------------------------------------------------------------------

// jointCase is one target, one drafter and one tree shape. D is the tree
// depth + 1: the most tokens one verification can emit.
type jointCase struct {
	name   string
	vocab  int
	start  []int32 // the context before the first emitted token
	D      int
	target *prefixModel
	draft  func([]int32) []float32
	build  builder
	// The negative controls that must be rejected on this case. A control
	// a case cannot show is left out: first-child-deepK needs depth ≥ K,
	// the others a draft node, draft-bonus a draft unlike the target.
	mustCatch []string
}

func jointCases() []jointCase {
	const v = 4
	var cases []jointCase
	// zeros: the share of exact zeros in the target's rows. A control that
	// emits an impossible token is rejected outright (χ² = +Inf); the cases
	// without zeros show by how much the wrong rules move the mass.
	add := func(name string, vocab int, start []int32, depth int, seed uint64, zeros float64,
		draft func(*prefixModel) func([]int32) []float32, build func(f func([]int32) []float32) builder, catch ...string) {
		tg := newPrefixModel(vocab, seed, zeros, 0.1)
		f := draft(tg)
		cases = append(cases, jointCase{name: name, vocab: vocab, start: start, D: depth + 1, target: tg, draft: f,
			build: build(f), mustCatch: catch})
	}
	other := func(seed uint64) func(*prefixModel) func([]int32) []float32 {
		return func(tg *prefixModel) func([]int32) []float32 {
			return newPrefixModel(tg.vocab, seed, 0, 0).dist
		}
	}
	same := func(tg *prefixModel) func([]int32) []float32 { return tg.dist }
	rev := func(tg *prefixModel) func([]int32) []float32 { return reversed(tg) }
	beam := func(vocab int, s Shape) func(f func([]int32) []float32) builder {
		return func(f func([]int32) []float32) builder { return beamBuilder(fnDraft{vocab, f}, s) }
	}
	hand := func(kids []int, dup map[int]bool) func(f func([]int32) []float32) builder {
		return func(f func([]int32) []float32) builder { return handBuilder(f, kids, dup) }
	}
	all := []string{"first-child-deep2", "first-child-deep3", "no-residual", "draft-bonus", "always-accept", "no-renormalise"}
	allBut := func(skip ...string) []string {
		var out []string
		for _, c := range all {
			if !slices.Contains(skip, c) {
				out = append(out, c)
			}
		}
		return out
	}

	add("root-only", v, []int32{1, 2}, 0, 11, 0, other(101), beam(v, Shape{}), "draft-bonus")
	add("chain-3/other-draft", v, []int32{0, 3}, 3, 12, 0, other(102), beam(v, Shape{Branch: []int{1, 1, 1}}), all...)
	// draft = target: the draft's bonus is the target's, so draft-bonus is
	// correct here; this is the case where depths 2–4 are reached most.
	add("chain-4/same-draft/V3", 3, []int32{2, 1}, 4, 13, 0.15, same, beam(3, Shape{Branch: []int{1, 1, 1, 1}}), allBut("draft-bonus")...)
	add("binary-2-2-2/other-draft", v, []int32{3, 3}, 3, 14, 0, other(104), beam(v, Shape{Branch: []int{2, 2, 2}}), all...)
	add("beam-d3-w2/other-draft", v, []int32{1, 0}, 3, 15, 0.15, other(105), beam(v, Shape{Depth: 3, Width: 2}), all...)
	add("wide-3-1-1/reversed-draft", v, []int32{0, 0}, 3, 16, 0.15, rev, beam(v, Shape{Branch: []int{3, 1, 1}}), all...)
	// Every token is a child at depths 1 and 2: one is always accepted
	// there (what remains after rejecting the others is the last child's).
	add("full-4-4-1/other-draft", v, []int32{2, 3}, 3, 17, 0, other(107), beam(v, Shape{Branch: []int{4, 4, 1}}), all...)
	// root: 3 children, the last (node 3) duplicating the first; node 1:
	// 2 children, node 2: none, node 3: 1 (unreachable: a duplicate is
	// never accepted); node 4: 1 child, at depth 3.
	add("irregular+dup/other-draft", v, []int32{3, 1}, 3, 18, 0, other(108),
		hand([]int{3, 2, 0, 1, 1, 0, 0}, map[int]bool{0: true}), all...)
	return cases
}

// ---- the harness ------------------------------------------------------------------

// jointRule is a verifier under test; draft gives the drafter's
// distribution at a node (only the draft-bonus control uses it).
type jointRule func(t *Tree, target, draft Targets, rng Source, res *Result)

// The negative controls: wrappers of VerifySample that each break one part
// of the rule, and the two wrong rules of TestSamplingPreservesDistribution.
var negativeControls = []struct {
	name string
	rule jointRule
}{
	// first-child-deep2: exact at the root's children, but always
	// accepts the first child at depth ≥ 2 (its parent sees a point mass on
	// it): the second emitted token onwards is wrong.
	{"first-child-deep2", firstChildFrom(2)},
	// first-child-deep3: the same from depth 3 on. The first two emitted
	// tokens are exact, so TestSamplingPreservesDistribution cannot see it
	// (TestSamplingJointDistribution checks that the two-token marginal
	// passes while the joint fails).
	{"first-child-deep3", firstChildFrom(3)},
	// no-residual: when every child of the last node was rejected, the
	// bonus is sampled from the full target distribution instead of the
	// residual (the rejected tokens are not removed).
	{"no-residual", func(t *Tree, target, _ Targets, rng Source, res *Result) {
		VerifySample(t, target, rng, res)
		if last := res.Path[len(res.Path)-1]; t.Nodes[last].Children > 0 {
			res.Tokens[len(res.Tokens)-1] = sampleExcluding(target(last), nil, 1, rng.Uniform())
		}
	}},
	// draft-bonus: the bonus token comes from the draft's distribution at
	// the last node (without the rejected children) instead of the
	// target's.
	{"draft-bonus", func(t *Tree, target, draft Targets, rng Source, res *Result) {
		VerifySample(t, target, rng, res)
		last := res.Path[len(res.Path)-1]
		q, n := draft(last), t.Nodes[last]
		var rejected []int32
		mass := 1.0
		for c := n.FirstChild; c < n.FirstChild+n.Children; c++ {
			if x := t.Nodes[c].Token; !contains(rejected, x) {
				rejected = append(rejected, x)
				mass -= q.Prob(x)
			}
		}
		res.Tokens[len(res.Tokens)-1] = sampleExcluding(q, rejected, max(mass, 0), rng.Uniform())
	}},
	{"always-accept", func(t *Tree, target, _ Targets, rng Source, res *Result) { alwaysAccept(t, target, rng, res) }},
	{"no-renormalise", func(t *Tree, target, _ Targets, rng Source, res *Result) { noRenormalise(t, target, rng, res) }},
}

// firstChildFrom is VerifySample except that a child at depth ≥ depth is
// always accepted when it comes first among its siblings.
func firstChildFrom(depth int32) jointRule {
	return func(t *Tree, target, _ Targets, rng Source, res *Result) {
		VerifySample(t, func(node int) Dist {
			n := t.Nodes[node]
			if n.Depth+1 >= depth && n.Children > 0 {
				return Dist{IDs: []int32{t.Nodes[n.FirstChild].Token}, P: []float32{1}}
			}
			return target(node)
		}, rng, res)
	}
}

// prepared is a case's tree at one context, with the target's and the
// draft's distribution at every node.
type prepared struct {
	tree          Tree
	target, draft []Dist
}

type jointRun struct {
	c     *jointCase
	trees []*prepared // by prefixIndex of the emitted tokens
}

// prefixIndex numbers the emitted prefixes of length < D: tokens as digits
// 1..V in base V+1.
func (r *jointRun) prefixIndex(emitted []int32) int {
	k := 0
	for _, t := range emitted {
		k = k*(r.c.vocab+1) + int(t) + 1
	}
	return k
}

func newJointRun(c *jointCase) *jointRun {
	n := 1
	for range c.D {
		n *= c.vocab + 1
	}
	return &jointRun{c: c, trees: make([]*prepared, n)}
}

// at is the prepared tree after the start context and emitted.
func (r *jointRun) at(emitted []int32) *prepared {
	k := r.prefixIndex(emitted)
	if p := r.trees[k]; p != nil {
		return p
	}
	p := &prepared{}
	ctx := append(append([]int32{}, r.c.start...), emitted...)
	r.c.build(ctx, &p.tree)
	if err := p.tree.Validate(); err != nil {
		panic(err)
	}
	if p.tree.Depth() >= r.c.D {
		panic(fmt.Sprintf("%s: tree of depth %d for D = %d", r.c.name, p.tree.Depth(), r.c.D))
	}
	for i := range p.tree.Nodes {
		path := ctx
		for _, j := range p.tree.AppendAncestors(nil, i)[1:] {
			path = append(path[:len(path):len(path)], p.tree.Nodes[j].Token)
		}
		p.target = append(p.target, Dist{P: r.c.target.dist(path)})
		p.draft = append(p.draft, Dist{P: r.c.draft(path)})
	}
	r.trees[k] = p
	return p
}

// depthStats counts verifications by how many draft tokens they accepted.
type depthStats struct{ verifications, deep int } // deep: accepted ≥ 2

// sample draws n sequences of D emitted tokens, verifying as many trees as
// each needs, and counts them by their base-V index.
func (r *jointRun) sample(rule jointRule, n int, seed uint64) ([]int, depthStats) {
	D, V := r.c.D, r.c.vocab
	cells := 1
	for range D {
		cells *= V
	}
	counts := make([]int, cells)
	rng := NewSplitMix(seed)
	var res Result
	var st depthStats
	emitted := make([]int32, 0, 2*D)
	for range n {
		emitted = emitted[:0]
		for len(emitted) < D {
			p := r.at(emitted)
			rule(&p.tree, func(node int) Dist { return p.target[node] }, func(node int) Dist { return p.draft[node] }, rng, &res)
			emitted = append(emitted, res.Tokens...)
			st.verifications++
			if res.Accepted() >= 2 {
				st.deep++
			}
		}
		cell := 0
		for _, t := range emitted[:D] {
			cell = cell*V + int(t)
		}
		counts[cell]++
	}
	return counts, st
}

// exact is the target's joint distribution of the next D tokens, by base-V
// index: the product of the conditionals along each sequence.
func (r *jointRun) exact() []float64 {
	D, V := r.c.D, r.c.vocab
	var out []float64
	var rec func(ctx []int32, prob float64, depth int)
	rec = func(ctx []int32, prob float64, depth int) {
		if depth == D {
			out = append(out, prob)
			return
		}
		p := r.c.target.dist(ctx)
		for t := range V {
			rec(append(ctx[:len(ctx):len(ctx)], int32(t)), prob*float64(p[t]), depth+1)
		}
	}
	rec(r.c.start, 1, 0)
	sum := 0.0
	for _, x := range out {
		sum += x
	}
	for i := range out {
		out[i] /= sum // the float32 rows sum to 1 only up to rounding
	}
	return out
}

// checked wraps the real verifier with the invariants every result must
// hold: the path is a root-first chain of the tree, the tokens are its
// tokens plus one bonus, and nothing the target rules out is emitted.
func checked(t *testing.T) jointRule {
	return func(tr *Tree, target, draft Targets, rng Source, res *Result) {
		VerifySample(tr, target, rng, res)
		if len(res.Tokens) != len(res.Path) || res.Path[0] != 0 {
			t.Fatalf("path %v, tokens %v", res.Path, res.Tokens)
		}
		for i := 1; i < len(res.Path); i++ {
			n := tr.Nodes[res.Path[i]]
			if int(n.Parent) != res.Path[i-1] || n.Token != res.Tokens[i-1] {
				t.Fatalf("path %v, tokens %v: not a chain of the tree", res.Path, res.Tokens)
			}
		}
		for i, tok := range res.Tokens {
			if target(res.Path[i]).Prob(tok) <= 0 {
				t.Fatalf("emitted token %d of probability 0 (path %v, tokens %v)", tok, res.Path, res.Tokens)
			}
		}
	}
}

// TestSamplingJointDistribution checks that VerifySample leaves the joint
// distribution of the next D emitted tokens (D = tree depth + 1, every
// position one verification can emit) exactly the target's, on every case
// of jointCases: a chain with an unrelated draft, a chain drafted by the
// target itself (the deepest acceptances), fixed branching trees, a beam
// whose shape depends on the context, a draft that proposes the target's
// least likely tokens (zeros included), trees that hold every token, and a
// hand-built irregular tree with a duplicate sibling. Targets have exact
// zeros and ties. Each draw verifies trees until D tokens are out (a
// verification that emits fewer continues at the new context with a new
// tree), and the histogram of the V^D sequences is compared with the exact
// joint by a chi-square test.
//
// Significance: a case fails at p < 1e-4. The seeds are fixed, so the
// outcome is deterministic; the level bounds the chance that a correct
// verifier fails after someone changes a seed or a case (≤ 8 cases ×
// 1e-4 < 1e-3 over the whole test). The same test must reject every
// negative control on every case that can show it (jointCase.mustCatch),
// at the same level: otherwise it would not be testing anything.
func TestSamplingJointDistribution(t *testing.T) {
	n := 50_000
	if race.Enabled || testing.Short() {
		n = 10_000 // the race detector makes sampling ~10× slower
	}
	const alpha = 1e-4
	for ci, c := range jointCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newJointRun(&c)
			probs := r.exact()
			seed := uint64(ci+1) * 0x9e3779b97f4a7c15
			counts, st := r.sample(checked(t), n, seed)
			stat, df, p := chiSquare(counts, probs)
			t.Logf("%s: VerifySample      D=%d n=%d: χ²=%8.1f df=%3d p=%.3g (%d verifications, %.1f%% accepted ≥ 2 drafts)",
				c.name, c.D, n, stat, df, p, st.verifications, 100*float64(st.deep)/float64(st.verifications))
			require.GreaterOrEqual(t, p, alpha, "VerifySample: χ²=%.1f df=%d p=%.3g", stat, df, p)
			for k, nc := range negativeControls {
				counts, _ := r.sample(nc.rule, n, seed^uint64(k+1))
				stat, df, p := chiSquare(counts, probs)
				must := slices.Contains(c.mustCatch, nc.name)
				t.Logf("%s: %-17s D=%d n=%d: χ²=%8.1f df=%3d p=%.3g (must fail: %v)", c.name, nc.name, c.D, n, stat, df, p, must)
				if must {
					require.Less(t, p, alpha, "negative control %s not rejected: χ²=%.1f df=%d p=%.3g", nc.name, stat, df, p)
				}
				if must && nc.name == "first-child-deep3" {
					// Its first two tokens are exact: a two-token test passes.
					stat, df, p := chiSquare(marginal(counts, c.vocab, c.D, 2), marginalF(probs, c.vocab, c.D, 2))
					t.Logf("%s: %-17s first two tokens only: χ²=%8.1f df=%3d p=%.3g", c.name, nc.name, stat, df, p)
					require.GreaterOrEqual(t, p, alpha, "the two-token marginal of %s is exact", nc.name)
				}
			}
		})
	}
}

// marginal sums base-V counts of D positions over all but the first k.
func marginal(counts []int, vocab, D, k int) []int {
	div := 1
	for range D - k {
		div *= vocab
	}
	out := make([]int, len(counts)/div)
	for i, c := range counts {
		out[i/div] += c
	}
	return out
}

func marginalF(probs []float64, vocab, D, k int) []float64 {
	div := 1
	for range D - k {
		div *= vocab
	}
	out := make([]float64, len(probs)/div)
	for i, p := range probs {
		out[i/div] += p
	}
	return out
}

// argmaxLowest is the most probable token, ties to the lowest id: plain
// greedy decoding's choice, computed independently of Argmax.
func argmaxLowest(p []float32) int32 {
	best := 0
	for i := range p {
		if p[i] > p[best] {
			best = i
		}
	}
	return int32(best)
}

// TestGreedyJointArgmaxChain runs VerifyGreedy on every case's tree at
// every context reachable within D tokens of the start, and checks that the
// emitted tokens are the target's argmax chain through the tree: each token
// is the argmax after the tokens before it, the accepted ones are a chain of
// the tree, and the walk stops only where no child holds the argmax (it
// accepts as much as the tree allows). Decoding D tokens from the start then
// equals plain greedy decoding. Targets have exact ties (broken towards the
// lower id).
func TestGreedyJointArgmaxChain(t *testing.T) {
	totalTies := 0
	for _, c := range jointCases() {
		r := newJointRun(&c)
		var res Result
		deep := 0 // verifications that accepted at depth ≥ 2
		ties := 0 // tokens chosen from an exact tie
		var visit func(emitted []int32)
		visit = func(emitted []int32) {
			if len(emitted) == c.D {
				return
			}
			p := r.at(emitted)
			VerifyGreedy(&p.tree, func(node int) Dist { return p.target[node] }, &res)
			require.Len(t, res.Tokens, len(res.Path), "%s %v", c.name, emitted)
			require.Equal(t, 0, res.Path[0])
			for i, tok := range res.Tokens {
				node := res.Path[i]
				row := p.target[node].P
				require.Equal(t, argmaxLowest(row), tok, "%s after %v: token %d is not the argmax", c.name, emitted, i)
				for j := int(tok) + 1; j < len(row); j++ {
					if row[j] == row[tok] {
						ties++
						break
					}
				}
				if i+1 < len(res.Path) {
					child := p.tree.Nodes[res.Path[i+1]]
					require.Equal(t, node, int(child.Parent), "%s after %v", c.name, emitted)
					require.Equal(t, tok, child.Token, "%s after %v", c.name, emitted)
				}
			}
			last := res.Path[len(res.Path)-1]
			require.Equal(t, -1, p.tree.Child(last, res.Bonus()), "%s after %v: stopped before a child holding the argmax", c.name, emitted)
			if res.Accepted() >= 2 {
				deep++
			}
			if c.name == "chain-4/same-draft/V3" {
				require.Equal(t, 4, res.Accepted(), "a draft equal to the target is accepted to the end")
			}
			for tok := range c.vocab {
				visit(append(emitted[:len(emitted):len(emitted)], int32(tok)))
			}
		}
		visit(nil)

		// Decode D tokens from the start, as the engine would.
		want := append([]int32{}, c.start...)
		for len(want) < len(c.start)+c.D {
			want = append(want, argmaxLowest(c.target.dist(want)))
		}
		var got []int32
		for len(got) < c.D {
			p := r.at(got)
			VerifyGreedy(&p.tree, func(node int) Dist { return p.target[node] }, &res)
			got = append(got, res.Tokens...)
		}
		require.Equal(t, want[len(c.start):], got[:c.D], c.name)
		t.Logf("%s: %d verifications accepted at depth ≥ 2, %d tokens chosen from a tie", c.name, deep, ties)
		totalTies += ties
	}
	require.Positive(t, totalTies, "the targets' ties are exercised")
}
