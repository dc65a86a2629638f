package jinja

import (
	"math"
	"strings"
	"unicode/utf8"
)

// Python's semantics for truth, arithmetic, comparison, membership,
// iteration and slicing, on Values.

func truthy(v Value) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case int64:
		return v != 0
	case float64:
		return v != 0
	case string:
		return v != ""
	case Markup:
		return v != ""
	case *List:
		return len(v.Items) > 0
	case *Dict:
		return v.Len() > 0
	case Undefined:
		return false
	}
	return true
}

// number returns v as a number: an int (ok, isInt) or a float. Bools are
// ints, as in Python.
func number(v Value) (i int64, f float64, isInt, ok bool) {
	switch v := v.(type) {
	case bool:
		if v {
			return 1, 1, true, true
		}
		return 0, 0, true, true
	case int64:
		return v, float64(v), true, true
	case float64:
		return 0, v, false, true
	}
	return 0, 0, false, false
}

func isString(v Value) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case Markup:
		return string(v), true
	}
	return "", false
}

func unsupported(op string, l, r Value) error {
	return typeErrorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
}

func (r *renderer) binary(op string, l, rv Value) (Value, error) {
	if u, ok := l.(Undefined); ok {
		return nil, u.err()
	}
	if u, ok := rv.(Undefined); ok {
		return nil, u.err()
	}
	li, lf, lInt, lNum := number(l)
	ri, rf, rInt, rNum := number(rv)
	if lNum && rNum {
		return arith(op, li, lf, lInt, ri, rf, rInt)
	}
	switch op {
	case "+":
		return r.add(l, rv)
	case "*":
		if rInt {
			return r.repeat(l, ri, rv)
		}
		if lInt {
			return r.repeat(rv, li, l)
		}
	case "%":
		if s, ok := l.(string); ok {
			return r.percentFormat(s, rv, false)
		}
		if m, ok := l.(Markup); ok {
			return r.percentFormat(string(m), rv, true)
		}
	}
	return nil, unsupported(op, l, rv)
}

func (r *renderer) add(l, rv Value) (Value, error) {
	switch a := l.(type) {
	case string:
		switch b := rv.(type) {
		case string:
			return r.concat(a, b)
		case Markup:
			if err := r.alloc(int64(escapedLen(a) + len(b))); err != nil {
				return nil, err
			}
			return Markup(htmlEscape(a) + string(b)), nil
		}
		return nil, typeErrorf("can only concatenate str (not \"%s\") to str", typeName(rv))
	case Markup:
		b, ok := isString(rv)
		if !ok {
			return nil, typeErrorf("can only concatenate str (not \"%s\") to str", typeName(rv))
		}
		_, plain := rv.(string)
		n := len(b)
		if plain {
			n = escapedLen(b)
		}
		if err := r.alloc(int64(len(a) + n)); err != nil {
			return nil, err
		}
		if plain {
			b = htmlEscape(b)
		}
		return Markup(string(a) + b), nil
	case *List:
		b, ok := rv.(*List)
		if !ok || b.kind != a.kind || a.kind > kindTuple {
			name := typeName(l)
			if a.kind <= kindTuple {
				return nil, typeErrorf("can only concatenate %s (not \"%s\") to %s", name, typeName(rv), name)
			}
			return nil, unsupported("+", l, rv)
		}
		n := int64(len(a.Items)) + int64(len(b.Items))
		if err := r.allocItems(n, itemBytes); err != nil {
			return nil, err
		}
		items := make([]Value, 0, n)
		items = append(items, a.Items...)
		items = append(items, b.Items...)
		return &List{Items: items, kind: a.kind}, nil
	}
	return nil, unsupported("+", l, rv)
}

// repeat is seq * n: the result's size is known before it is made.
func (r *renderer) repeat(seq Value, n int64, nv Value) (Value, error) {
	if n < 0 {
		n = 0
	}
	switch s := seq.(type) {
	case string, Markup:
		str, _ := isString(s)
		if n > 0 && int64(len(str)) > int64(r.lim.Output)/n {
			return nil, r.fail("the template would build a string of %d × %d bytes; at most %d are allowed", len(str), n, r.lim.Output)
		}
		if err := r.alloc(int64(len(str)) * n); err != nil {
			return nil, err
		}
		out := strings.Repeat(str, int(n))
		if _, ok := s.(Markup); ok {
			return Markup(out), nil
		}
		return out, nil
	case *List:
		if s.kind > kindTuple {
			break
		}
		if n > 0 && int64(len(s.Items)) > int64(r.lim.Output)/itemBytes/n {
			return nil, r.fail("the template would build a list of %d × %d items, too many", len(s.Items), n)
		}
		if err := r.allocItems(int64(len(s.Items))*n, itemBytes); err != nil {
			return nil, err
		}
		items := make([]Value, 0, int64(len(s.Items))*n)
		for range n {
			items = append(items, s.Items...)
		}
		return &List{Items: items, kind: s.kind}, nil
	}
	return nil, typeErrorf("can't multiply sequence by non-int of type '%s'", typeName(nv))
}

