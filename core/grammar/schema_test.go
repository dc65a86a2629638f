package grammar

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// sentence generates a random sentence of g: random allowed bytes, biased
// towards closing characters once it is long so that it ends; "" and false
// when it cannot finish within limit bytes.
func sentence(g *Grammar, rng *rand.Rand, limit int) (string, bool) {
	s := g.Start()
	var out []byte
	for len(out) < limit {
		if s.Accepting() && (len(out) > 0 && rng.IntN(4) == 0 || len(out) > limit/2) {
			return string(out), true
		}
		var ok []byte
		for c := range 128 { // ASCII keeps the walk short; UTF-8 is tested elsewhere
			if !s.AdvanceByte(byte(c)).Dead() {
				ok = append(ok, byte(c))
			}
		}
		if len(ok) == 0 {
			return string(out), s.Accepting()
		}
		c := ok[rng.IntN(len(ok))]
		if len(out) > limit/4 {
			for _, pref := range []byte(`"}]0`) {
				if !s.AdvanceByte(pref).Dead() {
					c = pref
					break
				}
			}
		}
		s = s.AdvanceByte(c)
		out = append(out, c)
	}
	return "", false
}

// Generated documents of each schema feature parse as JSON and satisfy
// the feature (the Python suite validates model output with jsonschema).
func TestSchemaFeatures(t *testing.T) {
	cases := []struct {
		name, schema string
		check        func(v any) bool
	}{
		{"string", `{"type":"string"}`, func(v any) bool { _, ok := v.(string); return ok }},
		{"integer", `{"type":"integer"}`, func(v any) bool { f, ok := v.(float64); return ok && f == float64(int64(f)) }},
		{"number", `{"type":"number"}`, func(v any) bool { _, ok := v.(float64); return ok }},
		{"boolean", `{"type":"boolean"}`, func(v any) bool { _, ok := v.(bool); return ok }},
		{"null", `{"type":"null"}`, func(v any) bool { return v == nil }},
		{"enum", `{"enum":["a",1,null,{"k":[true]}]}`, func(v any) bool {
			b, _ := json.Marshal(v)
			return strings.Contains(`"a" 1 null {"k":[true]}`, string(b))
		}},
		{"const", `{"const":"fixed"}`, func(v any) bool { return v == "fixed" }},
		{"type list", `{"type":["integer","null"]}`, func(v any) bool { _, ok := v.(float64); return ok || v == nil }},
		{"anyOf", `{"anyOf":[{"type":"boolean"},{"type":"array","items":{"type":"integer"}}]}`, func(v any) bool {
			if _, ok := v.(bool); ok {
				return true
			}
			_, ok := v.([]any)
			return ok
		}},
		{"array bounds", `{"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":3}`, func(v any) bool {
			a, ok := v.([]any)
			return ok && len(a) >= 2 && len(a) <= 3
		}},
		{"string length", `{"type":"string","minLength":2,"maxLength":4}`, func(v any) bool {
			s, ok := v.(string)
			return ok && len([]rune(s)) >= 2 && len([]rune(s)) <= 4
		}},
		{"pattern", `{"type":"string","pattern":"^[A-Z]{2}-\\d{3}(x|yz)?$"}`, func(v any) bool {
			s, ok := v.(string)
			return ok && regexp.MustCompile(`^[A-Z]{2}-\d{3}(x|yz)?$`).MatchString(s)
		}},
		{"pattern with quotes", `{"type":"string","pattern":"^a\"[^b]\\\\$"}`, func(v any) bool {
			s, ok := v.(string)
			return ok && len(s) == 4 && s[0] == 'a' && s[1] == '"' && s[3] == '\\'
		}},
		{"format date", `{"type":"string","format":"date"}`, func(v any) bool {
			s, ok := v.(string)
			return ok && regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`).MatchString(s)
		}},
		{"object required and optional", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},"required":["b"]}`, func(v any) bool {
			o, ok := v.(map[string]any)
			if !ok || o["b"] == nil {
				return false
			}
			for k := range o {
				if k != "a" && k != "b" && k != "c" {
					return false
				}
			}
			return true
		}},
		{"nested and $ref", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},"$ref":"#/$defs/node"}`, func(v any) bool {
			o, ok := v.(map[string]any)
			return ok && o["v"] != nil
		}},
		{"map", `{"type":"object","additionalProperties":{"type":"integer"}}`, func(v any) bool {
			o, ok := v.(map[string]any)
			for _, x := range o {
				if _, isNum := x.(float64); !isNum {
					return false
				}
			}
			return ok
		}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range cases {
		g, err := FromSchema([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		done := 0
		for range 200 {
			s, ok := sentence(g, rng, 400)
			if !ok {
				continue
			}
			done++
			var v any
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				t.Fatalf("%s: %q is not JSON: %v", c.name, s, err)
			}
			if !c.check(v) {
				t.Fatalf("%s: %q does not satisfy the schema", c.name, s)
			}
		}
		if done < 20 {
			t.Fatalf("%s: only %d of 200 walks finished", c.name, done)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	for schema, want := range map[string]string{
		`{"allOf":[{}]}`: `#: keyword "allOf" is not supported`,
		`{"properties":{"x":{"type":"integer","minimum":0}}}`: `#/properties/x: keyword "minimum" is not supported`,
		`{"type":"string","format":"email"}`:                  `format "email" is not supported`,
		`{"type":"string","pattern":"(a)\\1"}`:                "backreferences",
		`{"type":"frob"}`:                                     `unknown type "frob"`,
		`{"$ref":"https://example.com/s.json"}`:               "only local references",
		`{"$ref":"#/$defs/missing"}`:                          "does not resolve",
		`{"required":["a"],"properties":{}}`:                  `required property "a" has no schema`,
		`false`:                                               "admits no value",
		`{"enum":[]}`:                                         "non-empty array",
	} {
		_, err := FromSchema([]byte(schema))
		var se *SchemaError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), want) {
			t.Errorf("FromSchema(%s) = %v, want an error containing %q", schema, err, want)
		}
	}
}
