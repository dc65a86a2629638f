package jinja

import (
	"fmt"
	"strings"
)

// Template is a parsed template. It is immutable: one Template renders any
// number of times, concurrently.
type Template struct {
	body []node
}

// Parse limits.
const (
	// MaxSource is the most bytes of template text Parse accepts; real
	// chat templates are tens of kilobytes.
	MaxSource = 1 << 20
	// MaxNesting bounds the depth of the syntax tree: expressions inside
	// expressions and blocks inside blocks, each link of a chain (a.b.c,
	// a + b + c, x | f | g) counting as one. The parser and the
	// evaluator recurse once per level, so this is what keeps both far
	// from the Go stack's limit, whose overflow is fatal. jinja2 itself
	// fails past about 200 (Python's parser and recursion limits).
	MaxNesting = 256
)

// Parse parses a template's source as apply_chat_template's jinja2
// environment does.
func Parse(src string) (*Template, error) {
	if len(src) > MaxSource {
		return nil, &SyntaxError{Line: 1, Msg: fmt.Sprintf("the template has %d bytes; at most %d are allowed", len(src), MaxSource)}
	}
	p := &parser{lx: newLexer(normalizeNewlines(src))}
	body, err := p.subparse(nil)
	// The lexer's error comes first: the tokens stopped there.
	if p.lx.err != nil {
		return nil, p.lx.err
	}
	if err != nil {
		return nil, err
	}
	if t := p.cur(); t.kind != tokEOF {
		return nil, p.errorf("unexpected %s", t)
	}
	return &Template{body: body}, nil
}

type parser struct {
	lx    *lexer
	i     int // the current token's index in lx.toks
	depth int // nesting of the tree being built (MaxNesting)
	loops int // enclosing for loops in the current macro or template, for break/continue
	// soft is set inside an if statement or an inline if, up to the next
	// scope: jinja2 reports an unknown filter or test there only if it
	// is used, and everywhere else when it compiles the template.
	soft bool
	// macros are the macro definitions being parsed, innermost last: a
	// varargs, kwargs or caller read anywhere inside one (nested macros
	// included, as jinja2 counts them) marks all of them.
	macros []*macroDef
}

// inScope parses a body that jinja2 compiles in a scope of its own (a
// loop's, a macro's): no longer soft.
func (p *parser) inScope(parse func() error) error {
	soft := p.soft
	p.soft = false
	err := parse()
	p.soft = soft
	return err
}

// softly parses inside an if.
func (p *parser) softly(parse func() error) error {
	soft := p.soft
	p.soft = true
	err := parse()
	p.soft = soft
	return err
}

// tok is the token n after the current one, lexed as needed.
func (p *parser) tok(n int) token {
	for len(p.lx.toks) <= p.i+n && !p.lx.done {
		p.lx.more()
	}
	return p.lx.toks[min(p.i+n, len(p.lx.toks)-1)]
}

func (p *parser) cur() token  { return p.tok(0) }
func (p *parser) peek() token { return p.tok(1) }

func (p *parser) next() token {
	t := p.cur()
	if t.kind != tokEOF {
		p.i++
		// Drop consumed tokens now and then: the parser looks back at
		// none.
		if p.i >= 256 {
			n := copy(p.lx.toks, p.lx.toks[p.i:])
			p.lx.toks = p.lx.toks[:n]
			p.i = 0
		}
	}
	return t
}

func (p *parser) errorf(format string, args ...any) error {
	return &SyntaxError{Line: p.cur().line, Msg: fmt.Sprintf(format, args...)}
}

