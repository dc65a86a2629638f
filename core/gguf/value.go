package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// ValueType is the type tag of a metadata value. The numbers are the
// format's and appear in files.
type ValueType uint32

const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64",
}

func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return "value_type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// width is the encoded size of a fixed-size type, 0 for strings and arrays.
func (t ValueType) width() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one element of this type can occupy inside
// an array: it is what bounds an array's claimed length by the bytes left.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8 // the length
	case TypeArray:
		return 12 // element type and count
	}
	return t.width()
}

func (t ValueType) isInt() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

// Value is one metadata value: a type tag and its payload. The zero Value
// is a uint8 0. Values are immutable; they share no memory with the file
// they were parsed from.
type Value struct {
	typ ValueType
	// bits holds scalars: integers (signed ones sign-extended to 64 bits),
	// bools as 0 or 1, floats as the IEEE bits of their own width so that
	// NaN payloads survive a round trip.
	bits uint64
	str  string
	arr  *array
}

// array is an array payload. Exactly one of raw, strs and vals is used,
// chosen by elem, so that a vocabulary of 49,152 strings is one []string
// over one shared backing string rather than 49,152 Values.
type array struct {
	elem ValueType
	n    int
	raw  []byte   // fixed-size elements, little-endian as in the file
	strs []string // TypeString elements
	vals []Value  // TypeArray elements, each itself an array
}

// KV is one metadata pair.
type KV struct {
	Key   string
	Value Value
}

// Type is the value's type tag.
func (v Value) Type() ValueType { return v.typ }

// ElemType is an array's element type (meaningless for other values).
func (v Value) ElemType() ValueType {
	if v.arr == nil {
		return 0
	}
	return v.arr.elem
}

// Len is an array's element count, 0 for other values.
func (v Value) Len() int {
	if v.arr == nil {
		return 0
	}
	return v.arr.n
}

// Index returns an array's i-th element. Like a slice index it panics when
// v is not an array or i is out of range.
func (v Value) Index(i int) Value {
	a := v.arr
	if a == nil {
		panic("gguf: Index of a " + v.typ.String() + " value")
	}
	if i < 0 || i >= a.n {
		panic(fmt.Sprintf("gguf: index %d out of range [0:%d]", i, a.n))
	}
	switch a.elem {
	case TypeString:
		return Value{typ: TypeString, str: a.strs[i]}
	case TypeArray:
		return a.vals[i]
	}
	w := a.elem.width()
	return scalarFromBytes(a.elem, a.raw[i*w:(i+1)*w])
}

// AsString returns a string value. Strings are raw bytes: some tokenizers'
// tokens are not valid UTF-8, so no encoding is enforced.
func (v Value) AsString() (string, bool) {
	return v.str, v.typ == TypeString
}

// AsBool returns a bool value.
func (v Value) AsBool() (bool, bool) {
	return v.bits != 0, v.typ == TypeBool
}

// AsInt64 returns a value of any integer type that fits in an int64.
func (v Value) AsInt64() (int64, bool) {
	if !v.typ.isInt() || (v.typ == TypeUint64 && v.bits > math.MaxInt64) {
		return 0, false
	}
	return int64(v.bits), true
}

// AsUint64 returns a value of any integer type that is not negative.
func (v Value) AsUint64() (uint64, bool) {
	if !v.typ.isInt() || (v.typ.isSigned() && int64(v.bits) < 0) {
		return 0, false
	}
	return v.bits, true
}

// AsFloat64 returns a float32 or float64 value.
func (v Value) AsFloat64() (float64, bool) {
	switch v.typ {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	return 0, false
}

// AsStrings returns a copy of an array of strings. The copy is one
// allocation: the strings themselves are shared, not duplicated.
func (v Value) AsStrings() ([]string, bool) {
	if v.arr == nil || v.arr.elem != TypeString {
		return nil, false
	}
	return append(make([]string, 0, v.arr.n), v.arr.strs...), true
}

// AsFloat32s returns an array of float32 (or of float64, converted).
func (v Value) AsFloat32s() ([]float32, bool) {
	a := v.arr
	if a == nil {
		return nil, false
	}
	out := make([]float32, a.n)
	switch a.elem {
	case TypeFloat32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(a.raw[4*i:]))
		}
	case TypeFloat64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(a.raw[8*i:])))
		}
	default:
		return nil, false
	}
	return out, true
}

