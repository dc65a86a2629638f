package engine

import (
	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/spec"
)

// errStuck ends a constrained stream whose grammar no token of the
// vocabulary can continue (a grammar that needs characters the
// vocabulary cannot spell).
var errStuck = status.Errorf(status.InvalidRequest, "grammar: no token of the vocabulary can continue the output here")

// constraint is a decoding sequence's grammar: the state after the tokens
// emitted so far, and the masks.
type constraint struct {
	m     *grammar.Matcher
	state grammar.State
	// nodes[i] is the state after tree node i's path (node 0: state),
	// this iteration.
	nodes  []grammar.State
	masked []float32
	tree   spec.Tree // the pruned tree, when pruning removed nodes
	keep   []int
	states []grammar.State // scratch of pruneTrees, per node of the drafted tree
	alive  []uint8
}

// Node fates in pruneTrees.
const (
	pruned = iota
	live
	ended // an end token: kept, its children pruned
)

func newConstraint(g *grammar.Grammar, t *grammar.Trie) *constraint {
	return &constraint{m: grammar.NewMatcher(t), state: g.Start()}
}

// vocabTrie is the vocabulary's token trie: control tokens are never
// allowed, end-of-generation tokens only where the grammar is complete.
func (b *Backend) vocabTrie() *grammar.Trie {
	b.trieOnce.Do(func() {
		n := b.tok.Size()
		pieces := make([][]byte, n)
		eog := make([]bool, n)
		for id := range int32(n) {
			eog[id] = b.tok.EOG(id)
			if !b.tok.IsSpecial(id) {
				pieces[id] = b.tok.Piece(id)
			}
		}
		b.trie = grammar.NewTrie(pieces, eog)
	})
	return b.trie
}

// accept advances the grammar past an emitted token (nil: unconstrained).
func (c *constraint) accept(tok *tokenizer.Tokenizer, id int32) {
	if c == nil || tok.EOG(id) {
		return
	}
	c.state = c.state.Advance(tok.Piece(id))
}

// logits returns row with the tokens the grammar refuses at state s set
// to -Inf, and whether any token is allowed.
func (c *constraint) logits(s grammar.State, row []float32) ([]float32, bool) {
	if cap(c.masked) < len(row) {
		c.masked = make([]float32, len(row))
	}
	return grammar.Apply(c.m.Mask(s), row, c.masked[:len(row)])
}

// sample draws the next token at state s from row masked by the grammar,
// and reports false when the grammar allows no token. The full mask costs
// a walk over the vocabulary's trie (milliseconds where most tokens are
// allowed, as inside a string, and such states rarely repeat), so when
// the sampler cuts nothing the draw is made by rejection instead: draw
// from the unmasked row and keep the token if the grammar allows it,
// which checks only that token's bytes. Conditioned on landing in the
// allowed set, an unmasked draw is distributed exactly as the masked one
// (see sample.Sampler.Truncates), and only on a miss is the mask computed
// and the draw made again from it, so the result is exact whichever path
// it takes. A model following the grammar lands inside it almost always.
// A truncating sampler keeps only the likeliest allowed tokens, which it
// finds by testing tokens one at a time in rank order (see
// sample.Sampler.DistributionAllowed: the same distribution as the masked
// row's, bit for bit), so there too the mask is computed only where the
// scan cannot settle the cut.
func (c *constraint) sample(s grammar.State, row []float32, smp *sample.Sampler) (int32, bool) {
	m := c.m
	if !smp.Truncates() {
		if tok := smp.Sample(row); m.Allows(s, tok) {
			return tok, true
		}
	} else if tok, ok := smp.SampleAllowed(row, func(id int32) bool { return m.Allows(s, id) }); ok {
		return tok, true
	}
	row, ok := c.logits(s, row)
	if !ok {
		return 0, false
	}
	return smp.Sample(row), true
}

// pruneTrees removes from each constrained sequence's tree the drafted
// nodes the grammar refuses (with their subtrees), so verification spends
// no pass on tokens that cannot be emitted, and records each kept node's
// grammar state for verification's masks. trees holds the trees of the
// decoding slots that run this iteration (b.seqs: none sitting out, none
// at all while a prefill preempts decoding), in slot order.
func (b *Backend) pruneTrees(slots []*loop.Slot, trees []*spec.Tree) {
	if len(trees) == 0 {
		return
	}
	di := 0
	for _, s := range slots {
		q := s.State.(*sequence)
		if !q.decoding || q.idle {
			continue
		}
		i := di
		di++
		c := q.con
		if c == nil {
			continue
		}
		t := trees[i]
		c.nodes = append(c.nodes[:0], c.state)
		c.keep = append(c.keep[:0], 0)
		// Parents precede children, so one pass decides every node.
		c.states = append(c.states[:0], make([]grammar.State, t.Len())...)
		c.alive = append(c.alive[:0], make([]uint8, t.Len())...)
		states, alive := c.states, c.alive
		states[0], alive[0] = c.state, live
		for j := 1; j < t.Len(); j++ {
			n := t.Nodes[j]
			if alive[n.Parent] != live {
				continue // pruned, or below an end token
			}
			ps := states[n.Parent]
			if b.tok.EOG(n.Token) {
				// The end may be drafted only where the output is
				// complete; what follows it is never emitted.
				if ps.Accepting() {
					alive[j], states[j] = ended, ps
				}
				continue
			}
			if b.tok.IsSpecial(n.Token) {
				continue
			}
			ns := ps.Advance(b.tok.Piece(n.Token))
			if !ns.Dead() {
				alive[j], states[j] = live, ns
			}
		}
		for j := 1; j < t.Len(); j++ {
			if alive[j] != pruned {
				c.keep = append(c.keep, j)
				c.nodes = append(c.nodes, states[j])
			}
		}
		if len(c.keep) < t.Len() {
			if !t.Subtree(c.keep, &c.tree) {
				c.tree.Reset(t.Root())
				c.nodes = c.nodes[:1]
			}
			trees[i] = &c.tree
		}
	}
}
