package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Python's two string formatting languages: "fmt % args" and
// "fmt".format(*args, **kwargs), for str, int and float arguments. Widths
// and precisions go through the budget before any padding is made.

// fmtSpec is a parsed conversion: flags, width, precision and type.
type fmtSpec struct {
	fill       rune
	align      byte // '<', '>', '^', '=' or 0
	sign       byte // '+', ' ', '-' or 0
	alt, zero  bool
	width      int64
	prec       int64 // -1: none
	grouping   byte  // ',' or '_' or 0
	conversion byte  // the type letter, 0 for none
}

// percentFormat is fmt % arg. A tuple supplies the arguments in order, a
// dict those named by %(name)s, anything else the one argument; markup
// says fmt is Markup, whose arguments are escaped.
func (r *renderer) percentFormat(format string, arg Value, markup bool) (Value, error) {
	var args []Value
	var named *Dict
	switch a := arg.(type) {
	case *List:
		if a.kind == kindTuple {
			args = a.Items
		} else {
			args = []Value{a}
		}
	case *Dict:
		named, args = a, []Value{a}
	default:
		args = []Value{a}
	}
	out := r.newBuf()
	next := 0
	take := func() (Value, error) {
		if next >= len(args) {
			return nil, typeErrorf("not enough arguments for format string")
		}
		next++
		return args[next-1], nil
	}
	usedNamed := false
	for i := 0; i < len(format); {
		j := strings.IndexByte(format[i:], '%')
		if j < 0 {
			out.WriteString(format[i:])
			break
		}
		out.WriteString(format[i : i+j])
		i += j + 1
		if i >= len(format) {
			return nil, errorf(kindValue, "incomplete format")
		}
		var v Value
		haveV := false
		if format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 || named == nil {
				return nil, typeErrorf("format requires a mapping")
			}
			key := format[i+1 : i+end]
			got, ok := named.Get(key)
			if !ok {
				return nil, errorf(kindKey, "%s", pyReprString(key))
			}
			v, haveV, usedNamed = got, true, true
			i += end + 1
		}
		spec := fmtSpec{fill: ' ', prec: -1}
		for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
			switch format[i] {
			case '-':
				spec.align = '<'
			case '+':
				spec.sign = '+'
			case ' ':
				if spec.sign == 0 {
					spec.sign = ' '
				}
			case '#':
				spec.alt = true
			case '0':
				spec.zero = true
			}
			i++
		}
		num := func() (int64, error) {
			if i < len(format) && format[i] == '*' {
				i++
				w, err := take()
				if err != nil {
					return 0, err
				}
				n, _, isInt, ok := number(w)
				if !ok || !isInt {
					return 0, typeErrorf("* wants int")
				}
				return n, nil
			}
			start := i
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				i++
			}
			if start == i {
				return -1, nil
			}
			n, err := strconv.ParseInt(format[start:i], 10, 64)
			if err != nil {
				return 0, errorf(kindValue, "width too big")
			}
			return n, nil
		}
		w, err := num()
		if err != nil {
			return nil, err
		}
		if w < 0 && w != -1 {
			spec.align, w = '<', -w
		}
		spec.width = max(w, 0)
		if i < len(format) && format[i] == '.' {
			i++
			if spec.prec, err = num(); err != nil {
				return nil, err
			}
			spec.prec = max(spec.prec, 0)
		}
		for i < len(format) && strings.IndexByte("hlL", format[i]) >= 0 {
			i++
		}
		if i >= len(format) {
			return nil, errorf(kindValue, "incomplete format")
		}
		c := format[i]
		i++
		if c == '%' {
			out.WriteString("%")
			continue
		}
		if !haveV {
			if v, err = take(); err != nil {
				return nil, err
			}
		}
		if spec.align == 0 && spec.zero && strings.IndexByte("diouxXeEfFgG", c) >= 0 {
			spec.align, spec.fill = '=', '0'
		}
		if spec.align == 0 {
			spec.align = '>'
		}
		var s string
		switch c {
		case 's', 'r', 'a':
			if c == 's' {
				s, err = r.toStr(v)
			} else {
				w := r.newBuf()
				err = writeRepr(w, v, 0)
				s = w.String()
			}
			if err != nil {
				return nil, err
			}
			if markup {
				if _, isMarkup := v.(Markup); !isMarkup {
					s = htmlEscape(s)
				}
			}
			if spec.prec >= 0 {
				s = truncateRunes(s, spec.prec)
			}
			spec.conversion = 's'
		case 'c':
			if n, _, isInt, ok := number(v); ok && isInt {
				s = string(rune(n))
			} else if str, ok := isString(v); ok && utf8.RuneCountInString(str) == 1 {
				s = str
			} else {
				return nil, typeErrorf("%%c requires int or char")
			}
		case 'd', 'i', 'u', 'o', 'x', 'X', 'e', 'E', 'f', 'F', 'g', 'G':
			if c == 'i' || c == 'u' {
				c = 'd'
			}
			spec.conversion = c
			if s, err = formatNumber(v, spec, true); err != nil {
				return nil, err
			}
		default:
			return nil, errorf(kindValue, "unsupported format character '%c'", c)
		}
		if s, err = r.align(s, spec); err != nil {
			return nil, err
		}
		out.WriteString(s)
		if out.err != nil {
			return nil, out.err
		}
	}
	if !usedNamed && named == nil && next < len(args) {
		return nil, typeErrorf("not all arguments converted during string formatting")
	}
	if out.err != nil {
		return nil, out.err
	}
	if markup {
		return Markup(out.String()), nil
	}
	return out.String(), nil
}

