package spec

import (
	"math"
	"slices"
	"time"
)

// Policy picks how the verification budget is spent.
type Policy int

const (
	// AdaServe: SLO-customized selection, then throughput-optimized
	// selection (the default).
	AdaServe Policy = iota
	// Incremental: no speculation; every tree is its root.
	Incremental
	// SpecInfer: a fixed tree shape for every request whatever the load
	// (Config.Branch, by default ⟨1,1,3,1,1,1,1,1⟩); ignores the budget.
	SpecInfer
	// EqualGreedy: the budget split equally between requests, each filling
	// its share greedily by path probability.
	EqualGreedy
	// GlobalGreedy: the top B−n nodes by path probability across all
	// requests (AdaServe without its SLO phase).
	GlobalGreedy
)

func (p Policy) String() string {
	switch p {
	case AdaServe:
		return "adaserve"
	case Incremental:
		return "incremental"
	case SpecInfer:
		return "specinfer"
	case EqualGreedy:
		return "equal-greedy"
	case GlobalGreedy:
		return "global-greedy"
	}
	return "unknown"
}

// Order is the order in which the SLO phase serves requests.
type Order int

const (
	// Descending serves the largest A(r) first — the furthest behind its
	// SLO — as the paper does.
	Descending Order = iota
	// Ascending serves the smallest A(r) first, as the public
	// implementation does (the cheapest SLOs first, so that a budget too
	// small for everyone satisfies as many requests as it can).
	Ascending
)

// DefaultBranch is SpecInfer's static tree: branching factor per depth.
var DefaultBranch = []int{1, 1, 3, 1, 1, 1, 1, 1}

// Config configures speculation scheduling.
type Config struct {
	Policy Policy
	// Budget is B: tokens per verification pass, roots included (each
	// request's root always takes one). Find it with Calibrate.
	Budget int
	// MaxDepth and MaxWidth are D_max and W_max (0: DefaultMaxDepth and
	// DefaultMaxWidth).
	MaxDepth, MaxWidth int
	// NMax caps the draft nodes one request may take in the SLO phase, so
	// that a request whose target needs many improbable nodes cannot
	// drain the budget. 0 means ⌊1.2·B/n⌋ (as the public implementation).
	NMax int
	// Order of the SLO phase.
	Order Order
	// ExcludeRoot stops counting the root's certain token toward A(r).
	// The paper's Algorithm 2 counts it (n_acc starts at 1, and A is capped
	// at d+1, the root plus d accepted nodes); its Figure 5 does not
	// (A = 0.6 still takes a node). With ExcludeRoot the cap is d.
	ExcludeRoot bool
	// Branch is SpecInfer's tree (default DefaultBranch).
	Branch []int
	// MinProb, when positive, stops both phases (and the greedy baselines)
	// at nodes whose path probability is below it: where a verified token
	// costs a sizeable share of a forward pass (a CPU is compute-bound past
	// a few tokens), a node expected to yield less than that share slows
	// decoding down, budget or not. That holds in the SLO phase too: such
	// a node makes the request it is taken for slower per expected token,
	// and every other request of the pass slower. (On the real engine
	// with SmolLM2 and the n-gram drafter, an SLO phase without the floor
	// verified 3.3 nodes per decode at 10% acceptance against GlobalGreedy's
	// 1.9 at 26%, and its slower passes queued requests: 32% SLO
	// attainment at half the capacity, against 92%.) The engine prices it
	// from its cost curve; on a flat (GPU-like) curve it is small.
	MinProb float64
	// Floor, when set, raises MinProb for the nodes of a larger pass:
	// Floor[b] is the least path probability of the node that makes the
	// pass b tokens, roots included (its last entry serves every larger
	// pass). A CPU's pass grows dearer per token past the few tokens its
	// weight stream hides (on a 2-core EPYC, the 1.5B's T(8) 29 ms, T(16)
	// 54, T(24) 80), and MinProb, priced on the first few extra tokens,
	// let an n-gram index put 20-node trees at 7% acceptance in passes of
	// 26 tokens that took 91 ms where a plain pass took 25 (Floors).
	Floor []float64
}

// floor is the least path probability of the node that makes the pass
// size tokens.
func (c *Config) floor(size int) float64 {
	f := c.MinProb
	if len(c.Floor) > 0 {
		f = max(f, c.Floor[min(max(size, 0), len(c.Floor)-1)])
	}
	return f
}

// DefaultMaxDepth and DefaultMaxWidth are D_max and W_max when Config
// leaves them 0, and the runtimes' defaults too ("spec_max_depth",
// "spec_max_width"). Width 2: a third candidate per layer was rarely
// accepted on the n-gram and draft-model benchmarks while its verify cost
// is that of any token, and the spine drafter's side leaves come from the
// same distribution as the second.
const (
	DefaultMaxDepth = 8
	DefaultMaxWidth = 2
)

func (c *Config) maxDepth() int {
	if c.MaxDepth > 0 {
		return c.MaxDepth
	}
	return DefaultMaxDepth
}

