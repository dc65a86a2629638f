package grammar

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxRepeat bounds the counts of a {m,n} repetition: each count is a copy
// of the repeated element in the compiled grammar.
const MaxRepeat = 1000

// SyntaxError is a GBNF text that does not parse or compile. It names the
// line and column and what was wrong there.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return "grammar: " + e.Msg
	}
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// Parse compiles a GBNF grammar: rules "name ::= alternatives", the start
// rule named root. An alternative is a sequence of string literals
// ("abc", with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes), character
// classes ([a-z], [^"\\], with the same escapes), any character (.), rule
// names and parenthesised groups, each optionally followed by *, +, ?,
// {m}, {m,} or {m,n}; # starts a comment. A rule ends at a newline unless
// a parenthesis is open or the next line starts with |.
func Parse(text string) (*Grammar, error) {
	return ParseContext(context.Background(), text)
}

// ParseContext is Parse within MaxCompileSteps and MaxCompileBytes,
// stopped (a *CompileError wrapping ctx's error) soon after ctx is done.
func ParseContext(ctx context.Context, text string) (*Grammar, error) {
	return parse(newBudget(ctx), text)
}

func parse(b *budget, text string) (*Grammar, error) {
	if len(text) > MaxGrammarBytes {
		return nil, &SyntaxError{Msg: fmt.Sprintf("the grammar has %d bytes; at most %d are allowed", len(text), MaxGrammarBytes)}
	}
	if !utf8.ValidString(text) {
		return nil, &SyntaxError{Msg: "the grammar is not valid UTF-8"}
	}
	if err := b.alloc(len(text)); err != nil {
		return nil, err
	}
	p := &parser{src: text, ids: map[string]int32{}, b: b}
	if err := p.grammar(); err != nil {
		return nil, err
	}
	return p.compile()
}

type parser struct {
	src   string
	pos   int
	ids   map[string]int32
	names []string
	rules [][][]elem
	defAt []int // where each rule was defined (-1: only referenced so far)
	refAt []int // where each rule was first referenced
	// helper counts the helper rules made for the rule being parsed.
	helper int
	cur    string
	elems  int     // elements made so far (MaxElements)
	b      *budget // the compile's steps, bytes and context
}

// grow counts n more elements, refusing the grammar past MaxElements
// before they are made.
func (p *parser) grow(n int) error {
	if p.elems += n; p.elems > MaxElements {
		return p.errAt(p.pos, "the grammar needs more than %d elements (characters of literals, classes, rule references; a repetition {m,n} copies what it repeats)", MaxElements)
	}
	return p.b.alloc(n * elemBytes)
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	line, col := 1, 1
	for i, r := range p.src[:min(pos, len(p.src))] {
		_ = i
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// space skips blanks and comments, and newlines when nl is set.
func (p *parser) space(nl bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case (c == '\n' || c == '\r') && nl:
			p.pos++
		default:
			return
		}
	}
}

// continues reports whether, past newlines and blanks, the next line
// starts with '|' (an alternative continuing the rule).
func (p *parser) continues() bool {
	save := p.pos
	p.space(true)
	ok := p.pos < len(p.src) && p.src[p.pos] == '|'
	if !ok {
		p.pos = save
	}
	return ok
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// rule returns the index of the rule called name, creating it.
func (p *parser) rule(name string, at int) int32 {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := int32(len(p.rules))
	p.ids[name] = id
	p.names = append(p.names, name)
	p.rules = append(p.rules, nil)
	p.defAt = append(p.defAt, -1)
	p.refAt = append(p.refAt, at)
	return id
}

// newHelper makes a rule for a group or a repetition inside the rule
// being parsed, named after it.
func (p *parser) newHelper(alts [][]elem) (int32, error) {
	if len(p.rules) >= MaxRules {
		return 0, p.errAt(p.pos, "the grammar needs more than %d rules", MaxRules)
	}
	if err := p.b.step(1); err != nil {
		return 0, err
	}
	for {
		p.helper++
		name := fmt.Sprintf("%s-%d", p.cur, p.helper)
		if _, taken := p.ids[name]; !taken {
			id := p.rule(name, p.pos)
			p.rules[id] = alts
			p.defAt[id] = p.pos
			return id, nil
		}
	}
}

func (p *parser) grammar() error {
	for {
		p.space(true)
		if p.pos >= len(p.src) {
			break
		}
		if err := p.b.step(1); err != nil {
			return err
		}
		at := p.pos
		name := p.name()
		if name == "" {
			return p.errAt(p.pos, "expected a rule name, got %q", p.peekRune())
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.errAt(p.pos, "expected ::= after rule name %q", name)
		}
		p.pos += 3
		id := p.rule(name, at)
		if p.defAt[id] >= 0 {
			return p.errAt(at, "rule %q is defined twice", name)
		}
		p.defAt[id] = at
		p.cur, p.helper = name, 0
		p.space(true)
		alts, err := p.alternates(0)
		if err != nil {
			return err
		}
		p.rules[id] = alts
		p.space(false)
		if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
			return p.errAt(p.pos, "unexpected %q in rule %q", p.peekRune(), name)
		}
	}
	if len(p.rules) == 0 {
		return &SyntaxError{Msg: "the grammar is empty (it needs a rule named root)"}
	}
	return nil
}

