package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

var (
	hermesShape  = CallShape{Begin: "<tool_call>\n", End: "\n</tool_call>", Sep: "\n", NameKey: "name", ArgsKey: "arguments"}
	llama3Shape  = CallShape{Sep: "; ", NameKey: "name", ArgsKey: "parameters"}
	mistralShape = CallShape{Sep: ", ", ListOpen: "[", ListClose: "]", NameKey: "name", ArgsKey: "arguments"}
)

// testTools: one with a nested schema (object, array, enum, required),
// one with no parameters, one whose name has '.', '-' and digits.
var testTools = []Tool{
	{Name: "get_weather", Parameters: []byte(`{"type": "object", "properties": {
		"location": {"type": "string", "description": "a city"},
		"unit": {"enum": ["celsius", "fahrenheit"]},
		"days": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
		"options": {"type": "object", "properties": {"hourly": {"type": "boolean"}, "tz": {"type": "string"}}, "required": ["hourly"]}
	}, "required": ["location"]}`)},
	{Name: "now"},
	{Name: "search.web-2", Parameters: []byte(`{"properties": {"q": {"type": "string"}}, "required": ["q"]}`)},
}

// writeCall writes one call the way shape does.
func writeCall(shape CallShape, name, args string) string {
	return fmt.Sprintf(`%s{"%s": "%s", "%s": %s}%s`, shape.Begin, shape.NameKey, name, shape.ArgsKey, args, shape.End)
}

// writeCalls writes calls, each a name and its arguments.
func writeCalls(shape CallShape, calls ...[2]string) string {
	parts := make([]string, len(calls))
	for i, c := range calls {
		parts[i] = writeCall(shape, c[0], c[1])
	}
	return shape.ListOpen + strings.Join(parts, shape.Sep) + shape.ListClose
}

func mustToolCalls(t *testing.T, shape CallShape, tools []Tool) *Grammar {
	t.Helper()
	g, err := ToolCalls(shape, tools)
	if err != nil {
		t.Fatalf("ToolCalls: %v", err)
	}
	return g
}