// arith is + - * / // % ** on numbers: ints stay ints where Python's do,
// and overflow (Python's ints have none) is an error.
func arith(op string, li int64, lf float64, lInt bool, ri int64, rf float64, rInt bool) (Value, error) {
	both := lInt && rInt
	overflow := func() (Value, error) {
		return nil, errorf(kindOverflow, "integer result of %s is too large", op)
	}
	switch op {
	case "+":
		if both {
			s := li + ri
			if (s > li) != (ri > 0) {
				return overflow()
			}
			return s, nil
		}
		return lf + rf, nil
	case "-":
		if both {
			d := li - ri
			if (d < li) != (ri > 0) {
				return overflow()
			}
			return d, nil
		}
		return lf - rf, nil
	case "*":
		if both {
			if li != 0 && ri != 0 {
				p := li * ri
				if p/ri != li || (li == -1 && ri == math.MinInt64) || (ri == -1 && li == math.MinInt64) {
					return overflow()
				}
				return p, nil
			}
			return int64(0), nil
		}
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, errorf(kindZeroDiv, "division by zero")
		}
		return lf / rf, nil
	case "//":
		if both {
			if ri == 0 {
				return nil, errorf(kindZeroDiv, "integer division or modulo by zero")
			}
			if li == math.MinInt64 && ri == -1 {
				return overflow()
			}
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			return q, nil
		}
		if rf == 0 {
			return nil, errorf(kindZeroDiv, "float floor division by zero")
		}
		return math.Floor(lf / rf), nil
	case "%":
		if both {
			if ri == 0 {
				return nil, errorf(kindZeroDiv, "integer division or modulo by zero")
			}
			if ri == -1 {
				return int64(0), nil
			}
			m := li % ri
			if m != 0 && ((m < 0) != (ri < 0)) {
				m += ri
			}
			return m, nil
		}
		if rf == 0 {
			return nil, errorf(kindZeroDiv, "float modulo")
		}
		m := math.Mod(lf, rf)
		if m != 0 && ((m < 0) != (rf < 0)) {
			m += rf
		}
		return m, nil
	case "**":
		if both && ri >= 0 {
			result := int64(1)
			base := li
			for e := ri; e > 0; e >>= 1 {
				if e&1 == 1 {
					v, err := arith("*", result, 0, true, base, 0, true)
					if err != nil {
						return overflow()
					}
					result = v.(int64)
				}
				if e > 1 {
					v, err := arith("*", base, 0, true, base, 0, true)
					if err != nil {
						return overflow()
					}
					base = v.(int64)
				}
			}
			return result, nil
		}
		if lf == 0 && rf < 0 {
			return nil, errorf(kindZeroDiv, "0.0 cannot be raised to a negative power")
		}
		return math.Pow(lf, rf), nil
	}
	return nil, typeErrorf("unknown operator %s", op)
}

func unary(v Value, plus bool) (Value, error) {
	if u, ok := v.(Undefined); ok {
		return nil, u.err()
	}
	i, f, isInt, ok := number(v)
	switch {
	case !ok:
		sign := "-"
		if plus {
			sign = "+"
		}
		return nil, typeErrorf("bad operand type for unary %s: '%s'", sign, typeName(v))
	case plus && isInt:
		return i, nil
	case plus:
		return f, nil
	case isInt:
		if i == math.MinInt64 {
			return nil, errorf(kindOverflow, "integer result of - is too large")
		}
		return -i, nil
	}
	return -f, nil
}

// compare evaluates one comparison operator.
func (r *renderer) compare(op string, l, rv Value) (bool, error) {
	switch op {
	case "==":
		return r.equal(l, rv, 0)
	case "!=":
		eq, err := r.equal(l, rv, 0)
		return !eq, err
	case "in":
		return r.contains(rv, l)
	case "notin":
		in, err := r.contains(rv, l)
		return !in, err
	case "<":
		return r.less(l, rv, op, 0)
	case ">":
		return r.less(rv, l, op, 0)
	case "<=":
		lt, err := r.less(rv, l, op, 0)
		return !lt && err == nil, err
	case ">=":
		lt, err := r.less(l, rv, op, 0)
		return !lt && err == nil, err
	}
	return false, typeErrorf("unknown comparison %s", op)
}

