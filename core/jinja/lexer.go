package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokenKind is the kind of a lexed token.
type tokenKind uint8

const (
	tokData       tokenKind = iota // template text between tags
	tokVarBegin                    // {{
	tokVarEnd                      // }}
	tokBlockBegin                  // {%
	tokBlockEnd                    // %}
	tokName
	tokString
	tokInt
	tokFloat
	tokOp // an operator or punctuation, text in val
	tokEOF
)

type token struct {
	kind tokenKind
	val  string // data text, name, decoded string, operator, number text
	line int
	i    int64   // tokInt's value
	f    float64 // tokFloat's value
}

func (t token) String() string {
	switch t.kind {
	case tokData:
		return "template data"
	case tokVarBegin:
		return "'{{'"
	case tokVarEnd:
		return "'}}'"
	case tokBlockBegin:
		return "'{%'"
	case tokBlockEnd:
		return "'%}'"
	case tokString:
		return "string " + strconv.Quote(t.val)
	case tokEOF:
		return "end of template"
	}
	return "'" + t.val + "'"
}

// normalizeNewlines is what jinja2 does to a template's source before it
// lexes it: every \r\n and \r becomes \n, and one trailing newline is
// dropped (keep_trailing_newline is off in apply_chat_template).
func normalizeNewlines(src string) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

// isPySpace is Python's str.isspace for one rune: Go's unicode.IsSpace
// plus the ASCII information separators U+001C..U+001F.
func isPySpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

func pyStrip(s string) string  { return strings.TrimFunc(s, isPySpace) }
func pyLStrip(s string) string { return strings.TrimLeftFunc(s, isPySpace) }
func pyRStrip(s string) string { return strings.TrimRightFunc(s, isPySpace) }

// lexer turns a template's source into tokens, applying jinja2's
// whitespace control as it goes: a "-" beside a delimiter strips all
// whitespace on that side, trim_blocks removes the newline after a block
// or comment tag, and lstrip_blocks removes the spaces and tabs before a
// block or comment tag that starts its line. "+" turns the last two off
// for its tag.
//
// It lexes on demand (more), a tag at a time, so that a template the
// parser refuses early (too deep) is never tokenized whole.
type lexer struct {
	src  string
	pos  int
	line int
	toks []token // lexed and not yet consumed by the parser
	// lineStarting says the text before pos ends a line as far as
	// lstrip_blocks is concerned: the start of the template, or a tag
	// whose end swallowed a newline.
	lineStarting bool
	// Inside a tag: its closing delimiter ("%}" or "}}") and the closing
	// brackets owed, innermost last.
	delim string
	open  []byte
	done  bool  // the EOF token is out
	err   error // the first error; the token stream ends there
}

func newLexer(src string) *lexer { return &lexer{src: src, line: 1, lineStarting: true} }

// more lexes at least one more token (an EOF token at the end, and after
// an error, which err keeps).
func (lx *lexer) more() {
	if lx.done {
		return
	}
	n := len(lx.toks)
	for len(lx.toks) == n && lx.err == nil {
		if lx.delim != "" {
			lx.err = lx.tagToken()
		} else if lx.pos >= len(lx.src) {
			break
		} else {
			lx.err = lx.root()
		}
	}
	if len(lx.toks) == n {
		lx.emit(token{kind: tokEOF})
		lx.done = true
	}
}

func (lx *lexer) errorf(format string, args ...any) error {
	return &SyntaxError{Line: lx.line, Msg: fmt.Sprintf(format, args...)}
}

func (lx *lexer) emit(t token) {
	t.line = lx.line
	lx.toks = append(lx.toks, t)
}

// advance moves pos to end, counting the newlines passed.
func (lx *lexer) advance(end int) {
	lx.line += strings.Count(lx.src[lx.pos:end], "\n")
	lx.pos = end
}