func (p *parser) peekRune() string {
	if p.pos >= len(p.src) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return string(r)
}

// alternates parses "seq | seq | ...". depth is the parenthesis nesting:
// inside parentheses newlines are blanks.
func (p *parser) alternates(depth int) ([][]elem, error) {
	var alts [][]elem
	for {
		seq, err := p.sequence(depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if p.pos < len(p.src) && p.src[p.pos] == '|' || depth == 0 && p.continues() {
			p.pos++
			p.space(true)
			continue
		}
		return alts, nil
	}
}

// sequence parses elements up to '|', ')' or (at depth 0) a newline.
func (p *parser) sequence(depth int) ([]elem, error) {
	var seq []elem
	lastStart := -1 // index in seq where the last element began (for postfix operators)
	for {
		p.space(depth > 0)
		if p.pos >= len(p.src) {
			return seq, nil
		}
		c := p.src[p.pos]
		switch {
		case c == '|' || c == ')' || c == '\n' || c == '\r':
			return seq, nil
		case c == '"':
			lastStart = len(seq)
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			if err := p.grow(len(lit)); err != nil {
				return nil, err
			}
			// One backing array for the literal's classes: a long
			// literal is one allocation, not one per character.
			pairs := make([]rune, 2*len(lit))
			for i, r := range lit {
				pairs[2*i], pairs[2*i+1] = r, r
				seq = append(seq, elem{ref: -1, ranges: pairs[2*i : 2*i+2 : 2*i+2]})
			}
			if len(lit) == 0 {
				lastStart = -2 // an empty literal: nothing to repeat
			}
		case c == '[':
			if err := p.grow(1); err != nil {
				return nil, err
			}
			lastStart = len(seq)
			e, err := p.class()
			if err != nil {
				return nil, err
			}
			seq = append(seq, e)
		case c == '.':
			if err := p.grow(1); err != nil {
				return nil, err
			}
			p.pos++
			lastStart = len(seq)
			seq = append(seq, elem{ref: -1, neg: true})
		case c == '(':
			open := p.pos
			if depth >= MaxNesting {
				return nil, p.errAt(open, "parentheses nest deeper than %d", MaxNesting)
			}
			if err := p.grow(1); err != nil {
				return nil, err
			}
			p.pos++
			p.space(true)
			alts, err := p.alternates(depth + 1)
			if err != nil {
				return nil, err
			}
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errAt(open, "unclosed parenthesis")
			}
			p.pos++
			id, err := p.newHelper(alts)
			if err != nil {
				return nil, err
			}
			lastStart = len(seq)
			seq = append(seq, elem{ref: id})
		case isNameByte(c):
			if err := p.grow(1); err != nil {
				return nil, err
			}
			at := p.pos
			name := p.name()
			lastStart = len(seq)
			seq = append(seq, elem{ref: p.rule(name, at)})
		case c == '*' || c == '+' || c == '?' || c == '{':
			if lastStart == -1 {
				return nil, p.errAt(p.pos, "%q has nothing before it to repeat", string(c))
			}
			var err error
			if seq, err = p.repeat(seq, lastStart); err != nil {
				return nil, err
			}
			lastStart = len(seq) - 1
		default:
			return nil, p.errAt(p.pos, "unexpected %q", p.peekRune())
		}
	}
}

// repeat applies the postfix operator at p.pos to seq[start:] (one
// element, or the characters of one literal), returning the new sequence.
func (p *parser) repeat(seq []elem, start int) ([]elem, error) {
	op := p.src[p.pos]
	at := p.pos
	p.pos++
	lo, hi := 0, -1 // hi -1: unbounded
	switch op {
	case '+':
		lo = 1
	case '?':
		hi = 1
	case '{':
		var err error
		if lo, hi, err = p.counts(at); err != nil {
			return nil, err
		}
	}
	var item []elem
	if start >= 0 {
		item = append(item, seq[start:]...)
		seq = seq[:start]
	}
	// An empty literal repeated is still empty.
	if len(item) == 0 {
		return seq, nil
	}
	// Besides the item (kept, or in a helper rule): lo copies of one
	// unit, then hi-lo nested optional helpers of two elements each, or
	// a star's helper of two, and the reference to it.
	if err := p.grow(lo + 2*max(hi-lo, 1) + 1); err != nil {
		return nil, err
	}
	var unit elem
	if len(item) == 1 {
		unit = item[0]
	} else {
		id, err := p.newHelper([][]elem{item})
		if err != nil {
			return nil, err
		}
		unit = elem{ref: id}
	}
	for range lo {
		seq = append(seq, unit)
	}
	switch {
	case hi < 0:
		// star ::= unit star | ""
		id, err := p.newHelper(nil)
		if err != nil {
			return nil, err
		}
		p.rules[id] = [][]elem{{unit, {ref: id}}, {}}
		seq = append(seq, elem{ref: id})
	case hi > lo:
		// opt_k ::= unit opt_{k+1} | "", nested so at most hi-lo more.
		var tail int32 = -1
		for range hi - lo {
			alt := []elem{unit}
			if tail >= 0 {
				alt = append(alt, elem{ref: tail})
			}
			id, err := p.newHelper([][]elem{alt, {}})
			if err != nil {
				return nil, err
			}
			tail = id
		}
		seq = append(seq, elem{ref: tail})
	}
	if len(seq) == 0 {
		// x{0} and the like match nothing: an empty helper keeps the
		// sequence's shape for a following operator.
		id, err := p.newHelper([][]elem{{}})
		if err != nil {
			return nil, err
		}
		seq = append(seq, elem{ref: id})
	}
	return seq, nil
}

