package tokenizer

// wordRegex describes one member of the family of pre-tokenizer regexes
// that descend from Llama-3's and GPT-4o's, which llama.cpp runs through
// std::regex rather than a hand-written splitter. Each is an alternation
// tried in this order at every position (the first alternative that
// matches wins, as in any backtracking engine):
//
//	contraction   (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])   if leadingContraction
//	ascii word    [!-/:-@[-`{-~][A-Za-z]+                                   if asciiPunctWord
//	word          LEAD? BODY CONTRACTION?                                   (see wordKind)
//	number        \p{N}{1,digits} (\p{N}+ when digits < 0; none when 0)
//	punctuation   ' '?PUNCT+ TAIL                                           (see punctKind, tailKind)
//	newlines      \s*[\r\n]+
//	spaces        \s+(?!\S) | \s+          or Jais-2's \s{512}(?!\S) | ... | \s{1}
//
// llama.cpp runs these on a copy of the text in which every non-ASCII
// character stands for its category, so \p{Lu} and \p{Ll} both mean "a
// letter", and only ASCII letters have a case; the scanners here reproduce
// that, which is what the reference splits are.
type wordRegex struct {
	leadingContraction bool
	asciiPunctWord     bool
	word               wordKind
	// leadNotPS: the word's optional lead is [^\r\n\p{L}\p{P}\p{S}]
	// (DeepSeek-V3, AFMoE) instead of [^\r\n\p{L}\p{N}].
	leadNotPS         bool
	suffixContraction bool // the word may end in a contraction
	digits            int
	punct             punctKind
	tail              tailKind
	spaceCascade      bool // Jais-2's whitespace alternatives
}

type wordKind uint8

const (
	// wordLetters: \p{L}+
	wordLetters wordKind = iota
	// wordLettersMarks: [\p{L}\p{M}]+ (with the category collapse,
	// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ is this too)
	wordLettersMarks
	// wordCased: tekken's and GPT-4o's
	//   ((?=[\p{L}])[^a-z])*((?=[\p{L}])[^A-Z])+ | ((?=[\p{L}])[^a-z])+((?=[\p{L}])[^A-Z])*
	// an upper-case run then a lower-case run, where a non-ASCII letter is
	// both (only ASCII letters have a case after the collapse).
	wordCased
	// wordCasedMarks: the same with [\p{L}\p{M}] in the lookaheads
	// (granite-embed-multi-97m), so marks are both cases too.
	wordCasedMarks
	// wordPhrase: EXAONE-MoE's (?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+, letters
	// with their marks, joined across single spaces.
	wordPhrase
)

type punctKind uint8

const (
	punctNotSpaceLetterNumber punctKind = iota // [^\s\p{L}\p{N}]
	punctPunctSymbol                           // [\p{P}\p{S}]
)

type tailKind uint8

const (
	tailNone              tailKind = iota
	tailNewlines                   // [\r\n]*
	tailNewlinesSlash              // [\r\n/]*
	tailOneNewlineOrSlash          // [\r\n/]?
)

// match returns the end of the match at i, or -1.
func (x *wordRegex) match(s string, i int, st *matchState) int {
	r, w := runeAt(s, i)
	if x.leadingContraction && r == '\'' {
		if n := contractionLen(s[i+1:], true); n > 0 {
			return i + 1 + n
		}
	}
	if x.asciiPunctWord && r < 0x80 && asciiPunctOrSymbol(byte(r)) && i+1 < len(s) && isASCIILetter(s[i+1]) {
		end := i + 2
		for end < len(s) && isASCIILetter(s[end]) {
			end++
		}
		return end
	}
	if end := x.matchWord(s, i, r, w); end > 0 {
		if x.suffixContraction && end < len(s) && s[end] == '\'' {
			if n := contractionLen(s[end+1:], true); n > 0 {
				end += 1 + n
			}
		}
		return end
	}
	cat := categoryOf(r)
	if x.digits != 0 && cat == catNumber {
		end := i + w
		for n := 1; end < len(s) && (x.digits < 0 || n < x.digits); n++ {
			r2, w2 := runeAt(s, end)
			if !isNumber(r2) {
				break
			}
			end += w2
		}
		return end
	}
	if end := x.matchPunct(s, i, r, w); end > 0 {
		return end
	}
	if !isSpace(r) {
		return -1
	}
	return x.matchSpaces(s, i, st)
}

