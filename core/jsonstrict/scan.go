// Package jsonstrict reads the JSON of everything that crosses the ABI
// (requests, runtime configs, process settings) strictly.
//
// encoding/json is lenient where the header promises strictness: it turns
// invalid UTF-8 and lone surrogate escapes into U+FFFD, lets the last of
// two duplicate keys win, and treats null as "leave the value alone" for
// every type. This package holds a small scanner that checks a document
// completely (RFC 8259 grammar, well-formed UTF-8, paired surrogates, no
// duplicate keys in any object, nothing after the value, bounded nesting)
// and decodes values into Go destinations with the same rules, so an error
// always names the field, the byte offset and the JSON types involved.
//
// Two error classes, as the ABI documents them: a document that is not
// JSON under these rules is BadJSON; well-formed JSON with a value of the
// wrong type or range is InvalidRequest.
package jsonstrict

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lmstream/lmstream/core/status"
)

// maxJSONDepth bounds nesting. The deepest document the runtime reads is
// a replay "scripts" field (an array of arrays of arrays); the bound keeps
// an adversarial "[[[[..." from costing stack or time.
const maxJSONDepth = 64

// jsonKind names the JSON type of a value from its first byte, for
// messages ("got null", "got array").
func jsonKind(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// pathSeg is one step of the path to the value being decoded: an object
// key or an array index (key == "" and idx >= 0).
type pathSeg struct {
	key string
	idx int
}

// scanner reads one JSON value from data. base is the offset of data[0] in
// the whole document, so nested decodes report document offsets.
type scanner struct {
	data  []byte
	pos   int
	base  int
	what  string // "request", "config", "settings"
	depth int
	path  []pathSeg // decode mode: where the value being decoded sits
}

func (s *scanner) syntaxErr(at int, format string, args ...any) error {
	return status.Errorf(status.BadJSON, "%s: invalid JSON at byte %d: %s", s.what, s.base+at, fmt.Sprintf(format, args...))
}

// fieldName renders the current path: prompts[2], messages[0].role.
func (s *scanner) fieldName() string {
	var b strings.Builder
	for i, p := range s.path {
		if p.key != "" || p.idx < 0 {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p.key)
		} else {
			fmt.Fprintf(&b, "[%d]", p.idx)
		}
	}
	return b.String()
}

// valueErr is an InvalidRequest error about the value starting at start.
func (s *scanner) valueErr(start int, format string, args ...any) error {
	return status.Errorf(status.InvalidRequest, "%s field %q %s (at byte %d)", s.what, s.fieldName(), fmt.Sprintf(format, args...), s.base+start)
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// document checks that data is exactly one JSON value, with only
// whitespace around it.
func (s *scanner) document() error {
	s.ws()
	if s.pos == len(s.data) {
		return status.Errorf(status.BadJSON, "%s: empty JSON", s.what)
	}
	if err := s.value(reflect.Value{}); err != nil {
		return err
	}
	s.ws()
	if s.pos < len(s.data) {
		return s.syntaxErr(s.pos, "unexpected data after the top-level value")
	}
	return nil
}

// value reads the value at s.pos (no leading whitespace), decoding it into
// dst when dst is valid (an addressable value) and only checking it when
// not.
func (s *scanner) value(dst reflect.Value) error {
	if s.pos >= len(s.data) {
		return s.syntaxErr(s.pos, "unexpected end of input")
	}
	start := s.pos
	c := s.data[s.pos]
	if dst.IsValid() {
		switch dst.Kind() {
		case reflect.Pointer:
			// A pointer destination marks an optional value whose
			// presence matters; null is still not a value.
			if c == 'n' {
				return s.mismatch(start, dst.Type())
			}
			if dst.IsNil() {
				dst.Set(reflect.New(dst.Type().Elem()))
			}
			return s.value(dst.Elem())
		case reflect.Slice:
			if dst.Type() == rawType {
				if err := s.value(reflect.Value{}); err != nil {
					return err
				}
				dst.SetBytes(append([]byte(nil), s.data[start:s.pos]...))
				return nil
			}
		}
	}
	switch {
	case c == '{':
		return s.object(dst)
	case c == '[':
		return s.array(dst)
	case c == '"':
		if dst.IsValid() && dst.Kind() != reflect.String {
			return s.mismatch(start, dst.Type())
		}
		str, err := s.str(dst.IsValid())
		if err != nil {
			return err
		}
		if dst.IsValid() {
			dst.SetString(str)
		}
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		if err := s.number(); err != nil {
			return err
		}
		if dst.IsValid() {
			return s.setNumber(start, dst)
		}
		return nil
	case c == 't' || c == 'f' || c == 'n':
		lit := "null"
		if c == 't' {
			lit = "true"
		} else if c == 'f' {
			lit = "false"
		}
		if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
			return s.syntaxErr(s.pos, "invalid literal (true, false or null expected)")
		}
		s.pos += len(lit)
		if dst.IsValid() {
			if c == 'n' || dst.Kind() != reflect.Bool {
				return s.mismatch(start, dst.Type())
			}
			dst.SetBool(c == 't')
		}
		return nil
	}
	if c < 0x20 || c >= 0x7f {
		return s.syntaxErr(s.pos, "unexpected byte 0x%02x", c)
	}
	return s.syntaxErr(s.pos, "unexpected character %q", c)
}