func truncateRunes(s string, n int64) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// formatNumber formats a number for conversion spec.conversion (d o x X
// e E f F g G %, or 0 for str()), with its sign and alternate form;
// percent says % formatting (whose %x of a float is an error either way).
func formatNumber(v Value, spec fmtSpec, percent bool) (string, error) {
	i, f, isInt, ok := number(v)
	if !ok {
		return "", typeErrorf("%%%c format: a real number is required, not %s", spec.conversion, typeName(v))
	}
	neg := false
	var body string
	switch spec.conversion {
	case 'd', 'o', 'x', 'X', 0:
		if spec.conversion == 0 && !isInt {
			body = formatFloat(math.Abs(f))
			neg = math.Signbit(f) && !math.IsNaN(f)
			break
		}
		if !isInt {
			if spec.conversion != 'd' || !percent {
				return "", typeErrorf("%%%c format: an integer is required, not float", spec.conversion)
			}
			if math.IsInf(f, 0) || math.IsNaN(f) {
				return "", errorf(kindOverflow, "cannot convert float infinity or NaN to integer")
			}
			i = int64(f)
		}
		neg = i < 0
		u := uint64(i)
		if neg {
			u = uint64(-i)
		}
		base := map[byte]int{'d': 10, 0: 10, 'o': 8, 'x': 16, 'X': 16}[spec.conversion]
		body = strconv.FormatUint(u, base)
		if spec.conversion == 'X' {
			body = strings.ToUpper(body)
		}
		if spec.grouping != 0 && base == 10 {
			body = group(body, spec.grouping)
		}
		if spec.alt && base != 10 {
			body = "0" + map[byte]string{'o': "o", 'x': "x", 'X': "X"}[spec.conversion] + body
		}
	default:
		if isInt {
			f = float64(i)
		}
		neg = math.Signbit(f) && !math.IsNaN(f)
		f = math.Abs(f)
		prec := int(spec.prec)
		if prec < 0 {
			prec = 6
		}
		if prec > 1000 {
			prec = 1000
		}
		switch spec.conversion {
		case 'f', 'F', '%':
			if spec.conversion == '%' {
				f *= 100
			}
			body = strconv.FormatFloat(f, 'f', prec, 64)
		case 'e', 'E':
			body = pyExp(strconv.FormatFloat(f, 'e', prec, 64))
		case 'g', 'G':
			body = pyGeneral(f, prec, spec.alt)
		}
		if math.IsInf(f, 0) {
			body = "inf"
		} else if math.IsNaN(f) {
			body = "nan"
		}
		if spec.conversion == 'E' || spec.conversion == 'G' || spec.conversion == 'F' {
			body = strings.ToUpper(body)
		}
		if spec.conversion == '%' {
			body += "%"
		}
		if spec.grouping != 0 {
			intPart, frac, _ := strings.Cut(body, ".")
			body = group(intPart, spec.grouping)
			if frac != "" || strings.Contains(body, ".") {
				body += "." + frac
			}
		}
	}
	sign := ""
	switch {
	case neg:
		sign = "-"
	case spec.sign == '+':
		sign = "+"
	case spec.sign == ' ':
		sign = " "
	}
	return sign + body, nil
}

// pyExp turns Go's exponent (e+07, e+100) into Python's (at least two
// digits: e+07, e+100); they agree, but Go writes e+7 for 'e' with
// precision -1 only, so this just keeps the form.
func pyExp(s string) string {
	mant, exp, ok := strings.Cut(s, "e")
	if !ok {
		return s
	}
	sign := exp[:1]
	digits := strings.TrimLeft(exp[1:], "0")
	for len(digits) < 2 {
		digits = "0" + digits
	}
	return mant + "e" + sign + digits
}