// counts parses the rest of "{m}", "{m,}" or "{m,n}".
func (p *parser) counts(at int) (int, int, error) {
	num := func() (int, bool) {
		p.space(false)
		s := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if s == p.pos {
			return 0, false
		}
		n, err := strconv.Atoi(p.src[s:p.pos])
		if err != nil || n > MaxRepeat {
			n = MaxRepeat + 1
		}
		return n, true
	}
	lo, ok := num()
	if !ok {
		return 0, 0, p.errAt(at, "a repetition {m,n} needs a count")
	}
	hi := lo
	p.space(false)
	if p.pos < len(p.src) && p.src[p.pos] == ',' {
		p.pos++
		if n, ok := num(); ok {
			hi = n
		} else {
			hi = -1
		}
	}
	p.space(false)
	if p.pos >= len(p.src) || p.src[p.pos] != '}' {
		return 0, 0, p.errAt(at, "unclosed repetition {")
	}
	p.pos++
	switch {
	case lo > MaxRepeat || hi > MaxRepeat:
		return 0, 0, p.errAt(at, "repetition counts are at most %d", MaxRepeat)
	case hi >= 0 && hi < lo:
		return 0, 0, p.errAt(at, "repetition {%d,%d} has its maximum below its minimum", lo, hi)
	}
	return lo, hi, nil
}

// escape reads the escape sequence after a backslash.
func (p *parser) escape() (rune, error) {
	at := p.pos - 1
	if p.pos >= len(p.src) {
		return 0, p.errAt(at, "unfinished escape")
	}
	c := p.src[p.pos]
	p.pos++
	hexDigits := 0
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^', '/', '\'':
		return rune(c), nil
	case 'x':
		hexDigits = 2
	case 'u':
		hexDigits = 4
	case 'U':
		hexDigits = 8
	default:
		return 0, p.errAt(at, "unknown escape \\%c", c)
	}
	if len(p.src)-p.pos < hexDigits {
		return 0, p.errAt(at, "escape \\%c needs %d hex digits", c, hexDigits)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+hexDigits], 16, 32)
	if err != nil || v > utf8.MaxRune || v >= 0xd800 && v <= 0xdfff {
		return 0, p.errAt(at, "escape \\%c%s is not a character", c, p.src[p.pos:p.pos+hexDigits])
	}
	p.pos += hexDigits
	return rune(v), nil
}

// char reads one character of a literal or class, escapes resolved.
func (p *parser) char() (rune, error) {
	if p.src[p.pos] == '\\' {
		p.pos++
		return p.escape()
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return r, nil
}

func (p *parser) literal() ([]rune, error) {
	open := p.pos
	p.pos++
	var out []rune
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return nil, p.errAt(open, "unterminated string literal")
		}
		if p.src[p.pos] == '"' {
			p.pos++
			return out, nil
		}
		r, err := p.char()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
}

func (p *parser) class() (elem, error) {
	open := p.pos
	p.pos++
	e := elem{ref: -1}
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		e.neg = true
		p.pos++
	}
	for {
		if p.pos >= len(p.src) || p.src[p.pos] == '\n' {
			return e, p.errAt(open, "unterminated character class")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			return e, nil
		}
		lo, err := p.char()
		if err != nil {
			return e, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return e, err
			}
			if hi < lo {
				return e, p.errAt(open, "character range %q-%q is reversed", lo, hi)
			}
		}
		e.ranges = append(e.ranges, lo, hi)
	}
}

// compile checks the rules (all defined, root present, and what analyze
// checks) and builds the grammar.
func (p *parser) compile() (*Grammar, error) {
	for id, at := range p.defAt {
		if at < 0 {
			return nil, p.errAt(p.refAt[id], "rule %q is used but never defined", p.names[id])
		}
	}
	root, ok := p.ids["root"]
	if !ok {
		return nil, &SyntaxError{Msg: "the grammar has no rule named root"}
	}
	g := &Grammar{names: p.names, rules: p.rules, root: root}
	if err := g.finish(p.b); err != nil {
		return nil, err
	}
	return g, nil
}
