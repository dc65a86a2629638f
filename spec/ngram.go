package spec

import "slices"

// Index is an incremental n-gram index over a token stream: for every order
// k in 1..MaxOrder it maps the hash of each k-gram to the most recent
// position where it ends, and chains every position to the previous one
// with the same k-gram (zlib-style hash chains). Appending a token costs
// MaxOrder hash updates and map writes — O(1) amortised — and finding the
// occurrences of a suffix walks only as many chain links as matches wanted.
//
// Not safe for concurrent use.
type Index struct {
	toks  []int32
	order int
	head  []map[uint64]int32 // head[k-1][hash] = end position + 1 of the newest k-gram with that hash
	prev  [][]int32          // prev[k-1][e] = end position + 1 of the previous one, 0 when none
}

// NewIndex returns an empty index of k-grams up to maxOrder.
func NewIndex(maxOrder int) *Index {
	if maxOrder < 1 {
		maxOrder = 1
	}
	x := &Index{order: maxOrder, head: make([]map[uint64]int32, maxOrder), prev: make([][]int32, maxOrder)}
	for k := range x.head {
		x.head[k] = make(map[uint64]int32)
	}
	return x
}

// Len is the number of indexed tokens.
func (x *Index) Len() int { return len(x.toks) }

// separator marks a document boundary in a shared index; no query contains
// it, so no match spans two documents.
const separator = -1

const hashMul = 0x9e3779b97f4a7c15

// step extends a right-to-left k-gram hash by one token further left.
func step(h uint64, tok int32) uint64 {
	h = (h ^ uint64(uint32(tok))) * hashMul
	return h ^ (h >> 29)
}

// Append indexes one more token.
func (x *Index) Append(tok int32) {
	x.toks = append(x.toks, tok)
	e := len(x.toks) - 1
	h := uint64(0x243f6a8885a308d3)
	for k := 1; k <= x.order; k++ {
		p := x.prev[k-1]
		if k > e+1 {
			x.prev[k-1] = append(p, 0)
			continue
		}
		h = step(h, x.toks[e-k+1])
		x.prev[k-1] = append(p, x.head[k-1][h])
		x.head[k-1][h] = int32(e + 1)
	}
}

// Sync appends the tokens of toks beyond what is indexed. toks must extend
// what was indexed before (generation only appends); if it is shorter the
// index is rebuilt.
func (x *Index) Sync(toks []int32) {
	if len(toks) < len(x.toks) {
		x.Reset()
	}
	for _, t := range toks[len(x.toks):] {
		x.Append(t)
	}
}

// AppendDocument appends a whole document (an earlier output) behind a
// separator, for a shared index.
func (x *Index) AppendDocument(toks []int32) {
	if len(x.toks) > 0 {
		x.Append(separator)
	}
	for _, t := range toks {
		x.Append(t)
	}
}

// Reset empties the index, keeping its memory.
func (x *Index) Reset() {
	x.toks = x.toks[:0]
	for k := range x.head {
		clear(x.head[k])
		x.prev[k] = x.prev[k][:0]
	}
}

// continuations walks the occurrences of the k-gram whose right-to-left
// hash is h, newest first, up to max of them that have a known next token,
// and adds those next tokens to counts. It returns the updated counts and
// how many occurrences it counted.
func (x *Index) continuations(k int, h uint64, max int, counts []tokCount) ([]tokCount, int) {
	if k > x.order {
		return counts, 0
	}
	n := 0
	for e := int(x.head[k-1][h]) - 1; e >= 0 && n < max; e = int(x.prev[k-1][e]) - 1 {
		if e+1 >= len(x.toks) {
			continue // the stream's own suffix: nothing follows it yet
		}
		next := x.toks[e+1]
		if next == separator {
			continue
		}
		n++
		found := false
		for i := range counts {
			if counts[i].tok == next {
				counts[i].n++
				found = true
				break
			}
		}
		if !found {
			counts = append(counts, tokCount{tok: next, n: 1, order: len(counts)})
		}
	}
	return counts, n
}

type tokCount struct {
	tok   int32
	n     int
	order int // first seen rank: newer occurrences first
}

