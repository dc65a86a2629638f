package reply

import (
	"bytes"
	"encoding/json"
	"strings"
)

// llama3 reads Llama 3.x calls: a reply that is only JSON call objects
// ({"name": .., "parameters": {..}}, ';'-separated), or anything after
// <|python_tag|>: such JSON, or a built-in tool's name.call(k=v, ...).
// Whether the JSON is a call is known only when it is whole, so the unit
// is held to the end of the answer.
type llama3 struct{}

func (*llama3) openers() []string { return []string{pythonTag} }

var llamaLeads = []string{`"name"`, `"type"`}

func (*llama3) leads(start []byte) (isCall, decided bool) {
	if len(start) == 0 {
		return false, false
	}
	if start[0] != '{' {
		return false, true
	}
	rest := start[skipBlanks(start, 1):]
	for _, l := range llamaLeads {
		if bytes.HasPrefix(rest, []byte(l)) {
			return true, true
		}
	}
	if len(rest) == 0 || isPrefixOfAny(rest, llamaLeads) {
		return false, false
	}
	return false, true
}

func (*llama3) settle(opener string, body []byte, final bool) (int, []part) {
	if !final {
		return -1, nil
	}
	i := skipBlanks(body, 0)
	if opener == pythonTag && i < len(body) && body[i] != '{' {
		c, ok := pythonCall(string(bytes.TrimSpace(body)))
		if !ok {
			return len(body), nil
		}
		return len(body), []part{{raw: opener + string(body), call: c}}
	}
	var parts []part
	for i < len(body) {
		if body[i] == ';' {
			i = skipBlanks(body, i+1)
			continue
		}
		if body[i] != '{' {
			parts = append(parts, part{raw: string(body[i:])})
			break
		}
		var ext jsonExtent
		end := ext.scan(body[i:])
		if end < 0 {
			parts = append(parts, part{raw: string(body[i:])})
			break
		}
		v := body[i : i+end]
		c, _ := llamaCall(v)
		parts = append(parts, part{raw: string(v), call: c})
		i = skipBlanks(body, i+end)
	}
	return len(body), parts
}

// llamaCall is jsonCall held to Llama's shape, so that a JSON answer that
// merely has a "name" is not taken for a call: the arguments must be
// there and no other keys.
func llamaCall(v []byte) (*call, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(v, &obj) != nil {
		return nil, false
	}
	_, hasP := obj["parameters"]
	_, hasA := obj["arguments"]
	if !hasP && !hasA {
		return nil, false
	}
	for k := range obj {
		switch k {
		case "name", "parameters", "arguments", "type":
		default:
			return nil, false
		}
	}
	return jsonCall(v)
}

// pythonCall reads NAME.call(k=v, ...), the form Llama 3.1 writes built-in
// tools (brave_search, wolfram_alpha, code_interpreter) in. Values are
// Python literals: strings, numbers, True, False, None.
func pythonCall(s string) (*call, bool) {
	name, rest, ok := strings.Cut(s, ".call(")
	if !ok || !isIdent(name) {
		return nil, false
	}
	rest, ok = strings.CutSuffix(rest, ")")
	if !ok {
		return nil, false
	}
	obj := newObject()
	for {
		rest = strings.TrimSpace(rest)
		if rest == "" {
			break
		}
		key, after, ok := strings.Cut(rest, "=")
		key = strings.TrimSpace(key)
		if !ok || !isIdent(key) {
			return nil, false
		}
		val, after, ok := pyLiteral(strings.TrimSpace(after))
		if !ok {
			return nil, false
		}
		obj.set(key, val)
		after = strings.TrimSpace(after)
		if after != "" {
			if after[0] != ',' {
				return nil, false
			}
			after = after[1:]
		}
		rest = after
	}
	return &call{name: name, args: obj.text()}, true
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// pyLiteral reads one Python literal at the start of s as JSON.
func pyLiteral(s string) (json.RawMessage, string, bool) {
	if s == "" {
		return nil, "", false
	}
	if q := s[0]; q == '"' || q == '\'' {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			c := s[i]
			switch {
			case c == q:
				return jsonString(b.String()), s[i+1:], true
			case c == '\\' && i+1 < len(s):
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				default:
					b.WriteByte(s[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		return nil, "", false
	}
	end := strings.IndexAny(s, ", )")
	if end < 0 {
		end = len(s)
	}
	word := s[:end]
	switch word {
	case "True":
		return json.RawMessage("true"), s[end:], true
	case "False":
		return json.RawMessage("false"), s[end:], true
	case "None":
		return json.RawMessage("null"), s[end:], true
	}
	if json.Valid([]byte(word)) && (word[0] == '-' || word[0] >= '0' && word[0] <= '9') {
		return json.RawMessage(word), s[end:], true
	}
	return nil, "", false
}
