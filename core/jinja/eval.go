package jinja

import "fmt"

// eval evaluates an expression.
func (r *renderer) eval(s *scope, x expr) (Value, error) {
	if err := r.step(); err != nil {
		return nil, err
	}
	if err := r.enter(); err != nil {
		return nil, err
	}
	defer r.leave()
	switch x := x.(type) {
	case *constExpr:
		return x.v, nil
	case *nameExpr:
		return r.lookup(s, x.name), nil
	case *attrExpr:
		obj, err := r.eval(s, x.obj)
		if err != nil {
			return nil, err
		}
		return r.getAttr(obj, x.name)
	case *itemExpr:
		obj, err := r.eval(s, x.obj)
		if err != nil {
			return nil, err
		}
		key, err := r.eval(s, x.key)
		if err != nil {
			return nil, err
		}
		return r.getItem(obj, key)
	case *sliceExpr:
		return r.evalSlice(s, x)
	case *callExpr:
		return r.evalCall(s, x, nil)
	case *filterExpr:
		arg, err := r.eval(s, x.arg)
		if err != nil {
			return nil, err
		}
		return r.applyFilter(s, x, arg)
	case *testExpr:
		return r.evalTest(s, x)
	case *binExpr:
		l, err := r.eval(s, x.l)
		if err != nil {
			return nil, err
		}
		rv, err := r.eval(s, x.r)
		if err != nil {
			return nil, err
		}
		return r.binary(x.op, l, rv)
	case *concatExpr:
		return r.evalConcat(s, x)
	case *andExpr:
		l, err := r.eval(s, x.l)
		if err != nil || !truthy(l) {
			return l, err
		}
		return r.eval(s, x.r)
	case *orExpr:
		l, err := r.eval(s, x.l)
		if err != nil || truthy(l) {
			return l, err
		}
		return r.eval(s, x.r)
	case *notExpr:
		v, err := r.eval(s, x.x)
		if err != nil {
			return nil, err
		}
		return !truthy(v), nil
	case *negExpr:
		v, err := r.eval(s, x.x)
		if err != nil {
			return nil, err
		}
		return unary(v, x.plus)
	case *compareExpr:
		return r.evalCompare(s, x)
	case *condExpr:
		t, err := r.eval(s, x.test)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return r.eval(s, x.then)
		}
		if x.els == nil {
			return Undefined{msg: fmt.Sprintf("the inline if-expression on line %d evaluated to false and no else section was defined.", x.line)}, nil
		}
		return r.eval(s, x.els)
	case *listExpr:
		if err := r.allocItems(int64(len(x.items)), itemBytes); err != nil {
			return nil, err
		}
		items := make([]Value, len(x.items))
		for i, it := range x.items {
			v, err := r.eval(s, it)
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		l := &List{Items: items}
		if x.tuple {
			l.kind = kindTuple
		}
		return l, nil
	case *dictExpr:
		if err := r.allocItems(int64(len(x.keys)), entryBytes); err != nil {
			return nil, err
		}
		d := NewDict()
		for i := range x.keys {
			k, err := r.eval(s, x.keys[i])
			if err != nil {
				return nil, err
			}
			v, err := r.eval(s, x.vals[i])
			if err != nil {
				return nil, err
			}
			if err := d.Set(k, v); err != nil {
				return nil, err
			}
		}
		return d, nil
	case *blockArg:
		return nil, fmt.Errorf("jinja: a block's text outside its filter")
	}
	return nil, fmt.Errorf("jinja: unknown expression %T", x)
}

func (r *renderer) evalConcat(s *scope, x *concatExpr) (Value, error) {
	parts := make([]string, len(x.parts))
	for i, p := range x.parts {
		v, err := r.eval(s, p)
		if err != nil {
			return nil, err
		}
		if parts[i], err = r.toStr(v); err != nil {
			return nil, err
		}
	}
	return r.concat(parts...)
}

func (r *renderer) evalCompare(s *scope, x *compareExpr) (Value, error) {
	l, err := r.eval(s, x.first)
	if err != nil {
		return nil, err
	}
	for i, op := range x.ops {
		rv, err := r.eval(s, x.rest[i])
		if err != nil {
			return nil, err
		}
		ok, err := r.compare(op, l, rv)
		if err != nil || !ok {
			return false, err
		}
		l = rv
	}
	return true, nil
}

