package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer regexes speak of Unicode general categories (\p{L},
// \p{N}, \p{P}, \p{S}, \p{M}) and of \s. llama.cpp, whose splits are the
// reference, classifies with tables from Unicode 15.1; Go's unicode package
// is at 15.0. The two agree on every code point except those 15.1 assigned:
// CJK Extension I (letters) and six ideographic description characters
// (symbols), which Go still calls unassigned. uCategory adds them so that the
// two classify all 1,114,112 code points alike (checked once, code point by
// code point, against llama.cpp's table; see NOTES.md).
type uCategory uint8

const (
	catOther  uCategory = iota // control, format, unassigned, private use, non-space separators
	catLetter                  // \p{L}
	catNumber                  // \p{N}
	catPunct                   // \p{P}
	catSymbol                  // \p{S}
	catMark                    // \p{M}
)

// asciiCategory is the category of each ASCII character.
var asciiCategory [utf8.RuneSelf]uCategory

func init() {
	for c := rune(0); c < utf8.RuneSelf; c++ {
		asciiCategory[c] = categoryOfUnicode(c)
	}
}

func categoryOf(r rune) uCategory {
	if r >= 0 && r < utf8.RuneSelf {
		return asciiCategory[r]
	}
	return categoryOfUnicode(r)
}

func categoryOfUnicode(r rune) uCategory {
	switch {
	case unicode.IsLetter(r), 0x2EBF0 <= r && r <= 0x2EE5D: // + CJK Extension I (15.1)
		return catLetter
	case unicode.IsNumber(r):
		return catNumber
	case unicode.IsPunct(r):
		return catPunct
	case unicode.IsSymbol(r), 0x2FFC <= r && r <= 0x2FFF, r == 0x31EF: // + 15.1's IDCs
		return catSymbol
	case unicode.IsMark(r):
		return catMark
	}
	return catOther
}

// isSpace is \s: Unicode White_Space, which is also what llama.cpp's
// table holds (and C's isspace for ASCII: no \x1c-\x1f).
func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return asciiClass[r] == clsSpace
	}
	return unicode.IsSpace(r)
}

func isLetter(r rune) bool { return categoryOf(r) == catLetter }
func isNumber(r rune) bool { return categoryOf(r) == catNumber }
func isMark(r rune) bool   { return categoryOf(r) == catMark }

// isPunctCollapsed and isSymbolCollapsed are \p{P} and \p{S} as llama.cpp's
// general-purpose regex path applies them: it runs std::regex on a copy of
// the text in which every non-ASCII character is replaced by one byte per
// category, and rewrites \p{S} to that byte plus the ASCII symbols it lists,
// which leave out '~'. So in those regexes '~' is not a symbol (it is in
// the scanners modelled on llama.cpp's hand-written splitters, which read
// the category table directly).
func isPunctCollapsed(r rune) bool  { return categoryOf(r) == catPunct }
func isSymbolCollapsed(r rune) bool { return r != '~' && categoryOf(r) == catSymbol }

// isHan is llama.cpp's notion of a Han character for Kimi-K2: the CJK
// Unified Ideographs blocks and their extensions A to F and compatibility
// ideographs, by block range rather than by script property.
func isHan(r rune) bool {
	switch {
	case 0x4E00 <= r && r <= 0x9FFF, 0x3400 <= r && r <= 0x4DBF,
		0x20000 <= r && r <= 0x2A6DF, 0x2A700 <= r && r <= 0x2B73F,
		0x2B740 <= r && r <= 0x2B81F, 0x2B820 <= r && r <= 0x2CEAF,
		0x2CEB0 <= r && r <= 0x2EBEF, 0xF900 <= r && r <= 0xFAFF,
		0x2F800 <= r && r <= 0x2FA1F:
		return true
	}
	return false
}