// AsInt32s returns an array of any integer type whose every element fits
// in an int32.
func (v Value) AsInt32s() ([]int32, bool) {
	a := v.arr
	if a == nil || !a.elem.isInt() {
		return nil, false
	}
	out := make([]int32, a.n)
	w := a.elem.width()
	for i := range out {
		e := scalarFromBytes(a.elem, a.raw[i*w:(i+1)*w])
		x, ok := e.AsInt64()
		if !ok || x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
		out[i] = int32(x)
	}
	return out, true
}

// Equal reports whether v and w have the same type and payload. Floats
// compare by their bits, so a NaN equals itself.
func (v Value) Equal(w Value) bool {
	if v.typ != w.typ || v.bits != w.bits || v.str != w.str {
		return false
	}
	if v.arr == nil || w.arr == nil {
		return v.arr == w.arr
	}
	a, b := v.arr, w.arr
	if a.elem != b.elem || a.n != b.n {
		return false
	}
	switch a.elem {
	case TypeString:
		for i := range a.strs {
			if a.strs[i] != b.strs[i] {
				return false
			}
		}
	case TypeArray:
		for i := range a.vals {
			if !a.vals[i].Equal(b.vals[i]) {
				return false
			}
		}
	default:
		return bytes.Equal(a.raw, b.raw)
	}
	return true
}

// describe names v's type, arrays with their element type, for errors.
func (v Value) describe() string {
	if v.typ == TypeArray && v.arr != nil {
		return "array of " + v.arr.elem.String()
	}
	return v.typ.String()
}

// String formats v for people: strings quoted, arrays shortened to their
// first elements (32 scalars in all, however deeply nested).
func (v Value) String() string {
	var sb strings.Builder
	budget := 32
	v.format(&sb, &budget)
	return sb.String()
}

func (v Value) format(sb *strings.Builder, budget *int) {
	*budget--
	switch v.typ {
	case TypeString:
		sb.WriteString(quoteShort(v.str))
	case TypeBool:
		sb.WriteString(strconv.FormatBool(v.bits != 0))
	case TypeFloat32:
		sb.WriteString(strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32))
	case TypeFloat64:
		sb.WriteString(strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64))
	case TypeArray:
		sb.WriteByte('[')
		const show = 8
		shown := 0
		for ; shown < min(v.Len(), show) && *budget > 0; shown++ {
			if shown > 0 {
				sb.WriteByte(' ')
			}
			v.Index(shown).format(sb, budget)
		}
		if shown < v.Len() {
			if shown > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(sb, "... (%d %s)", v.arr.n, v.arr.elem)
		}
		sb.WriteByte(']')
	default:
		if v.typ.isSigned() {
			sb.WriteString(strconv.FormatInt(int64(v.bits), 10))
		} else {
			sb.WriteString(strconv.FormatUint(v.bits, 10))
		}
	}
}

// scalarFromBytes decodes a fixed-size value; b holds exactly t.width() bytes.
func scalarFromBytes(t ValueType, b []byte) Value {
	v := Value{typ: t}
	switch t {
	case TypeUint8, TypeBool:
		v.bits = uint64(b[0])
	case TypeInt8:
		v.bits = uint64(int64(int8(b[0])))
	case TypeUint16:
		v.bits = uint64(binary.LittleEndian.Uint16(b))
	case TypeInt16:
		v.bits = uint64(int64(int16(binary.LittleEndian.Uint16(b))))
	case TypeUint32, TypeFloat32:
		v.bits = uint64(binary.LittleEndian.Uint32(b))
	case TypeInt32:
		v.bits = uint64(int64(int32(binary.LittleEndian.Uint32(b))))
	case TypeUint64, TypeInt64, TypeFloat64:
		v.bits = binary.LittleEndian.Uint64(b)
	}
	return v
}

// appendScalar encodes a fixed-size value of type t from its bits.
func appendScalar(b []byte, t ValueType, bits uint64) []byte {
	switch t.width() {
	case 1:
		return append(b, byte(bits))
	case 2:
		return binary.LittleEndian.AppendUint16(b, uint16(bits))
	case 4:
		return binary.LittleEndian.AppendUint32(b, uint32(bits))
	}
	return binary.LittleEndian.AppendUint64(b, bits)
}

var valueReflectType = reflect.TypeFor[Value]()

// ValueOf converts a Go value to a Value: the sized integer types, float32,
// float64, bool, string, a Value, and slices or arrays of any of these,
// nested to any depth ([][]int32 becomes an array of arrays of int32).
// Named types convert by their underlying kind. int and uint are refused
// because their width, which is part of the file, would be the machine's.
func ValueOf(x any) (Value, error) {
	if x == nil {
		return Value{}, fmt.Errorf("gguf: cannot store nil")
	}
	return valueOf(reflect.ValueOf(x))
}