func TestToolCallsAcceptAndRefuse(t *testing.T) {
	weather := `{"location": "Paris", "unit": "celsius", "days": [1, 2], "options": {"hourly": true}}`
	for _, tc := range []struct {
		name  string
		shape CallShape
	}{{"hermes", hermesShape}, {"llama3", llama3Shape}, {"mistral", mistralShape}} {
		t.Run(tc.name, func(t *testing.T) {
			shape := tc.shape
			g := mustToolCalls(t, shape, testTools)
			yes := []string{
				writeCalls(shape, [2]string{"get_weather", weather}),
				writeCalls(shape, [2]string{"get_weather", `{"location":"Paris"}`}),
				writeCalls(shape, [2]string{"get_weather", "{\n  \"location\": \"Paris\",\n  \"days\": []\n}"}),
				writeCalls(shape, [2]string{"now", `{}`}),
				writeCalls(shape, [2]string{"now", `{"anything": [1, {"x": null}]}`}),
				writeCalls(shape, [2]string{"search.web-2", `{"q": "go \"grammar\""}`}),
				writeCalls(shape, [2]string{"now", `{}`}, [2]string{"get_weather", `{"location": "Oslo"}`}),
				writeCalls(shape, [2]string{"search.web-2", `{"q": "a"}`}, [2]string{"now", `{}`}, [2]string{"now", `{}`}),
				// JSON whitespace around the keys.
				shape.ListOpen + shape.Begin + `{ "name" : "now" , "` + shape.ArgsKey + `" :{} }` + shape.End + shape.ListClose,
			}
			for _, s := range yes {
				if !matches(g, s) {
					t.Errorf("should accept %q", s)
				}
			}
			no := []string{
				"",
				shape.ListOpen + shape.ListClose,
				writeCalls(shape, [2]string{"get_weathe", `{"location": "Paris"}`}),
				writeCalls(shape, [2]string{"get_weather2", `{"location": "Paris"}`}),
				writeCalls(shape, [2]string{"GET_WEATHER", `{"location": "Paris"}`}),
				writeCalls(shape, [2]string{"search", `{"q": "a"}`}),
				writeCalls(shape, [2]string{"get_weather", `{}`}),                                          // missing required
				writeCalls(shape, [2]string{"get_weather", `{"unit": "celsius"}`}),                         // missing required
				writeCalls(shape, [2]string{"get_weather", `{"location": 5}`}),                             // wrong type
				writeCalls(shape, [2]string{"get_weather", `{"location": "Paris", "unit": "kelvin"}`}),     // not in enum
				writeCalls(shape, [2]string{"get_weather", `{"location": "P", "days": [1, 2, 3, 4]}`}),     // maxItems
				writeCalls(shape, [2]string{"get_weather", `{"location": "P", "options": {"tz": "UTC"}}`}), // nested required
				writeCalls(shape, [2]string{"get_weather", `{"location": "P", "zone": 1}`}),                // unknown property
				writeCalls(shape, [2]string{"get_weather", `"{\"location\": \"Paris\"}"`}),                 // arguments as a string
				writeCalls(shape, [2]string{"now", `[]`}),                                                  // not an object
				writeCalls(shape, [2]string{"now", `null`}),
				writeCalls(shape, [2]string{"search.web-2", `{"query": "a"}`}),
				"Sure! " + writeCalls(shape, [2]string{"now", `{}`}),
				writeCalls(shape, [2]string{"now", `{}`}) + " done",
				writeCalls(shape, [2]string{"now", `{}`}) + shape.Sep,
				writeCalls(shape, [2]string{"now", `{}`}) + "\n",
				shape.ListOpen + shape.Begin + `{"` + shape.ArgsKey + `": {}, "name": "now"}` + shape.End + shape.ListClose, // keys swapped
				shape.ListOpen + shape.Begin + `{"name": "now"}` + shape.End + shape.ListClose,                              // no arguments
				shape.ListOpen + shape.Begin + `{"name": "now", "` + shape.ArgsKey + `": {}, "id": 1}` + shape.End + shape.ListClose,
			}
			for _, s := range no {
				if matches(g, s) {
					t.Errorf("should refuse %q", s)
				}
			}
			// A prefix of a call is alive (the grammar constrains the output
			// as it is written), but not accepted.
			part := writeCalls(shape, [2]string{"get_weather", weather})
			part = part[:len(part)/2]
			if !prefix(g, part) || matches(g, part) {
				t.Errorf("%q should be a live prefix only", part)
			}

			one := shape
			one.MaxCalls = 1
			g1 := mustToolCalls(t, one, testTools)
			single := writeCalls(shape, [2]string{"now", `{}`})
			two := writeCalls(shape, [2]string{"now", `{}`}, [2]string{"now", `{}`})
			if !matches(g1, single) || matches(g1, two) {
				t.Errorf("MaxCalls 1: one call %v (want true), two calls %v (want false)", matches(g1, single), matches(g1, two))
			}
			three := shape
			three.MaxCalls = 3
			g3 := mustToolCalls(t, three, testTools)
			for n := 1; n <= 4; n++ {
				calls := make([][2]string, n)
				for i := range calls {
					calls[i] = [2]string{"now", `{}`}
				}
				if got := matches(g3, writeCalls(shape, calls...)); got != (n <= 3) {
					t.Errorf("MaxCalls 3: %d calls accepted = %v", n, got)
				}
			}
		})
	}
}

// Random outputs of the grammar are calls to the tools, with arguments
// as each tool's schema says (checked here for the nested one).
func TestToolCallsGeneratedAreCalls(t *testing.T) {
	shape := llama3Shape
	shape.MaxCalls = 1 // the output is then one JSON object
	g := mustToolCalls(t, shape, testTools)
	rng := rand.New(rand.NewPCG(3, 4))
	names := map[string]int{}
	for range 300 {
		s, ok := sentence(g, rng, 600)
		if !ok {
			continue
		}
		var call map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s), &call); err != nil {
			t.Fatalf("%q is not JSON: %v", s, err)
		}
		var name string
		var args map[string]any
		if len(call) != 2 || json.Unmarshal(call["name"], &name) != nil || json.Unmarshal(call["parameters"], &args) != nil || args == nil {
			t.Fatalf("%q is not a call", s)
		}
		names[name]++
		switch name {
		case "get_weather":
			if _, ok := args["location"].(string); !ok {
				t.Fatalf("%q: no location", s)
			}
			if u, has := args["unit"]; has && u != "celsius" && u != "fahrenheit" {
				t.Fatalf("%q: unit %v", s, u)
			}
		case "search.web-2":
			if _, ok := args["q"].(string); !ok {
				t.Fatalf("%q: no q", s)
			}
		case "now":
		default:
			t.Fatalf("%q names no tool", s)
		}
	}
	if len(names) != 3 {
		t.Fatalf("the walks called %v; want each of the 3 tools", names)
	}
}

