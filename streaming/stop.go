package streaming

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// maxWordFirsts is the largest number of distinct stop first bytes for which
// the root fast path compares eight bytes at a time against each of them
// (SWAR); with more it scans with a table, one load per byte.
const maxWordFirsts = 4

// indexThreshold is the text length from which a stop set with a single
// first byte is searched with bytes.IndexByte, which is vectorised but has a
// call overhead that token-sized pushes would not amortise.
const indexThreshold = 64

const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// StopMatcher finds stop strings in streamed text, holding back only what
// could still become a match.
//
// It runs an Aho–Corasick automaton over the bytes of all stop strings. The
// state after each byte is the longest suffix of the text so far that is a
// prefix of some stop, so its depth is exactly the minimal hold-back of
// invariant I5, and each byte costs one table lookup however many stops
// there are. Because the automaton sees the stream as one continuous byte
// sequence, the match that completes first wins regardless of how the text
// was split into pushes; on a tie at the same end the longer stop wins, as
// it is the one with the earlier start.
//
// A StopMatcher is not safe for concurrent use; each stream owns one.
type StopMatcher struct {
	stops   []string // as given (empty ones dropped); index = stop id
	lens    []int32  // byte length of each stop as matched
	include bool     // release the stop itself on a match

	// The automaton. Bytes are mapped to classes so the transition table
	// has one column per distinct byte used in the stops plus one for all
	// other bytes; that keeps it small enough to stay in L1.
	class      [256]uint8
	nclass     int
	trans      []int32 // trans[state*nclass+class] = next state
	depth      []int32 // length of the stop prefix a state stands for
	out        []int32 // stop id matched on entering a state, for states >= firstMatch
	firstMatch int32   // states are numbered so that exactly those >= firstMatch complete a stop

	// The root fast path: bytes that leave the root state.
	isFirst   [256]bool
	nfirst    int                   // number of distinct first bytes
	firstWord [maxWordFirsts]uint64 // each first byte repeated in all eight lanes (padded by repeating the first)

	state   int32
	held    []byte // unreleased text, always the automaton's suffix widened to a character boundary
	done    bool
	matched int32 // stop id, when done
}

// NewStopMatcher builds a matcher for stops. Empty strings are ignored and
// duplicates are harmless; with no non-empty stop the matcher passes text
// through unchanged. When includeStop is set, a matched stop string is
// released with the text before it instead of being cut off.
//
// Push is fed well-formed UTF-8, so a stop holding invalid UTF-8 could only
// ever match inside a character (splitting it) or never. Such stops are
// matched in their decoded form (invalid subparts as U+FFFD), which is how
// their bytes would appear in sanitized text, and keeps every cut on a
// character boundary.
func NewStopMatcher(stops []string, includeStop bool) *StopMatcher {
	m := &StopMatcher{include: includeStop, matched: -1}
	var pats [][]byte
	for _, s := range stops {
		if s == "" {
			continue
		}
		var san Sanitizer
		p := san.Flush(san.Write(nil, []byte(s)))
		m.stops = append(m.stops, s)
		m.lens = append(m.lens, int32(len(p)))
		pats = append(pats, p)
	}
	if len(pats) == 0 {
		return m
	}
	m.build(pats)
	return m
}

