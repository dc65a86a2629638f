package engine

import (
	"math"

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
	tok   *tokenizer.Tokenizer
	state cstate
	// nodes[i] is the state after tree node i's path (node 0: state),
	// this iteration.
	nodes  []cstate
	masked []float32
	tree   spec.Tree // the pruned tree, when pruning removed nodes
	keep   []int
	states []cstate // scratch of pruneTrees, per node of the drafted tree
	alive  []uint8

	// A lazy constraint's trigger (nil: the grammar applies from the
	// start), and the tokens it refuses in free output, by watch
	// (refusedAt).
	trig    *trigger
	refused map[watch][]int32
}

// cstate is where the output stands under its constraint: in the grammar
// (on), or, under a lazy constraint not yet triggered, free with the
// trigger's watch.
type cstate struct {
	g  grammar.State
	on bool
	w  watch
}

func inGrammar(s grammar.State) cstate { return cstate{g: s, on: true} }

// dead: no continuation, not even the end (free output always has one).
func (s cstate) dead() bool { return s.on && s.g.Dead() }

// accepting: the output may end here (free output may end anywhere).
func (s cstate) accepting() bool { return !s.on || s.g.Accepting() }

// Node fates in pruneTrees.
const (
	pruned = iota
	live
	ended // an end token: kept, its children pruned
)

func newConstraint(g *grammar.Grammar, t *grammar.Trie, tok *tokenizer.Tokenizer) *constraint {
	return &constraint{m: grammar.NewMatcher(t), tok: tok, state: inGrammar(g.Start())}
}

// newLazyConstraint is a constraint that is free until trig fires.
func newLazyConstraint(trig *trigger, t *grammar.Trie, tok *tokenizer.Tokenizer) *constraint {
	return &constraint{m: grammar.NewMatcher(t), tok: tok, state: cstate{w: trig.start()}, trig: trig}
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

// accept advances the constraint past an emitted token (nil:
// unconstrained).
func (c *constraint) accept(id int32) {
	if c == nil || c.tok.EOG(id) {
		return
	}
	c.state = c.advance(c.state, id)
}

// advance is the state after token id (not an end token) at s. Free output
// takes any token, control tokens too, and watches its text for the
// trigger; in the grammar a control token's state is dead (its text is
// not something the model spells, see vocabTrie).
func (c *constraint) advance(s cstate, id int32) cstate {
	piece := c.tok.Piece(id)
	if !s.on {
		w, g, fired := c.trig.scan(s.w, piece)
		if fired {
			return inGrammar(g)
		}
		return cstate{w: w}
	}
	if c.tok.IsSpecial(id) {
		return cstate{g: grammar.State{}, on: true}
	}
	s.g = s.g.Advance(piece)
	return s
}

// allows reports whether token id may follow s.
func (c *constraint) allows(s cstate, id int32) bool {
	if s.on {
		return c.m.Allows(s.g, id)
	}
	return c.tok.EOG(id) || !c.advance(s, id).dead()
}

// logits returns row with the tokens the constraint refuses at state s set
// to -Inf, and whether any token is allowed. In free output that is the
// row itself unless some token would fire the trigger into text the
// grammar refuses.
func (c *constraint) logits(s cstate, row []float32) ([]float32, bool) {
	if !s.on {
		refused := c.refusedAt(s.w)
		if len(refused) == 0 {
			return row, true
		}
		masked := c.scratch(len(row))
		copy(masked, row)
		for _, id := range refused {
			masked[id] = float32(math.Inf(-1))
		}
		return masked, true
	}
	return grammar.Apply(c.m.Mask(s.g), row, c.scratch(len(row)))
}

func (c *constraint) scratch(n int) []float32 {
	if cap(c.masked) < n {
		c.masked = make([]float32, n)
	}
	return c.masked[:n]
}

// refusedAt lists the tokens that free output at watch w refuses: those
// that fire the trigger and carry on past it with text the calls' grammar
// refuses (a lead's "{" with a stray byte glued on). It walks the
// vocabulary once per watch a request reaches (free output mostly stays
// at one or two), and is kept for the request.
func (c *constraint) refusedAt(w watch) []int32 {
	if r, ok := c.refused[w]; ok {
		return r
	}
	if c.refused == nil {
		c.refused = make(map[watch][]int32)
	}
	var r []int32
	for id := range int32(c.tok.Size()) {
		if c.tok.EOG(id) {
			continue
		}
		if _, g, fired := c.trig.scan(w, c.tok.Piece(id)); fired && g.Dead() {
			r = append(r, id)
		}
	}
	c.refused[w] = r
	return r
}

// sample draws the next token at state s from row masked by the
// constraint, and reports false when it allows no token. The full mask
// costs a walk over the vocabulary's trie (milliseconds where most tokens
// are allowed, as inside a string, and such states rarely repeat), so
// when the sampler cuts nothing the draw is made by rejection instead:
// draw from the unmasked row and keep the token if the constraint allows
// it, which checks only that token's bytes. Conditioned on landing in the
// allowed set, an unmasked draw is distributed exactly as the masked one
// (see sample.Sampler.Truncates), and only on a miss is the mask computed
// and the draw made again from it, so the result is exact whichever path
// it takes. A model following the grammar lands inside it almost always.
// A truncating sampler keeps only the likeliest allowed tokens, which it
// finds by testing tokens one at a time in rank order (see
// sample.Sampler.DistributionAllowed: the same distribution as the masked
// row's, bit for bit), so there too the mask is computed only where the
// scan cannot settle the cut.
func (c *constraint) sample(s cstate, row []float32, smp *sample.Sampler) (int32, bool) {
	if !smp.Truncates() {
		if tok := smp.Sample(row); c.allows(s, tok) {
			return tok, true
		}
	} else if tok, ok := smp.SampleAllowed(row, func(id int32) bool { return c.allows(s, id) }); ok {
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
		c.states = append(c.states[:0], make([]cstate, t.Len())...)
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
				if ps.accepting() {
					alive[j], states[j] = ended, ps
				}
				continue
			}
			ns := c.advance(ps, n.Token)
			if !ns.dead() {
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