// Each tool's "$ref"s resolve within its own schema: two tools may both
// define "#/$defs/item", differently.
func TestToolCallsDefsStayApart(t *testing.T) {
	tools := []Tool{
		{Name: "a", Parameters: []byte(`{"$defs": {"item": {"type": "integer"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/item"}}, "required": ["x"]}`)},
		{Name: "b", Parameters: []byte(`{"$defs": {"item": {"type": "string"}}, "type": "object", "properties": {"x": {"$ref": "#/$defs/item"}}, "required": ["x"]}`)},
		{Name: "c", Parameters: []byte(`{"definitions": {"item": {"type": "object", "properties": {"next": {"$ref": "#/definitions/item"}}}}, "$ref": "#/definitions/item"}`)},
	}
	shape := hermesShape
	g := mustToolCalls(t, shape, tools)
	for s, want := range map[string]bool{
		writeCalls(shape, [2]string{"a", `{"x": 1}`}):                               true,
		writeCalls(shape, [2]string{"b", `{"x": "1"}`}):                             true,
		writeCalls(shape, [2]string{"a", `{"x": "1"}`}):                             false,
		writeCalls(shape, [2]string{"b", `{"x": 1}`}):                               false,
		writeCalls(shape, [2]string{"c", `{"next": {"next": {}}}`}):                 true,
		writeCalls(shape, [2]string{"c", `{"next": {"next": 1}}`}):                  false,
		writeCalls(shape, [2]string{"a", `{"x": 2}`}, [2]string{"b", `{"x": "y"}`}): true,
	} {
		if matches(g, s) != want {
			t.Errorf("%q: accepted = %v, want %v", s, !want, want)
		}
	}
}

// Names are exact JSON strings, escaped where JSON needs it and only
// there; {} and true admit any object, as no schema does.
func TestToolCallsNamesAndOpenSchemas(t *testing.T) {
	tools := []Tool{{Name: `say "hi"`, Parameters: []byte(`{}`)}, {Name: "a<b&c", Parameters: []byte(`true`)}, {Name: "日本"}, {Name: "n", Parameters: []byte(" null ")}}
	shape := llama3Shape
	g := mustToolCalls(t, shape, tools)
	for s, want := range map[string]bool{
		writeCalls(shape, [2]string{`say \"hi\"`, `{"k": 1}`}): true,
		writeCalls(shape, [2]string{`say "hi"`, `{}`}):         false,
		writeCalls(shape, [2]string{"a<b&c", `{}`}):            true,
		writeCalls(shape, [2]string{"日本", `{}`}):               true,
		writeCalls(shape, [2]string{`say \"hi\"`, `1`}):        false,
		writeCalls(shape, [2]string{"a<b&c", `"x"`}):           false,
		writeCalls(shape, [2]string{"n", `{"k": []}`}):         true,
		writeCalls(shape, [2]string{"n", `null`}):              false,
	} {
		if matches(g, s) != want {
			t.Errorf("%q: accepted = %v, want %v", s, !want, want)
		}
	}
}

func TestToolCallsErrors(t *testing.T) {
	weather := testTools[0]
	for _, tc := range []struct {
		shape CallShape
		tools []Tool
		want  string
		index int // the *ToolError's; -1: not one
	}{
		{hermesShape, nil, "no tools", -1},
		{hermesShape, []Tool{weather, {Parameters: []byte(`{}`)}}, "tool 1: the name is empty", 1},
		{hermesShape, []Tool{weather, {Name: "now"}, weather}, `tool "get_weather": the name is given to two tools`, 2},
		{hermesShape, []Tool{{Name: "x\xff"}}, "not valid UTF-8", 0},
		{hermesShape, []Tool{{Name: "now"}, {Name: "get_weather", Parameters: []byte(`{"properties": {"x": {"type": "integer", "minimum": 0}}}`)}},
			`tool "get_weather": json schema at #/properties/x: keyword "minimum" is not supported`, 1},
		{hermesShape, []Tool{{Name: "f", Parameters: []byte(`{"type": `)}}, `tool "f": json schema at #: not JSON`, 0},
		{hermesShape, []Tool{{Name: "f", Parameters: []byte(`{"type": "string"}`)}}, `tool "f": json schema at #/type: a call's arguments are a JSON object`, 0},
		{hermesShape, []Tool{{Name: "f", Parameters: []byte(`{"$ref": "#/$defs/item"}`)}, {Name: "g", Parameters: []byte(`{"$defs": {"item": {}}}`)}},
			`tool "f": json schema at #/$ref: reference "#/$defs/item" does not resolve`, 0},
		{hermesShape, []Tool{{Name: "f", Parameters: []byte(`{"properties": {"s": {"type": "string", "pattern": "(a?){1000}"}}}`)}},
			`tool "f": json schema at #/properties/s: cannot be followed`, 0},
		{CallShape{NameKey: "name"}, []Tool{weather}, "needs both a name key and an arguments key", -1},
		{CallShape{NameKey: "k", ArgsKey: "k"}, []Tool{weather}, `keys are both "k"`, -1},
		{CallShape{NameKey: "name", ArgsKey: "arguments", MaxCalls: -1}, []Tool{weather}, "MaxCalls is -1", -1},
	} {
		_, err := ToolCalls(tc.shape, tc.tools)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.tools, err, tc.want)
			continue
		}
		var te *ToolError
		if isTool := errors.As(err, &te); isTool != (tc.index >= 0) || isTool && te.Index != tc.index {
			t.Errorf("%v: %v: ToolError %v, want index %d", tc.tools, err, te, tc.index)
		}
	}
}