// root lexes template text up to and including the next tag's opening
// (or, for a comment, the whole comment; for a raw block, the whole
// block).
func (lx *lexer) root() error {
	{
		i := indexTagStart(lx.src, lx.pos)
		if i < 0 {
			lx.emitData(lx.src[lx.pos:])
			lx.advance(len(lx.src))
			return nil
		}
		kind := lx.src[i : i+2]
		mod := byte(0)
		if i+2 < len(lx.src) && (lx.src[i+2] == '-' || lx.src[i+2] == '+') {
			mod = lx.src[i+2]
		}
		text := lx.src[lx.pos:i]
		switch {
		case mod == '-':
			text = pyRStrip(text)
		case mod != '+' && kind != "{{":
			// lstrip_blocks: the whitespace between the line's start and
			// the tag goes, when there is nothing else on that line.
			lpos := strings.LastIndexByte(text, '\n') + 1
			if (lpos > 0 || lx.lineStarting) && lpos < len(text) && strings.TrimLeftFunc(text[lpos:], isPySpace) == "" {
				text = text[:lpos]
			}
		}
		lx.emitData(text)
		lx.advance(i)
		open := 2
		if mod != 0 {
			open = 3
		}
		switch kind {
		case "{#":
			if err := lx.comment(open); err != nil {
				return err
			}
		case "{%":
			if end, ok := lx.rawBlock(open); ok {
				return lx.raw(end)
			}
			lx.emit(token{kind: tokBlockBegin})
			lx.advance(lx.pos + open)
			lx.delim = "%}"
		default:
			lx.emit(token{kind: tokVarBegin})
			lx.advance(lx.pos + open)
			lx.delim = "}}"
		}
	}
	return nil
}

func (lx *lexer) emitData(s string) {
	if s != "" {
		lx.emit(token{kind: tokData, val: s})
	}
}

// indexTagStart finds the next "{{", "{%" or "{#" at or after from.
func indexTagStart(s string, from int) int {
	for i := from; ; {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 || i+j+1 >= len(s) {
			return -1
		}
		i += j
		if c := s[i+1]; c == '{' || c == '%' || c == '#' {
			return i
		}
		i++
	}
}

// closeTag consumes a tag's closing delimiter at pos ("%}" or "#}", and
// "}}" for variables), with its "-" or "+", and the whitespace it
// removes after itself. It reports whether one was there.
func (lx *lexer) closeTag(delim string) bool {
	s := lx.src[lx.pos:]
	switch {
	case strings.HasPrefix(s, "-"+delim):
		end := lx.pos + 3
		end += len(s[3:]) - len(pyLStrip(s[3:]))
		lx.lineStarting = end > lx.pos+3 && lx.src[end-1] == '\n'
		lx.advance(end)
	case delim != "}}" && strings.HasPrefix(s, "+"+delim):
		lx.lineStarting = false
		lx.advance(lx.pos + 3)
	case strings.HasPrefix(s, delim):
		end := lx.pos + 2
		lx.lineStarting = false
		if delim != "}}" && end < len(lx.src) && lx.src[end] == '\n' { // trim_blocks
			end++
			lx.lineStarting = true
		}
		lx.advance(end)
	default:
		return false
	}
	return true
}

func (lx *lexer) comment(open int) error {
	lx.advance(lx.pos + open)
	for i := lx.pos; i < len(lx.src); i++ {
		if lx.src[i] != '-' && lx.src[i] != '+' && lx.src[i] != '#' {
			continue
		}
		lx.advance(i)
		if lx.closeTag("#}") {
			return nil
		}
	}
	return lx.errorf("missing end of comment tag")
}

// rawBlock recognises "{% raw %}" (any "-" or "+" and spacing) at pos,
// returning where its opening tag ends.
func (lx *lexer) rawBlock(open int) (int, bool) {
	s := lx.src[lx.pos+open:]
	t := pyLStrip(s)
	if !strings.HasPrefix(t, "raw") {
		return 0, false
	}
	t = pyLStrip(t[3:])
	switch {
	case strings.HasPrefix(t, "-%}"):
		t = pyLStrip(t[3:])
	case strings.HasPrefix(t, "%}"):
		t = t[2:]
	default:
		return 0, false
	}
	return len(lx.src) - len(t), true
}

