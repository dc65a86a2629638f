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