// build constructs the automaton: a trie of the patterns, failure links in
// breadth-first order, and the full (dense) transition function, so Push
// never follows failure links at run time.
func (m *StopMatcher) build(pats [][]byte) {
	// Byte classes: 0 for bytes no stop uses, 1..k for the others. When all
	// 256 values occur there is no "other" class and each byte is its own.
	var used [256]bool
	maxLen := 0
	for _, p := range pats {
		for _, b := range p {
			used[b] = true
		}
		maxLen = max(maxLen, len(p))
		m.isFirst[p[0]] = true
	}
	k := 0
	for b := range used {
		if used[b] {
			k++
			m.class[b] = uint8(k)
		}
	}
	m.nclass = k + 1
	if k == 256 {
		for b := range m.class {
			m.class[b] = uint8(b)
		}
		m.nclass = 256
	}
	for b, f := range m.isFirst {
		if f {
			if m.nfirst < maxWordFirsts {
				m.firstWord[m.nfirst] = uint64(b) * lsbs
			}
			m.nfirst++
		}
	}
	for k := min(m.nfirst, maxWordFirsts); k < maxWordFirsts; k++ {
		m.firstWord[k] = m.firstWord[0]
	}

	// Trie. -1 marks a missing edge until the transitions are completed.
	nc := m.nclass
	trans := make([]int32, nc)
	for i := range trans {
		trans[i] = -1
	}
	depth := []int32{0}
	term := []int32{-1} // stop id whose whole text ends at this node
	for id, p := range pats {
		s := int32(0)
		for _, b := range p {
			c := int(m.class[b])
			if trans[int(s)*nc+c] < 0 {
				next := int32(len(depth))
				trans[int(s)*nc+c] = next
				depth = append(depth, depth[s]+1)
				term = append(term, -1)
				for range nc {
					trans = append(trans, -1)
				}
			}
			s = trans[int(s)*nc+c]
		}
		if term[s] < 0 {
			term[s] = int32(id) // a duplicate keeps the first id
		}
	}
	n := len(depth)

	// Failure links and dense transitions, breadth first so that a state's
	// failure target (which is shallower) is complete before the state.
	fail := make([]int32, n)
	out := make([]int32, n) // longest stop that is a suffix of the state's text
	out[0] = -1
	queue := make([]int32, 0, n)
	for c := 0; c < nc; c++ {
		if t := trans[c]; t < 0 {
			trans[c] = 0
		} else {
			fail[t] = 0
			queue = append(queue, t)
		}
	}
	for qi := 0; qi < len(queue); qi++ {
		s := queue[qi]
		// The state's own text is the longest candidate; otherwise the
		// longest stop ending here is the one its failure state carries.
		if term[s] >= 0 {
			out[s] = term[s]
		} else {
			out[s] = out[fail[s]]
		}
		for c := 0; c < nc; c++ {
			t := trans[int(s)*nc+c]
			if t < 0 {
				trans[int(s)*nc+c] = trans[int(fail[s])*nc+c]
				continue
			}
			fail[t] = trans[int(fail[s])*nc+c]
			queue = append(queue, t)
		}
	}

	// Renumber so the states that complete a stop come last: the hot loop
	// then tests a match with a single compare against firstMatch.
	perm := make([]int32, n)
	next := int32(0)
	for s := 0; s < n; s++ {
		if out[s] < 0 {
			perm[s] = next
			next++
		}
	}
	m.firstMatch = next
	for s := 0; s < n; s++ {
		if out[s] >= 0 {
			perm[s] = next
			next++
		}
	}
	m.trans = make([]int32, n*nc)
	m.depth = make([]int32, n)
	m.out = make([]int32, n)
	for s := 0; s < n; s++ {
		ns := int(perm[s])
		m.depth[ns] = depth[s]
		m.out[ns] = out[s]
		for c := 0; c < nc; c++ {
			m.trans[ns*nc+c] = perm[trans[s*nc+c]]
		}
	}
	// At most maxLen-1 bytes of stop prefix plus 3 bytes of widening are
	// held; allocating that now keeps Push allocation-free.
	m.held = make([]byte, 0, maxLen+3)
}

// Push feeds well-formed UTF-8 text (a whole number of characters). It
// appends to dst the text that can be released and returns it, plus
// matched=true when a stop string completed inside text. On a match dst ends
// exactly before the stop (or after it when includeStop), and the matcher is
// done: later Push calls return dst unchanged and matched=true.
func (m *StopMatcher) Push(dst, text []byte) (out []byte, matched bool) {
	if m.done {
		return dst, true
	}
	if m.trans == nil {
		return append(dst, text...), false
	}
	trans, class, nc, firstMatch := m.trans, &m.class, m.nclass, m.firstMatch
	s := m.state
	n := len(text)
	for i := 0; i < n; {
		if s == 0 {
			// At the root nothing is pending: jump to the next byte that
			// can begin a stop.
			i = m.skip(text, i)
			if i == n {
				break
			}
		}
		s = trans[int(s)*nc+int(class[text[i]])]
		i++
		if s >= firstMatch {
			return m.finish(dst, text, i, s), true
		}
	}
	m.state = s
	return m.release(dst, text), false
}

