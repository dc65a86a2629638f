package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A pre-tokenizer cuts text into the pieces that BPE merges never cross.
// Each one here is a hand-written scanner equivalent to a reference regex;
// Go's regexp has neither the lookahead (?!\S) nor fast \p{L}/\p{N}
// alternations, and a scanner is also several times faster.
//
// The scanners reproduce the regex engine's leftmost-first semantics: at each
// position the first alternative that matches wins, with greedy quantifiers
// backing off only as the regex would. Spans are appended as byte offsets
// into the scanned string plus base.
type span struct{ start, end int }

// A stage splits one chunk s, which starts at byte base of the text, and
// appends its pieces; a pre-tokenizer is a list of stages (see pretypes.go).
type stage func(dst []span, s string, base int) []span

type charClass uint8

const (
	clsOther  charClass = iota // [^\s\p{L}\p{N}]
	clsLetter                  // \p{L}
	clsNumber                  // \p{N}
	clsSpace                   // \s
)

var asciiClass [utf8.RuneSelf]charClass

func init() {
	for c := 0; c < utf8.RuneSelf; c++ {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			asciiClass[c] = clsLetter
		case '0' <= c && c <= '9':
			asciiClass[c] = clsNumber
		case c == ' ', '\t' <= c && c <= '\r':
			asciiClass[c] = clsSpace
		}
	}
}

// classOf is split into an inlinable ASCII path and an out-of-line Unicode
// lookup because it runs once per character of input.
func classOf(r rune) charClass {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	return classOfUnicode(r)
}

func classOfUnicode(r rune) charClass {
	switch categoryOf(r) {
	case catLetter:
		return clsLetter
	case catNumber:
		return clsNumber
	}
	if unicode.IsSpace(r) {
		return clsSpace
	}
	// Marks, punctuation, symbols, U+FFFD for invalid bytes.
	return clsOther
}

func runeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return decodeAt(s, i)
}

func decodeAt(s string, i int) (rune, int) { return utf8.DecodeRuneInString(s[i:]) }

// classAt is the class of the rune at i, clsSpace past the end (so that
// "followed by a non-space" tests fail at the end of the text).
func classAt(s string, i int) charClass {
	if i >= len(s) {
		return clsSpace
	}
	r, _ := runeAt(s, i)
	return classOf(r)
}

