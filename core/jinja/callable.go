package jinja

import (
	"strings"
)

// callArgs are a call's evaluated arguments.
type callArgs struct {
	pos     []Value
	kwNames []string
	kwVals  []Value
}

func (a *callArgs) setKw(name string, v Value) {
	for i, n := range a.kwNames {
		if n == name {
			a.kwVals[i] = v
			return
		}
	}
	a.kwNames = append(a.kwNames, name)
	a.kwVals = append(a.kwVals, v)
}

// missing marks a parameter a call did not pass.
type missing struct{}

func isMissing(v Value) bool { _, ok := v.(missing); return ok }

// orDefault is v, or def when v is missing.
func orDefault(v, def Value) Value {
	if isMissing(v) {
		return def
	}
	return v
}

// bind matches the arguments to a builtin's parameters, as Python
// binds a call: positionally, then by keyword. Unpassed parameters are
// missing{}.
func (a *callArgs) bind(fn string, params ...string) ([]Value, error) {
	if len(a.pos) > len(params) {
		return nil, typeErrorf("%s() takes at most %d argument(s) (%d given)", fn, len(params), len(a.pos))
	}
	out := make([]Value, len(params))
	for i := range out {
		out[i] = missing{}
	}
	copy(out, a.pos)
	for k, name := range a.kwNames {
		i := -1
		for j, p := range params {
			if p == name {
				i = j
				break
			}
		}
		if i < 0 {
			return nil, typeErrorf("%s() got an unexpected keyword argument '%s'", fn, name)
		}
		if i < len(a.pos) {
			return nil, typeErrorf("%s() got multiple values for argument '%s'", fn, name)
		}
		out[i] = a.kwVals[k]
	}
	return out, nil
}

// noKwargs refuses keyword arguments for a builtin that takes none.
func (a *callArgs) noKwargs(fn string) error {
	if len(a.kwNames) > 0 {
		return typeErrorf("%s() takes no keyword arguments", fn)
	}
	return nil
}

// builtin is a global function (range, namespace, raise_exception, ...).
type builtin struct {
	name string
	fn   func(r *renderer, a *callArgs) (Value, error)
}

// boundMethod is a method looked up on a value (s.strip, d.items,
// loop.cycle), called with its receiver.
type boundMethod struct {
	recv Value
	name string
	fn   methodFunc
}

type methodFunc func(r *renderer, recv Value, a *callArgs) (Value, error)

// macro is a {% macro %} (or a call block's caller) closed over the
// scope it was defined in, whose variables it reads as they are when it
// runs.
type macro struct {
	def   *macroDef
	scope *scope
}

// call calls a callable value.
func (r *renderer) call(fn Value, a *callArgs) (Value, error) {
	switch f := fn.(type) {
	case *macro:
		return r.callMacro(f, a)
	case *builtin:
		return f.fn(r, a)
	case *boundMethod:
		if err := r.size(f.recv); err != nil {
			return nil, err
		}
		for _, arg := range a.pos {
			if err := r.size(arg); err != nil {
				return nil, err
			}
		}
		return f.fn(r, f.recv, a)
	case *loopContext:
		return r.callLoop(f, a)
	case Undefined:
		return nil, f.err()
	}
	return nil, typeErrorf("'%s' object is not callable", typeName(fn))
}

func (r *renderer) enterCall(what string) error {
	r.calls++
	if r.calls > r.lim.CallDepth {
		return r.fail("%s nests deeper than %d calls", what, r.lim.CallDepth)
	}
	return nil
}

