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
//
// The nodes are stored in depth-first preorder, so a walk reads the arrays
// front to back and skips a subtree by a jump: node i (node 0 is the root,
// the empty prefix) is its parent's child by byte edge[i], at depth
// depth[i], and its subtree is the nodes i to end[i]-1. The tokens whose
// bytes end at node i are ids[tokAt[i]:tokAt[i+1]].
type Trie struct {
	vocab    int
	pieces   [][]byte
	eog      []int32 // end-of-generation tokens: allowed when the grammar accepts
	edge     []byte
	depth    []int32
	end      []int32
	tokAt    []int32
	ids      []int32
	maxDepth int32
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
	// A node is a range of the sorted order sharing a prefix of length
	// depth; its children are the subranges agreeing on the next byte.
	var build func(lo, hi int, depth int32, b byte)
	build = func(lo, hi int, depth int32, b byte) {
		i := len(t.edge)
		t.edge = append(t.edge, b)
		t.depth = append(t.depth, depth)
		t.end = append(t.end, 0)
		t.tokAt = append(t.tokAt, int32(len(t.ids)))
		t.maxDepth = max(t.maxDepth, depth)
		k := lo
		for k < hi && len(pieces[order[k]]) == int(depth) {
			t.ids = append(t.ids, order[k])
			k++
		}
		for k < hi {
			c := pieces[order[k]][depth]
			j := k
			for j < hi && pieces[order[j]][depth] == c {
				j++
			}
			build(k, j, depth+1, c)
			k = j
		}
		t.end[i] = int32(len(t.edge))
	}
	build(0, len(order), 0, 0)
	t.tokAt = append(t.tokAt, int32(len(t.ids)))
	return t
}

// Vocab is the number of tokens.
func (t *Trie) Vocab() int { return t.vocab }

// Nodes is the number of trie nodes (the bound on one mask's walk).
func (t *Trie) Nodes() int { return len(t.edge) }

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
// It advances the pushdown state at every live node; Matcher.Mask gives
// the same mask faster.
func (t *Trie) Mask(s State, dst []uint64) {
	t.maskStart(s, dst)
	at := make([]State, t.maxDepth+1) // at[d]: the state at the current node of depth d
	at[0] = s
	for i := int32(1); i < int32(len(t.edge)); {
		d := t.depth[i]
		ns := at[d-1].AdvanceByte(t.edge[i])
		if ns.Dead() {
			i = t.end[i]
			continue
		}
		at[d] = ns
		t.setTokens(i, dst)
		i++
	}
}

// maskStart clears dst and sets the end-of-generation tokens when s is
// complete.
func (t *Trie) maskStart(s State, dst []uint64) {
	clear(dst)
	if s.Accepting() {
		for _, id := range t.eog {
			dst[id/64] |= 1 << (uint(id) % 64)
		}
	}
}

// setTokens sets the bits of the tokens ending at node i.
func (t *Trie) setTokens(i int32, dst []uint64) {
	for _, id := range t.ids[t.tokAt[i]:t.tokAt[i+1]] {
		dst[uint32(id)/64] |= 1 << (uint32(id) % 64) // ids are never negative
	}
}

// Matcher computes masks and single-token tests for the states of one
// grammar over one trie. It builds, lazily, the deterministic automaton of
// the states it meets: each state gets a number when first seen (states
// with equal keys have equal futures), and each (state, byte) transition
// is computed once and then read from a table. A mask's walk over the trie
// thus costs a table read per node once the automaton around the state is
// known, where advancing the pushdown state at every node costs an
// expansion and allocations. This matters because the states of a
// bounded string are all distinct (each position is one), so the mask
// cache alone rarely hits there, while their transitions repeat.
// Not safe for concurrent use.
type Matcher struct {
	trie *Trie
	ids  map[string]int32 // state key → number
	// states[k] is state k; next[k<<8|b] its transition on byte b:
	// unknown, dead, or state number + firstState.
	states []State
	next   []int32
	masks  [][]uint64 // masks[k]: state k's mask, once computed
	// nMasks counts the masks kept, bounded by maxMasks (about
	// MaxMaskCacheBytes).
	nMasks, maxMasks int
	// last is the state looked up most recently, and lastID its number:
	// a sampler's scan tests many tokens at one state.
	last   State
	lastID int32
	atK    []int32 // walk's scratch
	atS    []State
}

// Transition table entries.
const (
	unknown    = 0
	dead       = 1
	firstState = 2
)

// untracked is the number of a state met after the automaton filled up:
// its transitions are computed each time.
const untracked = -1

// MaxMaskCacheBytes bounds the masks one Matcher keeps.
const MaxMaskCacheBytes = 4 << 20

// MaxAutomatonStates bounds the states one Matcher numbers (a kilobyte of
// transitions each). Past it, new states are advanced directly, and the
// next lookup starts the automaton afresh.
const MaxAutomatonStates = 2048

// NewMatcher returns a matcher over t.
func NewMatcher(t *Trie) *Matcher {
	m := &Matcher{trie: t, maxMasks: max(4, MaxMaskCacheBytes/(8*t.MaskWords()))}
	m.reset()
	return m
}

