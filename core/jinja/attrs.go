package jinja

import "unicode/utf8"

// Attribute and item lookup as jinja2's sandbox does it. obj.name tries
// the Python attribute first (a dict's items method, a str's strip) and
// then the item obj["name"]; obj[key] tries the item first and then, for
// a string key, the attribute. What neither finds is Undefined, and an
// attribute that would change a list or a dict is an Undefined that fails
// with a SecurityError when used, as in ImmutableSandboxedEnvironment.

func (r *renderer) getAttr(obj Value, name string) (Value, error) {
	if u, ok := obj.(Undefined); ok {
		return nil, u.err()
	}
	if v, found := r.pyAttr(obj, name); found {
		return v, nil
	}
	if v, found, err := r.pyItem(obj, name); err != nil || found {
		return v, err
	}
	return undefinedAttr(obj, name), nil
}

func (r *renderer) getItem(obj Value, key Value) (Value, error) {
	if u, ok := obj.(Undefined); ok {
		return nil, u.err()
	}
	if v, found, err := r.pyItem(obj, key); err != nil || found {
		return v, err
	}
	if name, ok := key.(string); ok {
		if v, found := r.pyAttr(obj, name); found {
			return v, nil
		}
	}
	return undefinedItem(obj, key), nil
}

// pyAttr is Python's getattr(obj, name) for the attributes templates
// reach: methods of str, list, tuple and dict, a namespace's attributes,
// the loop variable's, a macro's.
func (r *renderer) pyAttr(obj Value, name string) (Value, bool) {
	switch o := obj.(type) {
	case string, Markup:
		if m, ok := strMethods[name]; ok {
			return &boundMethod{recv: o, name: name, fn: m}, true
		}
	case *Dict:
		if m, ok := dictMethods[name]; ok {
			return &boundMethod{recv: o, name: name, fn: m}, true
		}
		if mutatingDictMethods[name] {
			return unsafeAttr(o, name), true
		}
	case *List:
		if o.kind <= kindTuple || o.kind == kindRange {
			if m, ok := listMethods[name]; ok {
				return &boundMethod{recv: o, name: name, fn: m}, true
			}
		}
		if o.kind == kindList && mutatingListMethods[name] {
			return unsafeAttr(o, name), true
		}
	case int64, float64, bool:
		switch name {
		case "real":
			if b, ok := o.(bool); ok {
				return map[bool]int64{true: 1, false: 0}[b], true
			}
			return o, true
		case "imag":
			if _, ok := o.(float64); ok {
				return 0.0, true
			}
			return int64(0), true
		}
	case *Namespace:
		return o.attrs.Get(name)
	case *loopContext:
		return o.attr(name)
	case *macro:
		switch name {
		case "name":
			return o.def.name, true
		case "arguments":
			args := make([]Value, len(o.def.params))
			for i, p := range o.def.params {
				args[i] = p
			}
			return newTuple(args...), true
		case "catch_kwargs":
			return o.def.usesKwargs, true
		case "catch_varargs":
			return o.def.usesVarargs, true
		case "caller":
			return o.def.usesCaller, true
		}
	}
	return nil, false
}

// pyItem is Python's obj[key]; found is false where Python raises a
// TypeError or a LookupError (which jinja2 turns into Undefined).
func (r *renderer) pyItem(obj Value, key Value) (Value, bool, error) {
	switch o := obj.(type) {
	case *Dict:
		if err := r.size(key); err != nil { // hashing a long key is work
			return nil, false, err
		}
		v, ok := o.Get(key)
		return v, ok, nil
	case *List:
		if !o.indexable() {
			return nil, false, nil
		}
		i, ok := index(key, len(o.Items))
		if !ok {
			return nil, false, nil
		}
		return o.Items[i], true, nil
	case string, Markup:
		s, _ := isString(o)
		if isASCII(s) {
			i, ok := index(key, len(s))
			if !ok {
				return nil, false, nil
			}
			return withKind(o, s[i:i+1]), true, nil
		}
		n := utf8.RuneCountInString(s)
		i, ok := index(key, n)
		if !ok {
			return nil, false, nil
		}
		if err := r.scan(len(s)); err != nil {
			return nil, false, err
		}
		for k, c := range s {
			if i == 0 {
				return withKind(o, s[k:k+utf8.RuneLen(c)]), true, nil
			}
			i--
		}
	}
	return nil, false, nil
}

// index resolves a Python index (negative from the end) into [0, n).
func index(key Value, n int) (int, bool) {
	i, _, isInt, ok := number(key)
	if !ok || !isInt {
		return 0, false
	}
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		return 0, false
	}
	return int(i), true
}

// withKind returns s as the same kind of string as like (Markup stays
// Markup).
func withKind(like Value, s string) Value {
	if _, ok := like.(Markup); ok {
		return Markup(s)
	}
	return s
}

func (lc *loopContext) attr(name string) (Value, bool) {
	n := len(lc.items)
	switch name {
	case "index":
		return int64(lc.index + 1), true
	case "index0":
		return int64(lc.index), true
	case "revindex":
		return int64(n - lc.index), true
	case "revindex0":
		return int64(n - lc.index - 1), true
	case "first":
		return lc.index == 0, true
	case "last":
		return lc.index == n-1, true
	case "length":
		return int64(n), true
	case "depth":
		return int64(lc.depth), true
	case "depth0":
		return int64(lc.depth - 1), true
	case "previtem":
		if lc.index == 0 {
			return Undefined{msg: "there is no previous item", kind: kindUndefined}, true
		}
		return lc.items[lc.index-1], true
	case "nextitem":
		if lc.index+1 >= n {
			return Undefined{msg: "there is no next item", kind: kindUndefined}, true
		}
		return lc.items[lc.index+1], true
	case "cycle":
		return &boundMethod{recv: lc, name: "cycle", fn: loopCycle}, true
	case "changed":
		return &boundMethod{recv: lc, name: "changed", fn: loopChanged}, true
	}
	return nil, false
}

func loopCycle(r *renderer, recv Value, a *callArgs) (Value, error) {
	lc := recv.(*loopContext)
	if len(a.pos) == 0 {
		return nil, typeErrorf("no items for cycling given")
	}
	return a.pos[lc.index%len(a.pos)], nil
}

func loopChanged(r *renderer, recv Value, a *callArgs) (Value, error) {
	lc := recv.(*loopContext)
	val := newTuple(a.pos...)
	if lc.hasLast {
		if eq, err := r.equal(lc.changed, val, 0); err != nil || eq {
			return false, err
		}
	}
	lc.changed, lc.hasLast = val, true
	return true, nil
}