// rawType is a destination that keeps the value's bytes (checked, not
// decoded), for fields whose type the caller inspects first.
var rawType = reflect.TypeFor[json.RawMessage]()

// mismatch reports a value of the wrong JSON type. It skips the value
// first so the message can quote a short scalar.
func (s *scanner) mismatch(start int, want reflect.Type) error {
	s.pos = start
	if err := s.value(reflect.Value{}); err != nil {
		return err
	}
	got := jsonKind(s.data[start])
	switch got {
	case "number", "boolean":
		got += " " + string(s.data[start:s.pos])
	case "string":
		q := string(s.data[start:s.pos])
		if len(q) > 40 {
			n := 40
			for n > 0 && !utf8.RuneStart(q[n]) {
				n--
			}
			q = q[:n] + "…"
		}
		got += " " + q
	}
	return s.valueErr(start, "must be %s, got %s", describe(want), got)
}

// describe names what a Go destination expects, in JSON's terms.
func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return describe(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		if t == rawType {
			return "a JSON value"
		}
		return "an array of " + plural(t.Elem())
	}
	return "a JSON value"
}

func plural(t reflect.Type) string {
	d := describe(t)
	d = strings.TrimPrefix(strings.TrimPrefix(d, "an "), "a ")
	if strings.HasPrefix(d, "array of ") {
		return "arrays of " + strings.TrimPrefix(d, "array of ")
	}
	return d + "s"
}

func (s *scanner) enter() error {
	s.depth++
	if s.depth > maxJSONDepth {
		return s.syntaxErr(s.pos, "nested deeper than %d levels", maxJSONDepth)
	}
	return nil
}

// object reads an object, rejecting duplicate keys. Into a struct it
// decodes the members by their json tags; a member the struct does not
// have is an error (a misspelt key is never ignored).
func (s *scanner) object(dst reflect.Value) error {
	start := s.pos
	if dst.IsValid() && dst.Kind() != reflect.Struct {
		return s.mismatch(start, dst.Type())
	}
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '{'
	var keys []string
	var seen map[string]bool // once the object is too big for a linear scan
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.pos >= len(s.data) {
			return s.syntaxErr(s.pos, "unexpected end of input in an object")
		}
		if s.data[s.pos] != '"' {
			return s.syntaxErr(s.pos, "object key expected (a string)")
		}
		keyAt := s.pos
		key, err := s.str(true)
		if err != nil {
			return err
		}
		dup := false
		if seen != nil {
			dup = seen[key]
			seen[key] = true
		} else {
			for _, k := range keys {
				if k == key {
					dup = true
					break
				}
			}
			keys = append(keys, key)
			if len(keys) > 16 {
				seen = make(map[string]bool, 2*len(keys))
				for _, k := range keys {
					seen[k] = true
				}
			}
		}
		if dup {
			return s.syntaxErr(keyAt, "duplicate key %q", key)
		}
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.syntaxErr(s.pos, "':' expected after an object key")
		}
		s.pos++
		s.ws()
		var field reflect.Value
		if dst.IsValid() {
			var nullable bool
			field, nullable = structField(dst, key)
			if !field.IsValid() {
				return s.valueErr(keyAt, "has an unknown field %q", key)
			}
			if nullable && s.pos < len(s.data) && s.data[s.pos] == 'n' {
				field = reflect.Value{} // null leaves the zero value
			}
			s.path = append(s.path, pathSeg{key: key, idx: -1})
		}
		if err := s.value(field); err != nil {
			return err
		}
		if dst.IsValid() {
			s.path = s.path[:len(s.path)-1]
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.syntaxErr(s.pos, "unexpected end of input in an object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return nil
		default:
			return s.syntaxErr(s.pos, "',' or '}' expected in an object")
		}
	}
}

