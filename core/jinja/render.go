package jinja

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// Options configure one render.
type Options struct {
	// Limits bound the render; the zero value means DefaultLimits.
	Limits Limits
	// Now is the time strftime_now formats; zero means the time the
	// render starts. Tests fix it to compare with reference outputs.
	Now time.Time
}

// Render renders the template with vars as its global variables (besides
// the builtins: range, namespace, dict, raise_exception, strftime_now,
// ...). It runs on the calling goroutine and returns when the template
// finishes, fails, runs out of budget or ctx ends, whichever is first;
// nothing of it keeps running after it returns.
func (t *Template) Render(ctx context.Context, vars map[string]Value, opt Options) (string, error) {
	out, _, err := t.render(ctx, vars, opt)
	return out, err
}

// internalError is the Kind of an Error that is a bug in the
// interpreter (a panic it recovered from), not in the template.
const internalError = "InternalError"

// render is Render, also returning the renderer for tests to inspect.
func (t *Template) render(ctx context.Context, vars map[string]Value, opt Options) (out string, r *renderer, err error) {
	r = &renderer{vars: vars, now: opt.Now}
	lim := opt.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits()
	}
	if r.now.IsZero() {
		r.now = time.Now()
	}
	r.init(ctx, lim)
	// A bug in the interpreter must not take the host down with it: a
	// panic (not a stack overflow, which the depth limits prevent) is a
	// failed render.
	defer func() {
		if p := recover(); p != nil {
			out, err = "", &Error{Kind: internalError, Msg: fmt.Sprint(p)}
		}
	}()
	if err := r.check(); err != nil {
		return "", r, err
	}
	r.out = r.newBuf()
	root := &scope{}
	if err := r.execBody(root, t.body); err != nil {
		return "", r, err
	}
	if r.out.err != nil {
		return "", r, r.out.err
	}
	return r.out.String(), r, nil
}

type renderer struct {
	budget
	out  *sbuf // where output goes now (a macro's, a block's, the template's)
	vars map[string]Value
	now  time.Time
	// Buffers that long concatenations can grow in place (concat.go).
	grow    map[unsafe.Pointer]*growBuf
	growSeq int64
}

func (r *renderer) newBuf() *sbuf { return &sbuf{b: &r.budget} }

// scope holds the variables one level of the template sets: the
// template's top level, a loop pass, a macro call, a with block. Lookups
// go outwards, then to the render's vars, then to the builtins. Scopes
// are small, so a scan beats a map until one grows.
type scope struct {
	names  []string
	vals   []Value
	index  map[string]int // once names outgrows a scan
	parent *scope
}

const scopeScan = 16

func (s *scope) find(name string) int {
	if s.index != nil {
		if i, ok := s.index[name]; ok {
			return i
		}
		return -1
	}
	for i := len(s.names) - 1; i >= 0; i-- {
		if s.names[i] == name {
			return i
		}
	}
	return -1
}

func (s *scope) set(name string, v Value) {
	if i := s.find(name); i >= 0 {
		s.vals[i] = v
		return
	}
	s.names = append(s.names, name)
	s.vals = append(s.vals, v)
	if s.index != nil {
		s.index[name] = len(s.names) - 1
	} else if len(s.names) > scopeScan {
		s.index = make(map[string]int, len(s.names))
		for i, n := range s.names {
			s.index[n] = i
		}
	}
}

func (r *renderer) lookup(s *scope, name string) Value {
	hops := 0
	for ; s != nil; s = s.parent {
		if i := s.find(name); i >= 0 {
			return s.vals[i]
		}
		hops++
	}
	if hops > 8 { // a lookup through deeply nested scopes is work
		_ = r.spend(int64(hops / 8))
	}
	if v, ok := r.vars[name]; ok {
		return v
	}
	if b, ok := globals[name]; ok {
		return b
	}
	return undefinedName(name)
}

// errBreak and errContinue carry {% break %} and {% continue %} up to
// their loop; the parser allows them only inside one.
var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

func (r *renderer) execBody(s *scope, body []node) error {
	for _, n := range body {
		if err := r.exec(s, n); err != nil {
			return err
		}
	}
	return nil
}

// at gives an error the line it happened on, if it has none yet.
func at(err error, line int) error {
	var e *Error
	if errors.As(err, &e) && e.Line == 0 {
		e.Line = line
	}
	return err
}

