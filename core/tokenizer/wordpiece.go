package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// WordPiece ("bert" vocabularies) as llama.cpp runs it. The text is
// normalised and cut into words (wpmWords), "▁" is put in front of each
// word, and each word is covered left to right by the longest vocabulary
// token that starts where the previous one ended. A word that cannot be
// covered becomes one UNK. llama.cpp's converter has rewritten the
// vocabulary for this: a word-initial piece "the" is stored as "▁the" and a
// continuation "##ing" as plain "ing", so the "▁" marks word starts and no
// "##" is needed.

// maxWordPieceTokenBytes bounds the tokens of a WordPiece vocabulary. The
// longest-match walk from each position of a word may go as deep as the
// longest token, so a hostile vocabulary with a megabyte token would make
// encoding quadratic in a long word. Real vocabularies stay near 20 bytes
// (BERT's longest is 21).
const maxWordPieceTokenBytes = 256

// wpmTrie finds the longest token that prefixes a byte string, one map
// lookup per byte.
type wpmTrie struct {
	child map[uint64]int32 // node<<8 | next byte → child node
	id    []int32          // token ending at each node, -1 if none
}

func (t *Tokenizer) initWPM() error {
	tr := &wpmTrie{child: make(map[uint64]int32, 4*len(t.tokens)), id: []int32{-1}}
	for i, s := range t.tokens {
		if len(s) > maxWordPieceTokenBytes {
			return fmt.Errorf("tokenizer: WordPiece token %d is %d bytes long, over the %d this tokenizer accepts", i, len(s), maxWordPieceTokenBytes)
		}
		if s == "" {
			continue // llama.cpp renames an empty token; it can never match
		}
		node := int32(0)
		for j := 0; j < len(s); j++ {
			key := uint64(node)<<8 | uint64(s[j])
			next, ok := tr.child[key]
			if !ok {
				next = int32(len(tr.id))
				tr.id = append(tr.id, -1)
				tr.child[key] = next
			}
			node = next
		}
		// The last of repeated texts wins, as in llama.cpp's text-to-id map
		// (every token type takes part there, controls included).
		tr.id[node] = int32(i)
	}
	t.wpm = tr
	return nil
}

// longest returns the longest token that b starts with and its length in
// bytes, or (-1, 0) when no token does.
func (tr *wpmTrie) longest(b []byte) (id int32, n int) {
	id, node := -1, int32(0)
	for i := 0; i < len(b); i++ {
		next, ok := tr.child[uint64(node)<<8|uint64(b[i])]
		if !ok {
			break
		}
		node = next
		if tr.id[node] >= 0 {
			id, n = tr.id[node], i+1
		}
	}
	return id, n
}

// encodeWPM appends the WordPiece tokens of one fragment of text (the text
// between special tokens).
func (t *Tokenizer) encodeWPM(out []int32, s string) []int32 {
	word := make([]byte, 0, 64)
	word = append(word, "▁"...)
	const prefix = len("▁")
	flush := func() {
		if len(word) > prefix {
			out = t.encodeWPMWord(out, word)
		}
		word = word[:prefix]
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if t.stripAccents {
			r = nfdBase(r)
		}
		switch wpmClassOf(r, t.stripAccents) {
		case wpmSpace:
			flush()
			continue
		case wpmDropped:
			continue
		}
		lr := r
		if t.lowercase {
			lr = unicode.ToLower(r)
		}
		if wpmStandsAlone(r) {
			flush()
			word = utf8.AppendRune(word, lr)
			flush()
			continue
		}
		word = utf8.AppendRune(word, lr)
	}
	flush()
	return out
}

// encodeWPMWord covers one "▁"-prefixed word greedily, longest token
// first; if some position has no token, the whole word becomes UNK (or
// nothing, for a vocabulary without one). Each step costs at most the
// longest token's length, so a word costs O(len × maxWordPieceTokenBytes).
func (t *Tokenizer) encodeWPMWord(out []int32, word []byte) []int32 {
	start := len(out)
	for i := 0; i < len(word); {
		id, n := t.wpm.longest(word[i:])
		if n == 0 {
			out = out[:start]
			if t.unk >= 0 {
				out = append(out, t.unk)
			}
			return out
		}
		out = append(out, id)
		i += n
	}
	return out
}

type wpmClass uint8

const (
	wpmKept    wpmClass = iota // part of a word
	wpmSpace                   // ends the word
	wpmDropped                 // removed: NUL, U+FFFD (and invalid UTF-8), \p{C}, marks when stripping accents
)

// wpmClassOf classes a code point the way llama.cpp's WordPiece
// preprocessing does. Unassigned code points are kept, as there: its table
// gives them no category, so they are neither controls nor marks.
func wpmClassOf(r rune, stripAccents bool) wpmClass {
	switch {
	case isSpace(r):
		return wpmSpace
	case r == 0 || r == utf8.RuneError || isOtherC(r):
		return wpmDropped
	case stripAccents && isMark(r):
		return wpmDropped
	}
	return wpmKept
}

// isOtherC is \p{C} less the unassigned code points: controls, format
// characters, private use (surrogates cannot come out of UTF-8 decoding).
func isOtherC(r rune) bool {
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7F
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co)
}

// wpmStandsAlone reports code points that form a word of their own:
// punctuation, ASCII symbols ("$", "+", "^", "~" ...; other symbols stay
// inside words) and CJK ideographs, which BERT tokenizes one by one.
func wpmStandsAlone(r rune) bool {
	switch categoryOf(r) {
	case catPunct:
		return true
	case catSymbol:
		return r < 0x7F
	}
	return isWPMCJK(r)
}

// isWPMCJK is the CJK ideograph test of BERT's tokenizer as llama.cpp
// copies it: the Unified Ideographs blocks with extensions A to E, the
// compatibility ideographs, and from Extension E on the ranges start at
// U+2B920 (not U+2B820) as in Hugging Face's Rust code.
func isWPMCJK(r rune) bool {
	switch {
	case 0x4E00 <= r && r <= 0x9FFF, 0x3400 <= r && r <= 0x4DBF,
		0x20000 <= r && r <= 0x2A6DF, 0x2A700 <= r && r <= 0x2B73F,
		0x2B740 <= r && r <= 0x2B81F, 0x2B920 <= r && r <= 0x2CEAF,
		0xF900 <= r && r <= 0xFAFF, 0x2F800 <= r && r <= 0x2FA1F:
		return true
	}
	return false
}
