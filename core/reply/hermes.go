package reply

import (
	"bytes"
	"slices"
)

// hermes reads <tool_call>{"name": .., "arguments": {..}}</tool_call>,
// and a reply that is one such JSON object without the markers, bare or
// in a ```json fence: Qwen2.5's smaller models (the Coder 0.5B and 1.5B
// among them) often answer so, and llama.cpp's parser takes those calls
// too. A bare object is a call only when it is the whole reply and names
// a function of the request.
type hermes struct{ end closerSearch }

func (*hermes) openers() []string { return []string{toolCallOpen} }

var hermesLeads = []string{`"name"`}

// fences are the openings of a fenced bare call.
var fences = []string{"```json", "```"}

func (*hermes) leads(start []byte) (isCall, decided bool) {
	if len(start) == 0 {
		return false, false
	}
	if start[0] == '`' {
		rest, ok := afterFence(start)
		if !ok {
			// Undecided while it may still become a fence's opening.
			open := isPrefixOfAny(start, fences) || slices.Contains(fences, string(start))
			return false, !open
		}
		rest = rest[skipBlanks(rest, 0):]
		if len(rest) == 0 {
			return false, false
		}
		start = rest
	}
	if start[0] != '{' {
		return false, true
	}
	rest := start[skipBlanks(start, 1):]
	if bytes.HasPrefix(rest, []byte(hermesLeads[0])) {
		return true, true
	}
	if len(rest) == 0 || isPrefixOfAny(rest, hermesLeads) {
		return false, false
	}
	return false, true
}

// afterFence is what follows a ```json or ``` fence's opening line; ok is
// false while b does not yet hold the whole opening.
func afterFence(b []byte) ([]byte, bool) {
	for _, f := range fences {
		if rest, ok := bytes.CutPrefix(b, []byte(f)); ok && len(rest) > 0 && (rest[0] == '\n' || rest[0] == ' ' || rest[0] == '\r') {
			return rest, true
		}
	}
	return nil, false
}

// unfence is a fenced reply's inside (b trimmed of blanks): the fence's
// opening line and closing ``` removed, or b itself when it has none.
func unfence(b []byte) []byte {
	rest, ok := afterFence(b)
	if !ok {
		return b
	}
	inner, closed := bytes.CutSuffix(bytes.TrimSpace(rest), []byte("```"))
	if !closed {
		return nil
	}
	return bytes.TrimSpace(inner)
}

func (h *hermes) settle(opener string, body []byte, final bool) (int, []part) {
	if opener == "" {
		// A bare object: known whole only at the end of the answer.
		if !final {
			return -1, nil
		}
		c, ok := jsonCall(unfence(bytes.TrimSpace(body)))
		if !ok {
			return len(body), nil
		}
		return len(body), []part{{raw: string(body), call: c}}
	}
	at := h.end.find(body, toolCallClose)
	if at < 0 {
		if !final {
			return -1, nil
		}
		h.end = closerSearch{}
		return len(body), nil // never closed: content
	}
	n := at + len(toolCallClose)
	raw := opener + string(body[:n])
	c, ok := jsonCall(bytes.TrimSpace(body[:at]))
	if !ok {
		return n, []part{{raw: raw}}
	}
	return n, []part{{raw: raw, call: c}}
}