func (r *renderer) exec(s *scope, n node) error {
	if err := r.step(); err != nil {
		return err
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.leave()
	switch n := n.(type) {
	case *textNode:
		r.out.WriteString(n.text)
		return r.out.err
	case *outputNode:
		v, err := r.eval(s, n.x)
		if err != nil {
			return at(err, n.line)
		}
		if err := writeStr(r.out, v, 0); err != nil {
			return err
		}
		return r.out.err
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(s, c)
			if err != nil {
				return at(err, n.line)
			}
			if truthy(v) {
				return r.execBody(s, n.bodies[i])
			}
		}
		return r.execBody(s, n.elseBody)
	case *forNode:
		iter, err := r.eval(s, n.iter)
		if err != nil {
			return at(err, n.line)
		}
		return at(r.loop(s, n, iter, 1, r.out), n.line)
	case *setNode:
		v, err := r.eval(s, n.x)
		if err != nil {
			return at(err, n.line)
		}
		return at(r.assign(s, n.target, v), n.line)
	case *setBlockNode:
		text, err := r.capture(&scope{parent: s}, n.body)
		if err != nil {
			return err
		}
		var v Value = text
		if n.filter != nil {
			if v, err = r.evalBlockFilter(s, n.filter, text); err != nil {
				return at(err, n.line)
			}
		}
		return at(r.assign(s, n.target, v), n.line)
	case *macroNode:
		s.set(n.m.name, &macro{def: n.m, scope: s})
		return nil
	case *callBlockNode:
		caller := &macro{def: n.caller, scope: s}
		v, err := r.evalCall(s, n.call, caller)
		if err != nil {
			return at(err, n.line)
		}
		if err := writeStr(r.out, v, 0); err != nil {
			return err
		}
		return r.out.err
	case *filterBlockNode:
		text, err := r.capture(&scope{parent: s}, n.body)
		if err != nil {
			return err
		}
		v, err := r.evalBlockFilter(s, n.filter, text)
		if err != nil {
			return at(err, n.line)
		}
		if err := writeStr(r.out, v, 0); err != nil {
			return err
		}
		return r.out.err
	case *withNode:
		vals := make([]Value, len(n.values))
		for i, x := range n.values {
			v, err := r.eval(s, x)
			if err != nil {
				return at(err, n.line)
			}
			vals[i] = v
		}
		inner := &scope{parent: s}
		for i, t := range n.targets {
			if err := r.assign(inner, t, vals[i]); err != nil {
				return at(err, n.line)
			}
		}
		return r.execBody(inner, n.body)
	case *scopeNode:
		return r.execBody(&scope{parent: s}, n.body)
	case *breakNode:
		return errBreak
	case *continueNode:
		return errContinue
	}
	return fmt.Errorf("jinja: unknown statement %T", n)
}

// capture renders body into a string of its own (a macro's result, a set
// block's value).
func (r *renderer) capture(s *scope, body []node) (string, error) {
	saved := r.out
	r.out = r.newBuf()
	defer func() { r.out = saved }()
	if err := r.execBody(s, body); err != nil {
		return "", err
	}
	if r.out.err != nil {
		return "", r.out.err
	}
	return r.out.String(), nil
}

// assign binds a set, for or with target.
func (r *renderer) assign(s *scope, t *target, v Value) error {
	switch {
	case t.tuple != nil:
		items, err := r.iterate(v)
		if err != nil {
			return err
		}
		if len(items) != len(t.tuple) {
			if len(items) > len(t.tuple) {
				return errorf(kindValue, "too many values to unpack (expected %d)", len(t.tuple))
			}
			return errorf(kindValue, "not enough values to unpack (expected %d, got %d)", len(t.tuple), len(items))
		}
		for i, sub := range t.tuple {
			if err := r.assign(s, sub, items[i]); err != nil {
				return err
			}
		}
		return nil
	case t.attr != "":
		ns, ok := r.lookup(s, t.name).(*Namespace)
		if !ok {
			return errorf(kindRuntime, "cannot assign attribute on non-namespace object")
		}
		if err := r.alloc(entryBytes); err != nil {
			return err
		}
		ns.attrs.SetString(t.attr, v)
		return nil
	}
	s.set(t.name, v)
	return nil
}

// loop runs a for loop over iter at recursion depth (1 for the loop
// itself, more for loop() calls of a recursive one), writing to out.
func (r *renderer) loop(s *scope, n *forNode, iter Value, depth int, out *sbuf) error {
	items, err := r.iterate(iter)
	if err != nil {
		return err
	}
	if n.cond != nil {
		kept := make([]Value, 0, len(items))
		for _, it := range items {
			if err := r.step(); err != nil {
				return err
			}
			is := &scope{parent: s}
			if err := r.assign(is, n.target, it); err != nil {
				return err
			}
			ok, err := r.eval(is, n.cond)
			if err != nil {
				return err
			}
			if truthy(ok) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.execBody(s, n.elseBody)
	}
	lc := &loopContext{items: items, depth: depth, node: n, scope: s}
	// Each pass starts from the enclosing scope's variables (a set in one
	// pass is gone in the next, as in jinja2); one scope object serves
	// all passes, emptied each time, so a loop costs no allocation per
	// pass.
	is := &scope{parent: s}
	for i, it := range items {
		if err := r.step(); err != nil {
			return err
		}
		lc.index = i
		is.names, is.vals, is.index = is.names[:0], is.vals[:0], nil
		if err := r.assign(is, n.target, it); err != nil {
			return err
		}
		is.set("loop", lc)
		err := r.execBody(is, n.body)
		if err == errBreak {
			break
		}
		if err != nil && err != errContinue {
			return err
		}
	}
	return nil
}

// loopContext is a loop's "loop" variable.
type loopContext struct {
	items   []Value
	index   int
	depth   int
	node    *forNode
	scope   *scope
	changed Value
	hasLast bool // changed() has seen a value
}
