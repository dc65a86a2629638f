// Package grammar constrains generation to a formal language: a GBNF
// grammar (llama.cpp's grammar format) or a JSON schema converted to one.
//
// A Grammar is compiled once per request; a State is the position of a
// partial output in it, advanced byte by byte (so a multibyte character
// split across tokens is matched exactly as it is generated). A Trie over
// a vocabulary's byte strings turns a State into the set of tokens that
// keep the output inside the language.
//
// The matcher is a pushdown automaton: a State holds a set of stacks of
// grammar positions (the element to match next, and under it where each
// enclosing rule resumes). Every stack's top is a character element, so
// one byte advances each stack in constant work plus the expansion of the
// rules that follow it.
package grammar

import (
	"cmp"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Limits that keep a hostile or accidental grammar from costing unbounded
// time or memory. A state that would exceed them is dead (no byte
// continues it), never a crash or a hang.
const (
	// MaxRules bounds the rules of a grammar, helper rules included.
	MaxRules = 1 << 14
	// MaxGrammarBytes bounds the GBNF text.
	MaxGrammarBytes = 1 << 20
	// MaxStacks bounds the stacks of one state: an ambiguous grammar can
	// keep many parses alive at once. A state that would have more keeps
	// the first MaxStacks (State.advanceRune).
	MaxStacks = 512
	// MaxDepth bounds a stack's height (the nesting of rules in progress).
	MaxDepth = 1024
	// MaxElements bounds the elements of all rules together (a literal's
	// every character is one, and {m,n} copies what it repeats), so the
	// compiled grammar's memory follows from it: tens of bytes each.
	MaxElements = 1 << 18
	// MaxNesting bounds the parentheses open at once in GBNF text and
	// the groups in a pattern: parsing them recurses, and each level is a
	// rule the matcher's stacks nest through.
	MaxNesting = 128
	// MaxBranches bounds the stacks one expansion may open from a single
	// position (the ways the output may go on there: 2,000 optional
	// properties in a row are 2,001 of them). Compile refuses a grammar
	// with a position past it: its sentences through that position would
	// otherwise be cut to the first MaxStacks ways. Half of MaxStacks
	// leaves room for a few such positions being open at once.
	MaxBranches = MaxStacks / 2
)

// elem is one element of an alternative: a character class, or a
// reference to a rule.
type elem struct {
	ref int32 // rule index; -1 for a character class
	// need is how many frames above its own the stack must still be able
	// to grow, from this element to its alternative's end, for the
	// alternative to finish (analyze.go). A frame placed here at height h
	// can finish only if h+need <= MaxDepth; expand never places one
	// that cannot, so no live state is a dead end by depth.
	need   int32
	ranges []rune // inclusive pairs lo, hi (character class)
	neg    bool   // the class matches what is outside ranges
}

// matches reports whether the character class elem matches r.
func (e *elem) matches(r rune) bool {
	in := false
	for i := 0; i+1 < len(e.ranges); i += 2 {
		if r >= e.ranges[i] && r <= e.ranges[i+1] {
			in = true
			break
		}
	}
	return in != e.neg
}

// matchesNothing reports whether the class matches no character at all
// (no Unicode scalar value: surrogates are not characters): "[^\x00-
// \U0010FFFF]" in GBNF, or a pattern's class of only the characters JSON
// must escape, which the converter leaves out. A stack with such a class
// on top is alive and can never go on, so analyze treats its alternative
// as one that never finishes.
func (e *elem) matchesNothing() bool {
	if !e.neg {
		for i := 0; i+1 < len(e.ranges); i += 2 {
			if lo, hi := e.ranges[i], e.ranges[i+1]; lo <= hi && hi >= 0 && lo <= utf8.MaxRune &&
				!(lo >= 0xd800 && hi <= 0xdfff) {
				return false
			}
		}
		return true
	}
	// Negated: nothing is left when the excluded ranges, with the
	// surrogates, cover every rune. Sweep up from 0 over the ranges in
	// order of their starts.
	type span struct{ lo, hi rune }
	spans := []span{{0xd800, 0xdfff}}
	for i := 0; i+1 < len(e.ranges); i += 2 {
		spans = append(spans, span{e.ranges[i], e.ranges[i+1]})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	next := rune(0) // the smallest rune not yet known to be excluded
	for _, s := range spans {
		if s.lo > next {
			return false
		}
		next = max(next, s.hi+1)
	}
	return next > utf8.MaxRune
}

// overlaps reports whether the class may match some rune in [lo, hi]: the
// test for a character whose first bytes only are known.
func (e *elem) overlaps(lo, hi rune) bool {
	if !e.neg {
		for i := 0; i+1 < len(e.ranges); i += 2 {
			if e.ranges[i] <= hi && e.ranges[i+1] >= lo {
				return true
			}
		}
		return false
	}
	// A negated class misses [lo, hi] only when its excluded ranges
	// cover all of it; one excluded range covering it is the usual case.
	for i := 0; i+1 < len(e.ranges); i += 2 {
		if e.ranges[i] <= lo && e.ranges[i+1] >= hi {
			return false
		}
	}
	return true
}

// How a character class relates to a range of characters.
const (
	coverNone = iota // matches none of them
	coverSome        // matches some, or it cannot tell cheaply
	coverAll         // matches all of them
)

// cover tells how the class matches the characters lo..hi. One range of
// the class holding all of them (or, negated, one excluded range) is the
// only way it answers coverAll (coverNone, negated); classes whose ranges
// merely abut answer coverSome, which costs exactness nothing.
func (e *elem) cover(lo, hi rune) int {
	all, none := coverAll, coverNone
	if e.neg {
		all, none = coverNone, coverAll
	}
	some := false
	for i := 0; i+1 < len(e.ranges); i += 2 {
		if e.ranges[i] <= lo && e.ranges[i+1] >= hi {
			return all
		}
		if e.ranges[i] <= hi && e.ranges[i+1] >= lo {
			some = true
		}
	}
	if some {
		return coverSome
	}
	return none
}

// Grammar is a compiled grammar. It is immutable and safe to share.
type Grammar struct {
	names []string
	rules [][][]elem // rule → alternatives → sequence
	root  int32
	start []*frame // the initial stacks
}

// Rules is the number of rules, helper rules included.
func (g *Grammar) Rules() int { return len(g.rules) }

// frame is one entry of a stack: the position of the element to match
// next (rule, alternative, index), over the rest of the stack. Frames are
// immutable and shared between stacks, so advancing a stack copies only
// its top.
type frame struct {
	rule, alt, idx int32
	depth          int32
	next           *frame
}

func (g *Grammar) elemAt(f *frame) *elem { return &g.rules[f.rule][f.alt][f.idx] }

// after is the stack once f's element is matched: the next element of the
// same alternative, or the enclosing rule's continuation when f's was the
// last (a reference in tail position thus never grows the stack).
func (g *Grammar) after(f *frame) *frame {
	if int(f.idx)+1 < len(g.rules[f.rule][f.alt]) {
		return &frame{rule: f.rule, alt: f.alt, idx: f.idx + 1, depth: f.depth, next: f.next}
	}
	return f.next
}

// expand appends to out the stacks that f stands for with every rule
// reference at the top replaced by the alternatives of its rule, so that
// each appended stack has a character class on top (or is empty: nil, the
// whole grammar matched). It reports false when more than MaxStacks
// stacks would be made (out then holds MaxStacks+1 whole stacks). An
// alternative that could not finish within MaxDepth frames from where it
// would start is left out (elem.need), so a
// stack that is made can always finish: no state is alive only to die
// later for want of depth. Termination: compile refuses left recursion,
// so a chain of expansions with no character consumed cannot revisit a
// rule, and no frame is placed higher than MaxDepth.
func (g *Grammar) expand(out []*frame, f *frame) ([]*frame, bool) {
	if len(out) > MaxStacks {
		return out, false
	}
	if f == nil {
		return append(out, nil), true
	}
	e := g.elemAt(f)
	if e.ref < 0 {
		return append(out, f), true
	}
	cont := g.after(f)
	depth := int32(1)
	if cont != nil {
		depth = cont.depth + 1
	}
	ok := true
	for a, alt := range g.rules[e.ref] {
		if len(alt) == 0 {
			out, ok = g.expand(out, cont)
		} else if depth+alt[0].need <= MaxDepth {
			out, ok = g.expand(out, &frame{rule: e.ref, alt: int32(a), depth: depth, next: cont})
		}
		if !ok {
			return out, false
		}
	}
	return out, true
}

// String renders the grammar in GBNF, one rule a line (for messages and
// tests).
func (g *Grammar) String() string {
	var s []byte
	for r, alts := range g.rules {
		s = append(s, g.names[r]...)
		s = append(s, " ::="...)
		for a, alt := range alts {
			if a > 0 {
				s = append(s, " |"...)
			}
			for _, e := range alt {
				s = append(s, ' ')
				if e.ref >= 0 {
					s = append(s, g.names[e.ref]...)
					continue
				}
				s = append(s, '[')
				if e.neg {
					s = append(s, '^')
				}
				for i := 0; i+1 < len(e.ranges); i += 2 {
					s = fmt.Appendf(s, "%s", classRune(e.ranges[i]))
					if e.ranges[i+1] != e.ranges[i] {
						s = fmt.Appendf(s, "-%s", classRune(e.ranges[i+1]))
					}
				}
				s = append(s, ']')
			}
			if len(alt) == 0 {
				s = append(s, ` ""`...)
			}
		}
		s = append(s, '\n')
	}
	return string(s)
}

func classRune(r rune) string {
	switch {
	case r == ']' || r == '\\' || r == '-' || r == '^':
		return `\` + string(r)
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02X`, r)
	case r > 0xffff:
		return fmt.Sprintf(`\U%08X`, r)
	case r >= 0x80:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return string(r)
}