// skip returns the index of the first byte at or after i that begins a stop,
// or len(text).
func (m *StopMatcher) skip(text []byte, i int) int {
	switch {
	case m.nfirst == 1 && len(text)-i >= indexThreshold:
		if j := bytes.IndexByte(text[i:], byte(m.firstWord[0])); j >= 0 {
			return i + j
		}
		return len(text)
	case m.nfirst <= maxWordFirsts:
		// Eight bytes at a time: a lane of w^f is zero where the byte
		// equals f, and (x-lsbs)&^x&msbs flags the lowest zero lane
		// exactly (lanes above it may be flagged falsely by the borrow,
		// which is harmless since only the lowest is used).
		f0, f1, f2, f3 := m.firstWord[0], m.firstWord[1], m.firstWord[2], m.firstWord[3]
		for ; i+8 <= len(text); i += 8 {
			w := binary.LittleEndian.Uint64(text[i:])
			x0, x1, x2, x3 := w^f0, w^f1, w^f2, w^f3
			t := (x0-lsbs)&^x0 | (x1-lsbs)&^x1 | (x2-lsbs)&^x2 | (x3-lsbs)&^x3
			if t &= msbs; t != 0 {
				return i + bits.TrailingZeros64(t)/8
			}
		}
	default:
		// Many first bytes: a table lookup per byte, eight per step while
		// none of them begins a stop.
		for ; i+8 <= len(text); i += 8 {
			w := text[i : i+8 : i+8]
			f := &m.isFirst
			if f[w[0]] || f[w[1]] || f[w[2]] || f[w[3]] || f[w[4]] || f[w[5]] || f[w[6]] || f[w[7]] {
				break
			}
		}
	}
	for i < len(text) && !m.isFirst[text[i]] {
		i++
	}
	return i
}

// release keeps the minimal hold of held+text and appends the rest to dst.
// The hold is the automaton's depth, widened backwards over continuation
// bytes so that released text never ends inside a character. Since stops are
// decoded to well-formed UTF-8, a held stop prefix always begins with a
// leading byte and the widening never fires; it stays as a cheap guard of
// invariant I1 should that ever change.
func (m *StopMatcher) release(dst, text []byte) []byte {
	hl := len(m.held)
	total := hl + len(text)
	at := func(k int) byte { // byte k of held+text
		if k < hl {
			return m.held[k]
		}
		return text[k-hl]
	}
	hold := int(m.depth[m.state])
	for hold < total && hold > 0 && isCont(at(total-hold)) {
		hold++
	}
	rel := total - hold
	if rel <= hl {
		dst = append(dst, m.held[:rel]...)
		m.held = append(m.held[:copy(m.held, m.held[rel:])], text...)
		return dst
	}
	dst = append(dst, m.held...)
	dst = append(dst, text[:rel-hl]...)
	m.held = append(m.held[:0], text[rel-hl:]...)
	return dst
}

// finish handles a match completed by text[end-1]: it releases held+text up
// to the start of the stop (or its end when including it) and drops the rest.
func (m *StopMatcher) finish(dst, text []byte, end int, s int32) []byte {
	id := m.out[s]
	hl := len(m.held)
	cut := hl + end // end of the stop within held+text
	if !m.include {
		// The stop starts inside held+text: everything before it was
		// either held (it was a prefix) or is part of this text.
		cut -= int(m.lens[id])
	}
	if cut <= hl {
		dst = append(dst, m.held[:cut]...)
	} else {
		dst = append(dst, m.held...)
		dst = append(dst, text[:cut-hl]...)
	}
	m.done = true
	m.matched = id
	m.held = m.held[:0]
	m.state = 0
	return dst
}

// Flush appends held-back text (at the end of a stream that did not match)
// and returns it. After a match there is nothing to flush.
func (m *StopMatcher) Flush(dst []byte) []byte {
	dst = append(dst, m.held...)
	m.held = m.held[:0]
	m.state = 0
	return dst
}

// Held returns the number of bytes currently held back.
func (m *StopMatcher) Held() int { return len(m.held) }

// Matched returns the stop string that matched, as it was given to
// NewStopMatcher, and whether one has.
func (m *StopMatcher) Matched() (stop string, ok bool) {
	if !m.done {
		return "", false
	}
	return m.stops[m.matched], true
}

// Reset returns the matcher to its initial state for a new stream, keeping
// the automaton.
func (m *StopMatcher) Reset() {
	m.state = 0
	m.held = m.held[:0]
	m.done = false
	m.matched = -1
}
