package grammar

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// A pattern nested tens of thousands of groups deep is refused by its
// nesting, before anything proportional to depth × length is built (the
// converter used to copy each group's text into its parent's: 172 s and
// hundreds of MB at 400,000 groups). The same for GBNF parentheses and a
// schema nested deeper than the converter recurses.
func TestDeepNestingIsRefusedAtOnce(t *testing.T) {
	for _, depth := range []int{50_000, 400_000} {
		pat := strings.Repeat("(", depth) + "a" + strings.Repeat(")", depth)
		_, err := FromSchema([]byte(`{"type": "string", "pattern": "` + pat + `"}`))
		var se *SchemaError
		if !errors.As(err, &se) || se.Path != "#/pattern" || !strings.Contains(err.Error(), "groups nest deeper than 127") {
			t.Errorf("pattern nested %d deep: %v", depth, err)
		}
		_, err = Parse("root ::= " + pat)
		if err == nil || !strings.Contains(err.Error(), "parentheses nest deeper than 128") {
			t.Errorf("GBNF nested %d deep: %v", depth, err)
		}
	}
	deep := strings.Repeat(`{"type": "array", "items": `, 200) + "{}" + strings.Repeat("}", 200)
	if _, err := FromSchema([]byte(deep)); err == nil || !strings.Contains(err.Error(), "deeper than 128") {
		t.Errorf("a schema nested 200 deep: %v", err)
	}
	// The deepest nesting allowed still compiles and matches (a pattern
	// is a group in the grammar it becomes, so its own go one less deep).
	pat := strings.Repeat("(", MaxNesting-1) + "a" + strings.Repeat(")", MaxNesting-1)
	g, err := FromSchema([]byte(`{"type": "string", "pattern": "` + pat + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Start().Advance([]byte(`"a"`)).Accepting() {
		t.Fatal(`"a" does not match a pattern of nested groups around a`)
	}
}

// A grammar whose elements would take unbounded memory ({m} copies what
// it repeats) is refused before they are made.
func TestElementsAreBounded(t *testing.T) {
	text := "root ::= " + strings.Repeat(`"ab"{1000} `, 300)
	_, err := Parse(text)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d elements", MaxElements)) {
		t.Fatalf("300 copies of a 1000-fold repetition: %v", err)
	}
	if _, err := Parse("root ::= " + strings.Repeat(`"ab"{1000} `, 50)); err != nil {
		t.Fatalf("50 copies: %v", err)
	}
}

// finishes walks from the start of g choosing, at every step, among the
// ASCII bytes that keep the output alive (prefer, once the output is long,
// the bytes in closers), and reports whether an accepting state is reached
// within limit bytes without ever meeting a live state that no byte
// continues: such a state is a stream that fails with "no token of the
// vocabulary can continue".
func finishes(t *testing.T, g *Grammar, rng *rand.Rand, limit int, closers string) bool {
	t.Helper()
	s := g.Start()
	var out []byte
	for len(out) < limit {
		if s.Accepting() && (rng.IntN(3) == 0 || len(out) > limit/2) {
			return true
		}
		var ok []byte
		for c := range 128 {
			if !s.AdvanceByte(byte(c)).Dead() {
				ok = append(ok, byte(c))
			}
		}
		if len(ok) == 0 {
			if !s.Accepting() {
				t.Errorf("after %q no byte continues and the output is not complete", out)
			}
			return s.Accepting()
		}
		c := ok[rng.IntN(len(ok))]
		if len(out) > limit/4 {
			for _, pref := range []byte(closers) {
				if !s.AdvanceByte(pref).Dead() {
					c = pref
					break
				}
			}
		}
		s = s.AdvanceByte(c)
		out = append(out, c)
	}
	return false
}

// The schemas that used to be accepted and then fail mid-stream (their
// states past MaxStacks were dead): too many ways open at once is refused
// at compile time, naming the schema; within the bound, every output can
// be finished.
func TestSchemasAreFollowedOrRefused(t *testing.T) {
	props := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"type": "object", "properties": {`)
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, `"p%d": {"type": "integer"}`, i)
		}
		b.WriteString("}}")
		return b.String()
	}
	for _, tc := range []struct {
		schema, path string
	}{
		{props(2000), "#"},
		{`{"type": "object", "properties": {"x": {"type": "string", "pattern": "(a?){1000}"}}}`, "#/properties/x"},
		{`{"type": "string", "pattern": "(a?|b?){20}"}`, "#"},
	} {
		_, err := FromSchema([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) || se.Path != tc.path || !strings.Contains(err.Error(), "ways at once") {
			t.Errorf("%.80s: %v, want it refused at %s", tc.schema, err, tc.path)
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for _, schema := range []string{
		props(200),
		`{"type": "string", "pattern": "(a?){200}b"}`,
		`{"type": "array", "items": {"type": "string", "pattern": "x(a?){100}"}, "minItems": 3}`,
	} {
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%.60s: %v", schema, err)
		}
		for range 20 {
			if !finishes(t, g, rng, 4000, `"}]0b`) {
				t.Fatalf("%.60s: an output could not be finished", schema)
			}
		}
	}
}

