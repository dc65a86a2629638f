package grammar

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// State is where a partial output stands in a grammar. States are
// immutable values: advancing returns a new State and leaves the old one
// valid, so a speculative tree can branch from any node's state.
type State struct {
	g      *Grammar
	stacks []*frame // tops are character classes; nil is a finished parse
	// A character whose first bytes have been seen: its bits so far, the
	// continuation bytes still needed, and its encoded length.
	cp   rune
	need uint8
	size uint8
	// whole: every completion of the partial character is a valid
	// character that every stack's class matches, so its bits no longer
	// matter and cp is kept 0. States that differ only in the bits of a
	// partial character are then one state (one key), which is what lets
	// a matcher's automaton share them: inside a string, every multibyte
	// prefix of the vocabulary would otherwise be a state of its own.
	whole bool
}

// Start is the state before any output.
func (g *Grammar) Start() State { return State{g: g, stacks: g.start} }

// Dead reports whether no continuation, not even the end, is possible.
func (s State) Dead() bool { return len(s.stacks) == 0 }

// Accepting reports whether the output so far is a complete sentence of
// the grammar (generation may end here).
func (s State) Accepting() bool {
	if s.need != 0 {
		return false
	}
	for _, f := range s.stacks {
		if f == nil {
			return true
		}
	}
	return false
}

// Advance returns the state after the bytes b; a dead state when they
// leave the grammar.
func (s State) Advance(b []byte) State {
	for _, c := range b {
		if s = s.AdvanceByte(c); s.Dead() {
			break
		}
	}
	return s
}

// AdvanceByte returns the state after one byte of output. Bytes of a
// multibyte character are matched as they come: a leading or partial
// character survives while some stack can still match one of its possible
// completions, and the completed character is matched exactly.
func (s State) AdvanceByte(c byte) State {
	dead := State{g: s.g}
	if s.need > 0 {
		if c&0xc0 != 0x80 {
			return dead
		}
		s.need--
		if s.whole {
			if s.need > 0 {
				return s
			}
			return s.advanceRune(0, true)
		}
		s.cp = s.cp<<6 | rune(c&0x3f)
		if s.need > 0 {
			return s.narrow()
		}
		r := s.cp
		if r < minRune[s.size] || r > utf8.MaxRune || r >= 0xd800 && r <= 0xdfff {
			return dead // overlong, surrogate or out of range
		}
		return s.advanceRune(r, false)
	}
	switch {
	case c < 0x80:
		return s.advanceRune(rune(c), false)
	case c&0xe0 == 0xc0:
		s.cp, s.need, s.size = rune(c&0x1f), 1, 2
	case c&0xf0 == 0xe0:
		s.cp, s.need, s.size = rune(c&0x0f), 2, 3
	case c&0xf8 == 0xf0:
		s.cp, s.need, s.size = rune(c&0x07), 3, 4
	default:
		return dead
	}
	return s.narrow()
}

// narrow checks a partial character against the stacks: dead when no
// class can match any completion of it, whole (see State) when every
// completion is a valid character and each class matches all of them or
// none (the stacks matching none are dropped, as the completed character
// would drop them), and otherwise s, matched exactly when it completes.
func (s State) narrow() State {
	shift := 6 * uint(s.need)
	lo := s.cp << shift
	hi := lo | (1<<shift - 1)
	if lo < minRune[s.size] || hi > utf8.MaxRune || hi >= 0xd800 && lo <= 0xdfff {
		// Some completions are invalid: keep the bits to tell them apart.
		if !s.anyOverlaps() {
			return State{g: s.g}
		}
		return s
	}
	var keep []*frame
	for i, f := range s.stacks {
		if f == nil {
			continue // a finished parse takes no character
		}
		switch s.g.elemAt(f).cover(lo, hi) {
		case coverSome:
			return s // matched exactly when it completes
		case coverAll:
			if keep == nil {
				keep = make([]*frame, 0, len(s.stacks)-i)
			}
			keep = append(keep, f)
		}
	}
	if len(keep) == 0 {
		return State{g: s.g}
	}
	return State{g: s.g, stacks: keep, need: s.need, size: s.size, whole: true}
}

// minRune is the smallest rune each encoded length may carry.
var minRune = [5]rune{0, 0, 0x80, 0x800, 0x10000}

// anyOverlaps reports whether some stack's class can match a completion
// of the partial character.
func (s *State) anyOverlaps() bool {
	shift := 6 * uint(s.need)
	lo := max(s.cp<<shift, minRune[s.size])
	hi := min(s.cp<<shift|(1<<shift-1), utf8.MaxRune)
	if lo > hi || lo >= 0xd800 && hi <= 0xdfff {
		return false // only overlong, out of range or surrogate completions
	}
	for _, f := range s.stacks {
		if f != nil && s.g.elemAt(f).overlaps(lo, hi) {
			return true
		}
	}
	return false
}

// advanceRune matches one whole character against every stack (all of
// them, when every stack is known to match it).
//
// Past MaxStacks it keeps the first MaxStacks ways on (earlier stacks and
// alternatives first) instead of giving up. Compile refuses any one
// position that opens more than MaxBranches ways, but several parses
// alive at once (alternatives sharing a prefix, each then opening up to
// MaxBranches) can add up past MaxStacks, and no compile-time check can
// tell every such grammar: ambiguity is undecidable. Each kept stack is a
// parse of the output so far that can finish (expand's invariant), so the
// output stays in the language and is never stranded; only a grammar that
// ambiguous loses some of its sentences.
func (s State) advanceRune(r rune, all bool) State {
	g := s.g
	var out []*frame
	ok := true
	for _, f := range s.stacks {
		if f == nil || !all && !g.elemAt(f).matches(r) {
			continue
		}
		if out, ok = g.expand(out, g.after(f)); !ok {
			out = dedup(out) // expand stopped at MaxStacks+1 whole stacks
			out = out[:min(len(out), MaxStacks)]
			return State{g: g, stacks: out}
		}
	}
	return State{g: g, stacks: dedup(out)}
}

// dedup drops repeated stacks (equal positions all the way down), which
// ambiguous grammars produce and which would otherwise multiply.
func dedup(st []*frame) []*frame {
	if len(st) < 2 {
		return st
	}
	out := st[:0]
	for i, f := range st {
		dup := false
		for _, h := range st[:i] {
			if sameStack(f, h) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, f)
		}
	}
	return out
}

func sameStack(a, b *frame) bool {
	for a != nil && b != nil {
		if a == b {
			return true
		}
		if a.rule != b.rule || a.alt != b.alt || a.idx != b.idx {
			return false
		}
		a, b = a.next, b.next
	}
	return a == b
}

// Key is a canonical encoding of the state: equal keys, equal futures.
// Masks are cached by it.
func (s State) Key() string {
	parts := make([]string, 0, len(s.stacks))
	var buf []byte
	for _, f := range s.stacks {
		buf = buf[:0]
		for ; f != nil; f = f.next {
			// rule+1 is never 0, so the 0 byte below ends a stack
			// unambiguously.
			buf = binary.AppendUvarint(buf, uint64(f.rule)+1)
			buf = binary.AppendUvarint(buf, uint64(f.alt))
			buf = binary.AppendUvarint(buf, uint64(f.idx))
		}
		buf = append(buf, 0)
		parts = append(parts, string(buf))
	}
	slices.Sort(parts)
	key := []byte{byte(s.need), byte(s.size)}
	if s.whole {
		key[0] |= 0x80 // need is at most 3
	}
	key = binary.AppendUvarint(key, uint64(s.cp))
	for _, p := range parts {
		key = append(key, p...)
	}
	return string(key)
}