// NGramDrafter drafts without a model: it looks up the longest recent
// suffix of the context (prompt, output so far, and the draft path) in an
// index of the request's own tokens — and, when that finds nothing, in an
// optional shared index of earlier outputs — and proposes the tokens that
// followed its previous occurrences. The conditional probability of a
// proposal is its count among the occurrences found, discounted:
// count / (total + Discount), so a single sighting is not taken as
// certainty. When the longest match proposes fewer tokens than the tree
// wants, shorter suffixes add theirs, sharing the mass the discount left
// over (a simple back-off). Path probabilities are products of those, as
// for a draft model, and the same beam (or fixed branching) shapes the tree.
//
// Calibration: how much a match says depends on its length and on the
// text (a one-token match in prose is a guess, a long one in code being
// copied is nearly certain), so the drafter checks itself. Before a
// generated token is indexed, it predicts that token from the ones before
// it, as a draft would have, and tallies the outcome under the longest
// match's order: decayed sums of hits and of the count estimate's
// predictions. An order's share of the mass is the count estimate's
// total/(total+Discount) times their ratio (at most 1 in all), so orders
// that keep hitting earn deeper drafts and orders that miss stop costing
// verification. It needs no word from the verifier: the emitted tokens
// are the target's own.
//
// Cost per iteration: syncing the index with the newly emitted tokens
// (a prediction and MaxOrder map writes each) plus, per expanded node, at
// most MaxOrder hash look-ups of at most MaxMatches chain links. Nothing
// depends on the context length.
//
// The per-request index lives in Seq.DraftState. Not safe for concurrent
// use.
//
// Orders: a match's length says most about whether its continuation
// comes next. Over the answers of the Qwen2.5-Coder 1.5B to the edit and
// rewrite prompt sets (core/engine/testdata), the newest occurrence of the
// longest matching suffix predicted the next token 18–23% of the time
// for one-token matches, 60% for two, 75–90% for three to seven and
// 81–100% for eight or more. So the defaults look as far back as eight
// tokens, which lets the calibration tell a copied stretch from a
// coincidence, and never draft from a single token, whose continuation
// is mostly a guess that a chain then compounds (NOTES.md, "n-gram
// orders", has the measurements).
type NGramDrafter struct {
	MaxOrder   int     // longest suffix matched (default 8)
	MinOrder   int     // shortest suffix matched (default 2)
	MaxMatches int     // occurrences counted per look-up (default 16)
	Discount   float64 // added to the total count (default 1; negative means 0)
	Shared     *Index  // optional index of earlier outputs (AppendDocument)

	g      grower
	seqs   []*Seq
	counts []tokCount
}

func (d *NGramDrafter) params() (maxOrder, minOrder, maxMatches int, discount float64) {
	maxOrder, minOrder, maxMatches, discount = d.MaxOrder, d.MinOrder, d.MaxMatches, d.Discount
	if maxOrder <= 0 {
		maxOrder = 8
	}
	if minOrder <= 0 {
		minOrder = min(2, maxOrder)
	}
	if maxMatches <= 0 {
		maxMatches = 16
	}
	switch {
	case discount == 0:
		discount = 1
	case discount < 0:
		discount = 0
	}
	return
}

// ngramSeq is a sequence's n-gram state: the index of its tokens, and how
// well the index has predicted the tokens the sequence went on to emit,
// per match order (see NGramDrafter's calibration).
type ngramSeq struct {
	idx *Index
	// hit[k] and pred[k] are decayed sums over the emitted tokens whose
	// longest match had order k: whether the top proposal was the token,
	// and the conditional probability the counts gave it.
	hit, pred []float64
}

const (
	// calibDecay per observation of an order: a horizon of about 30
	// tokens, so a stretch of copying raises the long orders' rate within
	// a few lines and prose lowers it again.
	calibDecay = 0.97
	// calibPrior is how many predicted acceptances the counts' own
	// estimate weighs against what was observed: with no history the
	// ratio is 1 and the counts stand.
	calibPrior = 2.0
)

// IndexOf returns the sequence's index, creating it and catching up with
// the sequence's tokens.
func (d *NGramDrafter) IndexOf(s *Seq) *Index { return d.stateOf(s).idx }

// stateOf returns the sequence's n-gram state caught up with its tokens:
// each generated token not yet indexed is first predicted from the tokens
// before it, as a draft would have, and the outcome is tallied under its
// match order.
func (d *NGramDrafter) stateOf(s *Seq) *ngramSeq {
	st, ok := s.DraftState.(*ngramSeq)
	maxOrder, _, _, _ := d.params()
	if !ok {
		st = &ngramSeq{idx: NewIndex(maxOrder), hit: make([]float64, maxOrder+1), pred: make([]float64, maxOrder+1)}
		s.DraftState = st
	}
	x := st.idx
	if len(s.Tokens) < x.Len() {
		x.Reset() // a sequence that shrank: rebuild (the rates stand)
	}
	for _, t := range s.Tokens[x.Len():] {
		if x.Len() >= s.Prompt && x.Len() > 0 {
			d.observe(st, t)
		}
		x.Append(t)
	}
	return st
}