// raw emits the text of a {% raw %} block up to its {% endraw %} as data.
func (lx *lexer) raw(bodyStart int) error {
	lx.advance(bodyStart)
	for i := lx.pos; ; {
		j := strings.Index(lx.src[i:], "{%")
		if j < 0 {
			return lx.errorf("missing end of raw directive")
		}
		j += i
		k := j + 2
		mod := byte(0)
		if k < len(lx.src) && (lx.src[k] == '-' || lx.src[k] == '+') {
			mod = lx.src[k]
			k++
		}
		rest := pyLStrip(lx.src[k:])
		if !strings.HasPrefix(rest, "endraw") {
			i = j + 2
			continue
		}
		rest = pyLStrip(rest[len("endraw"):])
		if !strings.HasPrefix(rest, "%}") && !strings.HasPrefix(rest, "-%}") && !strings.HasPrefix(rest, "+%}") {
			i = j + 2
			continue
		}
		text := lx.src[lx.pos:j]
		if mod == '-' {
			text = pyRStrip(text)
		} else if mod != '+' {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos > 0 && lpos < len(text) && strings.TrimLeftFunc(text[lpos:], isPySpace) == "" {
				text = text[:lpos]
			}
		}
		lx.emitData(text)
		lx.advance(len(lx.src) - len(rest))
		lx.closeTag("%}")
		return nil
	}
}

// tagToken lexes the next token inside a tag (whitespace skipped): an
// expression token or the closing delimiter. A closing delimiter inside
// brackets is brackets, not the end: "{{ {'a': {'b': 1}} }}".
func (lx *lexer) tagToken() error {
	for {
		if len(lx.open) == 0 && lx.closeTag(lx.delim) {
			kind := tokVarEnd
			if lx.delim == "%}" {
				kind = tokBlockEnd
			}
			lx.emit(token{kind: kind})
			lx.delim = ""
			return nil
		}
		s := lx.src[lx.pos:]
		if s == "" {
			return lx.errorf("unexpected end of template inside a tag")
		}
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case isPySpace(r):
			lx.advance(lx.pos + size)
			continue
		case r >= '0' && r <= '9':
			return lx.number()
		case r == '_' || unicode.IsLetter(r):
			n := 0
			for n < len(s) {
				c, sz := utf8.DecodeRuneInString(s[n:])
				if c != '_' && !unicode.IsLetter(c) && !unicode.IsDigit(c) {
					break
				}
				n += sz
			}
			lx.emit(token{kind: tokName, val: s[:n]})
			lx.advance(lx.pos + n)
		case r == '\'' || r == '"':
			return lx.str(byte(r))
		default:
			op := operatorAt(s)
			if op == "" {
				return lx.errorf("unexpected character %q", r)
			}
			switch op {
			case "(":
				lx.open = append(lx.open, ')')
			case "[":
				lx.open = append(lx.open, ']')
			case "{":
				lx.open = append(lx.open, '}')
			case ")", "]", "}":
				if len(lx.open) == 0 {
					return lx.errorf("unexpected '%s'", op)
				}
				if want := lx.open[len(lx.open)-1]; want != op[0] {
					return lx.errorf("unexpected '%s', expected '%c'", op, want)
				}
				lx.open = lx.open[:len(lx.open)-1]
			}
			lx.emit(token{kind: tokOp, val: op})
			lx.advance(lx.pos + len(op))
		}
		return nil
	}
}

// operatorAt is the longest operator s starts with, or "".
func operatorAt(s string) string {
	if len(s) >= 2 {
		switch s[:2] {
		case "//", "**", "==", "!=", ">=", "<=":
			return s[:2]
		}
	}
	if strings.IndexByte("+-/*%~[](){}><=.:|,;", s[0]) >= 0 {
		return s[:1]
	}
	return ""
}

