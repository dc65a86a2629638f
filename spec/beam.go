package spec

import "fmt"

// DraftModel is a small model sharing the target's vocabulary. core/model
// plugs in here; spec never imports it.
type DraftModel interface {
	// Vocab is the vocabulary size: the length of one distribution row.
	Vocab() int
	// NextDistributions writes, for every query, the draft model's
	// next-token probability distribution after Context followed by Path,
	// into out[i*Vocab():(i+1)*Vocab()]. out has room for every query.
	//
	// A Draft call makes at most one NextDistributions call per tree layer,
	// batched across all its sequences. The queries of a call are the nodes
	// added by the previous call (their parents were queries there) or, in
	// the first call, the roots; a model with a KV cache can therefore keep
	// each call's tokens in scratch and attend through Parent, exactly like
	// the target's tree pass.
	NextDistributions(queries []Query, out []float32) error
}

// TopKDraftModel is optionally implemented by a DraftModel that can hand
// back its k most probable next tokens directly — fusing the softmax with the
// selection — so that no full-vocabulary row is materialised per query (for
// a 49k vocabulary and a depth-8, width-4 beam over 8 requests, 232 rows of
// 192 KiB). BeamDrafter prefers it when present.
type TopKDraftModel interface {
	DraftModel
	// NextTopK writes, for query i, its k most probable next tokens by
	// descending probability into ids[i*k:(i+1)*k] and their probabilities
	// into probs[i*k:(i+1)*k]; unused entries have probability 0.
	NextTopK(queries []Query, k int, ids []int32, probs []float32) error
}

// BeamDrafter drafts with a DraftModel by beam search, as in AdaServe's
// speculation step: the first step decodes every root and keeps its top-w
// children; each later step decodes the previous layer's n×w nodes in one
// batch, and each request keeps the w children (out of w×w proposals: a
// node's top-w children are the only ones that can make the layer's top-w)
// with the highest path probability. After d steps a request's candidate
// tree has a root and d layers of at most w nodes.
//
// With Shape.Branch it builds a fixed tree instead (every node at depth i
// gets its top Branch[i] children), which is how SpecInfer drafts.
//
// Not safe for concurrent use; reuse one per engine loop.
type BeamDrafter struct {
	Model DraftModel

	g    grower
	rows []float32
	ids  []int32
}

// Draft implements Drafter.
func (b *BeamDrafter) Draft(seqs []*Seq, shape Shape, trees []*Tree) error {
	return b.g.grow(seqs, shape, trees, b.expand)
}

func (b *BeamDrafter) expand(queries []Query, k int, out [][]cand) error {
	if tk, ok := b.Model.(TopKDraftModel); ok {
		need := len(queries) * k
		if cap(b.ids) < need {
			b.ids, b.rows = make([]int32, need), make([]float32, need)
		}
		ids, probs := b.ids[:need], b.rows[:need]
		clear(probs)
		if err := tk.NextTopK(queries, k, ids, probs); err != nil {
			return fmt.Errorf("spec: draft model: %w", err)
		}
		for i := range queries {
			for j := i * k; j < (i+1)*k && probs[j] > 0; j++ {
				out[i] = append(out[i], cand{token: ids[j], cond: float64(probs[j])})
			}
		}
		return nil
	}
	v := b.Model.Vocab()
	if v <= 0 {
		return fmt.Errorf("spec: draft model vocabulary %d", v)
	}
	if need := len(queries) * v; cap(b.rows) < need {
		b.rows = make([]float32, need)
	}
	rows := b.rows[:len(queries)*v]
	if err := b.Model.NextDistributions(queries, rows); err != nil {
		return fmt.Errorf("spec: draft model: %w", err)
	}
	for i := range queries {
		out[i] = topK(rows[i*v:(i+1)*v], k, out[i])
	}
	return nil
}
