package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// A matcher is one regex anchored at i: the end of its match there, or -1
// (no match, or only an empty one). st is scratch that lives for one chunk,
// for matchers that would otherwise rescan the same run at each position.
type matcher func(s string, i int, st *matchState) int

// matchState remembers the whitespace run last scanned in a chunk: [start,
// end), and the end of its last \r or \n (-1 if none).
type matchState struct{ spaceStart, spaceEnd, spaceLastNL int }

// isolate makes a stage of a regex the way llama.cpp applies one: each
// match is a piece, and so is each stretch of text between matches (the
// regex is searched for from every position in turn, like
// std::regex_iterator). A matcher must not scan far before failing, or the
// stage turns quadratic; every one here fails within a character or two, or
// only after a run that a later attempt at the next position cannot repeat.
func isolate(m matcher) stage {
	return func(dst []span, s string, base int) []span {
		gap := 0
		st := matchState{spaceStart: -1, spaceEnd: -1, spaceLastNL: -1}
		for i := 0; i < len(s); {
			if end := m(s, i, &st); end > i {
				if gap < i {
					dst = append(dst, span{base + gap, base + i})
				}
				dst = append(dst, span{base + i, base + end})
				i, gap = end, end
				continue
			}
			_, w := runeAt(s, i)
			i += w
		}
		if gap < len(s) {
			dst = append(dst, span{base + gap, base + len(s)})
		}
		return dst
	}
}

// runOf is X+ for the class pred.
func runOf(pred func(rune) bool) matcher {
	return func(s string, i int, _ *matchState) int {
		if end := scanWhile(s, i, pred); end > i {
			return end
		}
		return -1
	}
}

// upTo is X{1,n}.
func upTo(n int, pred func(rune) bool) matcher {
	return func(s string, i int, _ *matchState) int {
		end := i
		for k := 0; k < n && end < len(s); k++ {
			r, w := runeAt(s, end)
			if !pred(r) {
				break
			}
			end += w
		}
		if end == i {
			return -1
		}
		return end
	}
}

// spaceThen is \s?X+.
func spaceThen(pred func(rune) bool) matcher {
	return func(s string, i int, _ *matchState) int {
		r, w := runeAt(s, i)
		if isSpace(r) {
			if end := scanWhile(s, i+w, pred); end > i+w {
				return end
			}
			return -1
		}
		if end := scanWhile(s, i, pred); end > i {
			return end
		}
		return -1
	}
}

// matchNewline is [\r\n].
func matchNewline(s string, i int, _ *matchState) int {
	if s[i] == '\r' || s[i] == '\n' {
		return i + 1
	}
	return -1
}

// matchThreeDigits is [0-9][0-9][0-9].
func matchThreeDigits(s string, i int, _ *matchState) int {
	if i+3 <= len(s) && isDigit(s[i]) && isDigit(s[i+1]) && isDigit(s[i+2]) {
		return i + 3
	}
	return -1
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// matchBloom is BLOOM's " ?[^(\s|.,!?…。，、।۔،)]+".
func matchBloom(s string, i int, _ *matchState) int {
	word := func(r rune) bool { return !isSpace(r) && !bloomBreaks.hasText(r) }
	k := i
	if s[i] == ' ' && i+1 < len(s) {
		if r, _ := runeAt(s, i+1); word(r) {
			k = i + 1
		}
	}
	if end := scanWhile(s, k, word); end > k {
		return end
	}
	return -1
}

// falconPunct is [\p{P}\$\+<=>\^~\|`] and defaultPunct the same without
// the backquote (llama.cpp's pre-tokenizer for "default").
func falconPunct(r rune) bool  { return isPunctCollapsed(r) || strings.ContainsRune("$+<=>^~|`", r) }
func defaultPunct(r rune) bool { return isPunctCollapsed(r) || strings.ContainsRune("$+<=>^~|", r) }

// deepseekLLMLetters is \s?[A-Za-zµÀ-Ö...]+ and deepseekLLMPunct
// \s?[!-/:-~！-／：-～‘-‟　-。]+.
var (
	deepseekLLMLetters = spaceThen(deepseekLetters.hasText)
	deepseekLLMPunct   = spaceThen(deepseekPunct.hasText)
)

// matchYoutuCJK is [가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+:
// the sets are disjoint, so the run is of the set the first character is in.
func matchYoutuCJK(s string, i int, _ *matchState) int {
	r, _ := runeAt(s, i)
	for _, set := range []runeSet{youtuHangul, youtuPunct, youtuBopomofo, cjkKana} {
		if set.hasText(r) {
			return scanWhile(s, i, set.hasText)
		}
	}
	return -1
}

// Chameleon's stages: its sentinel and image tokens, tab/newline/space
// runs, and single punctuation characters.

// matchSentinel is <sentinel:[0-9]+>.
func matchSentinel(s string, i int, _ *matchState) int {
	const prefix = "<sentinel:"
	if !strings.HasPrefix(s[i:], prefix) {
		return -1
	}
	end := i + len(prefix)
	for end < len(s) && isDigit(s[end]) {
		end++
	}
	if end == i+len(prefix) || end >= len(s) || s[end] != '>' {
		return -1
	}
	return end + 1
}

// matchImageToken is (IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z: the {1,4} gives
// back letters only to let Z match, and no letter A-I is a Z, so the Z must
// follow the longest run of up to four.
func matchImageToken(s string, i int, _ *matchState) int {
	const prefix = "IMGIMG"
	if !strings.HasPrefix(s[i:], prefix) {
		return -1
	}
	end := i + len(prefix)
	for n := 0; n < 4 && end < len(s) && 'A' <= s[end] && s[end] <= 'I'; n++ {
		end++
	}
	if end == i+len(prefix) || end >= len(s) || s[end] != 'Z' {
		return -1
	}
	return end + 1
}

// matchChameleonSpace is ([\t\n]|    |  ).
func matchChameleonSpace(s string, i int, _ *matchState) int {
	switch {
	case s[i] == '\t' || s[i] == '\n':
		return i + 1
	case strings.HasPrefix(s[i:], "    "):
		return i + 4
	case strings.HasPrefix(s[i:], "  "):
		return i + 2
	}
	return -1
}

// matchChameleonPunct is [\p{P}!-/:-@\[-`{-~]: one punctuation character or
// ASCII symbol.
func matchChameleonPunct(s string, i int, _ *matchState) int {
	r, w := runeAt(s, i)
	if (r < 0x80 && asciiPunctOrSymbol(byte(r))) || isPunctCollapsed(r) {
		return i + w
	}
	return -1
}

// splitTrailingSpace is \s+$: the whitespace that ends the chunk.
func splitTrailingSpace(dst []span, s string, base int) []span {
	t := len(s)
	for t > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:t])
		if !isSpace(r) {
			break
		}
		t -= w
	}
	if t > 0 {
		dst = append(dst, span{base, base + t})
	}
	if t < len(s) {
		dst = append(dst, span{base + t, base + len(s)})
	}
	return dst
}

