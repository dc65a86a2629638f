package grammar

import (
	"math"
	"slices"
)

// Trie is a vocabulary's tokens arranged by their bytes, so that the
// tokens a state allows are found in one walk that advances the state once
// per trie edge (a prefix shared by many tokens is matched once) and skips
// every subtree whose prefix already leaves the grammar. It is immutable
// and safe to share between requests.
type Trie struct {
	vocab  int
	pieces [][]byte
	eog    []int32 // end-of-generation tokens: allowed when the grammar accepts
	// Node i's edges are edges[first[i]:first[i+1]] (sorted by byte); the
	// tokens whose bytes end at node i are ids[tokAt[i]:tokAt[i+1]].
	first []int32
	edges []edge
	tokAt []int32
	ids   []int32
}

type edge struct {
	b    byte
	node int32
}

// NewTrie builds the trie of a vocabulary: pieces[id] are token id's
// output bytes, eog[id] marks the tokens that end generation. A token
// with no bytes that does not end generation (a control token) is never
// allowed.
func NewTrie(pieces [][]byte, eog []bool) *Trie {
	t := &Trie{vocab: len(pieces), pieces: pieces}
	order := make([]int32, 0, len(pieces))
	for id, p := range pieces {
		switch {
		case id < len(eog) && eog[id]:
			t.eog = append(t.eog, int32(id))
		case len(p) > 0:
			order = append(order, int32(id))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := slices.Compare(pieces[a], pieces[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	// Build breadth-first so each node's edges are contiguous: nodes are
	// ranges of the sorted order sharing a prefix of length depth.
	type span struct{ lo, hi, depth int }
	queue := []span{{0, len(order), 0}}
	t.first = append(t.first, 0)
	for qi := 0; qi < len(queue); qi++ {
		sp := queue[qi]
		t.tokAt = append(t.tokAt, int32(len(t.ids)))
		i := sp.lo
		for i < sp.hi && len(pieces[order[i]]) == sp.depth {
			t.ids = append(t.ids, order[i])
			i++
		}
		for i < sp.hi {
			b := pieces[order[i]][sp.depth]
			j := i
			for j < sp.hi && pieces[order[j]][sp.depth] == b {
				j++
			}
			t.edges = append(t.edges, edge{b: b, node: int32(len(queue))})
			queue = append(queue, span{i, j, sp.depth + 1})
			i = j
		}
		t.first = append(t.first, int32(len(t.edges)))
	}
	t.tokAt = append(t.tokAt, int32(len(t.ids)))
	return t
}

// Vocab is the number of tokens.
func (t *Trie) Vocab() int { return t.vocab }

// Nodes is the number of trie nodes (the bound on one mask's walk).
func (t *Trie) Nodes() int { return len(t.first) - 1 }

// MaskWords is the length of a mask: one bit per token.
func (t *Trie) MaskWords() int { return (t.vocab + 63) / 64 }

// Allows reports whether token id may follow state s.
func (t *Trie) Allows(s State, id int32) bool {
	if id < 0 || int(id) >= t.vocab {
		return false
	}
	if slices.Contains(t.eog, id) {
		return s.Accepting()
	}
	p := t.pieces[id]
	return len(p) > 0 && !s.Advance(p).Dead()
}

// Mask writes into dst (MaskWords words, cleared first) one bit per token
// that may follow s: tokens whose bytes keep the output inside the
// grammar, and the end-of-generation tokens when the output is complete.
func (t *Trie) Mask(s State, dst []uint64) {
	clear(dst)
	if s.Accepting() {
		for _, id := range t.eog {
			dst[id/64] |= 1 << (uint(id) % 64)
		}
	}
	t.walk(0, s, dst)
}

func (t *Trie) walk(node int32, s State, dst []uint64) {
	for _, e := range t.edges[t.first[node]:t.first[node+1]] {
		ns := s.AdvanceByte(e.b)
		if ns.Dead() {
			continue
		}
		for _, id := range t.ids[t.tokAt[e.node]:t.tokAt[e.node+1]] {
			dst[id/64] |= 1 << (uint(id) % 64)
		}
		t.walk(e.node, ns, dst)
	}
}

// Matcher computes masks for the states of one grammar over one trie,
// remembering recent ones: generation revisits the same states often
// (inside a free-form string every position has the same future), so
// most steps cost a lookup. Not safe for concurrent use.
type Matcher struct {
	trie  *Trie
	cache map[string][]uint64
	// maxCached bounds the cache's masks (about MaxMaskCacheBytes).
	maxCached int
}

// MaxMaskCacheBytes bounds the masks one Matcher keeps.
const MaxMaskCacheBytes = 4 << 20

// NewMatcher returns a matcher over t.
func NewMatcher(t *Trie) *Matcher {
	return &Matcher{trie: t, cache: map[string][]uint64{}, maxCached: max(4, MaxMaskCacheBytes/(8*t.MaskWords()))}
}

// Trie is the matcher's trie.
func (m *Matcher) Trie() *Trie { return m.trie }

// Mask returns the allowed-token mask of s. The slice is the matcher's
// and must not be modified.
func (m *Matcher) Mask(s State) []uint64 {
	key := s.Key()
	if mk, ok := m.cache[key]; ok {
		return mk
	}
	if len(m.cache) >= m.maxCached {
		clear(m.cache) // simple and bounded; the working set refills it
	}
	mk := make([]uint64, m.trie.MaskWords())
	m.trie.Mask(s, mk)
	m.cache[key] = mk
	return mk
}

// Allowed reports whether bit id of mask is set.
func Allowed(mask []uint64, id int32) bool { return mask[id/64]&(1<<(uint(id)%64)) != 0 }

// Apply writes logits with every token outside mask set to -Inf into dst
// (len(logits)) and returns it, and whether any token is allowed.
func Apply(mask []uint64, logits, dst []float32) ([]float32, bool) {
	neg := float32(math.Inf(-1))
	any := false
	for w, bits := range mask {
		base := w * 64
		end := min(base+64, len(logits))
		if bits == 0 {
			for i := base; i < end; i++ {
				dst[i] = neg
			}
			continue
		}
		any = true
		if bits == math.MaxUint64 && end-base == 64 {
			copy(dst[base:end], logits[base:end])
			continue
		}
		for i := base; i < end; i++ {
			if bits&(1<<uint(i-base)) != 0 {
				dst[i] = logits[i]
			} else {
				dst[i] = neg
			}
		}
	}
	return dst, any
}
