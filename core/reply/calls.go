package reply

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
)

// A part is one piece of a settled call unit: a call, or text that turned
// out not to be one (raw goes to Content verbatim).
type part struct {
	raw  string // the part's text as the model wrote it
	call *call  // nil: raw is content
}

// call is one parsed call before validation against the request.
type call struct {
	id   string // the model's own id, if it wrote one
	name string
	args string // JSON object text
}

const idChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newID makes a call id: OpenAI's "call_" and 24 random alphanumerics, or
// for Mistral 9 alphanumerics (its chat template refuses any other id).
func newID(f Format) string {
	n, prefix := 24, "call_"
	if f == Mistral {
		n, prefix = 9, ""
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = idChars[rand.IntN(len(idChars))]
	}
	return prefix + string(b)
}

// isObject reports whether b is the text of one JSON object.
func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// argsText is the arguments of a call as JSON object text: an object
// as written; a string whose content is an object (some models quote
// their arguments); {} when absent. ok is false for anything else.
func argsText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", true
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil || !isObject([]byte(s)) {
			return "", false
		}
		raw = bytes.TrimSpace([]byte(s))
	}
	if !isObject(raw) {
		return "", false
	}
	return string(raw), true
}

// jsonCall reads a call written as a JSON object: {"name": .., "arguments"
// or "parameters": {..}}, optionally with "type": "function" and "id".
func jsonCall(b []byte) (*call, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return nil, false
	}
	var c call
	if json.Unmarshal(obj["name"], &c.name) != nil || c.name == "" {
		return nil, false
	}
	if t, ok := obj["type"]; ok {
		var typ string
		if json.Unmarshal(t, &typ) != nil || typ != "function" {
			return nil, false
		}
	}
	if id, ok := obj["id"]; ok {
		if json.Unmarshal(id, &c.id) != nil {
			return nil, false
		}
	}
	args, hasArgs := obj["arguments"]
	params, hasParams := obj["parameters"]
	if hasArgs && hasParams {
		return nil, false
	}
	if hasParams {
		args = params
	}
	var ok bool
	if c.args, ok = argsText(args); !ok {
		return nil, false
	}
	return &c, true
}

// jsonList reads a JSON array of call objects ([{..}, {..}]) into parts,
// one per element; an element that is not a call is a content part.
func jsonList(b []byte) ([]part, bool) {
	var elems []json.RawMessage
	if json.Unmarshal(b, &elems) != nil {
		return nil, false
	}
	parts := make([]part, 0, len(elems))
	for _, e := range elems {
		c, _ := jsonCall(e)
		parts = append(parts, part{raw: string(e), call: c})
	}
	return parts, true
}
