package tokenizer

import "sort"

//go:generate sh -c "python3 nfd_gen.py > nfd_table.go"

// nfdRange says that code points first..last decompose to text that
// starts with base.
type nfdRange struct{ first, last, base rune }

// nfdBase is the first code point of r's canonical decomposition: "é" gives
// "e", "ấ" gives "a", a Hangul syllable its leading jamo. This is all of NFD
// that WordPiece's accent stripping keeps, and it is what llama.cpp applies
// (one code point in, one out), so the combining marks a decomposition
// would add never appear; marks already in the text are dropped later.
// Both tables come from Unicode 14 data; llama.cpp's was checked equal to
// this one for every code point (NOTES.md).
func nfdBase(r rune) rune {
	if r < nfdBaseRanges[0].first {
		return r
	}
	i := sort.Search(len(nfdBaseRanges), func(i int) bool { return nfdBaseRanges[i].last >= r })
	if i < len(nfdBaseRanges) && nfdBaseRanges[i].first <= r {
		return nfdBaseRanges[i].base
	}
	return r
}