// pyGeneral is %g: scientific when the exponent is below -4 or not below
// the precision, trailing zeros removed unless alt.
func pyGeneral(f float64, prec int, alt bool) string {
	if prec == 0 {
		prec = 1
	}
	if f == 0 {
		if alt {
			return "0." + strings.Repeat("0", prec-1)
		}
		return "0"
	}
	e := strconv.FormatFloat(f, 'e', prec-1, 64)
	_, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	var s string
	if exp < -4 || exp >= prec {
		s = pyExp(e)
		if !alt {
			mant, rest, _ := strings.Cut(s, "e")
			if strings.Contains(mant, ".") {
				mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
			}
			s = mant + "e" + rest
		}
		return s
	}
	s = strconv.FormatFloat(f, 'f', max(prec-1-exp, 0), 64)
	if !alt && strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func group(digits string, sep byte) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	lead := len(digits) % 3
	if lead > 0 {
		b.WriteString(digits[:lead])
	}
	for i := lead; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(sep)
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// align pads s to spec's width; '=' pads between the sign and the
// digits.
func (r *renderer) align(s string, spec fmtSpec) (string, error) {
	n := int64(utf8.RuneCountInString(s))
	if spec.width <= n {
		return s, nil
	}
	pad := spec.width - n
	fill := string(spec.fill)
	if pad > int64(r.lim.Output)/int64(len(fill)) {
		return "", r.fail("the template would pad a string to %d characters; at most %d bytes are allowed", spec.width, r.lim.Output)
	}
	if err := r.alloc(int64(len(s)) + pad*int64(len(fill))); err != nil {
		return "", err
	}
	p := func(k int64) string { return strings.Repeat(fill, int(k)) }
	switch spec.align {
	case '<':
		return s + p(pad), nil
	case '^':
		return p(pad/2) + s + p(pad-pad/2), nil
	case '=':
		signLen := 0
		if s != "" && strings.IndexByte("+- ", s[0]) >= 0 {
			signLen = 1
		}
		if len(s) > signLen+1 && s[signLen] == '0' && strings.IndexByte("xXob", s[signLen+1]) >= 0 {
			signLen += 2
		}
		return s[:signLen] + p(pad) + s[signLen:], nil
	}
	return p(pad) + s, nil
}

// strFormat is str.format: {} {0} {name} fields, with .attr and [key]
// lookups, !s !r conversions and a format spec.
func (r *renderer) strFormat(format string, a *callArgs) (string, error) {
	out := r.newBuf()
	auto := 0
	manual, automatic := false, false
	for i := 0; i < len(format); {
		c := format[i]
		if c == '}' {
			if i+1 < len(format) && format[i+1] == '}' {
				out.WriteString("}")
				i += 2
				continue
			}
			return "", errorf(kindValue, "Single '}' encountered in format string")
		}
		if c != '{' {
			j := strings.IndexAny(format[i:], "{}")
			if j < 0 {
				j = len(format) - i
			}
			out.WriteString(format[i : i+j])
			i += j
			continue
		}
		if i+1 < len(format) && format[i+1] == '{' {
			out.WriteString("{")
			i += 2
			continue
		}
		end := strings.IndexByte(format[i:], '}')
		if end < 0 {
			return "", errorf(kindValue, "Single '{' encountered in format string")
		}
		field := format[i+1 : i+end]
		i += end + 1
		field, specText, _ := strings.Cut(field, ":")
		field, conv, hasConv := strings.Cut(field, "!")
		name := field
		rest := ""
		if k := strings.IndexAny(field, ".["); k >= 0 {
			name, rest = field[:k], field[k:]
		}
		var v Value
		switch {
		case name == "":
			if manual {
				return "", errorf(kindValue, "cannot switch from manual field specification to automatic field numbering")
			}
			automatic = true
			if auto >= len(a.pos) {
				return "", errorf(kindIndex, "Replacement index %d out of range for positional args tuple", auto)
			}
			v = a.pos[auto]
			auto++
		case name[0] >= '0' && name[0] <= '9':
			if automatic {
				return "", errorf(kindValue, "cannot switch from automatic field numbering to manual field specification")
			}
			manual = true
			n, err := strconv.Atoi(name)
			if err != nil || n >= len(a.pos) {
				return "", errorf(kindIndex, "Replacement index %s out of range for positional args tuple", name)
			}
			v = a.pos[n]
		default:
			found := false
			for k, kn := range a.kwNames {
				if kn == name {
					v, found = a.kwVals[k], true
				}
			}
			if !found {
				return "", errorf(kindKey, "%s", pyReprString(name))
			}
		}
		for rest != "" {
			var err error
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				if k < 0 {
					k = len(rest) - 1
				}
				if v, err = r.getAttr(v, rest[1:1+k]); err != nil {
					return "", err
				}
				rest = rest[1+k:]
				continue
			}
			k := strings.IndexByte(rest, ']')
			if k < 0 {
				return "", errorf(kindValue, "Missing ']' in format string")
			}
			var key Value = rest[1:k]
			if n, err := strconv.ParseInt(rest[1:k], 10, 64); err == nil {
				key = n
			}
			if v, err = r.getItem(v, key); err != nil {
				return "", err
			}
			rest = rest[k+1:]
		}
		if hasConv {
			w := r.newBuf()
			var err error
			switch conv {
			case "s":
				err = writeStr(w, v, 0)
			case "r", "a":
				err = writeRepr(w, v, 0)
			default:
				return "", errorf(kindValue, "Unknown conversion specifier %s", conv)
			}
			if err != nil {
				return "", err
			}
			v = w.String()
		}
		s, err := r.formatValue(v, specText)
		if err != nil {
			return "", err
		}
		out.WriteString(s)
		if out.err != nil {
			return "", out.err
		}
	}
	return out.String(), out.err
}