func (c *Config) maxWidth() int {
	if c.MaxWidth > 0 {
		return c.MaxWidth
	}
	return DefaultMaxWidth
}

// Shape is the candidate tree to draft with n active requests:
// d = max(1, min(D_max, ⌈B/n⌉)) and w = max(1, min(W_max, ⌊B/n⌋)). With few
// requests each can afford a deep, wide tree; with many, the per-request
// share B/n shrinks and so does the drafting work, which would otherwise be
// wasted on nodes the selection cannot afford. Incremental drafts nothing;
// SpecInfer drafts its fixed tree.
func (c *Config) Shape(n int) Shape {
	switch {
	case n <= 0 || c.Policy == Incremental:
		return Shape{}
	case c.Policy == SpecInfer:
		b := c.Branch
		if b == nil {
			b = DefaultBranch
		}
		return Shape{Branch: b, Depth: len(b)}
	}
	per := float64(c.Budget) / float64(n)
	d := max(1, min(c.maxDepth(), int(math.Ceil(per))))
	w := max(1, min(c.maxWidth(), int(math.Floor(per))))
	return Shape{Depth: d, Width: w}
}

// Target is A(r) = (l + t_spec)/SLO − o: how many tokens the request must
// get from this iteration for its average time per output token, after the
// iteration, to be within its SLO. l is the time since its first token,
// t_spec this iteration's estimated duration, o the tokens generated after
// the first (Seq.AfterFirst): the TPOT the SLO is measured by spreads the
// time from the first token to the last over the tokens after the first, so
// (l + t_spec)/(o + A) = SLO exactly at the threshold. It is negative when
// the request is ahead of its SLO.
func Target(l, tspec, slo time.Duration, o int) float64 {
	return float64(l+tspec)/float64(slo) - float64(o)
}

// Candidate is one request's input to the selection.
type Candidate struct {
	Tree *Tree // the candidate tree from the drafter (root-only when not speculating)
	// Target is A(r) (uncapped; see Target). Ignored when BestEffort.
	Target float64
	// BestEffort requests have no SLO: they only take part in the
	// throughput phase.
	BestEffort bool
}

// item is a selectable node: its parent is selected, it is not.
type item struct {
	prob float64
	req  int32
	node int32
}

func (a item) before(b item) bool {
	if a.prob != b.prob {
		return a.prob > b.prob
	}
	if a.req != b.req {
		return a.req < b.req
	}
	return a.node < b.node
}

// heap is a max-heap of items by probability (ties: lower request, then
// lower node, which keeps every choice deterministic).
type heap []item