// callMacro binds arguments as jinja2's Macro.__call__ does: positional
// ones to the parameters in order, then keywords by name, then defaults
// (evaluated in the call's scope, so they may use earlier parameters);
// extra positional ones go to varargs and extra keywords to kwargs when
// the body reads those, and are an error otherwise.
func (r *renderer) callMacro(m *macro, a *callArgs) (Value, error) {
	d := m.def
	if err := r.enterCall("macro '" + d.name + "'"); err != nil {
		return nil, err
	}
	defer func() { r.calls-- }()
	s := &scope{parent: m.scope}
	kwNames, kwVals := append([]string(nil), a.kwNames...), append([]Value(nil), a.kwVals...)
	popKw := func(name string) (Value, bool) {
		for i, n := range kwNames {
			if n == name {
				v := kwVals[i]
				kwNames = append(kwNames[:i], kwNames[i+1:]...)
				kwVals = append(kwVals[:i], kwVals[i+1:]...)
				return v, true
			}
		}
		return nil, false
	}
	for i, p := range d.params {
		var v Value
		switch {
		case i < len(a.pos):
			v = a.pos[i]
		default:
			if kv, ok := popKw(p); ok {
				v = kv
			} else if d.defaults[i] != nil {
				dv, err := r.eval(s, d.defaults[i])
				if err != nil {
					return nil, err
				}
				v = dv
			} else {
				v = Undefined{msg: "parameter '" + p + "' was not provided", kind: kindUndefined}
			}
		}
		s.set(p, v)
	}
	if d.usesCaller && !contains(d.params, "caller") {
		c, ok := popKw("caller")
		if !ok {
			c = Undefined{msg: "No caller defined", kind: kindUndefined}
		}
		s.set("caller", c)
	}
	if d.usesKwargs {
		kw := NewDict()
		for i, n := range kwNames {
			kw.SetString(n, kwVals[i])
		}
		s.set("kwargs", kw)
	} else if len(kwNames) > 0 {
		if kwNames[0] == "caller" {
			return nil, typeErrorf("macro '%s' was invoked with two values for the special caller argument. This is most likely a bug.", d.name)
		}
		return nil, typeErrorf("macro '%s' takes no keyword argument '%s'", d.name, kwNames[0])
	}
	if d.usesVarargs {
		var extra []Value
		if len(a.pos) > len(d.params) {
			extra = append(extra, a.pos[len(d.params):]...)
		}
		s.set("varargs", newTuple(extra...))
	} else if len(a.pos) > len(d.params) {
		return nil, typeErrorf("macro '%s' takes not more than %d argument(s)", d.name, len(d.params))
	}
	return r.capture(s, d.body)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// callLoop is loop(items) in a recursive for loop: the loop's body again
// over items, one level deeper, its output returned as a string.
func (r *renderer) callLoop(lc *loopContext, a *callArgs) (Value, error) {
	if !lc.node.recursive {
		return nil, typeErrorf("Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.")
	}
	if len(a.pos) != 1 || len(a.kwNames) > 0 {
		return nil, typeErrorf("loop() takes exactly one argument")
	}
	if err := r.enterCall("a recursive loop"); err != nil {
		return nil, err
	}
	defer func() { r.calls-- }()
	saved := r.out
	r.out = r.newBuf()
	defer func() { r.out = saved }()
	if err := r.loop(lc.scope, lc.node, a.pos[0], lc.depth+1, r.out); err != nil {
		return nil, err
	}
	if r.out.err != nil {
		return nil, r.out.err
	}
	return r.out.String(), nil
}

// The globals every render sees, after its own variables.
var globals map[string]Value

func init() {
	globals = map[string]Value{
		"range":           &builtin{"range", builtinRange},
		"namespace":       &builtin{"namespace", builtinNamespace},
		"dict":            &builtin{"dict", builtinDict},
		"raise_exception": &builtin{"raise_exception", builtinRaise},
		"strftime_now":    &builtin{"strftime_now", builtinStrftimeNow},
		"cycler":          &builtin{"cycler", builtinUnsupported},
		"joiner":          &builtin{"joiner", builtinUnsupported},
		"lipsum":          &builtin{"lipsum", builtinUnsupported},
	}
}

func builtinUnsupported(r *renderer, a *callArgs) (Value, error) {
	return nil, errorf(kindRuntime, "this global is not available in chat templates")
}

// maxRange is the sandbox's MAX_RANGE: jinja2 refuses longer ranges.
const maxRange = 100_000

func builtinRange(r *renderer, a *callArgs) (Value, error) {
	if err := a.noKwargs("range"); err != nil {
		return nil, err
	}
	ints := make([]int64, len(a.pos))
	for i, v := range a.pos {
		n, _, isInt, ok := number(v)
		if !ok || !isInt {
			return nil, typeErrorf("'%s' object cannot be interpreted as an integer", typeName(v))
		}
		ints[i] = n
	}
	start, stop, step := int64(0), int64(0), int64(1)
	switch len(ints) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	default:
		return nil, typeErrorf("range expected at most 3 arguments, got %d", len(ints))
	}
	if step == 0 {
		return nil, errorf(kindValue, "range() arg 3 must not be zero")
	}
	var n int64
	switch {
	case step > 0 && stop > start:
		n = (stop-start-1)/step + 1
	case step < 0 && stop < start:
		n = (start-stop-1)/(-step) + 1
	}
	if n < 0 || n > maxRange {
		return nil, errorf(kindOverflow, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
	}
	if err := r.allocItems(n, itemBytes); err != nil {
		return nil, err
	}
	items := make([]Value, n)
	for i := range items {
		items[i] = start + int64(i)*step
	}
	return &List{Items: items, kind: kindRange, rng: [3]int64{start, stop, step}}, nil
}

func builtinNamespace(r *renderer, a *callArgs) (Value, error) {
	d, err := r.dictFromArgs("namespace", a)
	if err != nil {
		return nil, err
	}
	return &Namespace{attrs: d}, nil
}

func builtinDict(r *renderer, a *callArgs) (Value, error) {
	return r.dictFromArgs("dict", a)
}

// dictFromArgs is dict(mapping_or_pairs, **kwargs).
func (r *renderer) dictFromArgs(fn string, a *callArgs) (*Dict, error) {
	if len(a.pos) > 1 {
		return nil, typeErrorf("%s expected at most 1 argument, got %d", fn, len(a.pos))
	}
	d := NewDict()
	if len(a.pos) == 1 {
		switch src := a.pos[0].(type) {
		case *Dict:
			if err := r.allocItems(int64(src.Len()), entryBytes); err != nil {
				return nil, err
			}
			for i, k := range src.keys {
				if err := d.Set(k, src.vals[i]); err != nil {
					return nil, err
				}
			}
		default:
			items, err := r.iterate(src)
			if err != nil {
				return nil, err
			}
			if err := r.allocItems(int64(len(items)), entryBytes); err != nil {
				return nil, err
			}
			for _, it := range items {
				pair, err := r.iterate(it)
				if err != nil {
					return nil, err
				}
				if len(pair) != 2 {
					return nil, errorf(kindValue, "dictionary update sequence element has length %d; 2 is required", len(pair))
				}
				if err := d.Set(pair[0], pair[1]); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := r.allocItems(int64(len(a.kwNames)), entryBytes); err != nil {
		return nil, err
	}
	for i, n := range a.kwNames {
		d.SetString(n, a.kwVals[i])
	}
	return d, nil
}

func builtinRaise(r *renderer, a *callArgs) (Value, error) {
	parts := make([]string, 0, len(a.pos))
	for _, v := range a.pos {
		s, err := r.toStr(v)
		if err != nil {
			return nil, err
		}
		parts = append(parts, s)
	}
	return nil, &RaiseError{Msg: strings.Join(parts, " ")}
}

func builtinStrftimeNow(r *renderer, a *callArgs) (Value, error) {
	args, err := a.bind("strftime_now", "format")
	if err != nil {
		return nil, err
	}
	f, ok := isString(args[0])
	if !ok {
		return nil, typeErrorf("strftime() argument 1 must be str, not %s", typeName(args[0]))
	}
	return r.strftime(f, r.now)
}
