package grammar

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// byteTrie is a vocabulary with a token for each byte but those in
// missing, and the end token 256.
func byteTrie(missing ...byte) *Trie {
	pieces := make([][]byte, 257)
	for c := range 256 {
		if !slices.Contains(missing, byte(c)) {
			pieces[c] = []byte{byte(c)}
		}
	}
	eog := make([]bool, 257)
	eog[256] = true
	return NewTrie(pieces, eog)
}

// Fit leaves out exactly the characters whose bytes the vocabulary cannot
// write alone, and refuses a grammar that then cannot finish.
func TestFitNarrowsToTheVocabulary(t *testing.T) {
	whole := byteTrie()
	g, err := Parse(`root ::= [\x00-\x10]`)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := whole.Fit(g); err != nil || f != g {
		t.Fatalf("a vocabulary of every byte: %v, same grammar %v", err, f == g)
	}

	tr := byteTrie(0x04, 0xf1)
	if got := tr.unspelled(); !slices.Equal(got, []rune{4, 4, 0x40000, 0x7ffff}) {
		t.Fatalf("unspelled %x", got)
	}
	for _, tc := range []struct {
		src      string
		ok, dead []string // outputs accepted / dead after Fit
	}{
		{`root ::= [\x00-\x10]`, []string{"\x03", "\x05"}, []string{"\x04"}},
		{`root ::= [^a]`, []string{"b", "\U00030000", "\U00080000"}, []string{"\x04", "\U00040000", "\U0007FFFF"}},
		{`root ::= "x" [\x04] | "x" "y"`, []string{"xy"}, []string{"x\x04"}},
		{`root ::= [\U00040000-\U0007FFFF] | "z"`, []string{"z"}, []string{"\U00050000"}},
	} {
		g, err := Parse(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		f, err := tr.Fit(g)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		for _, s := range tc.ok {
			if !f.Start().Advance([]byte(s)).Accepting() {
				t.Errorf("%s: %q not accepted", tc.src, s)
			}
		}
		for _, s := range tc.dead {
			if !f.Start().Advance([]byte(s)).Dead() {
				t.Errorf("%s: %q not refused", tc.src, s)
			}
			if !g.Start().Advance([]byte(s)).Accepting() {
				t.Errorf("%s: %q was not accepted before Fit either", tc.src, s)
			}
		}
	}
	for _, src := range []string{`root ::= [\x04]+`, `root ::= "a" [\U00040000-\U0007FFFF]`} {
		g, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		var le *LimitError
		if _, err := tr.Fit(g); !errors.As(err, &le) || !strings.Contains(err.Error(), "matches no character") {
			t.Errorf("%s: %v", src, err)
		}
	}
	// A missing continuation byte leaves ASCII alone.
	if got := byteTrie(0x85).unspelled(); !slices.Equal(got, []rune{0x80, 0x10ffff}) {
		t.Errorf("unspelled %x", got)
	}
}
