package jinja

// Expressions, by jinja2's precedence, loosest first: conditional
// (x if c else y), or, and, not, comparisons (== != < <= > >= in, not in,
// chained), + and -, ~, * / // %, **, unary - and +, then a primary with
// its postfixes (.attr, [key], [a:b:c], (args)) and filters and tests
// (| f, is t). Unlike Python, ** is left-associative and binds looser
// than unary minus (-2 ** 2 is 4), and a filter binds to the operand
// beside it (a + b | f is a + (b | f)).

// parseTuple parses expressions separated by commas: one alone is
// itself, several (or one with a trailing comma) a tuple. parens says
// the tuple is inside explicit parentheses, where () is the empty tuple.
func (p *parser) parseTuple(condExpr, parens bool, extraEnd []string) (expr, error) {
	line := p.cur().line
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.tupleEnd(extraEnd) {
			break
		}
		x, err := p.parseExpr(condExpr)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if !p.isOp(",") {
			break
		}
		isTuple = true
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !parens {
			return nil, p.errorf("expected an expression, got %s", p.cur())
		}
	}
	return &listExpr{pos{line}, items, true}, nil
}

// parseExpr parses one expression; without withCond an inline if is not
// part of it (an {% if %} test, a for loop's iterable).
func (p *parser) parseExpr(withCond bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if !withCond {
		return p.parseOr()
	}
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	depth := p.depth
	defer func() { p.depth = depth }()
	for p.isName("if") {
		line := p.next().line
		if err := p.enter(); err != nil {
			return nil, err
		}
		var test, els expr
		err := p.softly(func() (err error) {
			if test, err = p.parseOr(); err != nil {
				return err
			}
			if p.skipName("else") {
				els, err = p.parseExpr(true)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		x = &condExpr{pos{line}, test, x, els}
	}
	return x, nil
}

// chain runs a left-associative operator loop, counting each link as a
// level of nesting: a + b + c is ((a + b) + c), as deep as it is long.
func (p *parser) chain(operand func() (expr, error), link func(left expr) (expr, bool, error)) (expr, error) {
	depth := p.depth
	defer func() { p.depth = depth }()
	x, err := operand()
	if err != nil {
		return nil, err
	}
	for {
		y, more, err := link(x)
		if err != nil {
			return nil, err
		}
		if !more {
			return x, nil
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
		x = y
	}
}

func (p *parser) parseOr() (expr, error) {
	return p.chain(p.parseAnd, func(l expr) (expr, bool, error) {
		if !p.isName("or") {
			return nil, false, nil
		}
		line := p.next().line
		r, err := p.parseAnd()
		return &orExpr{pos{line}, l, r}, true, err
	})
}

func (p *parser) parseAnd() (expr, error) {
	return p.chain(p.parseNot, func(l expr) (expr, bool, error) {
		if !p.isName("and") {
			return nil, false, nil
		}
		line := p.next().line
		r, err := p.parseNot()
		return &andExpr{pos{line}, l, r}, true, err
	})
}

func (p *parser) parseNot() (expr, error) {
	if !p.isName("not") {
		return p.parseCompare()
	}
	line := p.next().line
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	return &notExpr{pos{line}, x}, nil
}

func (p *parser) parseCompare() (expr, error) {
	line := p.cur().line
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{pos: pos{line}, first: first}
	for {
		t := p.cur()
		var op string
		switch {
		case t.kind == tokOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.next()
		case p.isName("in"):
			op = "in"
			p.next()
		case p.isName("not") && p.peek().kind == tokName && p.peek().val == "in":
			op = "notin"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

// binaryLevel parses one level of left-associative arithmetic.
func (p *parser) binaryLevel(operand func() (expr, error), ops ...string) (expr, error) {
	return p.chain(operand, func(l expr) (expr, bool, error) {
		t := p.cur()
		if t.kind != tokOp {
			return nil, false, nil
		}
		for _, op := range ops {
			if t.val == op {
				p.next()
				r, err := operand()
				return &binExpr{pos{t.line}, op, l, r}, true, err
			}
		}
		return nil, false, nil
	})
}

func (p *parser) parseMath1() (expr, error) { return p.binaryLevel(p.parseConcat, "+", "-") }

func (p *parser) parseConcat() (expr, error) {
	line := p.cur().line
	x, err := p.parseMath2()
	if err != nil || !p.isOp("~") {
		return x, err
	}
	parts := []expr{x}
	for p.skipOp("~") {
		y, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		parts = append(parts, y)
	}
	return &concatExpr{pos{line}, parts}, nil
}

func (p *parser) parseMath2() (expr, error) {
	return p.binaryLevel(p.parsePow, "*", "/", "//", "%")
}

func (p *parser) parsePow() (expr, error) { return p.binaryLevel(p.parseUnaryFiltered, "**") }

func (p *parser) parseUnaryFiltered() (expr, error) { return p.parseUnary(true) }

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	t := p.cur()
	var x expr
	if t.kind == tokOp && (t.val == "-" || t.val == "+") {
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		inner, err := p.parseUnary(false)
		p.leave()
		if err != nil {
			return nil, err
		}
		x = &negExpr{pos{t.line}, inner, t.val == "+"}
	} else {
		var err error
		if x, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	depth := p.depth
	defer func() { p.depth = depth }()
	x, err := p.parsePostfix(x)
	if err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.cur()
	at := pos{t.line}
	switch t.kind {
	case tokName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{at, true}, nil
		case "false", "False":
			return &constExpr{at, false}, nil
		case "none", "None":
			return &constExpr{at, nil}, nil
		}
		p.noteName(t.val)
		return &nameExpr{at, t.val}, nil
	case tokString:
		p.next()
		s := t.val
		for p.cur().kind == tokString { // "a" "b" is "ab"
			s += p.next().val
		}
		return &constExpr{at, s}, nil
	case tokInt:
		p.next()
		return &constExpr{at, t.i}, nil
	case tokFloat:
		p.next()
		return &constExpr{at, t.f}, nil
	case tokOp:
		switch t.val {
		case "(":
			p.next()
			x, err := p.parseTuple(true, true, nil)
			if err != nil {
				return nil, err
			}
			return x, p.expectOp(")")
		case "[":
			return p.parseList()
		case "{":
			return p.parseDict()
		}
	}
	return nil, p.errorf("unexpected %s", t)
}

func (p *parser) parseList() (expr, error) {
	at := pos{p.next().line}
	l := &listExpr{pos: at}
	for !p.isOp("]") {
		if len(l.items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp("]") {
				break
			}
		}
		x, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		l.items = append(l.items, x)
	}
	return l, p.expectOp("]")
}

func (p *parser) parseDict() (expr, error) {
	at := pos{p.next().line}
	d := &dictExpr{pos: at}
	for !p.isOp("}") {
		if len(d.keys) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp("}") {
				break
			}
		}
		k, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.parseExpr(true)
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
	}
	return d, p.expectOp("}")
}

// parsePostfix parses .attr, [subscript] and (call) links after a
// primary; the caller restores the depth the links add.
func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		t := p.cur()
		if t.kind != tokOp || (t.val != "." && t.val != "[" && t.val != "(") {
			return x, nil
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
		var err error
		switch t.val {
		case ".", "[":
			x, err = p.parseSubscript(x)
		default:
			x, err = p.parseCall(x)
		}
		if err != nil {
			return nil, err
		}
	}
}

func (p *parser) parseSubscript(obj expr) (expr, error) {
	t := p.next()
	at := pos{t.line}
	if t.val == "." {
		a := p.next()
		switch a.kind {
		case tokName:
			return &attrExpr{at, obj, a.val}, nil
		case tokInt:
			return &itemExpr{at, obj, &constExpr{at, a.i}}, nil
		}
		return nil, p.errorf("expected name or number after '.'")
	}
	var args []expr
	for !p.isOp("]") {
		if len(args) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		x, err := p.parseSubscribed()
		if err != nil {
			return nil, err
		}
		args = append(args, x)
	}
	if err := p.expectOp("]"); err != nil {
		return nil, err
	}
	switch len(args) {
	case 0:
		return nil, p.errorf("expected an expression in []")
	case 1:
		if s, ok := args[0].(*sliceExpr); ok {
			s.obj = obj
			return s, nil
		}
		return &itemExpr{at, obj, args[0]}, nil
	}
	return &itemExpr{at, obj, &listExpr{at, args, true}}, nil
}

// parseSubscribed parses what is inside [ ]: an expression or a slice
// start:stop:step with any part missing.
func (p *parser) parseSubscribed() (expr, error) {
	at := pos{p.cur().line}
	var start expr
	if !p.isOp(":") {
		x, err := p.parseExpr(true)
		if err != nil || !p.isOp(":") {
			return x, err
		}
		start = x
	}
	p.next() // ':'
	s := &sliceExpr{pos: at, start: start}
	var err error
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		if s.stop, err = p.parseExpr(true); err != nil {
			return nil, err
		}
	}
	if p.skipOp(":") && !p.isOp("]") && !p.isOp(",") {
		if s.step, err = p.parseExpr(true); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	at := pos{p.cur().line}
	args, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{at, fn, args}, nil
}

// parseArgs parses (a, b, k=v, *list, **dict) as jinja2 orders them:
// positional arguments before keywords, *list before **dict.
func (p *parser) parseArgs() (argList, error) {
	var a argList
	if err := p.expectOp("("); err != nil {
		return a, err
	}
	invalid := func() error { return p.errorf("invalid syntax for function call expression") }
	for first := true; !p.isOp(")"); first = false {
		if !first {
			if err := p.expectOp(","); err != nil {
				return a, err
			}
			if p.isOp(")") {
				break
			}
		}
		switch {
		case p.skipOp("*"):
			if a.dynArgs != nil || a.dynKwargs != nil {
				return a, invalid()
			}
			x, err := p.parseExpr(true)
			if err != nil {
				return a, err
			}
			a.dynArgs = x
		case p.skipOp("**"):
			if a.dynKwargs != nil {
				return a, invalid()
			}
			x, err := p.parseExpr(true)
			if err != nil {
				return a, err
			}
			a.dynKwargs = x
		case p.cur().kind == tokName && p.peek().kind == tokOp && p.peek().val == "=":
			if a.dynKwargs != nil {
				return a, invalid()
			}
			name := p.next().val
			p.next()
			x, err := p.parseExpr(true)
			if err != nil {
				return a, err
			}
			a.kwargs = append(a.kwargs, kwExpr{name, x})
		default:
			if a.dynArgs != nil || a.dynKwargs != nil || len(a.kwargs) > 0 {
				return a, invalid()
			}
			x, err := p.parseExpr(true)
			if err != nil {
				return a, err
			}
			a.args = append(a.args, x)
		}
	}
	return a, p.expectOp(")")
}

// parseFilterExpr parses the filters, tests and calls after an operand;
// the caller restores the depth the links add.
func (p *parser) parseFilterExpr(x expr) (expr, error) {
	for {
		var err error
		switch {
		case p.isOp("|"):
			x, err = p.parseFilterChain(x, false)
		case p.isName("is"):
			if err = p.enter(); err == nil {
				x, err = p.parseTest(x)
			}
		case p.isOp("("):
			if err = p.enter(); err == nil {
				x, err = p.parseCall(x)
			}
		default:
			return x, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// parseFilterChain parses | f(args) | g ...; inline says the first
// filter's name comes without a "|" ({% filter upper %}).
func (p *parser) parseFilterChain(x expr, inline bool) (expr, error) {
	for inline || p.isOp("|") {
		if !inline {
			p.next()
		}
		inline = false
		if err := p.enter(); err != nil {
			return nil, err
		}
		line := p.cur().line
		name, err := p.dottedName()
		if err != nil {
			return nil, err
		}
		if _, known := filters[name]; !known && !p.soft {
			return nil, &SyntaxError{Line: line, Msg: "no filter named '" + name + "'"}
		}
		f := &filterExpr{pos: pos{line}, arg: x, name: name}
		if p.isOp("(") {
			if f.argList, err = p.parseArgs(); err != nil {
				return nil, err
			}
		}
		x = f
	}
	return x, nil
}

func (p *parser) dottedName() (string, error) {
	name, err := p.expectName()
	for err == nil && p.skipOp(".") {
		var more string
		more, err = p.expectName()
		name += "." + more
	}
	return name, err
}

func (p *parser) parseTest(x expr) (expr, error) {
	line := p.next().line // is
	negate := p.skipName("not")
	name, err := p.dottedName()
	if err != nil {
		return nil, err
	}
	if _, known := tests[name]; !known && !p.soft {
		return nil, &SyntaxError{Line: line, Msg: "no test named '" + name + "'"}
	}
	t := &testExpr{pos: pos{line}, arg: x, name: name, negate: negate}
	c := p.cur()
	switch {
	case c.kind == tokOp && c.val == "(":
		if t.argList, err = p.parseArgs(); err != nil {
			return nil, err
		}
	case c.kind == tokString || c.kind == tokInt || c.kind == tokFloat ||
		(c.kind == tokOp && (c.val == "[" || c.val == "{")) ||
		(c.kind == tokName && c.val != "else" && c.val != "or" && c.val != "and"):
		// One argument without parentheses: x is divisibleby 3.
		if c.kind == tokName && c.val == "is" {
			return nil, p.errorf("you cannot chain multiple tests with is")
		}
		arg, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if arg, err = p.parsePostfix(arg); err != nil {
			return nil, err
		}
		t.args = []expr{arg}
	}
	return t, nil
}
