package jinja

import (
	"math"
	"strconv"
)

// Value is a template value, modelled on the Python objects jinja2 works
// with: nil (None), bool, int64 (int), float64 (float), string (str),
// Markup, *List (list and tuple), *Dict (dict, in insertion order),
// *Namespace, Undefined, and the callables and iterators a render makes
// (macros, builtins, bound methods, loop, generators). FromGo and
// FromJSON make Values from Go data.
type Value = any

// Markup is jinja2's Markup: a string marked safe (| safe). Adding a
// plain string to it HTML-escapes that string, as markupsafe does.
type Markup string

// Undefined is what a missing name, key, attribute or element evaluates
// to: jinja2's default Undefined. It prints as "" and is false and empty,
// and any other use (an attribute of it, arithmetic, a call) fails with
// the message it carries.
type Undefined struct {
	msg  string // the error its use raises
	kind string // kindUndefined, or kindSecurity for an unsafe attribute
}

func undefinedName(name string) Undefined {
	return Undefined{msg: "'" + name + "' is undefined", kind: kindUndefined}
}

func undefinedAttr(obj Value, name string) Undefined {
	return Undefined{msg: objectTypeRepr(obj) + " has no attribute '" + name + "'", kind: kindUndefined}
}

func undefinedItem(obj Value, key Value) Undefined {
	if s, ok := key.(string); ok {
		return Undefined{msg: objectTypeRepr(obj) + " has no attribute " + pyReprString(s), kind: kindUndefined}
	}
	return Undefined{msg: objectTypeRepr(obj) + " has no element " + scalarRepr(key), kind: kindUndefined}
}

func unsafeAttr(obj Value, name string) Undefined {
	return Undefined{msg: "access to attribute '" + name + "' of '" + typeName(obj) + "' object is unsafe.", kind: kindSecurity}
}

func (u Undefined) err() *Error {
	k := u.kind
	if k == "" {
		k = kindUndefined
	}
	msg := u.msg
	if msg == "" {
		msg = "value is undefined"
	}
	return &Error{Kind: k, Msg: msg}
}

// objectTypeRepr is how jinja2's Undefined names the object a lookup
// failed on: 'None', or "'dict object'".
func objectTypeRepr(v Value) string {
	if v == nil {
		return "'None'"
	}
	return "'" + typeName(v) + " object'"
}

// List is a Python list or tuple (immutable here, as in the sandbox
// apply_chat_template renders in), or a view that iterates like one
// (dict.items(), range()).
type List struct {
	Items []Value
	kind  listKind
	rng   [3]int64 // a range's start, stop, step
}

type listKind uint8

const (
	kindList listKind = iota
	kindTuple
	kindDictItems
	kindDictKeys
	kindDictValues
	kindRange
)

// NewList makes a list of items (not copied).
func NewList(items []Value) *List { return &List{Items: items} }

func newTuple(items ...Value) *List { return &List{Items: items, kind: kindTuple} }

// indexable: a list, a tuple or a range answers [i]; dict views do not.
func (l *List) indexable() bool { return l.kind <= kindTuple || l.kind == kindRange }

// Dict is a Python dict: keys in insertion order. Keys are hashable
// values (None, bool, numbers, strings, tuples of those); True and 1 are
// the same key, as in Python.
type Dict struct {
	keys  []Value
	vals  []Value
	index map[hkey]int // built once the dict outgrows a linear scan
	hks   []hkey
}

// hkey is a key's identity: equal keys (1, 1.0, True) have equal hkeys.
type hkey struct {
	kind byte
	s    string
	n    int64
	f    float64
}

const dictScan = 8 // dicts up to this size look keys up by scanning

// NewDict makes an empty dict.
func NewDict() *Dict { return &Dict{} }

func hashKey(k Value) (hkey, error) { return hashKeyAt(k, 0) }