// MaxTools tools compile, and one more is refused; the size limit is of
// all the tools' schemas together.
func TestToolCallsLimits(t *testing.T) {
	tools := make([]Tool, MaxTools+1)
	for i := range tools {
		tools[i] = Tool{Name: fmt.Sprintf("tool_%d", i), Parameters: []byte(`{"properties": {"x": {"type": "integer"}}}`)}
	}
	g, err := ToolCalls(hermesShape, tools[:MaxTools])
	if err != nil {
		t.Fatalf("%d tools: %v", MaxTools, err)
	}
	last := writeCalls(hermesShape, [2]string{fmt.Sprintf("tool_%d", MaxTools-1), `{"x": 3}`})
	if !matches(g, last) {
		t.Errorf("%d tools: %q refused", MaxTools, last)
	}
	if _, err := ToolCalls(hermesShape, tools); err == nil || !strings.Contains(err.Error(), "at most 128") {
		t.Errorf("%d tools: %v", MaxTools+1, err)
	}

	// A schema that converts to over a third of MaxGrammarBytes: one
	// tool of it compiles, three are too much.
	var b strings.Builder
	const props = 7000
	b.WriteString(`{"type": "object", "properties": {`)
	for i := range props {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"p%d": {"type": "integer"}`, i)
	}
	b.WriteString(`}, "required": [`)
	for i := range props {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"p%d"`, i)
	}
	b.WriteString("]}")
	v, err := parseSchema(nil, []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	c := newConv(nil)
	if _, err := c.convert(v, 0); err != nil {
		t.Fatal(err)
	}
	if size := c.size(""); size <= MaxGrammarBytes/3 || size > MaxGrammarBytes/2 {
		t.Fatalf("the schema converts to %d bytes; the test needs a third to a half of %d", size, MaxGrammarBytes)
	}
	big := []byte(b.String())
	if _, err := ToolCalls(hermesShape, []Tool{{Name: "one", Parameters: big}}); err != nil {
		t.Fatalf("one big tool: %v", err)
	}
	_, err = ToolCalls(hermesShape, []Tool{{Name: "one", Parameters: big}, {Name: "two", Parameters: big}, {Name: "three", Parameters: big}})
	if err == nil || !strings.Contains(err.Error(), `tool "three"`) ||
		!strings.Contains(err.Error(), "(with the 2 schemas before it) to a grammar of more than 1048576 bytes") {
		t.Errorf("three big tools: %v", err)
	}
}

// TestToolCallsTrail: with Trail, whitespace may end the calls, and a
// newline after a Hermes call leaves the model free to end there or to
// begin another call; without it the calls end at the last byte.
func TestToolCallsTrail(t *testing.T) {
	shape := hermesShape
	one := writeCalls(shape, [2]string{"now", `{}`})
	if matches(mustToolCalls(t, shape, testTools), one+"\n") {
		t.Errorf("without Trail, accepted %q", one+"\n")
	}
	shape.Trail = true
	g := mustToolCalls(t, shape, testTools)
	for _, s := range []string{one, one + "\n", one + " ", one + "\n" + one, one + "\n" + one + "\n"} {
		if !matches(g, s) {
			t.Errorf("should accept %q", s)
		}
	}
	for _, s := range []string{one + "\nx", one + "\n\n" + one, " " + one} {
		if matches(g, s) {
			t.Errorf("should refuse %q", s)
		}
	}
}