// Alternatives that share a prefix and then each open up to MaxBranches
// ways add up past MaxStacks, which no check at compile time can foresee
// for every grammar. Such a schema used to be accepted and its stream to
// die right after the prefix ("no token of the vocabulary can continue");
// the state now keeps MaxStacks of the ways, so every output goes on and
// can be finished, and what is finished is in the language.
func TestAmbiguityPastMaxStacksNeverStrands(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, schema := range []string{
		`{"anyOf": [{"type": "string", "pattern": "x(a?){200}b"}, {"type": "string", "pattern": "x(a?){200}c"},` +
			` {"type": "string", "pattern": "x(a?){200}d"}]}`,
		`{"type": "string", "pattern": "(x(a?){200}b|x(a?){200}c|x(a?){200}d|x(a?){200}e)"}`,
	} {
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%.60s: %v", schema, err)
		}
		s := g.Start().Advance([]byte(`"x`))
		if s.Dead() || len(s.stacks) > MaxStacks {
			t.Fatalf("%.60s: after \"x: dead %v, %d stacks", schema, s.Dead(), len(s.stacks))
		}
		for _, rest := range []string{`aaab"`, `b"`, strings.Repeat("a", 200) + `b"`} {
			if !s.Advance([]byte(rest)).Accepting() {
				t.Errorf("%.60s: \"x%s is not accepted", schema, rest)
			}
		}
		for range 10 {
			if !finishes(t, g, rng, 1000, `"bcde`) {
				t.Fatalf("%.60s: an output could not be finished", schema)
			}
		}
	}
}

