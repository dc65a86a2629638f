package reply

import "bytes"

// hermes reads <tool_call>{"name": .., "arguments": {..}}</tool_call>.
type hermes struct{ end closerSearch }

func (*hermes) openers() []string { return []string{toolCallOpen} }

func (h *hermes) settle(opener string, body []byte, final bool) (int, []part) {
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
