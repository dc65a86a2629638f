package spec

import "time"

// PassCost prices an iteration's forward pass: the roots of the decoding
// sequences in it (one token each), and the tokens below and beside them
// (tree nodes, prompt chunks). The batching rules (SitOut,
// PrefillChunkBeside, the prompt floor's pace, Guard's plain iteration)
// and the simulator's clock price passes with it alike.
//
// Why not one curve: a forward pass's cost curve is measured as a chain
// of N tokens of one sequence, whose keys and values are read once for
// the chain and stay in the caches, each token with its logits, as a
// verification pass runs. A batch of n sequences reads n caches, each as
// long as its sequence, from memory; a prompt chunk needs one token's
// logits. On two cores of a Xeon, SmolLM2's pass over 8 sequences took
// 12.0 ms at 256 committed tokens each against 7.3 ms at 64 (the chain:
// 9.4 ms for 8 tokens), and its prefill passes came out 25-50% under the
// chain's price for as many tokens. The simulator on the chain alone,
// replaying the engine's own requests, put AdaServe's attainment 43
// points above the engine's and Sarathi's 8-13 points under it; priced
// with the batches and the prompt price, 6-8 points above and 2-4 under.
type PassCost struct {
	// Chain is a pass over n tokens of one sequence behind Context
	// committed tokens (the cost curve, CurveAt).
	Chain func(n int) time.Duration
	// Roots is a pass over one token each of n sequences, each behind
	// Context committed tokens (nil: Chain, where sequences cost no more
	// than a chain, as on the derived GPU curves).
	Roots func(n int) time.Duration
	// Context is the committed tokens behind the measured passes.
	Context int
	// Entry is what each committed token of a sequence in the pass adds
	// beyond Context: reading its key and value rows from memory.
	Entry time.Duration
	// Prompt is what each token of a prompt chunk adds to a pass (0: the
	// chain's slope, as for a tree's nodes): a prompt token needs no
	// logits and reads only its own prompt's rows.
	Prompt time.Duration
}

// Pass prices a pass over the roots of roots sequences whose committed
// tokens beyond Context come to beyond in all (Beyond), nodes tree nodes
// below those roots and prompt tokens of prompt chunks: the roots' pass,
// plus beyond·Entry, plus the chain's slope over the nodes (they read
// their sequence's rows with its root), plus prompt·Prompt. A pass of
// prompt tokens alone is a one-token pass and Prompt for each further
// token.
func (c PassCost) Pass(roots, beyond, nodes, prompt int) time.Duration {
	if c.Chain == nil {
		return 0
	}
	if c.Prompt <= 0 {
		nodes, prompt = nodes+prompt, 0
	}
	var t time.Duration
	switch {
	case roots > 0:
		t = c.Chain(roots+nodes) + time.Duration(max(0, beyond))*c.Entry
		if c.Roots != nil {
			t += c.Roots(roots) - c.Chain(roots)
		}
	case nodes > 0:
		t = c.Chain(nodes)
	case prompt > 0:
		t = c.Chain(1) - c.Prompt
	}
	return t + time.Duration(prompt)*c.Prompt
}

// Beyond is how many of s's committed tokens lie beyond Context: those
// the measured passes did not read. A shorter sequence counts as
// Context: its rows mostly stay in the caches, and the roots' pass was
// measured at Context.
func (c PassCost) Beyond(s *Seq) int { return max(0, s.Committed()-c.Context) }

// BeyondAll is Beyond summed over seqs.
func (c PassCost) BeyondAll(seqs []*Seq) int {
	n := 0
	for _, s := range seqs {
		n += c.Beyond(s)
	}
	return n
}

// Plain prices a plain iteration of seqs: their roots alone.
func (c PassCost) Plain(seqs []*Seq) time.Duration {
	return c.Pass(len(seqs), c.BeyondAll(seqs), 0, 0)
}

// ChainCost is a PassCost of the chain curve at alone: every sequence
// priced as if it were part of one chain (the derived GPU curves, and
// callers with nothing more measured).
func ChainCost(at func(int) time.Duration) PassCost { return PassCost{Chain: at} }
