package jinja

// The syntax tree. Statements (node) are executed for their output and
// effects, expressions (expr) evaluated to a Value. Every node records its
// line for error messages.

type node interface{ nodeLine() int }

type expr interface{ exprLine() int }

type pos struct{ line int }

func (p pos) nodeLine() int { return p.line }
func (p pos) exprLine() int { return p.line }

// Statements.
type (
	textNode struct {
		pos
		text string
	}
	outputNode struct { // {{ expr }}
		pos
		x expr
	}
	ifNode struct { // {% if %}{% elif %}...{% else %}{% endif %}
		pos
		conds    []expr
		bodies   [][]node
		elseBody []node
	}
	forNode struct {
		pos
		target    *target
		iter      expr
		cond      expr // the loop's "if" filter, or nil
		recursive bool
		body      []node
		elseBody  []node
	}
	setNode struct { // {% set target = x %}
		pos
		target *target
		x      expr
	}
	setBlockNode struct { // {% set target | filters %}body{% endset %}
		pos
		target *target
		filter expr // applied to the body's text (a filterExpr chain on blockArg), or nil
		body   []node
	}
	macroNode struct {
		pos
		m *macroDef
	}
	callBlockNode struct { // {% call(params) f(args) %}body{% endcall %}
		pos
		call   *callExpr
		caller *macroDef
	}
	filterBlockNode struct { // {% filter f | g %}body{% endfilter %}
		pos
		filter expr // a filterExpr chain on blockArg
		body   []node
	}
	withNode struct {
		pos
		targets []*target
		values  []expr
		body    []node
	}
	scopeNode struct { // {% block %} and {% generation %}: the body in a scope of its own
		pos
		body []node
	}
	breakNode    struct{ pos }
	continueNode struct{ pos }
)

// target is what a set, a for or a with assigns to: a name, a namespace's
// attribute (ns.attr) or a tuple of names to unpack into.
type target struct {
	name  string
	attr  string    // with name: the namespace attribute to set
	tuple []*target // unpacking
}

// macroDef is a macro's (or a call block's caller's) definition.
type macroDef struct {
	name     string
	params   []string
	defaults []expr // one per param; nil where the param has none
	body     []node
	// What the body reads, which decides what a call may pass (jinja2
	// accepts extra positional arguments only when the body reads
	// varargs, and so on).
	usesVarargs, usesKwargs, usesCaller bool
}

// Expressions.
type (
	constExpr struct {
		pos
		v Value
	}
	nameExpr struct {
		pos
		name string
	}
	attrExpr struct { // obj.name
		pos
		obj  expr
		name string
	}
	itemExpr struct { // obj[key]
		pos
		obj, key expr
	}
	sliceExpr struct { // obj[start:stop:step]; absent parts nil
		pos
		obj, start, stop, step expr
	}
	callExpr struct {
		pos
		fn expr
		argList
	}
	filterExpr struct { // arg | name(args)
		pos
		arg  expr // blockArg for the body of a filter block
		name string
		argList
	}
	testExpr struct { // arg is [not] name(args)
		pos
		arg    expr
		name   string
		negate bool
		argList
	}
	binExpr struct { // arithmetic: + - * / // % **
		pos
		op   string
		l, r expr
	}
	concatExpr struct { // a ~ b ~ c
		pos
		parts []expr
	}
	andExpr struct {
		pos
		l, r expr
	}
	orExpr struct {
		pos
		l, r expr
	}
	notExpr struct {
		pos
		x expr
	}
	negExpr struct { // -x, or +x with plus
		pos
		x    expr
		plus bool
	}
	compareExpr struct { // a op b op c ...
		pos
		first expr
		ops   []string // == != < <= > >= in notin
		rest  []expr
	}
	condExpr struct { // then if test else els (els may be nil)
		pos
		test, then, els expr
	}
	listExpr struct {
		pos
		items []expr
		tuple bool
	}
	dictExpr struct {
		pos
		keys, vals []expr
	}
	// blockArg stands for the text of a filter block's body (or a set
	// block's) in the filter chain applied to it.
	blockArg struct{ pos }
)

// argList is a call's arguments: f(a, b, k=v, *list, **dict).
type argList struct {
	args               []expr
	kwargs             []kwExpr
	dynArgs, dynKwargs expr // nil when absent
}

type kwExpr struct {
	name string
	x    expr
}
