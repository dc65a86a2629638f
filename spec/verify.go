package spec

// Targets gives the target model's distribution at a tree node: the
// distribution of the token that follows the node's path (for the root, the
// token after the sequence's newest token). Verification calls it only for
// the nodes it walks through — at most Depth+1 of them — so a caller may
// turn logits into probabilities (temperature, penalties, top-k, top-p,
// min-p, with the node's path as the context) lazily.
type Targets func(node int) Dist

// Result is the outcome of verifying one tree.
type Result struct {
	// Path lists the accepted nodes: the root (0) first, then every
	// accepted draft node, parent before child. These are the batch entries
	// whose KV the cache keeps.
	Path []int
	// Tokens are the tokens this iteration emits: the accepted draft
	// tokens followed by the bonus token (len(Path) tokens in all).
	Tokens []int32

	rejected []int32 // scratch: tokens rejected at the current node
}

// Accepted is the number of accepted draft tokens.
func (r *Result) Accepted() int { return len(r.Path) - 1 }

// Bonus is the token sampled (or chosen) after the last accepted node.
func (r *Result) Bonus() int32 { return r.Tokens[len(r.Tokens)-1] }

func (r *Result) reset() {
	r.Path = append(r.Path[:0], 0)
	r.Tokens = r.Tokens[:0]
}

// VerifyGreedy walks the tree from the root, at each node moving to the
// child whose token is the target's argmax there; where no child matches,
// the argmax itself is the bonus token. Every emitted token is therefore the
// target's argmax given everything before it, so the output is identical,
// token for token, to plain greedy decoding (ties broken as Argmax does).
//
// The walk moves to strictly larger node indices (a child follows its
// parent in the canonical order, which Tree.Add enforces; a tree built by
// hand that breaks it ends the walk there), so it takes at most Len steps
// whatever the target's distributions hold.
func VerifyGreedy(t *Tree, target Targets, res *Result) {
	res.reset()
	node := 0
	for {
		best := Argmax(target(node))
		c := t.Child(node, best)
		if c <= node {
			res.Tokens = append(res.Tokens, best)
			return
		}
		res.Path = append(res.Path, c)
		res.Tokens = append(res.Tokens, best)
		node = c
	}
}

// VerifySample verifies the tree by recursive rejection sampling for
// deterministically chosen candidates, which leaves the output distributed
// exactly as if each token were sampled from the target directly.
//
// At a node with target distribution p, the children x1, x2, ... are tried
// in tree order. Child x is accepted with probability p(x); on rejection
// p(x) is set to 0 and p renormalised, and the next child is tried against
// the renormalised p. Why this is exact: a draft candidate is a point mass q
// = δx, and the classic speculative-sampling rule accepts with probability
// min(1, p(x)/q(x)) = p(x) and otherwise samples from the residual
// norm(max(p − q, 0)) = p with x removed. Applying the rule to x1 turns p
// into a mixture "x1 with probability p(x1), else the residual"; applying it
// again to x2 against the residual, and so on, keeps that mixture equal to
// p at every step. If every child is rejected the bonus token is sampled
// from what remains; if a child is accepted, the walk continues there with
// the target distribution conditioned on the longer path, so by induction
// every emitted token has its exact target conditional distribution. After
// an accepted leaf the bonus is sampled from the leaf's distribution.
//
// Nothing here uses the drafter's probabilities: they only shape the tree.
// (A rule that always accepts the first child, that rejects without
// removing x from p, that samples the bonus from the full p or from the
// draft, or that is exact only down to some depth, is not exact; the tests
// show chi-square tests on the joint distribution of every emitted position
// catching each of them.)
//
// As in VerifyGreedy, every step moves to a larger node index, so the walk
// is bounded by the tree's size; a NaN or infinite probability can only
// make a child rejected, never make the walk revisit a node.
func VerifySample(t *Tree, target Targets, rng Source, res *Result) {
	res.reset()
	node := 0
	for {
		p := target(node)
		n := t.Nodes[node]
		res.rejected = res.rejected[:0]
		rem := 1.0 // mass of p not yet rejected
		next := -1
		for c := n.FirstChild; c < n.FirstChild+n.Children; c++ {
			x := t.Nodes[c].Token
			if contains(res.rejected, x) {
				continue // a duplicate sibling: its probability is already 0
			}
			px := p.Prob(x)
			if px > 0 && rng.Uniform()*rem < px && int(c) > node {
				next = int(c)
				break
			}
			res.rejected = append(res.rejected, x)
			if rem -= px; rem < 0 {
				rem = 0
			}
		}
		if next < 0 {
			res.Tokens = append(res.Tokens, sampleExcluding(p, res.rejected, rem, rng.Uniform()))
			return
		}
		res.Path = append(res.Path, next)
		res.Tokens = append(res.Tokens, t.Nodes[next].Token)
		node = next
	}
}

func contains(s []int32, x int32) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// sampleExcluding samples from p restricted to the ids not in excluded,
// whose total mass is mass, with the uniform u.
func sampleExcluding(p Dist, excluded []int32, mass, u float64) int32 {
	target := u * mass
	acc := 0.0
	last := int32(-1)
	for i, pi := range p.P {
		if pi <= 0 {
			continue
		}
		id := int32(i)
		if p.IDs != nil {
			id = p.IDs[i]
		}
		if len(excluded) > 0 && contains(excluded, id) {
			continue
		}
		acc += float64(pi)
		last = id
		if acc > target {
			return id
		}
	}
	if last < 0 {
		// Only reachable through rounding: every token with mass was
		// rejected although the remaining mass was tiny. Fall back to the
		// most probable token.
		return Argmax(p)
	}
	return last // rounding: u*mass at the very top of the range
}
