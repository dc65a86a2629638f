package model

import "fmt"

// Plan is a batch checked and laid out for attention, the same for every
// device: each token's sequence, scratch index and visible scratch entries.
// A device's kernels read it as a mask: token i attends to the committed
// entries of its cache, the scratch entries [0, Span) and
// Extra[ExtraLo:ExtraHi], and writes its own K/V to scratch entry K.
type Plan struct {
	Tok   []TokenPlan
	Extra []int32 // visible scratch entries outside a token's span, ascending per token
	Seqs  []SeqPlan
	Rows  []int // tokens whose logits are wanted, in batch order
}

// TokenPlan is where a token sits in its sequence. A chain (prefill, or
// the first path of a tree) keeps everything in the span; tree branches off
// the first path list their ancestors in Extra.
type TokenPlan struct {
	Seq              int // index into Plan.Seqs
	K, Span          int
	ExtraLo, ExtraHi int
}

// SeqPlan is one sequence of the batch and its number of new tokens.
type SeqPlan struct {
	Cache Cache
	N     int
}

// Build checks b (lengths, tokens within vocab, parents earlier in the same
// sequence, positions = committed length + depth, room in each cache and
// nLogits floats for the wanted rows) and lays it out. It reserves nothing:
// see Reserve.
func (p *Plan) Build(b *Batch, vocab, nLogits int) error {
	n := len(b.Tokens)
	if len(b.Cache) != n || len(b.Pos) != n || len(b.Parent) != n || len(b.Logits) != n {
		return fmt.Errorf("model: batch of %d tokens has %d caches, %d positions, %d parents, %d logits flags",
			n, len(b.Cache), len(b.Pos), len(b.Parent), len(b.Logits))
	}
	p.Seqs, p.Rows, p.Extra = p.Seqs[:0], p.Rows[:0], p.Extra[:0]
	if cap(p.Tok) < n {
		p.Tok = make([]TokenPlan, n)
	}
	p.Tok = p.Tok[:n]
	for i := 0; i < n; i++ {
		t, cache, par := b.Tokens[i], b.Cache[i], b.Parent[i]
		if t < 0 || int(t) >= vocab {
			return fmt.Errorf("model: batch token %d is %d, outside the vocabulary of %d", i, t, vocab)
		}
		if cache == nil {
			return fmt.Errorf("model: batch token %d has no cache", i)
		}
		if par < -1 || par >= i {
			return fmt.Errorf("model: batch token %d has parent %d; a parent must come earlier in the batch (or be -1)", i, par)
		}
		seq := -1
		for j := range p.Seqs {
			if p.Seqs[j].Cache == cache {
				seq = j
				break
			}
		}
		if seq < 0 {
			seq = len(p.Seqs)
			p.Seqs = append(p.Seqs, SeqPlan{Cache: cache})
		}
		ti := TokenPlan{Seq: seq, K: p.Seqs[seq].N}
		p.Seqs[seq].N++
		wantPos := cache.Len()
		lo := len(p.Extra)
		if par >= 0 {
			if p.Tok[par].Seq != seq {
				return fmt.Errorf("model: batch token %d has parent %d from another sequence", i, par)
			}
			pt := p.Tok[par]
			wantPos = b.Pos[par] + 1
			ti.Span = pt.Span
			p.Extra = append(p.Extra, p.Extra[pt.ExtraLo:pt.ExtraHi]...)
		}
		if len(p.Extra) == lo && ti.K == ti.Span {
			ti.Span++
		} else {
			p.Extra = append(p.Extra, int32(ti.K))
		}
		ti.ExtraLo, ti.ExtraHi = lo, len(p.Extra)
		if b.Pos[i] != wantPos {
			return fmt.Errorf("model: batch token %d has position %d, want %d (committed length + depth)", i, b.Pos[i], wantPos)
		}
		p.Tok[i] = ti
		if b.Logits[i] {
			p.Rows = append(p.Rows, i)
		}
	}
	if need := len(p.Rows) * vocab; nLogits < need {
		return fmt.Errorf("model: %d tokens want logits: %d floats needed, got %d", len(p.Rows), need, nLogits)
	}
	for _, q := range p.Seqs {
		if q.Cache.Len()+q.N > q.Cache.Cap() {
			return fmt.Errorf("model: %d new tokens on %d cached overflow the cache of %d", q.N, q.Cache.Len(), q.Cache.Cap())
		}
	}
	return nil
}

// Reserve makes room for each sequence's new tokens in its cache.
func (p *Plan) Reserve() error {
	for _, q := range p.Seqs {
		if err := q.Cache.Reserve(q.N); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	return nil
}