// structField finds the field of v tagged (or named) key, and whether it
// is tagged jsonstrict:"nullable": a null there means the zero value, for
// the fields OpenAI's API sends as null (an assistant message's content
// when it only calls tools).
func structField(v reflect.Value, key string) (reflect.Value, bool) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return v.Field(i), f.Tag.Get("jsonstrict") == "nullable"
		}
	}
	return reflect.Value{}, false
}

// array reads an array, appending each element to a slice destination.
func (s *scanner) array(dst reflect.Value) error {
	start := s.pos
	if dst.IsValid() && dst.Kind() != reflect.Slice {
		return s.mismatch(start, dst.Type())
	}
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '['
	if dst.IsValid() {
		dst.Set(reflect.MakeSlice(dst.Type(), 0, 0))
		s.path = append(s.path, pathSeg{})
	}
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		if dst.IsValid() {
			s.path = s.path[:len(s.path)-1]
		}
		return nil
	}
	for i := 0; ; i++ {
		s.ws()
		var elem reflect.Value
		if dst.IsValid() {
			s.path[len(s.path)-1].idx = i
			elem = reflect.New(dst.Type().Elem()).Elem()
		}
		if err := s.value(elem); err != nil {
			return err
		}
		if dst.IsValid() {
			dst.Set(reflect.Append(dst, elem))
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.syntaxErr(s.pos, "unexpected end of input in an array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			if dst.IsValid() {
				s.path = s.path[:len(s.path)-1]
			}
			return nil
		default:
			return s.syntaxErr(s.pos, "',' or ']' expected in an array")
		}
	}
}

// str reads a string: well-formed UTF-8, no raw control characters,
// valid escapes, and every \u surrogate escape paired (high then low).
// It builds the Go string only when asked to.
func (s *scanner) str(build bool) (string, error) {
	start := s.pos
	s.pos++ // '"'
	var buf []byte
	seg := s.pos
	for {
		if s.pos >= len(s.data) {
			return "", s.syntaxErr(start, "unterminated string")
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			var out string
			if build {
				if buf == nil {
					out = string(s.data[seg:s.pos])
				} else {
					out = string(append(buf, s.data[seg:s.pos]...))
				}
			}
			s.pos++
			return out, nil
		case c == '\\':
			if build {
				buf = append(buf, s.data[seg:s.pos]...)
			}
			r, err := s.escape()
			if err != nil {
				return "", err
			}
			if build {
				buf = utf8.AppendRune(buf, r)
			}
			seg = s.pos
		case c < 0x20:
			return "", s.syntaxErr(s.pos, "control character 0x%02x in a string (it must be escaped)", c)
		case c < utf8.RuneSelf:
			s.pos++
		default:
			// DecodeRune rejects overlong forms, surrogates encoded in
			// UTF-8 and truncated sequences with (RuneError, 1).
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				return "", s.syntaxErr(s.pos, "invalid UTF-8 byte 0x%02x in a string", c)
			}
			s.pos += size
		}
	}
}

// escape reads one escape sequence at s.pos (the backslash).
func (s *scanner) escape() (rune, error) {
	at := s.pos
	if s.pos+1 >= len(s.data) {
		return 0, s.syntaxErr(at, "unterminated escape")
	}
	c := s.data[s.pos+1]
	s.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, ok := s.hex4()
		if !ok {
			return 0, s.syntaxErr(at, `invalid \u escape (four hex digits expected)`)
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, s.syntaxErr(at, `lone low surrogate \u%04x (not valid Unicode)`, r)
		case r >= 0xD800 && r <= 0xDBFF:
			if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
				s.pos += 2
				lo, ok := s.hex4()
				if ok && lo >= 0xDC00 && lo <= 0xDFFF {
					return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), nil
				}
			}
			return 0, s.syntaxErr(at, `lone high surrogate \u%04x (a low surrogate escape must follow)`, r)
		}
		return r, nil
	}
	return 0, s.syntaxErr(at, "invalid escape \\%c", c)
}