func (r *renderer) evalSlice(s *scope, x *sliceExpr) (Value, error) {
	obj, err := r.eval(s, x.obj)
	if err != nil {
		return nil, err
	}
	var bounds [3]Value
	for i, b := range []expr{x.start, x.stop, x.step} {
		if b == nil {
			continue
		}
		if bounds[i], err = r.eval(s, b); err != nil {
			return nil, err
		}
	}
	if u, ok := obj.(Undefined); ok {
		return nil, u.err()
	}
	v, err := r.slice(obj, bounds[0], bounds[1], bounds[2])
	if e, ok := err.(*Error); ok && e.Kind == kindType {
		// jinja2's getitem turns a failed subscript into an undefined.
		return Undefined{msg: objectTypeRepr(obj) + " has no element slice", kind: kindUndefined}, nil
	}
	return v, err
}

// evalArgs evaluates a call's arguments, spreading *list and **dict.
func (r *renderer) evalArgs(s *scope, a *argList) (*callArgs, error) {
	ca := &callArgs{}
	if len(a.args) > 0 {
		ca.pos = make([]Value, 0, len(a.args))
	}
	for _, x := range a.args {
		v, err := r.eval(s, x)
		if err != nil {
			return nil, err
		}
		ca.pos = append(ca.pos, v)
	}
	for _, kw := range a.kwargs {
		v, err := r.eval(s, kw.x)
		if err != nil {
			return nil, err
		}
		ca.setKw(kw.name, v)
	}
	if a.dynArgs != nil {
		v, err := r.eval(s, a.dynArgs)
		if err != nil {
			return nil, err
		}
		items, err := r.iterate(v)
		if err != nil {
			return nil, err
		}
		ca.pos = append(ca.pos, items...)
	}
	if a.dynKwargs != nil {
		v, err := r.eval(s, a.dynKwargs)
		if err != nil {
			return nil, err
		}
		d, ok := v.(*Dict)
		if !ok {
			return nil, typeErrorf("argument after ** must be a mapping, not %s", typeName(v))
		}
		for i, k := range d.keys {
			name, ok := k.(string)
			if !ok {
				return nil, typeErrorf("keywords must be strings")
			}
			ca.setKw(name, d.vals[i])
		}
	}
	return ca, nil
}

// evalCall evaluates a call; caller, when not nil, is a call block's body
// passed as the caller keyword.
func (r *renderer) evalCall(s *scope, x *callExpr, caller *macro) (Value, error) {
	fn, err := r.eval(s, x.fn)
	if err != nil {
		return nil, err
	}
	a, err := r.evalArgs(s, &x.argList)
	if err != nil {
		return nil, err
	}
	if caller != nil {
		a.setKw("caller", caller)
	}
	return r.call(fn, a)
}

// evalBlockFilter applies a filter block's (or set block's) filter chain
// to the body's text.
func (r *renderer) evalBlockFilter(s *scope, f expr, text string) (Value, error) {
	fx, ok := f.(*filterExpr)
	if !ok {
		return nil, fmt.Errorf("jinja: a block filter that is not a filter")
	}
	var arg Value = text
	if _, isBlock := fx.arg.(*blockArg); !isBlock {
		var err error
		if arg, err = r.evalBlockFilter(s, fx.arg, text); err != nil {
			return nil, err
		}
	}
	return r.applyFilter(s, fx, arg)
}

func (r *renderer) applyFilter(s *scope, x *filterExpr, arg Value) (Value, error) {
	f, ok := filters[x.name]
	if !ok {
		return nil, errorf(kindRuntime, "No filter named '%s' found.", x.name)
	}
	a, err := r.evalArgs(s, &x.argList)
	if err != nil {
		return nil, err
	}
	if err := r.size(arg); err != nil {
		return nil, err
	}
	return f(r, arg, a)
}

func (r *renderer) evalTest(s *scope, x *testExpr) (Value, error) {
	t, ok := tests[x.name]
	if !ok {
		return nil, errorf(kindRuntime, "No test named '%s' found.", x.name)
	}
	arg, err := r.eval(s, x.arg)
	if err != nil {
		return nil, err
	}
	a, err := r.evalArgs(s, &x.argList)
	if err != nil {
		return nil, err
	}
	if err := r.size(arg); err != nil {
		return nil, err
	}
	ok, err = t(r, arg, a)
	if err != nil {
		return nil, err
	}
	return ok != x.negate, nil
}
