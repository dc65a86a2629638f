package jinja

import "unicode"

// testFunc is a jinja2 test (x is name(args)).
type testFunc func(r *renderer, v Value, a *callArgs) (bool, error)

// tests are jinja2's builtin tests.
var tests map[string]testFunc

func init() {
	compareTest := func(op string) testFunc {
		return func(r *renderer, v Value, a *callArgs) (bool, error) {
			if len(a.pos) != 1 {
				return false, typeErrorf("the %s test takes exactly one argument", op)
			}
			return r.compare(op, v, a.pos[0])
		}
	}
	tests = map[string]testFunc{
		"boolean":  func(r *renderer, v Value, a *callArgs) (bool, error) { _, ok := v.(bool); return ok, nil },
		"callable": testCallable,
		"defined": func(r *renderer, v Value, a *callArgs) (bool, error) {
			_, undef := v.(Undefined)
			return !undef, nil
		},
		"undefined": func(r *renderer, v Value, a *callArgs) (bool, error) {
			_, undef := v.(Undefined)
			return undef, nil
		},
		"divisibleby": testDivisibleBy,
		"eq":          compareTest("=="),
		"equalto":     compareTest("=="),
		"==":          compareTest("=="),
		"ne":          compareTest("!="),
		"!=":          compareTest("!="),
		"lt":          compareTest("<"),
		"lessthan":    compareTest("<"),
		"<":           compareTest("<"),
		"le":          compareTest("<="),
		"<=":          compareTest("<="),
		"gt":          compareTest(">"),
		"greaterthan": compareTest(">"),
		">":           compareTest(">"),
		"ge":          compareTest(">="),
		">=":          compareTest(">="),
		"in": func(r *renderer, v Value, a *callArgs) (bool, error) {
			if len(a.pos) != 1 {
				return false, typeErrorf("the in test takes exactly one argument")
			}
			return r.contains(a.pos[0], v)
		},
		"escaped": func(r *renderer, v Value, a *callArgs) (bool, error) { _, ok := v.(Markup); return ok, nil },
		"even":    testParity(0),
		"odd":     testParity(1),
		"false":   func(r *renderer, v Value, a *callArgs) (bool, error) { return v == false, nil },
		"true":    func(r *renderer, v Value, a *callArgs) (bool, error) { return v == true, nil },
		"none":    func(r *renderer, v Value, a *callArgs) (bool, error) { return v == nil, nil },
		"float":   func(r *renderer, v Value, a *callArgs) (bool, error) { _, ok := v.(float64); return ok, nil },
		"integer": func(r *renderer, v Value, a *callArgs) (bool, error) { _, ok := v.(int64); return ok, nil },
		"number": func(r *renderer, v Value, a *callArgs) (bool, error) {
			_, _, _, ok := number(v)
			return ok, nil
		},
		"string": func(r *renderer, v Value, a *callArgs) (bool, error) { _, ok := isString(v); return ok, nil },
		"mapping": func(r *renderer, v Value, a *callArgs) (bool, error) {
			_, ok := v.(*Dict)
			return ok, nil
		},
		"iterable": func(r *renderer, v Value, a *callArgs) (bool, error) {
			switch v.(type) {
			case string, Markup, *List, *Dict, *Generator, Undefined:
				return true, nil
			}
			return false, nil
		},
		"sequence": func(r *renderer, v Value, a *callArgs) (bool, error) {
			switch x := v.(type) {
			case string, Markup, *Dict, Undefined:
				return true, nil
			case *List:
				return x.indexable(), nil
			}
			return false, nil
		},
		"sameas": func(r *renderer, v Value, a *callArgs) (bool, error) {
			if len(a.pos) != 1 {
				return false, typeErrorf("the sameas test takes exactly one argument")
			}
			return sameAs(v, a.pos[0]), nil
		},
		"lower": testCase(unicode.IsLower, unicode.IsUpper),
		"upper": testCase(unicode.IsUpper, unicode.IsLower),
		"filter": func(r *renderer, v Value, a *callArgs) (bool, error) {
			name, _ := v.(string)
			_, ok := filters[name]
			return ok, nil
		},
		"test": func(r *renderer, v Value, a *callArgs) (bool, error) {
			name, _ := v.(string)
			_, ok := tests[name]
			return ok, nil
		},
	}
}

func testCallable(r *renderer, v Value, a *callArgs) (bool, error) {
	switch x := v.(type) {
	case *macro, *builtin, *boundMethod:
		return true, nil
	case *loopContext:
		return x.node.recursive, nil
	}
	return false, nil
}

func testDivisibleBy(r *renderer, v Value, a *callArgs) (bool, error) {
	if len(a.pos) != 1 {
		return false, typeErrorf("the divisibleby test takes exactly one argument")
	}
	m, err := r.binary("%", v, a.pos[0])
	if err != nil {
		return false, err
	}
	eq, err := r.equal(m, int64(0), 0)
	return eq, err
}

func testParity(want int64) testFunc {
	return func(r *renderer, v Value, a *callArgs) (bool, error) {
		m, err := r.binary("%", v, int64(2))
		if err != nil {
			return false, err
		}
		return r.equal(m, want, 0)
	}
}

// testCase is lower/upper on str(v): some cased character, all of them
// in the wanted case.
func testCase(want, other func(rune) bool) testFunc {
	return func(r *renderer, v Value, a *callArgs) (bool, error) {
		s, err := r.toStr(v)
		if err != nil {
			return false, err
		}
		found := false
		for _, c := range s {
			if other(c) || unicode.IsTitle(c) {
				return false, nil
			}
			if want(c) {
				found = true
			}
		}
		return found, nil
	}
}

// sameAs approximates Python's "is": the same object for containers and
// callables, and for immutable scalars (which CPython often shares) equal
// values of the same type. An Undefined is never the same as anything.
func sameAs(a, b Value) bool {
	switch a.(type) {
	case Undefined, *boundMethod:
		return false
	}
	return a == b // every Value type is comparable
}

// isWordRune: what Python's \w matches.
func isWordRune(c rune) bool {
	return c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c) || unicode.IsNumber(c)
}