func (s *scanner) hex4() (rune, bool) {
	if len(s.data)-s.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.data[s.pos : s.pos+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	s.pos += 4
	return r, true
}

// number checks a number's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	start := s.pos
	digits := func() int {
		n := 0
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.data[s.pos] == '-' {
		s.pos++
	}
	intAt := s.pos
	n := digits()
	switch {
	case n == 0:
		return s.syntaxErr(start, "invalid number (digits expected)")
	case n > 1 && s.data[intAt] == '0':
		return s.syntaxErr(start, "invalid number (leading zero)")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return s.syntaxErr(start, "invalid number (digits expected after '.')")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return s.syntaxErr(start, "invalid number (digits expected in the exponent)")
		}
	}
	return nil
}

// setNumber stores the number data[start:s.pos] into dst. Integers must be
// integral and fit the destination; an integral value written with an
// exponent or fraction (1e3, 2.0) is accepted when exact. Numbers must be
// finite: 1e999 is out of range, never +Inf.
func (s *scanner) setNumber(start int, dst reflect.Value) error {
	lit := string(s.data[start:s.pos])
	switch dst.Kind() {
	case reflect.Float32, reflect.Float64:
		v, err := strconv.ParseFloat(lit, dst.Type().Bits())
		if math.IsInf(v, 0) || (err != nil && !isRange(err)) {
			return s.valueErr(start, "must be a finite number, got number %s (out of range)", lit)
		}
		// An underflow (1e-400) is a range error with the value rounded
		// to 0 or a subnormal: that is the number written, as near as
		// the type holds it.
		dst.SetFloat(v)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := dst.Type().Bits()
		lo, hi := -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1
		v, ok := parseInteger(lit)
		if !ok {
			return s.valueErr(start, "must be an integer, got number %s", lit)
		}
		if v.neg && v.mag > uint64(-(lo+1))+1 || !v.neg && v.mag > uint64(hi) || v.big {
			return s.valueErr(start, "must be an integer in [%d, %d], got %s", lo, hi, lit)
		}
		if v.neg {
			dst.SetInt(int64(-v.mag))
		} else {
			dst.SetInt(int64(v.mag))
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := dst.Type().Bits()
		hi := uint64(math.MaxUint64) >> (64 - bits)
		v, ok := parseInteger(lit)
		if !ok {
			return s.valueErr(start, "must be an integer, got number %s", lit)
		}
		if v.big || v.mag > hi || v.neg && v.mag != 0 {
			return s.valueErr(start, "must be an integer in [0, %d], got %s", hi, lit)
		}
		dst.SetUint(v.mag)
		return nil
	}
	return s.mismatch(start, dst.Type())
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// integer is a parsed integral number: its magnitude and sign, or big when
// the magnitude exceeds 64 bits.
type integer struct {
	mag      uint64
	neg, big bool
}

// parseInteger reads an integral JSON number. Plain digits are parsed
// exactly; with a fraction or exponent the value must be an integer that
// float64 holds exactly (|v| <= 2^53), so nothing is rounded silently.
func parseInteger(lit string) (integer, bool) {
	neg := strings.HasPrefix(lit, "-")
	digits := strings.TrimPrefix(lit, "-")
	if !strings.ContainsAny(digits, ".eE") {
		u, err := strconv.ParseUint(digits, 10, 64)
		if err != nil {
			return integer{neg: neg, big: true}, isRange(err)
		}
		return integer{mag: u, neg: neg}, true
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !isRange(err) {
		return integer{}, false
	}
	if math.IsInf(f, 0) {
		return integer{neg: neg, big: true}, true
	}
	if f != math.Trunc(f) {
		return integer{}, false
	}
	if math.Abs(f) > 1<<53 {
		return integer{neg: neg, big: true}, true
	}
	return integer{mag: uint64(math.Abs(f)), neg: f < 0}, true
}
