package reply

import (
	"bytes"
	"encoding/json"
	"strings"
)

// qwen3Coder reads <tool_call><function=NAME><parameter=K>V</parameter>
// ...</function></tool_call>, building the arguments object from the
// parameters: a value that parses as JSON is that JSON, else a string.
// Seed-OSS writes the same inside <seed:tool_call>...</seed:tool_call>.
type qwen3Coder struct {
	open, close string
	end         closerSearch
}

func (q *qwen3Coder) openers() []string { return []string{q.open} }

func (q *qwen3Coder) settle(opener string, body []byte, final bool) (int, []part) {
	at := q.end.find(body, q.close)
	if at < 0 {
		if !final {
			return -1, nil
		}
		q.end = closerSearch{}
		return len(body), nil
	}
	n := at + len(q.close)
	raw := opener + string(body[:n])
	c, ok := xmlFunction(string(bytes.TrimSpace(body[:at])))
	if !ok {
		return n, []part{{raw: raw}}
	}
	return n, []part{{raw: raw, call: c}}
}

const (
	fnOpen     = "<function="
	fnClose    = "</function>"
	paramOpen  = "<parameter="
	paramClose = "</parameter>"
)

// xmlFunction reads <function=NAME>...</function>, the whole of s. A
// parameter's value ends at </parameter>, or (models drop it) at the
// next <parameter= or </function>.
func xmlFunction(s string) (*call, bool) {
	rest, ok := strings.CutPrefix(s, fnOpen)
	if !ok {
		return nil, false
	}
	name, rest, ok := strings.Cut(rest, ">")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, "<\n") {
		return nil, false
	}
	rest, ok = strings.CutSuffix(strings.TrimSpace(rest), fnClose)
	if !ok {
		return nil, false
	}
	obj := newObject()
	for {
		rest = strings.TrimSpace(rest)
		if rest == "" {
			break
		}
		after, ok := strings.CutPrefix(rest, paramOpen)
		if !ok {
			return nil, false
		}
		key, after, ok := strings.Cut(after, ">")
		key = strings.TrimSpace(key)
		if !ok || key == "" || strings.ContainsAny(key, "<\n") {
			return nil, false
		}
		end, next := len(after), len(after)
		if i := strings.Index(after, paramClose); i >= 0 {
			end, next = i, i+len(paramClose)
		}
		if i := strings.Index(after, paramOpen); i >= 0 && i < end {
			end, next = i, i
		}
		obj.set(key, paramValue(after[:end]))
		rest = after[next:]
	}
	return &call{name: name, args: obj.text()}, true
}

// paramValue is a parameter's JSON: the text between the newlines that
// frame it, as JSON when it parses as JSON, else as a string.
func paramValue(v string) json.RawMessage {
	v = strings.TrimPrefix(v, "\n")
	v = strings.TrimSuffix(v, "\n")
	if t := strings.TrimSpace(v); t != "" && json.Valid([]byte(t)) {
		var b bytes.Buffer
		if json.Compact(&b, []byte(t)) == nil {
			return b.Bytes()
		}
	}
	return jsonString(v)
}

// jsonString is s as a JSON string, with <, > and & as written (Go's
// default escapes them for HTML).
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// object builds a JSON object's text keeping its keys in the order
// written; a repeated key keeps its place and takes the later value.
type object struct {
	keys []string
	vals map[string]json.RawMessage
}

func newObject() *object { return &object{vals: map[string]json.RawMessage{}} }

func (o *object) set(k string, v json.RawMessage) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) text() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(k))
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.String()
}