// equal is Python's ==.
func (r *renderer) equal(a, b Value, depth int) (bool, error) {
	if depth > maxValueDepth {
		return false, tooDeep()
	}
	ai, af, aInt, aNum := number(a)
	bi, bf, bInt, bNum := number(b)
	if aNum || bNum {
		if !aNum || !bNum {
			return false, nil
		}
		if aInt && bInt {
			return ai == bi, nil
		}
		return af == bf, nil
	}
	switch x := a.(type) {
	case nil:
		return b == nil, nil
	case string, Markup:
		xs, _ := isString(x)
		ys, ok := isString(b)
		if ok {
			if err := r.scan(len(xs)); err != nil {
				return false, err
			}
		}
		return ok && xs == ys, nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok, nil
	case *List:
		y, ok := b.(*List)
		if !ok || x.kind != y.kind || len(x.Items) != len(y.Items) {
			return false, nil
		}
		if err := r.spend(int64(len(x.Items))); err != nil {
			return false, err
		}
		for i := range x.Items {
			eq, err := r.equal(x.Items[i], y.Items[i], depth+1)
			if err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false, nil
		}
		if err := r.spend(int64(x.Len())); err != nil {
			return false, err
		}
		for i, k := range x.keys {
			v, found := y.Get(k)
			if !found {
				return false, nil
			}
			eq, err := r.equal(x.vals[i], v, depth+1)
			if err != nil || !eq {
				return false, err
			}
		}
		return true, nil
	}
	return a == b, nil
}