func valueOf(rv reflect.Value) (Value, error) {
	if rv.Type() == valueReflectType {
		return rv.Interface().(Value), nil
	}
	switch rv.Kind() {
	case reflect.String:
		return Value{typ: TypeString, str: rv.String()}, nil
	case reflect.Slice, reflect.Array:
		return sliceValue(rv)
	}
	t, err := kindType(rv.Type())
	if err != nil {
		return Value{}, err
	}
	return Value{typ: t, bits: scalarBits(rv)}, nil
}

// kindType maps a Go type to the value type it is stored as.
func kindType(rt reflect.Type) (ValueType, error) {
	switch rt.Kind() {
	case reflect.Uint8:
		return TypeUint8, nil
	case reflect.Int8:
		return TypeInt8, nil
	case reflect.Uint16:
		return TypeUint16, nil
	case reflect.Int16:
		return TypeInt16, nil
	case reflect.Uint32:
		return TypeUint32, nil
	case reflect.Int32:
		return TypeInt32, nil
	case reflect.Uint64:
		return TypeUint64, nil
	case reflect.Int64:
		return TypeInt64, nil
	case reflect.Float32:
		return TypeFloat32, nil
	case reflect.Float64:
		return TypeFloat64, nil
	case reflect.Bool:
		return TypeBool, nil
	case reflect.String:
		return TypeString, nil
	case reflect.Slice, reflect.Array:
		return TypeArray, nil
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		return 0, fmt.Errorf("gguf: cannot store %s: its width is the machine's; convert to a sized type such as uint32 or int64", rt)
	}
	return 0, fmt.Errorf("gguf: cannot store a value of type %s", rt)
}

func scalarBits(rv reflect.Value) uint64 {
	switch rv.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return uint64(rv.Int())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint()
	case reflect.Float32:
		return uint64(math.Float32bits(float32(rv.Float())))
	case reflect.Float64:
		return math.Float64bits(rv.Float())
	case reflect.Bool:
		if rv.Bool() {
			return 1
		}
	}
	return 0
}

func sliceValue(rv reflect.Value) (Value, error) {
	n := rv.Len()
	if rv.Type().Elem() == valueReflectType {
		vals := make([]Value, n)
		for i := range vals {
			vals[i] = rv.Index(i).Interface().(Value)
		}
		if n == 0 {
			return Value{}, fmt.Errorf("gguf: an empty []Value has no element type; use ArrayOf")
		}
		return ArrayOf(vals[0].typ, vals...)
	}
	elem, err := kindType(rv.Type().Elem())
	if err != nil {
		return Value{}, err
	}
	a := &array{elem: elem, n: n}
	switch elem {
	case TypeString:
		a.strs = make([]string, n)
		for i := range a.strs {
			a.strs[i] = rv.Index(i).String()
		}
	case TypeArray:
		a.vals = make([]Value, n)
		for i := range a.vals {
			if a.vals[i], err = sliceValue(rv.Index(i)); err != nil {
				return Value{}, err
			}
		}
	default:
		a.raw = make([]byte, 0, n*elem.width())
		for i := range n {
			a.raw = appendScalar(a.raw, elem, scalarBits(rv.Index(i)))
		}
	}
	return Value{typ: TypeArray, arr: a}, nil
}

// ArrayOf builds an array whose elements all have type elem; it is how to
// make an empty array of a given type, or an array of arrays from Values.
func ArrayOf(elem ValueType, elems ...Value) (Value, error) {
	if !elem.valid() {
		return Value{}, fmt.Errorf("gguf: unknown element type %d", uint32(elem))
	}
	a := &array{elem: elem, n: len(elems)}
	switch elem {
	case TypeString:
		a.strs = make([]string, len(elems))
	case TypeArray:
		a.vals = make([]Value, len(elems))
	default:
		a.raw = make([]byte, 0, len(elems)*elem.width())
	}
	for i, e := range elems {
		if e.typ != elem {
			return Value{}, fmt.Errorf("gguf: element %d of an array of %s is a %s", i, elem, e.typ)
		}
		switch elem {
		case TypeString:
			a.strs[i] = e.str
		case TypeArray:
			a.vals[i] = e
		default:
			a.raw = appendScalar(a.raw, elem, e.bits)
		}
	}
	return Value{typ: TypeArray, arr: a}, nil
}