func (m *Matcher) reset() {
	m.ids = map[string]int32{}
	m.states, m.next, m.masks = m.states[:0], m.next[:0], m.masks[:0]
	m.nMasks = 0
	m.last, m.lastID = State{}, untracked
}

// number returns s's state number, numbering it if it is new; untracked
// when the automaton is full.
func (m *Matcher) number(s State) int32 {
	key := s.Key()
	if k, ok := m.ids[key]; ok {
		return k
	}
	if len(m.states) >= MaxAutomatonStates {
		return untracked
	}
	k := int32(len(m.states))
	m.ids[key] = k
	m.states = append(m.states, s)
	m.next = append(m.next, make([]int32, 256)...)
	m.masks = append(m.masks, nil)
	return k
}

// lookup returns the number of s, starting the automaton afresh when it
// is full (lookups happen between walks, so no walk holds old numbers).
func (m *Matcher) lookup(s State) int32 {
	if m.lastID != untracked && sameState(s, m.last) {
		return m.lastID
	}
	if len(m.states) >= MaxAutomatonStates {
		m.reset()
	}
	k := m.number(s)
	m.last, m.lastID = s, k
	return k
}

// sameState reports whether a and b are the same value (not merely equal
// states): states are immutable, so sharing the stacks' backing array
// means being the same state.
func sameState(a, b State) bool {
	return a.g == b.g && len(a.stacks) == len(b.stacks) && len(a.stacks) > 0 &&
		&a.stacks[0] == &b.stacks[0] && a.cp == b.cp && a.need == b.need && a.size == b.size
}

// step is the transition from state k (or, untracked, from s) on byte c:
// the next state's number and, when it is untracked, the state itself;
// ok is false when c leaves the grammar.
func (m *Matcher) step(k int32, s State, c byte) (int32, State, bool) {
	if k == untracked {
		ns := s.AdvanceByte(c)
		if ns.Dead() {
			return untracked, State{}, false
		}
		return m.number(ns), ns, true
	}
	at := int(k)<<8 | int(c)
	switch t := m.next[at]; t {
	case dead:
		return untracked, State{}, false
	case unknown:
	default:
		return t - firstState, State{}, true
	}
	ns := m.states[k].AdvanceByte(c)
	if ns.Dead() {
		m.next[at] = dead
		return untracked, State{}, false
	}
	nk := m.number(ns)
	if nk != untracked {
		m.next[at] = nk + firstState
	}
	return nk, ns, true
}

// Allows reports whether token id may follow s (as Trie.Allows), reading
// the automaton's transitions for the token's bytes.
func (m *Matcher) Allows(s State, id int32) bool {
	t := m.trie
	if id < 0 || int(id) >= t.vocab {
		return false
	}
	if slices.Contains(t.eog, id) {
		return s.Accepting()
	}
	p := t.pieces[id]
	if len(p) == 0 {
		return false
	}
	k := m.lookup(s)
	var ok bool
	for _, c := range p {
		if k, s, ok = m.step(k, s, c); !ok {
			return false
		}
	}
	return true
}

// Mask returns the allowed-token mask of s (as Trie.Mask). The slice is
// the matcher's and must not be modified.
func (m *Matcher) Mask(s State) []uint64 {
	k := m.lookup(s)
	if k != untracked && m.masks[k] != nil {
		return m.masks[k]
	}
	mk := make([]uint64, m.trie.MaskWords())
	m.walk(k, s, mk)
	if k != untracked && m.nMasks < m.maxMasks {
		m.masks[k] = mk
		m.nMasks++
	}
	return mk
}

// walk is Trie.Mask reading the automaton: a transition already known
// costs one table read, the rest go through step.
func (m *Matcher) walk(k int32, s State, dst []uint64) {
	t := m.trie
	t.maskStart(s, dst)
	if cap(m.atK) < int(t.maxDepth)+1 {
		m.atK = make([]int32, t.maxDepth+1)
		m.atS = make([]State, t.maxDepth+1)
	}
	// atK[d] is the state number at the current node of depth d; atS[d]
	// the state itself where that number is untracked.
	atK, atS := m.atK[:t.maxDepth+1], m.atS[:t.maxDepth+1]
	atK[0], atS[0] = k, s
	for i := int32(1); i < int32(len(t.edge)); {
		d := t.depth[i]
		pk := atK[d-1]
		if pk != untracked {
			switch e := m.next[int(pk)<<8|int(t.edge[i])]; {
			case e >= firstState:
				atK[d] = e - firstState
				t.setTokens(i, dst)
				i++
				continue
			case e == dead:
				i = t.end[i]
				continue
			}
		}
		nk, ns, ok := m.step(pk, atS[d-1], t.edge[i])
		if !ok {
			i = t.end[i]
			continue
		}
		atK[d], atS[d] = nk, ns
		t.setTokens(i, dst)
		i++
	}
	clear(atS) // drop the references to untracked states
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