// formatValue is format(v, spec): Python's format spec mini-language for
// str, int and float.
func (r *renderer) formatValue(v Value, specText string) (string, error) {
	spec, err := parseFormatSpec(specText)
	if err != nil {
		return "", err
	}
	if _, isStr := isString(v); isStr || (spec.conversion == 0 && !isNumber(v)) {
		if spec.conversion != 0 && spec.conversion != 's' {
			return "", errorf(kindValue, "Unknown format code '%c' for object of type '%s'", spec.conversion, typeName(v))
		}
		s, err := r.toStr(v)
		if err != nil {
			return "", err
		}
		if spec.prec >= 0 {
			s = truncateRunes(s, spec.prec)
		}
		if spec.align == 0 {
			spec.align = '<'
		}
		return r.align(s, spec)
	}
	if _, isBool := v.(bool); isBool && spec.conversion == 0 {
		s, _ := strScalar(v)
		if spec.align == 0 {
			spec.align = '<'
		}
		return r.align(s, spec)
	}
	if spec.conversion == 0 && spec.prec >= 0 {
		spec.conversion = 'g'
	}
	if spec.conversion == 'n' {
		spec.conversion = 'd'
	}
	s, err := formatNumber(v, spec, false)
	if err != nil {
		return "", err
	}
	if spec.align == 0 {
		spec.align = '>'
		if spec.zero {
			spec.align, spec.fill = '=', '0'
		}
	}
	return r.align(s, spec)
}

func isNumber(v Value) bool { _, _, _, ok := number(v); return ok }

// parseFormatSpec parses [[fill]align][sign][#][0][width][,|_][.precision][type].
func parseFormatSpec(s string) (fmtSpec, error) {
	spec := fmtSpec{fill: ' ', prec: -1}
	rs := []rune(s)
	i := 0
	isAlign := func(c rune) bool { return c == '<' || c == '>' || c == '^' || c == '=' }
	if len(rs) >= 2 && isAlign(rs[1]) {
		spec.fill, spec.align = rs[0], byte(rs[1])
		i = 2
	} else if len(rs) >= 1 && isAlign(rs[0]) {
		spec.align = byte(rs[0])
		i = 1
	}
	if i < len(rs) && (rs[i] == '+' || rs[i] == '-' || rs[i] == ' ') {
		spec.sign = byte(rs[i])
		i++
	}
	if i < len(rs) && rs[i] == '#' {
		spec.alt = true
		i++
	}
	if i < len(rs) && rs[i] == '0' {
		spec.zero = true
		i++
	}
	start := i
	for i < len(rs) && rs[i] >= '0' && rs[i] <= '9' {
		i++
	}
	if i > start {
		w, err := strconv.ParseInt(string(rs[start:i]), 10, 64)
		if err != nil {
			return spec, errorf(kindValue, "Too many decimal digits in format string")
		}
		spec.width = w
	}
	if i < len(rs) && (rs[i] == ',' || rs[i] == '_') {
		spec.grouping = byte(rs[i])
		i++
	}
	if i < len(rs) && rs[i] == '.' {
		i++
		start = i
		for i < len(rs) && rs[i] >= '0' && rs[i] <= '9' {
			i++
		}
		if i == start {
			return spec, errorf(kindValue, "Format specifier missing precision")
		}
		p, err := strconv.ParseInt(string(rs[start:i]), 10, 64)
		if err != nil {
			return spec, errorf(kindValue, "Too many decimal digits in format string")
		}
		spec.prec = p
	}
	if i < len(rs) {
		if i != len(rs)-1 || rs[i] > 0x7f {
			return spec, errorf(kindValue, "Invalid format specifier")
		}
		spec.conversion = byte(rs[i])
	}
	return spec, nil
}
