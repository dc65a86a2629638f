package grammar

import (
	"fmt"
	"unicode/utf8"
)

// Fit is g as this vocabulary can write it: every character class narrowed
// to the characters whose UTF-8 bytes the vocabulary has a one-byte token
// for each, and the result analysed again, so that no state the output
// reaches needs a character no token sequence spells. A grammar that
// cannot finish that way is an error (a *LimitError naming the rule),
// given at submit rather than as "no token of the vocabulary can
// continue" mid-stream.
//
// Most vocabularies spell every byte UTF-8 text holds (byte-level BPE's
// 256 base tokens, SentencePiece's byte fallback) and get g itself.
// SmolLM2's lacks a few control bytes and the lead bytes of planes 4 to
// 11: those characters are left out, which JSON text never needed (JSON
// escapes control characters, and those planes are unassigned). A
// character the vocabulary writes only inside longer tokens is left out
// too; the narrowing is conservative, never permissive.
func (t *Trie) Fit(g *Grammar) (*Grammar, error) {
	out := t.unspelled()
	if len(out) == 0 {
		return g, nil
	}
	f := &Grammar{names: g.names, root: g.root, rules: make([][][]elem, len(g.rules))}
	for r, alts := range g.rules {
		f.rules[r] = make([][]elem, len(alts))
		for a, seq := range alts {
			s := make([]elem, len(seq))
			for i, e := range seq {
				if e.ref < 0 {
					e = e.without(out)
				}
				s[i] = e
			}
			f.rules[r][a] = s
		}
	}
	if err := f.finish(nil); err != nil {
		return nil, err
	}
	return f, nil
}

// unspelled is the characters the vocabulary cannot write byte by byte,
// as inclusive rune ranges: each ASCII byte without a one-byte token, each
// lead byte's block of characters, and, should a continuation byte be
// missing, every character past ASCII (the conservative answer: such a
// vocabulary is not one any supported model has).
func (t *Trie) unspelled() []rune {
	var single [256]bool
	for _, id := range t.ids[t.tokAt[0]:t.tokAt[len(t.tokAt)-1]] {
		if p := t.pieces[id]; len(p) == 1 {
			single[p[0]] = true
		}
	}
	var out []rune
	for c := range 0x80 {
		if !single[c] {
			out = append(out, rune(c), rune(c))
		}
	}
	for c := 0x80; c < 0xc0; c++ {
		if !single[c] {
			return append(out, 0x80, utf8.MaxRune)
		}
	}
	for c := 0xc2; c <= 0xf4; c++ {
		if single[c] {
			continue
		}
		var lo, hi rune
		switch {
		case c < 0xe0:
			lo = rune(c&0x1f) << 6
			hi = lo | 0x3f
		case c < 0xf0:
			lo = max(rune(c&0x0f)<<12, 0x800)
			hi = rune(c&0x0f)<<12 | 0xfff
		default:
			lo = max(rune(c&0x07)<<18, 0x10000)
			hi = min(rune(c&0x07)<<18|0x3ffff, utf8.MaxRune)
		}
		out = append(out, lo, hi)
	}
	return out
}

// without is the class e less the characters in the ranges out.
func (e elem) without(out []rune) elem {
	if e.neg {
		// Outside ranges and outside out: outside both.
		e.ranges = append(append([]rune(nil), e.ranges...), out...)
		return e
	}
	ranges := append([]rune(nil), e.ranges...)
	for j := 0; j+1 < len(out); j += 2 {
		olo, ohi := out[j], out[j+1]
		var next []rune
		for i := 0; i+1 < len(ranges); i += 2 {
			lo, hi := ranges[i], ranges[i+1]
			if hi < olo || lo > ohi {
				next = append(next, lo, hi)
				continue
			}
			if lo < olo {
				next = append(next, lo, olo-1)
			}
			if hi > ohi {
				next = append(next, ohi+1, hi)
			}
		}
		ranges = next
	}
	e.ranges = ranges
	return e
}

// finish analyses the rules (analyze) and makes the start stacks: the
// last steps of a compile, and of Fit.
func (g *Grammar) finish(b *budget) error {
	if err := g.analyze(b); err != nil {
		return err
	}
	start := make([]*frame, 0, len(g.rules[g.root]))
	ok := true
	for a, alt := range g.rules[g.root] {
		if len(alt) == 0 {
			start = append(start, nil)
		} else if 1+alt[0].need > MaxDepth {
			continue // cannot finish (analyze: some alternative can)
		} else if start, ok = g.expand(start, &frame{rule: g.root, alt: int32(a), depth: 1}); !ok {
			return &LimitError{Rule: g.names[g.root], Msg: fmt.Sprintf("the output may begin in more than %d ways", MaxStacks)}
		}
	}
	g.start = dedup(start)
	return nil
}