// matchWord is LEAD? BODY: the lead is taken when the body then matches
// after it, else the body is tried at i itself; for the cased words the
// whole of that is done for the first form and then for the second.
func (x *wordRegex) matchWord(s string, i int, r rune, w int) int {
	lead := r != '\r' && r != '\n'
	if x.leadNotPS {
		c := categoryOf(r)
		lead = lead && c != catLetter && !isPunctCollapsed(r) && !isSymbolCollapsed(r)
	} else {
		c := categoryOf(r)
		lead = lead && c != catLetter && c != catNumber
	}
	forms := 1
	if x.word == wordCased || x.word == wordCasedMarks {
		forms = 2
	}
	for form := 0; form < forms; form++ {
		if lead && i+w < len(s) {
			if end := x.body(s, i+w, form); end > 0 {
				return end
			}
		}
		if end := x.body(s, i, form); end > 0 {
			return end
		}
	}
	return -1
}

// body matches the word's body at p, or returns -1. form picks the first
// (upper* lower+) or second (upper+ lower*) alternative of a cased word.
func (x *wordRegex) body(s string, p int, form int) int {
	switch x.word {
	case wordLetters:
		if end := scanWhile(s, p, isLetter); end > p {
			return end
		}
	case wordLettersMarks:
		if end := scanWhile(s, p, isLetterOrMark); end > p {
			return end
		}
	case wordCased, wordCasedMarks:
		return x.casedBody(s, p, form)
	case wordPhrase:
		return phraseBody(s, p)
	}
	return -1
}

// casedBody matches U*W+ (form 0) or U+W* (form 1) at p, where U is "a
// letter but not a-z" and W "a letter but not A-Z" (with marks counted as
// letters for wordCasedMarks). U* is greedy and gives back characters until
// W+ can match: the first success is at the last W inside or right after
// the U run, and since everything inside the run before that is U-only
// (A-Z), a W inside the run matches alone.
func (x *wordRegex) casedBody(s string, p int, form int) int {
	marks := x.word == wordCasedMarks
	q, lastBoth := p, -1 // end of the U run; start of its last character that is also W
	for q < len(s) {
		r, w := runeAt(s, q)
		if !casedUpper(r, marks) {
			break
		}
		if casedLower(r, marks) {
			lastBoth = q
		}
		q += w
	}
	lowerEnd := func(k int) int {
		for k < len(s) {
			r, w := runeAt(s, k)
			if !casedLower(r, marks) {
				break
			}
			k += w
		}
		return k
	}
	if form == 1 {
		if q == p {
			return -1
		}
		return lowerEnd(q)
	}
	if end := lowerEnd(q); end > q {
		return end
	}
	if lastBoth >= 0 {
		_, w := runeAt(s, lastBoth)
		return lastBoth + w
	}
	return -1
}

func casedUpper(r rune, marks bool) bool {
	if r < 0x80 {
		return 'A' <= r && r <= 'Z'
	}
	c := categoryOf(r)
	return c == catLetter || (marks && c == catMark)
}

func casedLower(r rune, marks bool) bool {
	if r < 0x80 {
		return 'a' <= r && r <= 'z'
	}
	c := categoryOf(r)
	return c == catLetter || (marks && c == catMark)
}

// phraseBody matches (?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+ at p: a letter, then
// greedily letters, marks, and spaces that are followed by a letter.
func phraseBody(s string, p int) int {
	r, w := runeAt(s, p)
	if !isLetter(r) {
		return -1
	}
	end := p + w
	for end < len(s) {
		r, w := runeAt(s, end)
		switch c := categoryOf(r); {
		case c == catLetter || c == catMark:
			end += w
			continue
		case r == ' ' && end+1 < len(s):
			if r2, w2 := runeAt(s, end+1); isLetter(r2) {
				end += 1 + w2
				continue
			}
		}
		break
	}
	return end
}