// less is Python's <, with its TypeError between unorderable types.
func (r *renderer) less(a, b Value, op string, depth int) (bool, error) {
	if depth > maxValueDepth {
		return false, tooDeep()
	}
	if u, ok := a.(Undefined); ok {
		return false, u.err()
	}
	if u, ok := b.(Undefined); ok {
		return false, u.err()
	}
	ai, af, aInt, aNum := number(a)
	bi, bf, bInt, bNum := number(b)
	if aNum && bNum {
		if aInt && bInt {
			return ai < bi, nil
		}
		return af < bf, nil
	}
	if as, ok := isString(a); ok {
		if bs, ok := isString(b); ok {
			if err := r.scan(min(len(as), len(bs))); err != nil {
				return false, err
			}
			return as < bs, nil
		}
	}
	if x, ok := a.(*List); ok {
		if y, ok := b.(*List); ok && x.kind == y.kind && x.kind <= kindTuple {
			for i := 0; i < len(x.Items) && i < len(y.Items); i++ {
				eq, err := r.equal(x.Items[i], y.Items[i], depth+1)
				if err != nil {
					return false, err
				}
				if !eq {
					return r.less(x.Items[i], y.Items[i], op, depth+1)
				}
			}
			return len(x.Items) < len(y.Items), nil
		}
	}
	return false, typeErrorf("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
}

// contains is Python's "item in container".
func (r *renderer) contains(container, item Value) (bool, error) {
	switch c := container.(type) {
	case string, Markup:
		cs, _ := isString(c)
		s, ok := isString(item)
		if !ok {
			if u, isU := item.(Undefined); isU {
				return false, u.err()
			}
			return false, typeErrorf("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		if err := r.scan(len(cs)); err != nil {
			return false, err
		}
		return strings.Contains(cs, s), nil
	case *List:
		if err := r.spend(int64(len(c.Items))); err != nil {
			return false, err
		}
		for _, it := range c.Items {
			eq, err := r.equal(it, item, 0)
			if err != nil {
				return false, err
			}
			if eq {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		if _, err := hashKey(item); err != nil {
			return false, err
		}
		if err := r.size(item); err != nil {
			return false, err
		}
		_, ok := c.Get(item)
		return ok, nil
	case *Generator:
		for _, it := range c.take() {
			if eq, err := r.equal(it, item, 0); err != nil || eq {
				return eq, err
			}
		}
		return false, nil
	case Undefined:
		return false, nil
	}
	return false, typeErrorf("argument of type '%s' is not iterable", typeName(container))
}

// iterate returns what a for loop over v goes through.
func (r *renderer) iterate(v Value) ([]Value, error) {
	switch v := v.(type) {
	case *List:
		return v.Items, nil
	case *Dict:
		return v.keys, nil
	case string:
		return r.runes(v)
	case Markup:
		items, err := r.runes(string(v))
		for i, it := range items {
			items[i] = Markup(it.(string))
		}
		return items, err
	case *Generator:
		return v.take(), nil
	case Undefined:
		if v.kind == kindSecurity {
			return nil, v.err()
		}
		return nil, nil
	}
	return nil, typeErrorf("'%s' object is not iterable", typeName(v))
}

// runes splits a string into its characters, as iterating a str does.
func (r *renderer) runes(s string) ([]Value, error) {
	n := utf8.RuneCountInString(s)
	if err := r.allocItems(int64(n), itemBytes+4); err != nil {
		return nil, err
	}
	out := make([]Value, 0, n)
	for i, c := range s {
		out = append(out, s[i:i+utf8.RuneLen(c)])
	}
	return out, nil
}

// length is len(v).
func length(v Value) (int, error) {
	switch v := v.(type) {
	case string:
		return utf8.RuneCountInString(v), nil
	case Markup:
		return utf8.RuneCountInString(string(v)), nil
	case *List:
		return len(v.Items), nil
	case *Dict:
		return v.Len(), nil
	case Undefined:
		return 0, nil
	}
	return 0, typeErrorf("object of type '%s' has no len()", typeName(v))
}

// sliceIndices is Python's slice.indices: start, stop and step clamped
// to a sequence of length n.
func sliceIndices(start, stop, step Value, n int) (int, int, int, error) {
	get := func(v Value, def int) (int, bool, error) {
		if v == nil {
			return def, false, nil
		}
		i, _, isInt, ok := number(v)
		if !ok || !isInt {
			return 0, false, typeErrorf("slice indices must be integers or None or have an __index__ method")
		}
		if i > math.MaxInt32 {
			i = math.MaxInt32
		} else if i < -math.MaxInt32 {
			i = -math.MaxInt32
		}
		return int(i), true, nil
	}
	st, _, err := get(step, 1)
	if err != nil {
		return 0, 0, 0, err
	}
	if st == 0 {
		return 0, 0, 0, errorf(kindValue, "slice step cannot be zero")
	}
	lo, hi := 0, n
	if st < 0 {
		lo, hi = -1, n-1
	}
	clamp := func(v Value, def int) (int, error) {
		i, given, err := get(v, def)
		if err != nil || !given {
			return i, err
		}
		if i < 0 {
			i += n
			if i < lo {
				i = lo
			}
		} else if i > hi {
			i = hi
		}
		return i, nil
	}
	defStart, defStop := 0, n
	if st < 0 {
		defStart, defStop = n-1, -1
	}
	a, err := clamp(start, defStart)
	if err != nil {
		return 0, 0, 0, err
	}
	b, err := clamp(stop, defStop)
	return a, b, st, err
}

// slice is seq[start:stop:step] for strings, lists and tuples.
func (r *renderer) slice(obj, start, stop, step Value) (Value, error) {
	switch o := obj.(type) {
	case string, Markup:
		s, _ := isString(o)
		ascii := isASCII(s)
		var runes []rune
		n := len(s)
		if !ascii {
			runes = []rune(s)
			n = len(runes)
		}
		a, b, st, err := sliceIndices(start, stop, step, n)
		if err != nil {
			return nil, err
		}
		if err := r.alloc(int64(len(s))); err != nil {
			return nil, err
		}
		var out string
		if ascii && st == 1 {
			if a < b {
				out = s[a:b]
			}
		} else {
			var sb strings.Builder
			for i := a; (st > 0 && i < b) || (st < 0 && i > b); i += st {
				if ascii {
					sb.WriteByte(s[i])
				} else {
					sb.WriteRune(runes[i])
				}
			}
			out = sb.String()
		}
		if _, ok := o.(Markup); ok {
			return Markup(out), nil
		}
		return out, nil
	case *List:
		if !o.indexable() {
			break
		}
		a, b, st, err := sliceIndices(start, stop, step, len(o.Items))
		if err != nil {
			return nil, err
		}
		if err := r.allocItems(int64(len(o.Items)), itemBytes); err != nil {
			return nil, err
		}
		var items []Value
		for i := a; (st > 0 && i < b) || (st < 0 && i > b); i += st {
			items = append(items, o.Items[i])
		}
		kind := o.kind
		if kind == kindRange {
			kind = kindList
		}
		return &List{Items: items, kind: kind}, nil
	}
	return nil, typeErrorf("'%s' object is not subscriptable", typeName(obj))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// htmlEscape is markupsafe's escape.
func htmlEscape(s string) string {
	if !strings.ContainsAny(s, "&<>'\"") {
		return s
	}
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;", "\"", "&#34;").Replace(s)
}

// escapedLen is len(htmlEscape(s)), known before escaping.
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&', '\'', '"':
			n += 4
		case '<', '>':
			n += 3
		}
	}
	return n
}
