package reply

import (
	"bytes"
	"strings"
)

// deepseek reads DeepSeek's call section,
// <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>CALL<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>,
// where CALL is R1/V3's function<｜tool▁sep｜>NAME\n```json\n{..}\n``` or
// V3.1's NAME<｜tool▁sep｜>{..}. A call begun without the section marker
// (R1 distills drop it) is read too. The section settles as one unit; at
// the end of the answer an unclosed section gives the calls it completed.
type deepseek struct{ end closerSearch }

func (*deepseek) openers() []string { return []string{dsCallsBegin, dsCallBegin} }

func (d *deepseek) settle(opener string, body []byte, final bool) (int, []part) {
	closer := dsCallsEnd
	if opener == dsCallBegin {
		closer = dsCallEnd
	}
	at := d.end.find(body, closer)
	n := at + len(closer)
	if at < 0 {
		if !final {
			return -1, nil
		}
		d.end = closerSearch{}
		if opener == dsCallBegin {
			return len(body), nil // a call never closed: content
		}
		at, n = len(body), len(body)
	}
	if opener == dsCallBegin {
		c, ok := dsCall(string(body[:at]))
		if !ok {
			return n, []part{{raw: opener + string(body[:n])}}
		}
		return n, []part{{raw: opener + string(body[:n]), call: c}}
	}
	return n, dsSection(body[:at])
}

// dsSection splits a section's inside into its calls and any other text.
func dsSection(s []byte) []part {
	var parts []part
	for i := skipBlanks(s, 0); i < len(s); i = skipBlanks(s, i) {
		rest := s[i:]
		if !hasPrefix(rest, dsCallBegin) {
			j := bytes.Index(rest, []byte(dsCallBegin))
			if j < 0 {
				j = len(rest)
			}
			parts = append(parts, part{raw: string(rest[:j])})
			i += j
			continue
		}
		inner := rest[len(dsCallBegin):]
		e := bytes.Index(inner, []byte(dsCallEnd))
		if e < 0 {
			parts = append(parts, part{raw: string(rest)})
			break
		}
		raw := string(rest[:len(dsCallBegin)+e+len(dsCallEnd)])
		c, _ := dsCall(string(inner[:e]))
		parts = append(parts, part{raw: raw, call: c})
		i += len(raw)
	}
	return parts
}

// dsCall reads one call's inside.
func dsCall(s string) (*call, bool) {
	left, right, ok := strings.Cut(s, dsSep)
	if !ok {
		return nil, false
	}
	left = strings.TrimSpace(left)
	var c call
	if left == "function" {
		name, fenced, _ := strings.Cut(right, "\n")
		c.name = strings.TrimSpace(name)
		args := strings.TrimSpace(fenced)
		args, ok = strings.CutPrefix(args, "```")
		if ok {
			args = strings.TrimPrefix(args, "json")
			if args, ok = strings.CutSuffix(strings.TrimSpace(args), "```"); !ok {
				return nil, false
			}
		}
		c.args = strings.TrimSpace(args)
	} else {
		c.name, c.args = left, strings.TrimSpace(right)
	}
	if c.name == "" || strings.ContainsAny(c.name, " \n<") || !isObject([]byte(c.args)) {
		return nil, false
	}
	return &c, true
}
