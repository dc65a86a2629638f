package grammar

import (
	"errors"
	"strings"
	"testing"
)

// matches reports whether the whole of s is a sentence of g.
func matches(g *Grammar, s string) bool { return g.Start().Advance([]byte(s)).Accepting() }

// prefix reports whether s can still be continued into a sentence.
func prefix(g *Grammar, s string) bool { return !g.Start().Advance([]byte(s)).Dead() }

func mustParse(t *testing.T, src string) *Grammar {
	t.Helper()
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return g
}

func TestGBNFConstructs(t *testing.T) {
	cases := []struct {
		src      string
		yes, no  []string
		prefixes []string
	}{
		{`root ::= "ab" | "cd"`, []string{"ab", "cd"}, []string{"", "a", "abc", "ac"}, []string{"a", "c"}},
		{`root ::= [a-c]+ "!"`, []string{"a!", "abcab!"}, []string{"!", "ad!", "a"}, nil},
		{`root ::= [^a-c]*`, []string{"", "xyz", "é日本"}, []string{"a", "xa"}, nil},
		{`root ::= "x"? "y"{2,3}`, []string{"yy", "xyyy"}, []string{"y", "xyyyy"}, nil},
		{"root ::= item (\",\" item)*\nitem ::= [0-9]{1,2} # comment\n", []string{"1", "12,3,45"}, []string{"123", "1,", ""}, nil},
		{"root ::= (\n  \"a\"\n  | \"b\"\n)\n", []string{"a", "b"}, []string{"ab"}, nil},
		{"root ::= \"a\"\n  | \"b\"\n", []string{"a", "b"}, []string{"ab"}, nil},
		{`root ::= "\x41\u00e9\n" [\t]`, []string{"Aé\n\t"}, []string{"A"}, nil},
		{`root ::= . .`, []string{"ab", "日本"}, []string{"a"}, nil},
		{`root ::= "(" root ")" | ""`, []string{"", "()", "((()))"}, []string{"(()", ")"}, nil},
		{`root ::= "ab"* "c"`, []string{"c", "ababc"}, []string{"abac"}, nil},
		{`root ::= [日-本]`, []string{"日", "本"}, []string{"a", "月月"}, nil},
	}
	for _, c := range cases {
		g := mustParse(t, c.src)
		for _, s := range c.yes {
			if !matches(g, s) {
				t.Errorf("%q: %q should match", c.src, s)
			}
		}
		for _, s := range c.no {
			if matches(g, s) {
				t.Errorf("%q: %q should not match", c.src, s)
			}
		}
		for _, s := range c.prefixes {
			if !prefix(g, s) {
				t.Errorf("%q: %q should be a live prefix", c.src, s)
			}
		}
	}
}

// A character split across tokens is matched byte by byte: its first
// bytes live exactly when some completion can match.
func TestPartialUTF8(t *testing.T) {
	g := mustParse(t, `root ::= "é" | "日"`)
	e := []byte("é")
	if prefix(g, string(e[:1])) == false {
		t.Fatal("first byte of é should be live")
	}
	if !g.Start().Advance(e[:1]).Advance(e[1:]).Accepting() {
		t.Fatal("é in two pieces should match")
	}
	if !g.Start().Advance([]byte{0xc3}).AdvanceByte(0xa8).Dead() { // è
		t.Fatal("è must not match")
	}
	if !g.Start().Advance([]byte{0xf0}).Dead() {
		t.Fatal("a 4-byte lead cannot start é or 日")
	}
	if !g.Start().Advance([]byte{0xc0, 0x80}).Dead() {
		t.Fatal("overlong encodings are never characters")
	}
}

// A partial character that every class either matches in all its
// completions or in none is one state whatever its bits, so a matcher's
// automaton shares it; where a class splits the completions, the bits stay
// and decide exactly.
func TestPartialUTF8States(t *testing.T) {
	g := mustParse(t, `root ::= [^"]* "\""`)
	a := g.Start().Advance([]byte("日")[:2])
	b := g.Start().Advance([]byte("本")[:2])
	if a.Key() != b.Key() {
		t.Error("partial characters a string takes whole should be one state")
	}
	if !a.Advance([]byte("日")[2:]).Advance([]byte(`"`)).Accepting() {
		t.Error("the completed character should leave the string open")
	}
	if !a.Advance([]byte{0x41}).Dead() {
		t.Error("an ASCII byte cannot complete a character")
	}
	// Surrogates stay invalid: ED A0..BF would encode U+D800..DFFF.
	if !g.Start().Advance([]byte{0xed, 0xa0}).Dead() {
		t.Error("a surrogate prefix should be dead")
	}
	// A class covering part of a lead byte's completions: α..ω is
	// U+03B1..U+03C9, and lead CE spans U+0380..U+03BF.
	greek := mustParse(t, `root ::= [α-ω]`)
	ce := greek.Start().AdvanceByte(0xce)
	if ce.Dead() || ce.AdvanceByte(0xb1).Dead() != false || !ce.AdvanceByte(0xb0).Dead() {
		t.Error("the class must decide the completed character exactly")
	}
	if greek.Start().Advance([]byte("α")[:1]).Key() == greek.Start().Advance([]byte("ω")[:1]).Key() {
		t.Error("CE and CF lead bytes differ under [α-ω]")
	}
}