// Nesting is followed as deep as MaxDepth allows and never deeper, and no
// output is let into a nesting it could not close: where one more "["
// would leave too few frames for what must follow it, "[" is refused
// while the shorter way out stays open.
func TestDepthNeverStrandsAnOutput(t *testing.T) {
	// After each "[" either another level or a leaf that nests five
	// rules of its own.
	g, err := Parse(`root ::= "[" (root | leaf) "]"
leaf ::= "(" l2 ")"
l2 ::= "(" l3 ")"
l3 ::= "(" l4 ")"
l4 ::= "(" l5 ")"
l5 ::= "x"`)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Start()
	opened := 0
	for {
		n := s.AdvanceByte('[')
		if n.Dead() {
			break
		}
		s, opened = n, opened+1
		if opened > MaxDepth {
			t.Fatalf("%d levels opened; at most %d frames are followed", opened, MaxDepth)
		}
	}
	if opened < MaxDepth-16 {
		t.Fatalf("only %d levels opened", opened)
	}
	rest := "((((x))))" + strings.Repeat("]", opened)
	if e := s.Advance([]byte(rest[:4])); e.Dead() {
		t.Fatalf("after %d levels the leaf cannot start", opened)
	}
	if !s.Advance([]byte(rest)).Accepting() {
		t.Fatalf("after %d levels the output cannot be closed", opened)
	}

	// A root that nests deeper than MaxDepth to finish at all, and one
	// that never finishes, are refused.
	var chain strings.Builder
	chain.WriteString("root ::= r0\n")
	for i := range MaxDepth + 10 {
		fmt.Fprintf(&chain, "r%d ::= \"[\" r%d \"]\"\n", i, i+1)
	}
	fmt.Fprintf(&chain, "r%d ::= \"x\"\n", MaxDepth+10)
	var le *LimitError
	if _, err := Parse(chain.String()); !errors.As(err, &le) || !strings.Contains(err.Error(), "nests rules") {
		t.Errorf("a chain %d rules deep: %v", MaxDepth+10, err)
	}
	if _, err := Parse(`root ::= "a" root`); !errors.As(err, &le) || !strings.Contains(err.Error(), "matches no text") {
		t.Errorf("a root that never finishes: %v", err)
	}
	// An alternative that never finishes is never entered: the grammar
	// is its other alternatives.
	g, err = Parse("root ::= \"a\" | loop\nloop ::= \"b\" loop")
	if err != nil {
		t.Fatal(err)
	}
	if !g.Start().AdvanceByte('b').Dead() || !g.Start().AdvanceByte('a').Accepting() {
		t.Error(`"b" starts an output that can never finish`)
	}
}

// A character class that matches no character (GBNF's [^\x00-\U0010FFFF],
// a negated class leaving only surrogates, or a pattern's class of only
// what JSON must escape, which the converter leaves out) used to be
// accepted and put the output where no byte goes on: "no token of the
// vocabulary can continue". An alternative through one is never entered,
// and a grammar or schema with no other way is refused.
func TestClassesMatchingNothingAreNeverEntered(t *testing.T) {
	var le *LimitError
	for _, src := range []string{
		`root ::= [^\x00-\U0010FFFF]`,
		`root ::= [^\x00-\uD7FF\uE000-\U0010FFFF]`,
		`root ::= "a" x` + "\n" + `x ::= [^\x00-\x7F\x80-\U0010FFFF] | [^\x00-\U0010FFFF] "b"`,
	} {
		if _, err := Parse(src); !errors.As(err, &le) || !strings.Contains(err.Error(), "matches no character") {
			t.Errorf("%s: %v", src, err)
		}
	}
	var se *SchemaError
	for _, pat := range []string{`[\"]`, `[\\\\]`, `x[\\n\"]y`} {
		schema := `{"type": "string", "pattern": "` + pat + `"}`
		if _, err := FromSchema([]byte(schema)); !errors.As(err, &se) || !strings.Contains(err.Error(), "matches no character") {
			t.Errorf("%s: %v", schema, err)
		}
	}
	// With another way, the way through the class is closed from its start.
	g, err := Parse(`root ::= "a" [^\x00-\U0010FFFF] | "b" | "a" "c"`)
	if err != nil {
		t.Fatal(err)
	}
	if s := g.Start().AdvanceByte('a'); s.Dead() || !s.AdvanceByte('c').Accepting() || len(s.stacks) != 1 {
		t.Errorf(`after "a": %d stacks, "ac" accepted %v`, len(s.stacks), s.AdvanceByte('c').Accepting())
	}
	g, err = FromSchema([]byte(`{"type": "string", "pattern": "a[\\n]|b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Start().Advance([]byte(`"a`)).Dead() || !g.Start().Advance([]byte(`"b"`)).Accepting() {
		t.Error(`"a" starts an output that can never go on`)
	}
	// A negated class with one character left is that character.
	g, err = Parse(`root ::= [^\x01-\U0010FFFF]`)
	if err != nil {
		t.Fatal(err)
	}
	if !g.Start().AdvanceByte(0).Accepting() || !g.Start().AdvanceByte(1).Dead() {
		t.Error(`[^\x01-\U0010FFFF] is not NUL alone`)
	}
}
