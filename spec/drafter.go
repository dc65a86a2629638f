package spec

import (
	"fmt"
	"slices"
	"time"
)

// Seq is what speculation needs to know about one running request.
type Seq struct {
	// Tokens is the prompt followed by every generated token. The last one
	// is the root of the next tree: emitted, but not yet in the KV cache.
	Tokens []int32
	// Prompt is how many of Tokens are the prompt.
	Prompt int
	// SLO is the request's time-per-output-token objective; 0 means best
	// effort (the request only takes part in the throughput phase).
	SLO time.Duration
	// Start is when the request's first token was emitted: the origin of
	// the latency l in A(r) (whose o counts the tokens after it:
	// AfterFirst).
	Start time.Time
	// NoSpec turns speculation off for this request: it is never drafted
	// for and its tree is its root alone (plain decoding).
	NoSpec bool
	// MaxDepth, when positive, caps the depth of the request's tree, and
	// MaxNodes, when positive, its node count (root included): the room
	// left in its KV cache, or the tokens max_tokens still allows. Plan
	// prunes the candidate tree to them (breadth-first, so what stays is
	// ancestor-closed) before the selection spends budget on it.
	MaxDepth, MaxNodes int
	// Payoff gates the request's speculation on what it measurably gains
	// (the runtime reports each iteration to it).
	Payoff Payoff
	// DraftState belongs to the Drafter (an n-gram index, a draft model's
	// cache); the runtime only keeps it alive with the Seq.
	DraftState any
}

// Generated is the number of tokens generated so far, the first included.
func (s *Seq) Generated() int { return len(s.Tokens) - s.Prompt }

// Committed is how many of Tokens are in the target's KV cache: all but
// the root.
func (s *Seq) Committed() int { return max(0, len(s.Tokens)-1) }

// AfterFirst is o in A(r): the tokens generated after the first one.
//
// The convention is the SLO metric's: a request's TPOT is the time from its
// first token to its last divided by the tokens after the first (the usage's
// tpot_ms, (last − first)/(generated − 1), which attainment compares with
// tpot_slo_ms); the first token's own latency is TTFT's. A(r)'s l runs from
// the first token (Start), so its o must not count that token either: with
// o = Generated(), a request that gained exactly A(r) tokens every iteration
// would end one token short, above its SLO.
func (s *Seq) AfterFirst() int { return max(0, s.Generated()-1) }

// Slack is how long after now the sequence may emit its next token and
// stay within its TPOT SLO: SLO·(o+1) − l, o tokens past its first and l
// since it (negative once behind). Meaningful only for a sequence with an
// SLO and its first token out.
func (s *Seq) Slack(now time.Time) time.Duration {
	return s.SLO*time.Duration(s.AfterFirst()+1) - now.Sub(s.Start)
}

// Shape says how big a candidate tree to draft.
type Shape struct {
	// Depth is d, the number of speculation steps (tree layers below the
	// root). 0 drafts nothing.
	Depth int
	// Width is w, the beam width: every node gets its top-w children and
	// each layer keeps the w with the highest path probability.
	Width int
	// Branch, when set, replaces the beam by a fixed tree: a node at depth
	// i gets its top Branch[i] children and nothing is pruned (SpecInfer's
	// static tree). Depth is then len(Branch).
	Branch []int
	// Spine replaces the beam by a chain with side leaves: only the most
	// probable node of each layer is expanded, and its top Width children
	// form the next layer. Each step then asks one query per sequence, which
	// a draft model answers by extending the one path it keeps in its KV
	// cache: a step costs a single-token draft pass per sequence, where a
	// beam's layers re-feed every path below the root. The side leaves
	// come from the same distribution, so they cost nothing to draft.
	Spine bool
	// StopProb, when positive, ends drafting below a node whose path
	// probability is under it: the node stays in the tree (it may be
	// verified) but no query asks for its children. A drafter whose steps
	// cost real time sets it from a cost model (see Payoff.StopProb).
	StopProb float64
	// Calib, when set, calibrates the path probabilities StopProb is
	// compared with: a node at depth d is judged by Calibrated(f, d,
	// Calib) (Acceptance.Factors fills it). Trees still carry the raw f;
	// Acceptance.Scale calibrates them after drafting.
	Calib []float64
}

func (s Shape) depth() int {
	if s.Branch != nil {
		return len(s.Branch)
	}
	return s.Depth
}

// Drafter builds candidate token trees.
type Drafter interface {
	// Draft builds one candidate tree per sequence: trees[i] is reset to
	// the root seqs[i].Tokens[last] and grown to the given shape, each node
	// carrying its approximate path probability (the product of the
	// drafter's conditional probabilities along the path). A drafter may
	// stop a branch early when it has nothing to propose.
	Draft(seqs []*Seq, shape Shape, trees []*Tree) error
}

// StandbyDrafter is a Drafter that can also draft, cheaply, for requests
// whose speculation is backed off (Payoff). A request that drafts with a
// model can lose to plain decoding where its model mispredicts and yet
// have stretches an n-gram index drafts in microseconds (a file rewritten
// with a change: the model's steps lost, the copied lines were free).
// Backing the request off stops the model; Standby lets such free trees
// through meanwhile. It may leave any tree bare, and should leave bare
// every tree not expected to beat plain decoding on its own.
type StandbyDrafter interface {
	Drafter
	Standby(seqs []*Seq, shape Shape, trees []*Tree) error
}