// observe tallies whether the top proposal of the longest match at the
// end of the index is t, the token that came next.
func (d *NGramDrafter) observe(st *ngramSeq, t int32) {
	maxOrder, minOrder, maxMatches, discount := d.params()
	x := st.idx
	var hs [16]uint64
	hashes := suffixHashes(hs[:0], x.toks, nil, maxOrder)
	for kk := len(hashes); kk >= minOrder; kk-- {
		d.counts = d.counts[:0]
		var total int
		d.counts, total = x.continuations(kk, hashes[kk-1], maxMatches, d.counts)
		if total == 0 {
			continue
		}
		top := slices.MinFunc(d.counts, likelier) // expand's first proposal
		st.hit[kk] *= calibDecay
		st.pred[kk] *= calibDecay
		st.pred[kk] += float64(top.n) / (float64(total) + discount)
		if top.tok == t {
			st.hit[kk]++
		}
		return
	}
}

// suffixHashes appends to dst the right-to-left hashes of the suffixes of
// context followed by path, of length 1 to maxOrder (as many as there are
// tokens): dst[k-1] is the hash of the last k tokens, the key of the
// order-k look-up.
func suffixHashes(dst []uint64, context, path []int32, maxOrder int) []uint64 {
	h := uint64(0x243f6a8885a308d3)
	for _, part := range [2][]int32{path, context} {
		for i := len(part) - 1; i >= 0 && len(dst) < maxOrder; i-- {
			h = step(h, part[i])
			dst = append(dst, h)
		}
	}
	return dst
}

// likelier orders proposals as they are offered: more occurrences first,
// then the more recently seen.
func likelier(a, b tokCount) int {
	if a.n != b.n {
		return b.n - a.n
	}
	return a.order - b.order
}

// rate is the calibration ratio of order k: observed over predicted
// acceptances, shrunk towards 1 by calibPrior.
func (st *ngramSeq) rate(k int) float64 {
	if k >= len(st.hit) {
		return 1
	}
	return (st.hit[k] + calibPrior) / (st.pred[k] + calibPrior)
}

// Draft implements Drafter.
func (d *NGramDrafter) Draft(seqs []*Seq, shape Shape, trees []*Tree) error {
	for _, s := range seqs {
		d.stateOf(s)
	}
	d.seqs = seqs
	err := d.g.grow(seqs, shape, trees, d.expand)
	d.seqs = nil
	return err
}

func (d *NGramDrafter) expand(queries []Query, k int, out [][]cand) error {
	maxOrder, minOrder, maxMatches, discount := d.params()
	for qi, q := range queries {
		st := d.seqs[q.Seq].DraftState.(*ngramSeq)
		own := st.idx
		var hs [16]uint64
		hashes := suffixHashes(hs[:0], q.Context, q.Path, maxOrder)
		// Back off from the longest matching suffix to shorter ones while
		// fewer than k distinct tokens are proposed. Each order's proposals
		// share the mass its longer orders left unassigned, so a longer,
		// more specific match always ranks first. Of that mass, an order
		// whose proposals were seen total times takes the share
		// total/(total+discount), scaled by how its top proposals fared
		// on the tokens this sequence emitted (the calibration ratio; the
		// shared index's orders are not calibrated), and leaves the rest.
		mass := 1.0
		n := 0
		for _, x := range []*Index{own, d.Shared} {
			if x == nil {
				continue
			}
			for kk := len(hashes); kk >= minOrder && n < k && mass > 0; kk-- {
				d.counts = d.counts[:0]
				var total int
				d.counts, total = x.continuations(kk, hashes[kk-1], maxMatches, d.counts)
				if total == 0 {
					continue
				}
				slices.SortFunc(d.counts, likelier)
				share := float64(total) / (float64(total) + discount)
				if x == own {
					share = min(1, share*st.rate(kk))
				}
				scale := mass * share / float64(total)
				for _, c := range d.counts {
					if n == k {
						break
					}
					if proposed(out[qi], c.tok) {
						continue
					}
					out[qi] = append(out[qi], cand{token: c.tok, cond: float64(c.n) * scale})
					n++
				}
				mass *= 1 - share
			}
			if n > 0 {
				slices.SortStableFunc(out[qi], func(a, b cand) int {
					switch {
					case a.cond > b.cond:
						return -1
					case a.cond < b.cond:
						return 1
					}
					return 0
				})
				break // the shared index only stands in when the request's own history has nothing
			}
		}
	}
	return nil
}

func proposed(cs []cand, tok int32) bool {
	for _, c := range cs {
		if c.token == tok {
			return true
		}
	}
	return false
}
