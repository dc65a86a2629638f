package grammar

import (
	"testing"
)

// FuzzGrammar feeds random grammar texts and random outputs through the
// whole path a constrained request takes: parsing and compiling, the
// matcher byte by byte, and masks over a vocabulary cut from the input.
// Whatever the bytes, nothing may panic or run without bound (the
// matcher's limits turn runaway states dead).
func FuzzGrammar(f *testing.F) {
	for _, seed := range []struct{ g, in string }{
		{`root ::= "a" | "b"`, "a"},
		{"root ::= item (\",\" item)*\nitem ::= [0-9]{1,3}", "1,22,333"},
		{`root ::= ("(" root ")")*`, "(()())"},
		{"root ::= json-value\n" + jsonCommon, `{"a": [1, 2.5e3, "x\u00e9"], "b": null}`},
		{`root ::= [^a-z]+ . "日本"?`, "XYZ!日本"},
		{`root ::= a a a a a a
a ::= b b | ""
b ::= c c | ""
c ::= "x" | ""`, "xxxxxx"},
	} {
		f.Add(seed.g, []byte(seed.in))
	}
	f.Fuzz(func(t *testing.T, text string, in []byte) {
		if len(text) > 4096 || len(in) > 4096 {
			return
		}
		g, err := Parse(text)
		if err != nil {
			if g != nil {
				t.Fatal("a grammar and an error")
			}
			return
		}
		s := g.Start()
		for _, c := range in {
			n := s.AdvanceByte(c)
			if n.Dead() {
				break
			}
			s = n
		}
		_ = s.Key()
		// A vocabulary made of the input's pieces (and every single
		// byte), so the trie walk meets both random and live bytes.
		var pieces [][]byte
		for i := 0; i < len(in); i += 3 {
			pieces = append(pieces, in[i:min(i+5, len(in))])
		}
		for b := range 256 {
			pieces = append(pieces, []byte{byte(b)})
		}
		eog := make([]bool, len(pieces)+1)
		eog[len(pieces)] = true
		pieces = append(pieces, nil)
		tr := NewTrie(pieces, eog)
		m := NewMatcher(tr)
		mask := m.Mask(s)
		ref := make([]uint64, tr.MaskWords())
		tr.Mask(s, ref)
		for id := range int32(len(pieces)) {
			if want := tr.Allows(s, id); Allowed(mask, id) != want || Allowed(ref, id) != want || m.Allows(s, id) != want {
				t.Fatalf("token %d %q: matcher mask %v, trie mask %v, matcher Allows %v, trie Allows %v", id, pieces[id], Allowed(mask, id), Allowed(ref, id), m.Allows(s, id), want)
			}
		}
	})
}
