package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/lmstream/lmstream/core/status"
)

// Fields is a JSON object being read field by field. Request and config
// parsing take the fields they know; whatever is left is an error, so a
// misspelt option is reported instead of silently ignored.
type Fields struct {
	what string // "request" or "config", for messages
	m    map[string]json.RawMessage
}

// ParseFields reads a JSON object. Anything else is a BadJSON error.
func ParseFields(data []byte, what string) (*Fields, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, status.Errorf(status.BadJSON, "%s: empty JSON", what)
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, status.Errorf(status.BadJSON, "%s: expected a JSON object, got %s", what, te.Value)
		}
		return nil, status.Errorf(status.BadJSON, "%s: %v", what, err)
	}
	if m == nil {
		return nil, status.Errorf(status.BadJSON, "%s: expected a JSON object, got null", what)
	}
	if dec.More() {
		return nil, status.Errorf(status.BadJSON, "%s: unexpected data after the JSON object", what)
	}
	return &Fields{what: what, m: m}, nil
}

// Has reports whether the field is present (and not yet taken).
func (f *Fields) Has(key string) bool { _, ok := f.m[key]; return ok }

// Take decodes the field into dst and removes it. A missing field leaves dst
// unchanged and reports false. A value of the wrong type is an
// InvalidRequest error naming the field and the expected type.
func (f *Fields) Take(key string, dst any) (bool, error) {
	raw, ok := f.m[key]
	if !ok {
		return false, nil
	}
	delete(f.m, key)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return true, f.typeError(key, raw, dst, err)
	}
	return true, nil
}

func (f *Fields) typeError(key string, raw json.RawMessage, dst any, err error) error {
	want := describeType(dst)
	got := strings.TrimSpace(string(raw))
	if len(got) > 40 {
		got = got[:40] + "…"
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return status.Errorf(status.InvalidRequest, "%s field %q: %s.%s must be %s, got %s", f.what, key, key, te.Field, describeGoType(te.Type.String()), te.Value)
	}
	if strings.Contains(err.Error(), "unknown field") {
		return status.Errorf(status.InvalidRequest, "%s field %q: %v", f.what, key, strings.TrimPrefix(err.Error(), "json: "))
	}
	return status.Errorf(status.InvalidRequest, "%s field %q must be %s, got %s", f.what, key, want, got)
}

func describeType(dst any) string { return describeGoType(fmt.Sprintf("%T", dst)) }

func describeGoType(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case strings.HasPrefix(t, "[][][]int"):
		return "an array of arrays of arrays of integers"
	case strings.HasPrefix(t, "[][]int"):
		return "an array of arrays of integers"
	case strings.HasPrefix(t, "[]int"), strings.HasPrefix(t, "[]uint"):
		return "an array of integers"
	case t == "[]string":
		return "an array of strings"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	}
	return "of type " + t
}

// Rest returns an error naming the fields nobody took, or nil.
func (f *Fields) Rest() error {
	if len(f.m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(f.m))
	for k := range f.m {
		keys = append(keys, fmt.Sprintf("%q", k))
	}
	sort.Strings(keys)
	return status.Errorf(status.InvalidRequest, "%s: unknown field %s", f.what, strings.Join(keys, ", "))
}