// scanClass returns the end of the run of class c that starts at i.
func scanClass(s string, i int, c charClass) int {
	for i < len(s) {
		// ASCII fast path: this loop is most of pre-tokenization's time.
		if b := s[i]; b < utf8.RuneSelf {
			if asciiClass[b] != c {
				break
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if classOf(r) != c {
			break
		}
		i += w
	}
	return i
}

// contractionLen is the length of the contraction suffix ('s 't 're 've 'm
// 'll 'd) at the start of rest, which follows an apostrophe; 0 if none.
// Llama-3 and Qwen2 match them case-insensitively.
func contractionLen(rest string, foldCase bool) int {
	if len(rest) == 0 {
		return 0
	}
	lower := func(c byte) byte {
		if foldCase && 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(rest[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(rest) > 1 && lower(rest[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(rest) > 1 && lower(rest[1]) == 'l' {
			return 2
		}
	}
	return 0
}

// whitespaceEnd handles the trailing alternatives \s+(?!\S)|\s+ for the
// whitespace run [i, end): a run that reaches the end of the text is taken
// whole; otherwise it gives its last character back so that the character can
// prefix the following word (" ?\p{L}+"), unless it is a single character.
func whitespaceEnd(s string, i, end int) int {
	if end == len(s) {
		return end
	}
	_, w := utf8.DecodeLastRuneInString(s[i:end])
	if end-w > i {
		return end - w
	}
	return end
}

// splitGPT2 implements
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(dst []span, s string, base int) []span {
	for i := 0; i < len(s); {
		r, w := runeAt(s, i)
		if r == '\'' {
			if n := contractionLen(s[i+1:], false); n > 0 {
				dst = append(dst, span{base + i, base + i + 1 + n})
				i += 1 + n
				continue
			}
		}
		// " ?X+" for X in letters, numbers, others: an optional single
		// space joins the run that follows it.
		k, c := i, classOf(r)
		if r == ' ' {
			if c2 := classAt(s, i+w); c2 != clsSpace {
				k, c = i+w, c2
			}
		}
		var end int
		if c != clsSpace {
			end = scanClass(s, k, c)
		} else {
			end = whitespaceEnd(s, i, scanClass(s, i, clsSpace))
		}
		dst = append(dst, span{base + i, base + end})
		i = end
	}
	return dst
}

// splitSmolLM first isolates every \p{N} character (Hugging Face's
// Digits(individual_digits=true)) and then applies the GPT-2 scanner to the
// text between them, so "x 2024" is "x", " ", "2", "0", "2", "4".
func splitSmolLM(dst []span, s string, base int) []span {
	seg := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf && (b < '0' || b > '9') {
			i++
			continue
		}
		r, w := runeAt(s, i)
		if classOf(r) == clsNumber {
			if seg < i {
				dst = splitGPT2(dst, s[seg:i], base+seg)
			}
			dst = append(dst, span{base + i, base + i + w})
			seg = i + w
		}
		i += w
	}
	if seg < len(s) {
		dst = splitGPT2(dst, s[seg:], base+seg)
	}
	return dst
}

// splitLlama3 implements Llama-3's
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func splitLlama3(dst []span, s string, base int) []span {
	return splitLlamaStyle(dst, s, base, 3)
}

// splitQwen2 is Llama-3's scanner with \p{N} instead of \p{N}{1,3}.
func splitQwen2(dst []span, s string, base int) []span {
	return splitLlamaStyle(dst, s, base, 1)
}

// splitQwen35 is Qwen2's scanner with combining marks joining letters:
// [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ for words and [^\s\p{L}\p{M}\p{N}] for
// punctuation runs.
func splitQwen35(dst []span, s string, base int) []span {
	return splitLlamaStyleMarks(dst, s, base, 1, true)
}

func splitLlamaStyle(dst []span, s string, base int, maxDigits int) []span {
	return splitLlamaStyleMarks(dst, s, base, maxDigits, false)
}

// splitLlamaStyleMarks is the Llama-3 family's scanner; with marks, \p{M}
// counts as a letter in words and not as punctuation.
func splitLlamaStyleMarks(dst []span, s string, base int, maxDigits int, marks bool) []span {
	wordChar := func(r rune, c charClass) bool { return c == clsLetter || (marks && c == clsOther && isMark(r)) }
	punctChar := func(r rune, c charClass) bool { return c == clsOther && !(marks && isMark(r)) }
	for i := 0; i < len(s); {
		r, w := runeAt(s, i)
		end := i
		c := classOf(r)
		var r2 rune = -1 // the next rune, -1 at the end
		var c2 charClass = clsSpace
		if i+w < len(s) {
			r2, _ = runeAt(s, i+w)
			c2 = classOf(r2)
		}
		switch {
		case r == '\'' && contractionLen(s[i+1:], true) > 0:
			end = i + 1 + contractionLen(s[i+1:], true)
		case wordChar(r, c):
			end = wordRunEnd(s, i, marks)
		case r != '\r' && r != '\n' && c != clsNumber && r2 >= 0 && wordChar(r2, c2):
			// [^\r\n\p{L}\p{N}]?\p{L}+: any one non-newline, non-alnum
			// character (space, tab, quote...) leads a word.
			end = wordRunEnd(s, i+w, marks)
		case c == clsNumber:
			end = i
			for n := 0; n < maxDigits && end < len(s); n++ {
				r2, w2 := runeAt(s, end)
				if classOf(r2) != clsNumber {
					break
				}
				end += w2
			}
		case punctChar(r, c) || (r == ' ' && r2 >= 0 && punctChar(r2, c2)):
			// " ?[^\s\p{L}\p{N}]+[\r\n]*"
			k := i
			if r == ' ' {
				k = i + w
			}
			end = punctRunEnd(s, k, marks)
			for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
				end++
			}
		default: // whitespace
			run := scanClass(s, i, clsSpace)
			if nl := strings.LastIndexAny(s[i:run], "\r\n"); nl >= 0 {
				// \s*[\r\n]+ : through the last newline of the run.
				end = i + nl + 1
			} else {
				end = whitespaceEnd(s, i, run)
			}
		}
		dst = append(dst, span{base + i, base + end})
		i = end
	}
	return dst
}

// wordRunEnd is the end of the run of letters (and, with marks, combining
// marks) that starts at i.
func wordRunEnd(s string, i int, marks bool) int {
	if !marks {
		return scanClass(s, i, clsLetter)
	}
	for i < len(s) {
		r, w := runeAt(s, i)
		if c := classOf(r); c != clsLetter && !(c == clsOther && isMark(r)) {
			break
		}
		i += w
	}
	return i
}

// punctRunEnd is the end of the run of [^\s\p{L}\p{N}] (with marks, also
// not \p{M}) that starts at i.
func punctRunEnd(s string, i int, marks bool) int {
	if !marks {
		return scanClass(s, i, clsOther)
	}
	for i < len(s) {
		r, w := runeAt(s, i)
		if classOf(r) != clsOther || isMark(r) {
			break
		}
		i += w
	}
	return i
}
