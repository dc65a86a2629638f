package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// regexToGBNF converts a JSON-schema "pattern" (ECMA-262 syntax, the
// common subset: literals, escapes, classes, ., groups, alternation and
// quantifiers) into a GBNF expression for the string's content as it
// appears inside JSON quotes. The output matches the whole string (an
// anchored match is one of the strings an unanchored pattern accepts, so
// the output always validates). Characters that JSON must escape are
// left out of classes and written escaped when literal.
func regexToGBNF(pat string, b *budget) (string, error) {
	if !utf8.ValidString(pat) {
		return "", fmt.Errorf("pattern is not valid UTF-8")
	}
	if err := b.alloc(4 * len(pat)); err != nil { // the runes
		return "", err
	}
	r := &rx{src: []rune(pat), b: b}
	if len(r.src) > 0 && r.src[0] == '^' {
		r.pos++
	}
	r.out.WriteByte('(')
	if err := r.alternation(0); err != nil {
		return "", err
	}
	if r.pos < len(r.src) {
		return "", r.errf("unexpected %q", string(r.src[r.pos]))
	}
	r.out.WriteByte(')')
	return r.out.String(), nil
}

// rx converts a pattern by recursive descent, writing the GBNF into one
// buffer as it goes (building each group's text and then copying it into
// its parent's would cost the nesting depth times the pattern's length).
type rx struct {
	src []rune
	pos int
	out strings.Builder
	b   *budget
}

func (r *rx) errf(format string, args ...any) error {
	return fmt.Errorf("pattern at character %d: %s", r.pos, fmt.Sprintf(format, args...))
}

func (r *rx) alternation(depth int) error {
	for {
		if err := r.sequence(depth); err != nil {
			return err
		}
		if r.pos < len(r.src) && r.src[r.pos] == '|' {
			r.pos++
			r.out.WriteString(" | ")
			continue
		}
		return nil
	}
}

// sequence writes the atoms up to '|', ')' or the end. Each atom is one
// GBNF element (a literal, a class or a parenthesised group), so a
// quantifier applies to it written right after it.
func (r *rx) sequence(depth int) error {
	empty := true
	atom := func(s string) {
		if !empty {
			r.out.WriteByte(' ')
		}
		r.out.WriteString(s)
		empty = false
	}
	defer func() {
		if empty {
			r.out.WriteString(`""`)
		}
	}()
	for r.pos < len(r.src) {
		if err := r.b.step(1); err != nil {
			return err
		}
		c := r.src[r.pos]
		switch c {
		case '|':
			return nil
		case ')':
			if depth == 0 {
				return r.errf("unbalanced )")
			}
			return nil
		case '$':
			if r.pos == len(r.src)-1 {
				r.pos++
				continue
			}
			return r.errf("$ is supported only at the end")
		case '^':
			return r.errf("^ is supported only at the start")
		case '(':
			// The pattern becomes a group of its own in the grammar.
			if depth+1 >= MaxNesting {
				return r.errf("groups nest deeper than %d", MaxNesting-1)
			}
			r.pos++
			if r.pos+1 < len(r.src) && r.src[r.pos] == '?' {
				if r.src[r.pos+1] != ':' {
					return r.errf("lookaround and named groups are not supported")
				}
				r.pos += 2
			}
			atom("(")
			if err := r.alternation(depth + 1); err != nil {
				return err
			}
			if r.pos >= len(r.src) || r.src[r.pos] != ')' {
				return r.errf("unclosed (")
			}
			r.pos++
			r.out.WriteByte(')')
		case '[':
			s, err := r.class()
			if err != nil {
				return err
			}
			atom(s)
		case '.':
			r.pos++
			atom(`[^"\\\x00-\x1F\x7F]`)
		case '\\':
			s, err := r.escapeAtom()
			if err != nil {
				return err
			}
			atom(s)
		case '*', '+', '?', '{':
			return r.errf("quantifier %q has nothing to repeat", string(c))
		default:
			r.pos++
			atom(jsonCharLit(c))
		}
		q, err := r.quantifier()
		if err != nil {
			return err
		}
		r.out.WriteString(q)
	}
	return nil
}

func (r *rx) quantifier() (string, error) {
	if r.pos >= len(r.src) {
		return "", nil
	}
	var q string
	switch c := r.src[r.pos]; c {
	case '*', '+', '?':
		r.pos++
		q = string(c)
	case '{':
		end := r.pos + 1
		for end < len(r.src) && r.src[end] != '}' {
			end++
		}
		if end >= len(r.src) {
			return "", r.errf("unclosed {")
		}
		body := string(r.src[r.pos+1 : end])
		lo, hi, comma := body, "", false
		if i := strings.IndexByte(body, ','); i >= 0 {
			lo, hi, comma = body[:i], body[i+1:], true
		}
		l, err := strconv.Atoi(lo)
		if err != nil || l > MaxRepeat {
			return "", r.errf("bad repetition {%s}", body)
		}
		switch {
		case !comma:
			q = fmt.Sprintf("{%d}", l)
		case hi == "":
			q = fmt.Sprintf("{%d,}", l)
		default:
			h, err := strconv.Atoi(hi)
			if err != nil || h > MaxRepeat || h < l {
				return "", r.errf("bad repetition {%s}", body)
			}
			q = fmt.Sprintf("{%d,%d}", l, h)
		}
		r.pos = end + 1
	default:
		return "", nil
	}
	if r.pos < len(r.src) && r.src[r.pos] == '?' {
		r.pos++ // lazy: the same language
	}
	return q, nil
}

