package jsonstrict

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/lmstream/lmstream/core/status"
)

// Fields is a JSON object being read field by field. Request and config
// parsing take the fields they know; whatever is left is an error, so a
// misspelt option is reported instead of silently ignored.
//
// The whole document is checked by the strict scanner (scan.go) when it
// is parsed: malformed JSON, invalid UTF-8, lone surrogates, duplicate keys
// at any depth and trailing data are BadJSON errors before any field is
// read. Take then decodes one member with the same scanner, so a value of
// the wrong type (null included: no field takes null) is an InvalidRequest
// error naming the field, its byte offset and the JSON types.
type Fields struct {
	what string // "request", "config" or "settings", for messages
	data []byte
	m    map[string]member // not yet taken
	off  map[string]int    // every member's value offset, taken or not
}

// member is one top-level member: its key's offset and its value's bytes
// [start, end).
type member struct{ key, start, end int }

// ParseFields reads a JSON object. Anything else is a BadJSON error.
func ParseFields(data []byte, what string) (*Fields, error) {
	s := &scanner{data: data, what: what}
	if err := s.document(); err != nil {
		return nil, err
	}
	// The document is valid: walk the top-level object again to note
	// where each member's value lies.
	s.pos = 0
	s.ws()
	if c := data[s.pos]; c != '{' {
		return nil, status.Errorf(status.BadJSON, "%s: expected a JSON object, got %s", what, jsonKind(c))
	}
	f := &Fields{what: what, data: data, m: map[string]member{}, off: map[string]int{}}
	s.pos++
	for {
		s.ws()
		if data[s.pos] == '}' {
			return f, nil
		}
		if data[s.pos] == ',' {
			s.pos++
			s.ws()
		}
		keyAt := s.pos
		key, _ := s.str(true)
		s.ws()
		s.pos++ // ':'
		s.ws()
		start := s.pos
		if err := s.value(reflect.Value{}); err != nil {
			return nil, err // unreachable: the document was checked
		}
		f.m[key] = member{keyAt, start, s.pos}
		f.off[key] = start
		s.ws()
	}
}

// Has reports whether the field is present (and not yet taken).
func (f *Fields) Has(key string) bool {
	if recording.on.Load() {
		record(f.what, key)
	}
	_, ok := f.m[key]
	return ok
}

// Kind is the JSON type of a present field's value ("string", "array",
// ...), or "" when the field is absent or taken.
func (f *Fields) Kind(key string) string {
	if recording.on.Load() {
		record(f.what, key)
	}
	mb, ok := f.m[key]
	if !ok {
		return ""
	}
	return jsonKind(f.data[mb.start])
}

// Take decodes the field into dst (a pointer) and removes it. A missing
// field leaves dst unchanged and reports false. A value of the wrong type,
// null included, is an InvalidRequest error naming the field, the byte
// offset and the expected JSON type. dst may point to a string, bool,
// integer, float, slice, struct (members by json tag; unknown ones are
// errors), pointer (allocated when the field is present) or
// json.RawMessage.
func (f *Fields) Take(key string, dst any) (bool, error) {
	if recording.on.Load() {
		record(f.what, key)
	}
	mb, ok := f.m[key]
	if !ok {
		return false, nil
	}
	delete(f.m, key)
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return true, status.Errorf(status.Internal, "%s field %q: Take needs a non-nil pointer, got %T", f.what, key, dst)
	}
	s := &scanner{data: f.data[:mb.end], pos: mb.start, what: f.what, path: []pathSeg{{key: key, idx: -1}}}
	return true, s.value(v.Elem())
}

// Offset is the byte offset of the field's value in the document, taken or
// not; -1 when the document has no such field.
func (f *Fields) Offset(key string) int {
	if o, ok := f.off[key]; ok {
		return o
	}
	return -1
}

// Errorf is an InvalidRequest error about the field's value, naming it and
// its byte offset: `request field "top_k" must be ... (at byte 31)`.
func (f *Fields) Errorf(key, format string, args ...any) error {
	return status.Errorf(status.InvalidRequest, "%s field %q %s (at byte %d)", f.what, key, fmt.Sprintf(format, args...), f.Offset(key))
}

// Number is what TakeIn reads: Go's integer and float types.
type Number interface {
	~int | ~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// TakeIn takes a numeric field and checks it lies in [lo, hi], reporting
// the field, its offset and the range otherwise. A missing field leaves
// dst unchanged (its default is not checked).
func TakeIn[T Number](f *Fields, key string, dst *T, lo, hi T) (bool, error) {
	given, err := f.Take(key, dst)
	if err != nil || !given {
		return given, err
	}
	if v := *dst; !(v >= lo && v <= hi) {
		return true, f.Errorf(key, "must be in [%v, %v], got %v", lo, hi, v)
	}
	return true, nil
}

// Rest returns an error naming the fields nobody took, or nil.
func (f *Fields) Rest() error {
	if len(f.m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(f.m))
	for k := range f.m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return f.m[keys[i]].key < f.m[keys[j]].key })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%q (at byte %d)", k, f.m[k].key)
	}
	word := "field"
	if len(keys) > 1 {
		word = "fields"
	}
	return status.Errorf(status.InvalidRequest, "%s: unknown %s %s", f.what, word, strings.Join(parts, ", "))
}
