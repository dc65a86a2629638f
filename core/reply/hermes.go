package reply

import "bytes"

// hermes reads <tool_call>{"name": .., "arguments": {..}}</tool_call>,
// and a reply that is one such JSON object without the markers: Qwen2.5's
// smaller models (the Coder 0.5B among them) often leave them out, and
// llama.cpp's parser takes those calls too. A bare object is a call only
// when it is the whole reply and names a function of the request.
type hermes struct{ end closerSearch }

func (*hermes) openers() []string { return []string{toolCallOpen} }

var hermesLeads = []string{`"name"`}

func (*hermes) leads(start []byte) (isCall, decided bool) {
	if len(start) == 0 {
		return false, false
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

func (h *hermes) settle(opener string, body []byte, final bool) (int, []part) {
	if opener == "" {
		// A bare object: known whole only at the end of the answer.
		if !final {
			return -1, nil
		}
		c, ok := jsonCall(bytes.TrimSpace(body))
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