// Query asks a draft model for the next-token distribution after a tree
// node: the input is Context followed by Path.
type Query struct {
	Seq     int     // index of the sequence in the Draft call
	Node    int     // the node whose children are wanted
	Parent  int     // that node's parent; -1 when it is the root
	Depth   int     // its depth (0 for the root)
	Token   int32   // its token
	Context []int32 // the sequence's tokens, ending with the root
	Path    []int32 // the tokens below the root down to Node (empty at the root)
}

// cand is one proposed child.
type cand struct {
	token  int32
	cond   float64 // conditional probability given the parent's path
	prob   float64 // path probability
	parent int     // tree node index of the parent
	rank   int     // order among the parent's proposals (tie-break)
}

// expander proposes, for every query, up to k children sorted by descending
// conditional probability, appended to out (one slice per query).
type expander func(queries []Query, k int, out [][]cand) error

// grower holds the scratch of the layer-by-layer tree construction shared by
// the beam drafter and the n-gram drafter.
type grower struct {
	queries  []Query
	cands    [][]cand
	layer    []cand
	frontier [][]int // per sequence: node indices of the current layer
	arena    []int32
}

// grow builds the candidate trees of seqs layer by layer. Each step asks the
// expander, in one batch, for the children of every frontier node of every
// sequence, then keeps per sequence either the top-w of the layer by path
// probability (beam) or every proposed child (fixed branching).
func (g *grower) grow(seqs []*Seq, shape Shape, trees []*Tree, ex expander) error {
	if len(trees) < len(seqs) {
		return fmt.Errorf("spec: Draft: %d trees for %d sequences", len(trees), len(seqs))
	}
	for len(g.frontier) < len(seqs) {
		g.frontier = append(g.frontier, nil)
	}
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			return fmt.Errorf("spec: Draft: sequence %d has no tokens", i)
		}
		trees[i].Reset(s.Tokens[len(s.Tokens)-1])
		g.frontier[i] = append(g.frontier[i][:0], 0)
	}
	depth := shape.depth()
	for d := 0; d < depth; d++ {
		k := shape.Width
		if shape.Branch != nil {
			k = shape.Branch[d]
		}
		if k <= 0 {
			break
		}
		g.queries = g.queries[:0]
		g.arena = g.arena[:0]
		for i, s := range seqs {
			for _, node := range g.frontier[i] {
				n := trees[i].Nodes[node]
				start := len(g.arena)
				for j := node; j > 0; j = int(trees[i].Nodes[j].Parent) {
					g.arena = append(g.arena, trees[i].Nodes[j].Token)
				}
				slices.Reverse(g.arena[start:])
				g.queries = append(g.queries, Query{
					Seq: i, Node: node, Parent: int(n.Parent), Depth: int(n.Depth), Token: n.Token,
					Context: s.Tokens,
				})
				q := &g.queries[len(g.queries)-1]
				q.Path = g.arena[start:len(g.arena):len(g.arena)]
			}
		}
		if len(g.queries) == 0 {
			break
		}
		// The arena may have moved while growing: fix the Path slices.
		off := 0
		for qi := range g.queries {
			q := &g.queries[qi]
			l := len(q.Path)
			q.Path = g.arena[off : off+l : off+l]
			off += l
		}
		for len(g.cands) < len(g.queries) {
			g.cands = append(g.cands, nil)
		}
		for qi := range g.queries {
			g.cands[qi] = g.cands[qi][:0]
		}
		if err := ex(g.queries, k, g.cands[:len(g.queries)]); err != nil {
			return err
		}
		qi := 0
		for i := range seqs {
			g.layer = g.layer[:0]
			for _, node := range g.frontier[i] {
				pp := trees[i].Nodes[node].Prob
				for r, c := range g.cands[qi] {
					if r >= k || c.cond <= 0 {
						break
					}
					c.prob, c.parent, c.rank = pp*c.cond, node, r
					g.layer = append(g.layer, c)
				}
				qi++
			}
			if shape.Branch == nil && !shape.Spine && len(g.layer) > shape.Width {
				// Beam: keep the w most probable paths of the layer.
				slices.SortFunc(g.layer, func(a, b cand) int {
					switch {
					case a.prob > b.prob:
						return -1
					case a.prob < b.prob:
						return 1
					case a.parent != b.parent:
						return a.parent - b.parent
					}
					return a.rank - b.rank
				})
				g.layer = g.layer[:shape.Width]
				// Back to canonical order: by parent, then proposal rank.
				slices.SortFunc(g.layer, func(a, b cand) int {
					if a.parent != b.parent {
						return a.parent - b.parent
					}
					return a.rank - b.rank
				})
			}
			g.frontier[i] = g.frontier[i][:0]
			for j, c := range g.layer {
				node := trees[i].Add(c.parent, c.token, c.prob)
				if Calibrated(c.prob, d+1, shape.Calib) < shape.StopProb || shape.Spine && j > 0 {
					continue // a leaf: not worth (or not on the spine to) expand
				}
				g.frontier[i] = append(g.frontier[i], node)
			}
		}
	}
	return nil
}

// topK appends to out the k most probable entries of a dense distribution
// row, by descending probability (ties: lower token first). Zero entries are
// never proposed.
func topK(row []float32, k int, out []cand) []cand {
	base := len(out)
	for i, p := range row {
		if p <= 0 {
			continue
		}
		n := len(out) - base
		if n == k && float64(p) <= out[len(out)-1].cond {
			continue
		}
		c := cand{token: int32(i), cond: float64(p)}
		if n < k {
			out = append(out, c)
		} else {
			out[len(out)-1] = c
		}
		// insertion: move the new entry up while it beats its predecessor
		for j := len(out) - 1; j > base && out[j].cond > out[j-1].cond; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
