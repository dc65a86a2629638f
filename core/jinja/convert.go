package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// FromGo converts Go data to a Value: nil, bools, integers, floats and
// strings as themselves; slices as lists; maps with string keys as dicts
// (in sorted key order: a Go map has none, and a template that prints a
// dict's keys should print them the same way every time); json.RawMessage
// and json.Number as FromJSON reads them; Values as they are.
func FromGo(v any) (Value, error) { return fromGo(v, 0) }

func fromGo(v any, depth int) (Value, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("jinja: the value nests deeper than %d levels", maxValueDepth)
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string, Markup, *List, *Dict, *Namespace, Undefined:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case json.RawMessage:
		return FromJSON(x)
	case json.Number:
		return jsonNumber(string(x))
	case []Value:
		return NewList(x), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := NewDict()
		for _, k := range keys {
			val, err := fromGo(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			d.SetString(k, val)
		}
		return d, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return nil, fmt.Errorf("jinja: %d does not fit an int64", rv.Uint())
		}
		return int64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Slice, reflect.Array:
		items := make([]Value, rv.Len())
		for i := range items {
			it, err := fromGo(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			items[i] = it
		}
		return NewList(items), nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		m := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
		return fromGo(m, depth)
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return fromGo(rv.Elem().Interface(), depth)
	}
	return nil, fmt.Errorf("jinja: cannot convert %T to a template value", v)
}

// FromJSON decodes JSON into a Value as Python's json.loads does: objects
// become dicts in the order their keys appear (which tojson then
// reproduces), numbers without a fraction or exponent ints.
func FromJSON(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSON(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("jinja: JSON: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("jinja: JSON: data after the value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder, depth int) (Value, error) {
	if depth > maxValueDepth {
		return nil, fmt.Errorf("nests deeper than %d levels", maxValueDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '[':
			items := []Value{}
			for dec.More() {
				it, err := decodeJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				items = append(items, it)
			}
			_, err := dec.Token()
			return NewList(items), err
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				val, err := decodeJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.SetString(k, val)
			}
			_, err := dec.Token()
			return d, err
		}
		return nil, fmt.Errorf("unexpected %v", x)
	case json.Number:
		return jsonNumber(string(x))
	case string, bool, nil:
		return x, nil
	}
	return nil, fmt.Errorf("unexpected token %v", t)
}

// jsonNumber is how json.loads reads a number: an int unless it has a
// fraction or an exponent. Ints beyond int64 (Python's are unbounded)
// become floats.
func jsonNumber(s string) (Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !isRangeErr(err) {
		return nil, err
	}
	return f, nil
}
