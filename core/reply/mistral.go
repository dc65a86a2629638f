package reply

// mistral reads [TOOL_CALLS][{"name":..,"arguments":{..},"id":..}, ...]
// (Mistral 7B v0.3, Nemo, Small 3.x) and the newer
// [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{..} (Magistral, Ministral 3, Devstral).
type mistral struct{ js jsonUnit }

func (*mistral) openers() []string { return []string{mistralCalls} }

// maxNameLen bounds a call's name (and id) written before its arguments:
// past it the text is not a call.
const maxNameLen = 256

func (m *mistral) settle(opener string, body []byte, final bool) (int, []part) {
	i := skipBlanks(body, 0)
	if i < len(body) && (body[i] == '[' || body[i] == '{') {
		return m.js.settle(opener, body, i, final, nil)
	}
	j := i
	for j < len(body) && j-i <= maxNameLen && isNameByte(body[j]) {
		j++
	}
	name := string(body[i:j])
	if j == len(body) {
		if final {
			return len(body), nil
		}
		return -1, nil
	}
	if name == "" || j-i > maxNameLen {
		return j, nil
	}
	c := &call{name: name}
	rest := body[j:]
	if hasPrefix(rest, mistralCallID) {
		k := j + len(mistralCallID)
		e := k
		for e < len(body) && e-k <= maxNameLen && isNameByte(body[e]) {
			e++
		}
		if e == len(body) {
			if final {
				return len(body), nil
			}
			return -1, nil
		}
		c.id = string(body[k:e])
		j, rest = e, body[e:]
	}
	if !hasPrefix(rest, mistralArgs) {
		if !final && isPrefixOfAny(rest, []string{mistralArgs, mistralCallID}) {
			return -1, nil
		}
		return j, nil
	}
	return m.js.settle(opener, body, j+len(mistralArgs), final, c)
}

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func hasPrefix(b []byte, s string) bool { return len(b) >= len(s) && string(b[:len(s)]) == s }

// jsonUnit settles a call unit whose arguments (or list of calls) are one
// JSON value: complete when its brackets balance.
type jsonUnit struct {
	at  int // where the value starts in the body; 0 with ext unused
	ext jsonExtent
}

// settle reads the JSON value at body[from:] (after blanks). With named
// set it is the arguments of that call; otherwise it is a call object or
// a list of them.
func (u *jsonUnit) settle(opener string, body []byte, from int, final bool, named *call) (int, []part) {
	i := skipBlanks(body, from)
	if i == len(body) {
		if final {
			return len(body), nil
		}
		return -1, nil
	}
	if body[i] != '{' && (named != nil || body[i] != '[') {
		return i, nil // not JSON: not a call
	}
	if u.at != i {
		u.at, u.ext = i, jsonExtent{}
	}
	end := u.ext.scan(body[i:])
	if end < 0 {
		if !final {
			return -1, nil
		}
		u.at, u.ext = 0, jsonExtent{}
		return len(body), nil
	}
	u.at, u.ext = 0, jsonExtent{}
	n := i + end
	v := body[i:n]
	raw := opener + string(body[:n])
	switch {
	case named != nil:
		named.args = string(v)
		return n, []part{{raw: raw, call: named}}
	case v[0] == '[':
		parts, ok := jsonList(v)
		if !ok {
			return n, nil
		}
		return n, parts
	default:
		c, _ := jsonCall(v)
		return n, []part{{raw: raw, call: c}}
	}
}