func (h *heap) push(x item) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *heap) pop() item {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].before(s[m]) {
			m = l
		}
		if r < len(s) && s[r].before(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// Selector runs the selection; it keeps its scratch between calls, so a
// warmed-up Select allocates nothing. Not safe for concurrent use.
type Selector struct {
	keep  [][]int
	h     heap
	left  heap
	order []int
	acc   []float64
	bound bool
	size  int // tokens in the pass so far, roots included
}

// Bound reports whether the last Select left out, for want of budget (or
// of EqualGreedy's quota), a node it would otherwise have verified: one at
// or above MinProb. In a selection that was not bound, AdaServe, EqualGreedy
// and GlobalGreedy all verify every candidate worth it, so their trees
// differ only in the iterations the budget binds (AdaServe's Guard and its
// SLO-sized prefill chunk act around the selection, not in it).
func (s *Selector) Bound() bool { return s.bound }

// Select picks, for every candidate, the nodes to verify: ascending node
// indices starting with the root, ancestor-closed (a node is only selected
// after its parent). depth is the drafting depth d (for the cap on A). The
// result is owned by the Selector until the next call.
//
// AdaServe's selection, the heart of the package:
//
// The expected number of tokens a tree yields is the sum of its nodes' path
// probabilities f(v) (the root's is 1: its bonus token is certain), so a
// request's TPOT constraint becomes Σ f(v) ≥ A(r) and the total
// Σ over all selected nodes is what throughput maximises, under the budget
// Σ |T_i| ≤ B. Because f never increases from a parent to a child, taking
// nodes in descending f order is both ancestor-closed and optimal: for a
// threshold, the greedy prefix reaches it with the fewest nodes; for a node
// count, it has the largest sum. Hence two phases:
//
//  1. SLO-customized: each request with an SLO, in Order of A(r), takes its
//     own most probable remaining nodes until its expected tokens reach
//     A_cap(r) = min(A(r), d+1) — no tree of depth d can yield more than d+1
//     tokens, so a request that far behind gets the best this iteration can
//     do — or it has taken NMax nodes, or the budget is spent, or its next
//     node is below MinProb (one that costs more than it yields).
//  2. Throughput-optimized: the rest of the budget goes to the most
//     probable remaining nodes of all requests together.
//
// "Most probable remaining" is computed with a priority queue over the
// frontier (unselected children of selected nodes), so the result stays
// ancestor-closed even when a drafter's probabilities are not monotone.
func (s *Selector) Select(cfg *Config, depth int, reqs []Candidate) [][]int {
	n := len(reqs)
	for len(s.keep) < n {
		s.keep = append(s.keep, nil)
	}
	keep := s.keep[:n]
	for i := range keep {
		keep[i] = append(keep[i][:0], 0)
	}
	s.bound = false
	s.size = n
	if n == 0 {
		return keep
	}
	budget := max(0, cfg.Budget-n) // every root takes one slot
	switch cfg.Policy {
	case Incremental:
		return keep
	case SpecInfer:
		for i, r := range reqs {
			for v := 1; v < r.Tree.Len(); v++ {
				keep[i] = append(keep[i], v)
			}
		}
		return keep
	case EqualGreedy:
		quota := cfg.Budget/n - 1
		for i := range reqs {
			s.h = s.h[:0]
			s.pushChildren(reqs, i, 0)
			for q := 0; q < quota && len(s.h) > 0 && s.h[0].prob >= cfg.floor(s.size+1); q++ {
				s.take(reqs, keep, s.h.pop())
			}
			s.bound = s.bound || s.worth(cfg)
		}
		return s.sorted(keep)
	case GlobalGreedy:
		s.h = s.h[:0]
		for i := range reqs {
			s.pushChildren(reqs, i, 0)
		}
		s.fill(reqs, keep, budget, cfg)
		return s.sorted(keep)
	}

	// AdaServe. Phase 1: SLO-customized selection.
	nmax := cfg.NMax
	if nmax <= 0 {
		nmax = int(1.2 * float64(cfg.Budget) / float64(n))
	}
	s.order = s.order[:0]
	s.acc = s.acc[:0]
	s.left = s.left[:0]
	for i, r := range reqs {
		if cfg.ExcludeRoot {
			s.acc = append(s.acc, 0)
		} else {
			s.acc = append(s.acc, 1) // the root's token is certain
		}
		if r.BestEffort || math.IsNaN(r.Target) {
			s.pushChildrenTo(&s.left, reqs, i, 0)
			continue
		}
		s.order = append(s.order, i)
	}
	slices.SortStableFunc(s.order, func(a, b int) int {
		ta, tb := reqs[a].Target, reqs[b].Target
		if cfg.Order == Ascending {
			ta, tb = tb, ta
		}
		switch {
		case ta > tb:
			return -1
		case ta < tb:
			return 1
		}
		return 0
	})
	for _, i := range s.order {
		target := reqs[i].Target
		if cfg.ExcludeRoot {
			target = min(target, float64(depth))
		} else {
			target = min(target, float64(depth+1))
		}
		s.h = s.h[:0]
		s.pushChildren(reqs, i, 0)
		for taken := 0; s.acc[i] < target && taken < nmax && budget > 0 && len(s.h) > 0 && s.h[0].prob >= cfg.floor(s.size+1); taken++ {
			it := s.h.pop()
			s.take(reqs, keep, it)
			s.acc[i] += it.prob
			budget--
		}
		s.left = append(s.left, s.h...)
	}
	// Phase 2: throughput-optimized selection over what is left.
	s.h = s.h[:0]
	for _, it := range s.left {
		s.h.push(it)
	}
	s.fill(reqs, keep, budget, cfg)
	return s.sorted(keep)
}

// Expected is Σ f(v) over the selected nodes of one request: the expected
// number of tokens its verification yields (bonus token included).
func Expected(t *Tree, keep []int) float64 {
	e := 0.0
	for _, v := range keep {
		e += t.Nodes[v].Prob
	}
	return e
}

func (s *Selector) pushChildren(reqs []Candidate, i, v int) { s.pushChildrenTo(&s.h, reqs, i, v) }

func (s *Selector) pushChildrenTo(h *heap, reqs []Candidate, i, v int) {
	t := reqs[i].Tree
	nd := t.Nodes[v]
	for c := nd.FirstChild; c < nd.FirstChild+nd.Children; c++ {
		h.push(item{prob: t.Nodes[c].Prob, req: int32(i), node: c})
	}
}

// take selects a node and makes its children selectable.
func (s *Selector) take(reqs []Candidate, keep [][]int, it item) {
	keep[it.req] = append(keep[it.req], int(it.node))
	s.size++
	s.pushChildren(reqs, int(it.req), int(it.node))
}

func (s *Selector) fill(reqs []Candidate, keep [][]int, budget int, cfg *Config) {
	for ; budget > 0 && len(s.h) > 0 && s.h[0].prob >= cfg.floor(s.size+1); budget-- {
		s.take(reqs, keep, s.h.pop())
	}
	s.bound = s.worth(cfg)
}

// worth says whether the frontier still holds a node worth verifying in
// the next slot of the pass.
func (s *Selector) worth(cfg *Config) bool {
	return len(s.h) > 0 && s.h[0].prob >= cfg.floor(s.size+1)
}

func (s *Selector) sorted(keep [][]int) [][]int {
	for _, k := range keep {
		slices.Sort(k)
	}
	return keep
}
