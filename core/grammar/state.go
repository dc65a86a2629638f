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
		s.cp = s.cp<<6 | rune(c&0x3f)
		s.need--
		if s.need > 0 {
			if !s.anyOverlaps() {
				return dead
			}
			return s
		}
		r := s.cp
		if r < minRune[s.size] || r > utf8.MaxRune || r >= 0xd800 && r <= 0xdfff {
			return dead // overlong, surrogate or out of range
		}
		s.cp, s.size = 0, 0
		return s.advanceRune(r)
	}
	switch {
	case c < 0x80:
		return s.advanceRune(rune(c))
	case c&0xe0 == 0xc0:
		s.cp, s.need, s.size = rune(c&0x1f), 1, 2
	case c&0xf0 == 0xe0:
		s.cp, s.need, s.size = rune(c&0x0f), 2, 3
	case c&0xf8 == 0xf0:
		s.cp, s.need, s.size = rune(c&0x07), 3, 4
	default:
		return dead
	}
	if !s.anyOverlaps() {
		return dead
	}
	return s
}

// minRune is the smallest rune each encoded length may carry.
var minRune = [5]rune{0, 0, 0x80, 0x800, 0x10000}

// anyOverlaps reports whether some stack's class can match a completion
// of the partial character.
func (s *State) anyOverlaps() bool {
	shift := 6 * uint(s.need)
	lo := max(s.cp<<shift, minRune[s.size])
	hi := min(s.cp<<shift|(1<<shift-1), utf8.MaxRune)
	if lo > hi {
		return false
	}
	for _, f := range s.stacks {
		if f != nil && s.g.elemAt(f).overlaps(lo, hi) {
			return true
		}
	}
	return false
}

// advanceRune matches one whole character against every stack.
func (s State) advanceRune(r rune) State {
	g := s.g
	var out []*frame
	ok := true
	for _, f := range s.stacks {
		if f == nil || !g.elemAt(f).matches(r) {
			continue
		}
		if out, ok = g.expand(out, g.after(f)); !ok {
			return State{g: g} // past the limits: dead, never unbounded
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
	key = binary.AppendUvarint(key, uint64(s.cp))
	for _, p := range parts {
		key = append(key, p...)
	}
	return string(key)
}