// splitNewlines is [^\n]+|[\n]+: runs of newlines and runs of the rest.
func splitNewlines(dst []span, s string, base int) []span {
	for i := 0; i < len(s); {
		nl := s[i] == '\n'
		end := i + 1
		for end < len(s) && (s[end] == '\n') == nl {
			end++
		}
		dst = append(dst, span{base + i, base + end})
		i = end
	}
	return dst
}

// splitDigitGroups is llama.cpp's hand-written splitter for AFMoE's digits
// (and Tiny Aya's \d{1,3}(?=(?:\d{3})*\b)): each \p{N} run is cut into
// groups of three from the right. What precedes a run is not a piece of its
// own: it joins the run's first group, as in llama.cpp, where later stages
// then separate them.
func splitDigitGroups(dst []span, s string, base int) []span {
	prev := 0
	for i := 0; i < len(s); {
		r, w := runeAt(s, i)
		if !isNumber(r) {
			i += w
			continue
		}
		n, end := 0, i
		for end < len(s) {
			r, w := runeAt(s, end)
			if !isNumber(r) {
				break
			}
			end += w
			n++
		}
		// Cut after the first n%3 digits (when not 0), then after every third.
		next := n % 3
		if next == 0 {
			next = 3
		}
		for k := 1; i < end; k++ {
			_, w := runeAt(s, i)
			i += w
			if k == next {
				dst = append(dst, span{base + prev, base + i})
				prev = i
				next += 3
			}
		}
	}
	if prev < len(s) {
		dst = append(dst, span{base + prev, base + len(s)})
	}
	return dst
}

// splitSuperBPEDigits is (?=(\d{3})+(?!\d)), an empty match before every
// ASCII digit that has a positive multiple of three digits from it to the
// end of its run: the run is cut into groups of three from the right. The
// empty pieces llama.cpp makes there hold no tokens, so they are left out.
func splitSuperBPEDigits(dst []span, s string, base int) []span {
	prev := 0
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			i++
			continue
		}
		end := i
		for end < len(s) && isDigit(s[end]) {
			end++
		}
		for cut := i + (end-i)%3; cut < end; cut += 3 {
			if cut > prev {
				dst = append(dst, span{base + prev, base + cut})
				prev = cut
			}
		}
		i = end
	}
	if prev < len(s) {
		dst = append(dst, span{base + prev, base + len(s)})
	}
	return dst
}

// splitKimiK2 follows llama.cpp's hand-written splitter for Kimi-K2, which
// stands for
//
//	[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{L}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// (its source regex also puts \p{M} in words and splits case; the splitter,
// which is the reference, does neither).
func splitKimiK2(dst []span, s string, base int) []span {
	wordChar := func(r rune) bool { return isLetter(r) && !isHan(r) }
	for i := 0; i < len(s); {
		r, w := runeAt(s, i)
		c := classOf(r)
		end := i
		switch {
		case isHan(r):
			end = scanWhile(s, i, isHan)
		case wordChar(r) || (r != '\r' && r != '\n' && c != clsLetter && c != clsNumber && i+w < len(s) && wordChar(runeOf(s, i+w))):
			end = scanWhile(s, i+w, wordChar)
			if end < len(s) && s[end] == '\'' {
				if n := contractionLen(s[end+1:], true); n > 0 {
					end += 1 + n
				}
			}
		case c == clsNumber:
			end = advanceWhileUpTo(s, i, 3, isNumber)
		case c == clsOther || (r == ' ' && i+w < len(s) && classOf(runeOf(s, i+w)) == clsOther):
			k := i
			if r == ' ' {
				k = i + w
			}
			end = scanClass(s, k, clsOther)
			for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
				end++
			}
		default: // whitespace
			run := scanClass(s, i, clsSpace)
			if nl := strings.LastIndexAny(s[i:run], "\r\n"); nl >= 0 {
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

func runeOf(s string, i int) rune {
	r, _ := runeAt(s, i)
	return r
}

// advanceWhileUpTo is the end of at most n characters from i that satisfy
// pred.
func advanceWhileUpTo(s string, i, n int, pred func(rune) bool) int {
	for ; n > 0 && i < len(s); n-- {
		r, w := runeAt(s, i)
		if !pred(r) {
			break
		}
		i += w
	}
	return i
}