// jsonCharLit is the GBNF for one literal character as JSON writes it
// inside a string.
func jsonCharLit(c rune) string {
	switch {
	case c == '"':
		return `"\\\""`
	case c == '\\':
		return `"\\\\"`
	case c < 0x20 || c == 0x7f:
		return fmt.Sprintf(`"\\u%04x"`, c)
	}
	return gbnfLiteral(string(c))
}

// classEscapes are the shorthand classes as GBNF ranges.
var classEscapes = map[rune]string{
	'd': `0-9`, 'w': `0-9A-Za-z_`, 's': ` \t`,
}

func (r *rx) escapeAtom() (string, error) {
	r.pos++
	if r.pos >= len(r.src) {
		return "", r.errf("trailing backslash")
	}
	c := r.src[r.pos]
	r.pos++
	switch c {
	case 'd', 'w', 's':
		return "[" + classEscapes[c] + "]", nil
	case 'D', 'W', 'S':
		return `[^"\\\x00-\x1F\x7F` + classEscapes[c+'a'-'A'] + "]", nil
	case 'n', 'r', 't':
		return jsonCharLit(map[rune]rune{'n': '\n', 'r': '\r', 't': '\t'}[c]), nil
	case 'b', 'B':
		return "", r.errf("word boundaries are not supported")
	}
	if c >= '0' && c <= '9' {
		return "", r.errf("backreferences are not supported")
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return "", r.errf("escape \\%c is not supported", c)
	}
	return jsonCharLit(c), nil
}

// classRange renders a range for a GBNF class.
func classRange(lo, hi rune) string {
	if lo == hi {
		return classRune(lo)
	}
	return classRune(lo) + "-" + classRune(hi)
}

func (r *rx) class() (string, error) {
	r.pos++
	neg := false
	if r.pos < len(r.src) && r.src[r.pos] == '^' {
		neg = true
		r.pos++
	}
	var ranges []string
	var pairs []rune // the positive class's ranges, to subtract JSON's escapes from
	first := true
	for {
		if r.pos >= len(r.src) {
			return "", r.errf("unclosed [")
		}
		c := r.src[r.pos]
		if c == ']' && !first {
			r.pos++
			break
		}
		first = false
		r.pos++
		if c == '\\' {
			if r.pos >= len(r.src) {
				return "", r.errf("trailing backslash")
			}
			e := r.src[r.pos]
			r.pos++
			if s, ok := classEscapes[e]; ok {
				ranges = append(ranges, s)
				pairs = append(pairs, classPairs[e]...)
				continue
			}
			switch e {
			case 'n':
				c = '\n'
			case 't':
				c = '\t'
			case 'r':
				c = '\r'
			default:
				if e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z' || e >= '0' && e <= '9' {
					return "", r.errf("escape \\%c in a class is not supported", e)
				}
				c = e
			}
		}
		hi := c
		if r.pos+1 < len(r.src) && r.src[r.pos] == '-' && r.src[r.pos+1] != ']' {
			hi = r.src[r.pos+1]
			r.pos += 2
			if hi == '\\' {
				return "", r.errf("escaped range ends are not supported")
			}
			if hi < c {
				return "", r.errf("range %c-%c is reversed", c, hi)
			}
		}
		ranges = append(ranges, classRange(c, hi))
		pairs = append(pairs, c, hi)
	}
	// Characters JSON escapes are never produced by a class: a negated
	// class excludes them, a positive one is intersected (below, by the
	// alternative with the always-excluded set).
	if neg {
		return `[^"\\\x00-\x1F\x7F` + strings.Join(ranges, "") + "]", nil
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i+1 < len(pairs); i += 2 {
		for _, p := range subtractJSONEscapes(pairs[i], pairs[i+1]) {
			b.WriteString(classRange(p[0], p[1]))
		}
	}
	b.WriteByte(']')
	return b.String(), nil
}

var classPairs = map[rune][]rune{
	'd': {'0', '9'}, 'w': {'0', '9', 'A', 'Z', 'a', 'z', '_', '_'}, 's': {' ', ' ', '\t', '\t'},
}

// subtractJSONEscapes splits [lo, hi] around the characters a JSON string
// must escape (controls, '"', '\\').
func subtractJSONEscapes(lo, hi rune) [][2]rune {
	var out [][2]rune
	for _, cut := range [][2]rune{{0, 0x1f}, {'"', '"'}, {'\\', '\\'}, {0x7f, 0x7f}} {
		if hi < cut[0] || lo > cut[1] {
			continue
		}
		if lo < cut[0] {
			out = append(out, [2]rune{lo, cut[0] - 1})
		}
		lo = cut[1] + 1
	}
	if lo <= hi {
		out = append(out, [2]rune{lo, hi})
	}
	return out
}