// enter is called before each level of recursion (and each link of a
// chain); every enter is paired with a leave, deferred or explicit.
func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxNesting {
		return p.errorf("the template nests deeper than %d levels", MaxNesting)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) isOp(op string) bool {
	t := p.cur()
	return t.kind == tokOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.cur()
	return t.kind == tokName && t.val == name
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(name string) bool {
	if p.isName(name) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.skipOp(op) {
		return p.errorf("expected '%s', got %s", op, p.cur())
	}
	return nil
}

func (p *parser) expectName() (string, error) {
	t := p.cur()
	if t.kind != tokName {
		return "", p.errorf("expected a name, got %s", t)
	}
	p.next()
	return t.val, nil
}

func (p *parser) expectKind(k tokenKind, what string) error {
	if p.cur().kind != k {
		return p.errorf("expected %s, got %s", what, p.cur())
	}
	p.next()
	return nil
}

// subparse parses statements up to a block tag named in end (left as the
// current token, its "{%" consumed) or the end of the template.
func (p *parser) subparse(end []string) ([]node, error) {
	var body []node
	for {
		t := p.cur()
		switch t.kind {
		case tokEOF:
			if end != nil {
				return nil, p.errorf("unexpected end of template; looking for %s", strings.Join(end, " or "))
			}
			return body, nil
		case tokData:
			p.next()
			body = append(body, &textNode{pos{t.line}, t.val})
		case tokVarBegin:
			p.next()
			x, err := p.parseTuple(true, false, nil)
			if err != nil {
				return nil, err
			}
			if err := p.expectKind(tokVarEnd, "'}}'"); err != nil {
				return nil, err
			}
			body = append(body, &outputNode{pos{t.line}, x})
		case tokBlockBegin:
			p.next()
			if n := p.cur(); n.kind == tokName {
				for _, e := range end {
					if n.val == e {
						return body, nil
					}
				}
			}
			n, err := p.parseStatement()
			if err != nil {
				return nil, err
			}
			if n != nil {
				body = append(body, n)
			}
			if err := p.expectKind(tokBlockEnd, "'%}'"); err != nil {
				return nil, err
			}
		default:
			return nil, p.errorf("unexpected %s", t)
		}
	}
}

// parseBody parses a block's body after its opening tag's arguments: the
// tag's end, the statements, and the end tag's name (returned). The
// caller expects the end tag's "%}" (subparse does).
func (p *parser) parseBody(end ...string) ([]node, string, error) {
	if err := p.enter(); err != nil {
		return nil, "", err
	}
	defer p.leave()
	p.skipOp(":")
	if err := p.expectKind(tokBlockEnd, "'%}'"); err != nil {
		return nil, "", err
	}
	body, err := p.subparse(end)
	if err != nil {
		return nil, "", err
	}
	return body, p.next().val, nil
}

func (p *parser) parseStatement() (node, error) {
	t := p.cur()
	if t.kind != tokName {
		return nil, p.errorf("tag name expected")
	}
	at := pos{t.line}
	switch t.val {
	case "for":
		return p.parseFor(at)
	case "if":
		return p.parseIf(at)
	case "set":
		return p.parseSet(at)
	case "macro":
		return p.parseMacro(at)
	case "call":
		return p.parseCallBlock(at)
	case "filter":
		p.next()
		var f expr
		var body []node
		err := p.inScope(func() (err error) {
			depth := p.depth
			f, err = p.parseFilterChain(&blockArg{at}, true)
			p.depth = depth
			if err != nil {
				return err
			}
			body, _, err = p.parseBody("endfilter")
			return err
		})
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{at, f, body}, nil
	case "with":
		return p.parseWith(at)
	case "block":
		p.next()
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		p.skipName("scoped")
		p.skipName("required")
		var body []node
		err = p.inScope(func() (err error) {
			body, _, err = p.parseBody("endblock")
			return err
		})
		if err != nil {
			return nil, err
		}
		p.skipName(name)
		return &scopeNode{at, body}, nil
	case "generation": // transformers' tag marking the assistant's text
		p.next()
		var body []node
		err := p.inScope(func() (err error) {
			body, _, err = p.parseBody("endgeneration")
			return err
		})
		if err != nil {
			return nil, err
		}
		return &scopeNode{at, body}, nil
	case "break", "continue":
		p.next()
		if p.loops == 0 {
			return nil, p.errorf("'%s' outside loop", t.val)
		}
		if t.val == "break" {
			return &breakNode{at}, nil
		}
		return &continueNode{at}, nil
	case "include", "import", "from", "extends":
		return nil, p.errorf("{%% %s %%} is not allowed: a chat template cannot load other templates", t.val)
	}
	return nil, p.errorf("unknown tag '%s'", t.val)
}

func (p *parser) parseFor(at pos) (node, error) {
	p.next()
	tg, err := p.parseTarget(false, "in")
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		return nil, p.errorf("expected 'in', got %s", p.cur())
	}
	iter, err := p.parseTuple(false, false, []string{"recursive"})
	if err != nil {
		return nil, err
	}
	n := &forNode{pos: at, target: tg, iter: iter}
	var end string
	err = p.inScope(func() (err error) {
		if p.skipName("if") {
			if n.cond, err = p.parseExpr(true); err != nil {
				return err
			}
		}
		n.recursive = p.skipName("recursive")
		p.loops++
		n.body, end, err = p.parseBody("endfor", "else")
		p.loops--
		return err
	})
	if err != nil {
		return nil, err
	}
	if end == "else" {
		if n.elseBody, _, err = p.parseBody("endfor"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) parseIf(at pos) (node, error) {
	p.next()
	var n node
	err := p.softly(func() (err error) {
		n, err = p.parseIfSoftly(at)
		return err
	})
	return n, err
}

func (p *parser) parseIfSoftly(at pos) (node, error) {
	n := &ifNode{pos: at}
	for {
		cond, err := p.parseTuple(false, false, nil)
		if err != nil {
			return nil, err
		}
		body, end, err := p.parseBody("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if n.elseBody, _, err = p.parseBody("endif"); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
}

func (p *parser) parseSet(at pos) (node, error) {
	p.next()
	var tg *target
	if p.cur().kind == tokName && p.peek().kind == tokOp && p.peek().val == "." {
		ns := p.next().val
		p.next()
		attr, err := p.expectName()
		if err != nil {
			return nil, err
		}
		tg = &target{name: ns, attr: attr}
	} else {
		var err error
		if tg, err = p.parseTarget(false); err != nil {
			return nil, err
		}
	}
	if p.skipOp("=") {
		x, err := p.parseTuple(true, false, nil)
		if err != nil {
			return nil, err
		}
		return &setNode{at, tg, x}, nil
	}
	var filter expr
	var body []node
	err := p.inScope(func() (err error) {
		if p.isOp("|") {
			depth := p.depth
			filter, err = p.parseFilterChain(&blockArg{at}, false)
			p.depth = depth
			if err != nil {
				return err
			}
		}
		body, _, err = p.parseBody("endset")
		return err
	})
	if err != nil {
		return nil, err
	}
	return &setBlockNode{at, tg, filter, body}, nil
}

// parseTarget parses an assignment target: a name or a tuple of them
// (for a, b in ...; set a, b = ...), each element possibly in parentheses.
func (p *parser) parseTarget(inParens bool, end ...string) (*target, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var items []*target
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.tupleEnd(end) {
			break
		}
		var t *target
		switch c := p.cur(); {
		case c.kind == tokOp && c.val == "(":
			p.next()
			inner, err := p.parseTarget(true)
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			t = inner
		case c.kind == tokName:
			switch c.val {
			case "true", "false", "True", "False", "none", "None":
				return nil, p.errorf("can't assign to const")
			}
			p.next()
			t = &target{name: c.val}
		default:
			return nil, p.errorf("can't assign to %s", c)
		}
		items = append(items, t)
		if !p.isOp(",") {
			break
		}
		isTuple = true
	}
	if len(items) == 0 {
		if inParens {
			return &target{tuple: []*target{}}, nil
		}
		return nil, p.errorf("expected an assignment target, got %s", p.cur())
	}
	if !isTuple {
		return items[0], nil
	}
	return &target{tuple: items}, nil
}

// tupleEnd: the tokens that end a tuple without parentheses.
func (p *parser) tupleEnd(extra []string) bool {
	t := p.cur()
	switch {
	case t.kind == tokVarEnd || t.kind == tokBlockEnd || t.kind == tokEOF:
		return true
	case t.kind == tokOp && t.val == ")":
		return true
	case t.kind == tokName:
		for _, e := range extra {
			if t.val == e {
				return true
			}
		}
	}
	return false
}

func (p *parser) parseMacro(at pos) (node, error) {
	p.next()
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	m := &macroDef{name: name}
	if err := p.inScope(func() error { return p.parseSignature(m) }); err != nil {
		return nil, err
	}
	if err := p.parseMacroBody(m, "endmacro"); err != nil {
		return nil, err
	}
	return &macroNode{at, m}, nil
}

// parseMacroBody parses a macro's (or a call block's caller's) body: a
// loop around the definition does not make break legal inside it.
func (p *parser) parseMacroBody(m *macroDef, end string) error {
	loops := p.loops
	p.loops = 0
	p.macros = append(p.macros, m)
	err := p.inScope(func() (err error) {
		m.body, _, err = p.parseBody(end)
		return err
	})
	p.macros = p.macros[:len(p.macros)-1]
	p.loops = loops
	return err
}

// noteName records a read of varargs, kwargs or caller in the macros
// being parsed.
func (p *parser) noteName(name string) {
	for _, m := range p.macros {
		switch name {
		case "varargs":
			m.usesVarargs = true
		case "kwargs":
			m.usesKwargs = true
		case "caller":
			m.usesCaller = true
		}
	}
}

func (p *parser) parseSignature(m *macroDef) error {
	if err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		if len(m.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return err
			}
		}
		name, err := p.expectName()
		if err != nil {
			return err
		}
		var def expr
		if p.skipOp("=") {
			if def, err = p.parseExpr(true); err != nil {
				return err
			}
		} else if len(m.defaults) > 0 && m.defaults[len(m.defaults)-1] != nil {
			return p.errorf("non-default argument follows default argument")
		}
		m.params = append(m.params, name)
		m.defaults = append(m.defaults, def)
	}
	return p.expectOp(")")
}

func (p *parser) parseCallBlock(at pos) (node, error) {
	p.next()
	caller := &macroDef{name: "caller"}
	if p.isOp("(") {
		if err := p.inScope(func() error { return p.parseSignature(caller) }); err != nil {
			return nil, err
		}
	}
	x, err := p.parseExpr(true)
	if err != nil {
		return nil, err
	}
	call, ok := x.(*callExpr)
	if !ok {
		return nil, p.errorf("expected call")
	}
	if err := p.parseMacroBody(caller, "endcall"); err != nil {
		return nil, err
	}
	return &callBlockNode{at, call, caller}, nil
}

func (p *parser) parseWith(at pos) (node, error) {
	p.next()
	n := &withNode{pos: at}
	for p.cur().kind != tokBlockEnd {
		if len(n.targets) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tg, err := p.parseTarget(false)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		x, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, tg)
		n.values = append(n.values, x)
	}
	err := p.inScope(func() (err error) {
		n.body, _, err = p.parseBody("endwith")
		return err
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}