// matchPunct is ' '?PUNCT+ TAIL.
func (x *wordRegex) matchPunct(s string, i int, r rune, w int) int {
	k := i
	if r == ' ' && i+1 < len(s) {
		if r2, _ := runeAt(s, i+1); x.isPunct(r2) {
			k = i + 1
		}
	}
	if k == i && !x.isPunct(r) {
		return -1
	}
	end := k
	for end < len(s) {
		r2, w2 := runeAt(s, end)
		if !x.isPunct(r2) {
			break
		}
		end += w2
	}
	switch x.tail {
	case tailNewlines:
		for end < len(s) && (s[end] == '\r' || s[end] == '\n') {
			end++
		}
	case tailNewlinesSlash:
		for end < len(s) && (s[end] == '\r' || s[end] == '\n' || s[end] == '/') {
			end++
		}
	case tailOneNewlineOrSlash:
		if end < len(s) && (s[end] == '\r' || s[end] == '\n' || s[end] == '/') {
			end++
		}
	}
	return end
}

func (x *wordRegex) isPunct(r rune) bool {
	if x.punct == punctPunctSymbol {
		return isPunctCollapsed(r) || isSymbolCollapsed(r)
	}
	c := categoryOf(r)
	return c != catLetter && c != catNumber && !isSpace(r)
}

// matchSpaces handles a whitespace run at i: through its last newline if it
// has one, else the spaces alternatives. The run's extent is kept in st, so
// that Jais-2's cascade, which takes at most 512 characters of a run at a
// time, does not rescan the rest of the run for each piece.
func (x *wordRegex) matchSpaces(s string, i int, st *matchState) int {
	if !(st.spaceStart <= i && i < st.spaceEnd) {
		st.spaceStart, st.spaceEnd, st.spaceLastNL = i, i, -1
		for st.spaceEnd < len(s) {
			r, w := runeAt(s, st.spaceEnd)
			if !isSpace(r) {
				break
			}
			if r == '\r' || r == '\n' {
				st.spaceLastNL = st.spaceEnd + 1
			}
			st.spaceEnd += w
		}
	}
	run, lastNL := st.spaceEnd, st.spaceLastNL
	if lastNL > i {
		return lastNL
	}
	atEnd := run == len(s)
	if !x.spaceCascade {
		return whitespaceEnd(s, i, run)
	}
	// \s{k}(?!\S) for k = 512, 256, ..., 4, then \s{1,2}(?!\S), then \s{1}:
	// k spaces followed by a space or the end of the chunk. n is the run's
	// length in characters, counted only as far as the cascade looks.
	n := 0
	for j := i; j < run && n <= 512; n++ {
		_, w := runeAt(s, j)
		j += w
	}
	fits := func(k int) bool { return n > k || (n == k && atEnd) }
	for k := 512; k >= 4; k /= 2 {
		if fits(k) {
			return advanceRunes(s, i, k)
		}
	}
	if fits(2) {
		return advanceRunes(s, i, 2)
	}
	return advanceRunes(s, i, 1)
}

func advanceRunes(s string, i, n int) int {
	for ; n > 0 && i < len(s); n-- {
		_, w := runeAt(s, i)
		i += w
	}
	return i
}

func scanWhile(s string, i int, pred func(rune) bool) int {
	for i < len(s) {
		r, w := runeAt(s, i)
		if !pred(r) {
			break
		}
		i += w
	}
	return i
}

func isLetterOrMark(r rune) bool {
	c := categoryOf(r)
	return c == catLetter || c == catMark
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// asciiPunctOrSymbol is [!-/:-@[-`{-~]: printable ASCII that is neither a
// letter, a digit nor a space.
func asciiPunctOrSymbol(c byte) bool {
	return '!' <= c && c <= '~' && !isASCIILetter(c) && !('0' <= c && c <= '9')
}
