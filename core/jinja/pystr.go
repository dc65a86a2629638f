package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python's str() and repr() of values: what {{ x }} prints, what ~ joins
// and what a list shows its items as.

// maxValueDepth bounds the recursion into nested values (printing,
// comparing, converting to JSON). Only a namespace can hold itself, and
// JSON input nests at most this deep; Python stops at its recursion
// limit too.
const maxValueDepth = 500

func tooDeep() error {
	return errorf(kindValue, "the value nests deeper than %d levels (or contains itself)", maxValueDepth)
}

// strScalar is str(v) for values that need no builder, ok false for
// the rest (containers and the like).
func strScalar(v Value) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case Markup:
		return string(v), true
	case nil:
		return "None", true
	case bool:
		if v {
			return "True", true
		}
		return "False", true
	case int64:
		return strconv.FormatInt(v, 10), true
	case float64:
		return formatFloat(v), true
	case Undefined:
		return "", true
	}
	return "", false
}

// toStr is str(v) under the budget.
func (r *renderer) toStr(v Value) (string, error) {
	if s, ok := strScalar(v); ok {
		return s, nil
	}
	w := r.newBuf()
	if err := writeStr(w, v, 0); err != nil {
		return "", err
	}
	return w.String(), w.err
}

func writeStr(w *sbuf, v Value, depth int) error {
	if s, ok := strScalar(v); ok {
		w.WriteString(s)
		return w.err
	}
	return writeRepr(w, v, depth)
}

// writeRepr writes repr(v).
func writeRepr(w *sbuf, v Value, depth int) error {
	if depth > maxValueDepth {
		return tooDeep()
	}
	if err := w.b.step(); err != nil {
		return err
	}
	switch v := v.(type) {
	case string:
		w.WriteString(pyReprString(v))
	case Markup:
		w.WriteString("Markup(" + pyReprString(string(v)) + ")")
	case Undefined:
		w.WriteString("Undefined")
	case *List:
		open, end := "[", "]"
		switch v.kind {
		case kindTuple:
			open, end = "(", ")"
			if len(v.Items) == 1 {
				end = ",)"
			}
		case kindDictItems:
			open, end = "dict_items([", "])"
		case kindDictKeys:
			open, end = "dict_keys([", "])"
		case kindDictValues:
			open, end = "dict_values([", "])"
		case kindRange:
			s := "range(" + strconv.FormatInt(v.rng[0], 10) + ", " + strconv.FormatInt(v.rng[1], 10)
			if v.rng[2] != 1 {
				s += ", " + strconv.FormatInt(v.rng[2], 10)
			}
			w.WriteString(s + ")")
			return w.err
		}
		w.WriteString(open)
		for i, it := range v.Items {
			if i > 0 {
				w.WriteString(", ")
			}
			if err := writeRepr(w, it, depth+1); err != nil {
				return err
			}
		}
		w.WriteString(end)
	case *Dict:
		return writeDictRepr(w, v, depth)
	case *Namespace:
		w.WriteString("<Namespace ")
		if err := writeDictRepr(w, v.attrs, depth); err != nil {
			return err
		}
		w.WriteString(">")
	case *Generator:
		w.WriteString("<generator object " + v.name + ">")
	case *macro:
		w.WriteString("<Macro '" + v.def.name + "'>")
	case *builtin:
		w.WriteString("<built-in function " + v.name + ">")
	case *boundMethod:
		w.WriteString("<built-in method " + v.name + " of " + typeName(v.recv) + " object>")
	case *loopContext:
		w.WriteString("<LoopContext " + strconv.Itoa(v.index+1) + "/" + strconv.Itoa(len(v.items)) + ">")
	default:
		s, _ := strScalar(v)
		w.WriteString(s)
	}
	return w.err
}

func writeDictRepr(w *sbuf, d *Dict, depth int) error {
	w.WriteString("{")
	for i, k := range d.keys {
		if i > 0 {
			w.WriteString(", ")
		}
		if err := writeRepr(w, k, depth+1); err != nil {
			return err
		}
		w.WriteString(": ")
		if err := writeRepr(w, d.vals[i], depth+1); err != nil {
			return err
		}
	}
	w.WriteString("}")
	return w.err
}

// scalarRepr is repr(v) for short messages (no budget: callers pass keys
// and small values only).
func scalarRepr(v Value) string {
	switch v := v.(type) {
	case string:
		return pyReprString(v)
	case Markup:
		return "Markup(" + pyReprString(string(v)) + ")"
	}
	if s, ok := strScalar(v); ok {
		return s
	}
	return typeName(v) + " object"
}

// pyReprString is Python's repr of a str: single quotes unless the text
// has a single quote and no double one, and escapes for backslashes,
// the quote, and characters Python does not print.
func pyReprString(s string) string {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == utf8.RuneError:
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && !pyPrintable(r)):
			switch {
			case r < 0x100:
				fmt.Fprintf(&b, `\x%02x`, r)
			case r < 0x10000:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// pyPrintable approximates Python's str.isprintable for one rune: what
// repr leaves unescaped.
func pyPrintable(r rune) bool {
	if r == ' ' {
		return true
	}
	return unicode.IsPrint(r)
}

// formatFloat is Python's repr of a float: the shortest text that reads
// back as the same number, in positional notation for exponents from -4
// to 15 and scientific beyond, always with a "." or an exponent.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	neg := strings.HasPrefix(e, "-")
	if neg {
		e = e[1:]
	}
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp >= -4 && exp < 16 {
		if exp >= 0 {
			if len(digits) <= exp+1 {
				out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				out = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			out = "0." + strings.Repeat("0", -exp-1) + digits
		}
	}
	if out == "" {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		out = m + "e" + sign + es
	}
	if neg {
		out = "-" + out
	}
	return out
}