func hashKeyAt(k Value, depth int) (hkey, error) {
	if depth > maxValueDepth {
		return hkey{}, tooDeep()
	}
	switch k := k.(type) {
	case nil:
		return hkey{kind: 'N'}, nil
	case bool:
		if k {
			return hkey{kind: 'i', n: 1}, nil
		}
		return hkey{kind: 'i'}, nil
	case int64:
		return hkey{kind: 'i', n: k}, nil
	case float64:
		if k == math.Trunc(k) && math.Abs(k) < 1<<62 {
			return hkey{kind: 'i', n: int64(k)}, nil
		}
		return hkey{kind: 'f', f: k}, nil
	case string:
		return hkey{kind: 's', s: k}, nil
	case Markup:
		return hkey{kind: 's', s: string(k)}, nil
	case *List:
		if k.kind == kindTuple {
			s := ""
			for _, it := range k.Items {
				h, err := hashKeyAt(it, depth+1)
				if err != nil {
					return hkey{}, err
				}
				s += string(h.kind) + h.s + strconv.FormatInt(h.n, 10) + strconv.FormatFloat(h.f, 'g', -1, 64) + "\x00"
			}
			return hkey{kind: 't', s: s}, nil
		}
	}
	return hkey{}, typeErrorf("unhashable type: '%s'", typeName(k))
}

// Len is the number of entries.
func (d *Dict) Len() int { return len(d.keys) }

func (d *Dict) find(h hkey) int {
	if d.index != nil {
		if i, ok := d.index[h]; ok {
			return i
		}
		return -1
	}
	for i := range d.hks {
		if d.hks[i] == h {
			return i
		}
	}
	return -1
}

// Get looks a key up.
func (d *Dict) Get(k Value) (Value, bool) {
	h, err := hashKey(k)
	if err != nil {
		return nil, false
	}
	if i := d.find(h); i >= 0 {
		return d.vals[i], true
	}
	return nil, false
}

// Set adds a key or replaces its value (keeping its place and its first
// spelling, as Python does).
func (d *Dict) Set(k, v Value) error {
	h, err := hashKey(k)
	if err != nil {
		return err
	}
	if i := d.find(h); i >= 0 {
		d.vals[i] = v
		return nil
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	d.hks = append(d.hks, h)
	if d.index != nil {
		d.index[h] = len(d.keys) - 1
	} else if len(d.keys) > dictScan {
		d.index = make(map[hkey]int, len(d.keys))
		for i, hk := range d.hks {
			d.index[hk] = i
		}
	}
	return nil
}

// SetString is Set with a string key, which cannot fail.
func (d *Dict) SetString(k string, v Value) { _ = d.Set(k, v) }

// Keys are the keys in order (not a copy).
func (d *Dict) Keys() []Value { return d.keys }

// Values are the values in the keys' order (not a copy).
func (d *Dict) Values() []Value { return d.vals }

// Namespace is what namespace() returns: the one object a template may
// change ({% set ns.attr = value %}), which is how values escape a loop.
type Namespace struct{ attrs *Dict }

// Generator is the lazy sequence Python's map, select and friends return:
// here computed at once, but like the generator it iterates only once,
// has no length and is not JSON.
type Generator struct {
	items []Value
	name  string // for its repr
	used  bool
}

func (g *Generator) take() []Value {
	if g.used {
		return nil
	}
	g.used = true
	return g.items
}

// typeName is the Python type name of a value, for messages.
func typeName(v Value) string {
	switch v := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case Markup:
		return "Markup"
	case *List:
		switch v.kind {
		case kindTuple:
			return "tuple"
		case kindDictItems:
			return "dict_items"
		case kindDictKeys:
			return "dict_keys"
		case kindDictValues:
			return "dict_values"
		case kindRange:
			return "range"
		}
		return "list"
	case *Dict:
		return "dict"
	case *Namespace:
		return "Namespace"
	case Undefined:
		return "Undefined"
	case *Generator:
		return "generator"
	case *macro:
		return "Macro"
	case *loopContext:
		return "LoopContext"
	case *builtin, *boundMethod:
		return "builtin_function_or_method"
	}
	return "object"
}