// number lexes an integer (decimal with "_" separators, 0b, 0o, 0x) or
// a float (digits with a fraction, an exponent or both), as jinja2's
// lexer reads them.
func (lx *lexer) number() error {
	s := lx.src[lx.pos:]
	digits := func(s string, ok func(byte) bool) int { // d(_?d)*
		n := 0
		for n < len(s) && ok(s[n]) {
			n++
			if n+1 < len(s) && s[n] == '_' && ok(s[n+1]) {
				n++
			}
		}
		return n
	}
	dec := func(c byte) bool { return c >= '0' && c <= '9' }
	// A float: digits, then a fraction and/or an exponent.
	if n := digits(s, dec); n > 0 {
		end := n
		if end+1 < len(s) && s[end] == '.' && dec(s[end+1]) {
			end += 1 + digits(s[end+1:], dec)
		}
		if end < len(s) && (s[end] == 'e' || s[end] == 'E') {
			k := end + 1
			if k < len(s) && (s[k] == '+' || s[k] == '-') {
				k++
			}
			if m := digits(s[k:], dec); m > 0 {
				end = k + m
			}
		}
		if end > n {
			f, err := strconv.ParseFloat(strings.ReplaceAll(s[:end], "_", ""), 64)
			if err != nil && !isRangeErr(err) {
				return lx.errorf("invalid float %q", s[:end])
			}
			lx.emit(token{kind: tokFloat, val: s[:end], f: f})
			lx.advance(lx.pos + end)
			return nil
		}
	}
	base, prefix := 10, 0
	if len(s) > 1 && s[0] == '0' {
		switch s[1] | 0x20 {
		case 'b':
			base, prefix = 2, 2
		case 'o':
			base, prefix = 8, 2
		case 'x':
			base, prefix = 16, 2
		}
	}
	var end int
	switch {
	case prefix > 0:
		ok := func(c byte) bool {
			v, valid := digitValue(c)
			return valid && v < base
		}
		rest := s[prefix:]
		if len(rest) > 0 && rest[0] == '_' {
			rest = rest[1:]
			prefix++
		}
		end = prefix + digits(rest, ok)
		if end == prefix {
			base, end = 10, 1 // "0" followed by a name
		}
	case s[0] == '0': // 0(_?0)*
		end = digits(s, func(c byte) bool { return c == '0' })
	default:
		end = digits(s, dec)
	}
	text := strings.ReplaceAll(s[:end], "_", "")
	if base != 10 {
		text = text[2:]
	}
	v, err := strconv.ParseInt(text, base, 64)
	if err != nil {
		return lx.errorf("integer %q is too large", s[:end])
	}
	lx.emit(token{kind: tokInt, val: s[:end], i: v})
	lx.advance(lx.pos + end)
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func digitValue(c byte) (int, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0'), true
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

// str lexes a quoted string and decodes its escapes as Python's
// unicode-escape codec does (jinja2 decodes string literals with it):
// the usual \n \t \\ \' \" and friends, octal, \x, \u and \U; any other
// backslash stays as it is.
func (lx *lexer) str(quote byte) error {
	s := lx.src[lx.pos:]
	end := -1
	for i := 1; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == quote {
			end = i
			break
		}
	}
	if end < 0 {
		return lx.errorf("unterminated string")
	}
	val, err := unescape(s[1:end])
	if err != nil {
		return lx.errorf("%v", err)
	}
	lx.emit(token{kind: tokString, val: val})
	lx.advance(lx.pos + end + 1)
	return nil
}

func unescape(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, n := 0, 0
			for n < 3 && i+n < len(s) && s[i+n] >= '0' && s[i+n] <= '7' {
				v = v*8 + int(s[i+n]-'0')
				n++
			}
			b.WriteRune(rune(v))
			i += n - 1
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+1+n > len(s) {
				return "", fmt.Errorf("truncated \\%cXXXX escape", e)
			}
			v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
			if err != nil {
				return "", fmt.Errorf("truncated \\%cXXXX escape", e)
			}
			if v > unicode.MaxRune {
				return "", fmt.Errorf("illegal Unicode character")
			}
			b.WriteRune(rune(v))
			i += n
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), nil
}