// The matcher's automaton gives the same masks and tests as advancing the
// pushdown state, over a vocabulary of all single bytes, every two-byte
// prefix of some multibyte characters and some words, at states inside
// and outside strings.
func TestMatcherEqualsTrie(t *testing.T) {
	var pieces [][]byte
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, w := range []string{"日本", "é", "αβ", "\"", `\`, `\u00e9`, "{\"", "\":", "true", "12", "-3.5e2", " ", "\n", "ω\"", "\xed\xa0", "日"[:2], "α"[:1]} {
		pieces = append(pieces, []byte(w))
	}
	eog := make([]bool, len(pieces)+1)
	eog[len(pieces)] = true
	pieces = append(pieces, nil)
	tr := NewTrie(pieces, eog)
	m := NewMatcher(tr)
	ref := make([]uint64, tr.MaskWords())
	for _, c := range []struct{ g, out string }{
		{"root ::= json-value\n" + jsonCommon, `{"a": "x日`},
		{"root ::= json-value\n" + jsonCommon, `{"a": [1, 2`},
		{"root ::= json-value\n" + jsonCommon, `{"a"`},
		{`root ::= [α-ω]+ "."`, "αβ"},
		{`root ::= [^"]{0,3} "!"`, "日"},
	} {
		s := mustParse(t, c.g).Start()
		for i := range len(c.out) + 1 {
			st := s.Advance([]byte(c.out[:i]))
			if st.Dead() {
				t.Fatalf("%q is not a prefix of %q", c.out[:i], c.g)
			}
			tr.Mask(st, ref)
			mask := m.Mask(st)
			for id := range int32(len(pieces)) {
				if Allowed(mask, id) != Allowed(ref, id) || m.Allows(st, id) != tr.Allows(st, id) || Allowed(ref, id) != tr.Allows(st, id) {
					t.Fatalf("after %q, token %q: matcher mask %v, allows %v; trie mask %v, allows %v", c.out[:i], pieces[id], Allowed(mask, id), m.Allows(st, id), Allowed(ref, id), tr.Allows(st, id))
				}
			}
		}
	}
}

func TestGBNFErrors(t *testing.T) {
	cases := map[string]string{
		`root ::= "abc`:                  "unterminated string",
		`root ::= foo`:                   `rule "foo" is used but never defined`,
		`start ::= "a"`:                  "no rule named root",
		`root ::= root "a" | "b"`:        "left-recursive",
		`root ::= ("" | "a")* "b"`:       "left-recursive",
		"root ::= \"a\"\nroot ::= \"b\"": "defined twice",
		`root ::= [a-`:                   "unterminated character class",
		`root ::= "a"{3,1}`:              "maximum below its minimum",
		`root ::= "a"{5000}`:             "at most 1000",
		`root ::= "\q"`:                  `unknown escape`,
		`root ::= ( "a"`:                 "unclosed parenthesis",
		`root ::= * "a"`:                 "nothing before it to repeat",
		`root = "a"`:                     "expected ::=",
		``:                               "empty",
		"root ::= [z-a]":                 "reversed",
		`root ::= "a" $`:                 `unexpected "$"`,
		"root ::= \"\\ud800\"":           "not a character",
	}
	for src, want := range cases {
		_, err := Parse(src)
		var se *SyntaxError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", src, err, want)
		}
	}
}

func TestTrieMask(t *testing.T) {
	pieces := [][]byte{[]byte("a"), []byte("ab"), []byte("b"), []byte("abc"), nil, []byte("c"), {0xc3}, {0xa9}, []byte("é"), []byte("x")}
	eog := make([]bool, len(pieces))
	eog[4] = true
	tr := NewTrie(pieces, eog)
	g := mustParse(t, `root ::= "a" "b"* "c" "é"?`)
	m := NewMatcher(tr)
	want := func(s State, ids ...int32) {
		t.Helper()
		mask := m.Mask(s)
		for id := range int32(len(pieces)) {
			exp := false
			for _, w := range ids {
				exp = exp || w == id
			}
			if Allowed(mask, id) != exp {
				t.Errorf("token %d %q: allowed %v, want %v", id, pieces[id], Allowed(mask, id), exp)
			}
			if tr.Allows(s, id) != exp {
				t.Errorf("Allows(%d) = %v, want %v", id, tr.Allows(s, id), exp)
			}
		}
	}
	s := g.Start()
	want(s, 0, 1, 3)
	s = s.Advance([]byte("ab"))
	want(s, 2, 5)
	s = s.Advance([]byte("c"))
	want(s, 4, 6, 8) // end, the lead byte of é, é whole
	want(s.Advance([]byte{0xc3}), 7)
}
