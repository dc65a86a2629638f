package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// filterTojson is transformers' tojson filter: Python's json.dumps(x,
// ensure_ascii=False, indent=None, separators=None, sort_keys=False),
// which unlike jinja2's own escapes no HTML characters.
func filterTojson(r *renderer, v Value, a *callArgs) (Value, error) {
	args, err := a.bind("tojson", "ensure_ascii", "indent", "separators", "sort_keys")
	if err != nil {
		return nil, err
	}
	j := &jsonWriter{w: r.newBuf(), r: r, ascii: truthy(orDefault(args[0], false)), sortKeys: truthy(orDefault(args[3], false))}
	switch ind := orDefault(args[1], nil).(type) {
	case nil:
	case string:
		j.indent, j.pretty = ind, true
	default:
		n, _, isInt, ok := number(ind)
		if !ok || !isInt {
			return nil, typeErrorf("indent must be an int or a str")
		}
		if n > 1024 { // Python would make it; no template needs it
			return nil, errorf(kindValue, "indent %d is too large", n)
		}
		j.indent, j.pretty = strings.Repeat(" ", int(max(n, 0))), true
	}
	j.itemSep, j.keySep = ", ", ": "
	if j.pretty {
		j.itemSep = ","
	}
	if sep := orDefault(args[2], nil); sep != nil {
		items, err := r.iterate(sep)
		if err != nil {
			return nil, err
		}
		if len(items) != 2 {
			return nil, errorf(kindValue, "separators must be a (item_separator, key_separator) pair")
		}
		is, ok1 := isString(items[0])
		ks, ok2 := isString(items[1])
		if !ok1 || !ok2 {
			return nil, typeErrorf("separators must be strings")
		}
		j.itemSep, j.keySep = is, ks
	}
	if err := j.value(v, 0); err != nil {
		return nil, err
	}
	if j.w.err != nil {
		return nil, j.w.err
	}
	return j.w.String(), nil
}

type jsonWriter struct {
	w               *sbuf
	r               *renderer
	ascii, sortKeys bool
	pretty          bool
	indent          string
	itemSep, keySep string
}

func notSerializable(v Value) error {
	return typeErrorf("Object of type %s is not JSON serializable", typeName(v))
}

// newline starts a line at depth's indentation (pretty printing only).
func (j *jsonWriter) newline(depth int) {
	j.w.WriteString("\n")
	for range depth {
		j.w.WriteString(j.indent)
	}
}

func (j *jsonWriter) value(v Value, depth int) error {
	if depth > maxValueDepth {
		return tooDeep()
	}
	if err := j.r.step(); err != nil {
		return err
	}
	switch x := v.(type) {
	case nil:
		j.w.WriteString("null")
	case bool:
		if x {
			j.w.WriteString("true")
		} else {
			j.w.WriteString("false")
		}
	case int64:
		j.w.WriteString(strconv.FormatInt(x, 10))
	case float64:
		j.w.WriteString(jsonFloat(x))
	case string:
		j.str(x)
	case Markup:
		j.str(string(x))
	case *List:
		if x.kind != kindList && x.kind != kindTuple {
			return notSerializable(v)
		}
		if len(x.Items) == 0 {
			j.w.WriteString("[]")
			break
		}
		j.w.WriteString("[")
		for i, it := range x.Items {
			if i > 0 {
				j.w.WriteString(j.itemSep)
			}
			if j.pretty {
				j.newline(depth + 1)
			}
			if err := j.value(it, depth+1); err != nil {
				return err
			}
		}
		if j.pretty {
			j.newline(depth)
		}
		j.w.WriteString("]")
	case *Dict:
		return j.dict(x, depth)
	default:
		return notSerializable(v)
	}
	return j.w.err
}

func (j *jsonWriter) dict(d *Dict, depth int) error {
	if d.Len() == 0 {
		j.w.WriteString("{}")
		return j.w.err
	}
	order := make([]int, d.Len())
	for i := range order {
		order[i] = i
	}
	if j.sortKeys {
		// Python sorts the (key, value) pairs: keys of different types
		// do not compare.
		keys := make([]Value, len(order))
		for i := range keys {
			keys[i] = int64(i)
		}
		if err := j.r.sortValues(keys, func(i Value) (Value, error) { return d.keys[i.(int64)], nil }, false); err != nil {
			return err
		}
		for i, k := range keys {
			order[i] = int(k.(int64))
		}
	}
	j.w.WriteString("{")
	for n, i := range order {
		if n > 0 {
			j.w.WriteString(j.itemSep)
		}
		if j.pretty {
			j.newline(depth + 1)
		}
		switch k := d.keys[i].(type) {
		case string:
			j.str(k)
		case Markup:
			j.str(string(k))
		case nil:
			j.str("null")
		case bool:
			j.str(map[bool]string{true: "true", false: "false"}[k])
		case int64:
			j.str(strconv.FormatInt(k, 10))
		case float64:
			j.str(jsonFloat(k))
		default:
			return typeErrorf("keys must be str, int, float, bool or None, not %s", typeName(k))
		}
		j.w.WriteString(j.keySep)
		if err := j.value(d.vals[i], depth+1); err != nil {
			return err
		}
	}
	if j.pretty {
		j.newline(depth)
	}
	j.w.WriteString("}")
	return j.w.err
}

func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return formatFloat(f)
}

// str writes a JSON string as Python's json module does: ", \ and the
// control characters escaped (\n, \r, \t, \b, \f or \u00XX), and with
// ensure_ascii every non-ASCII character as \uXXXX (surrogate pairs
// beyond the BMP).
func (j *jsonWriter) str(s string) {
	j.w.WriteString(`"`)
	start := 0
	flush := func(i int) {
		if start < i {
			j.w.WriteString(s[start:i])
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if !j.ascii {
				i += size
				continue
			}
			flush(i)
			if r >= 0x10000 {
				r -= 0x10000
				j.w.WriteString(fmt.Sprintf(`\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff)))
			} else {
				j.w.WriteString(fmt.Sprintf(`\u%04x`, r))
			}
			i += size
			start = i
			continue
		}
		flush(i)
		switch c {
		case '"':
			j.w.WriteString(`\"`)
		case '\\':
			j.w.WriteString(`\\`)
		case '\n':
			j.w.WriteString(`\n`)
		case '\r':
			j.w.WriteString(`\r`)
		case '\t':
			j.w.WriteString(`\t`)
		case '\b':
			j.w.WriteString(`\b`)
		case '\f':
			j.w.WriteString(`\f`)
		default:
			j.w.WriteString(fmt.Sprintf(`\u%04x`, c))
		}
		i++
		start = i
	}
	flush(len(s))
	j.w.WriteString(`"`)
}
