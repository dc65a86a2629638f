package grammar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// SchemaError is a JSON schema the converter cannot express, naming the
// construct and where it is (a JSON pointer into the schema).
type SchemaError struct {
	Path string // "#/properties/age"
	Msg  string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("json schema at %s: %s", e.Path, e.Msg)
}

// The grammar's shared rules: JSON whitespace (bounded, so a model cannot
// fill its budget with blanks), strings, numbers and any JSON value.
const jsonCommon = `ws ::= "" | " " | "\n" [ \t]{0,20}
json-char ::= [^"\\\x00-\x1F\x7F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
json-string ::= "\"" json-char* "\"" ws
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? ws
json-integer ::= json-int ws
json-boolean ::= ("true" | "false") ws
json-null ::= "null" ws
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-string ":" ws json-value ("," ws json-string ":" ws json-value)*)? "}" ws
json-array ::= "[" ws (json-value ("," ws json-value)*)? "]" ws
`

// JSONObject is the grammar of any JSON object (response_format
// {"type": "json_object"}).
func JSONObject() *Grammar {
	g, err := Parse("root ::= json-object\n" + jsonCommon)
	if err != nil {
		panic(err) // the text is a constant
	}
	return g
}

// FromSchema compiles a JSON schema into a grammar of the JSON texts that
// validate against it. Supported: "type" (string, number, integer,
// boolean, null, object, array, or a list of them), "properties" with
// "required" (properties in their declared order, optional ones
// omissible), "additionalProperties" as a schema for objects without
// properties, "items" with "minItems"/"maxItems", "enum", "const",
// "anyOf"/"oneOf", local "$ref" ("#/$defs/..", "#/definitions/.."),
// strings with "minLength"/"maxLength", "pattern" (a regular expression
// without lookaround or backreferences) and "format" (date, time,
// date-time, uuid). Annotations (title, description, ...) are ignored.
// Anything else is a *SchemaError naming the keyword.
func FromSchema(schema []byte) (*Grammar, error) {
	return FromSchemaContext(context.Background(), schema)
}

// FromSchemaContext is FromSchema within MaxCompileSteps and
// MaxCompileBytes, stopped (a *CompileError wrapping ctx's error) soon
// after ctx is done: a request's schema is compiled while its client
// waits, and one that leaves must not leave the work running.
func FromSchemaContext(ctx context.Context, schema []byte) (*Grammar, error) {
	b := newBudget(ctx)
	v, err := parseSchema(b, schema)
	if err != nil {
		return nil, err
	}
	c := newConv(b)
	name, err := c.convert(v, 0)
	if err != nil {
		return nil, err
	}
	head := "root ::= " + name + "\n"
	if b := c.size(head); b > MaxGrammarBytes {
		return nil, &SchemaError{Path: "#", Msg: fmt.Sprintf("the schema converts to a grammar of %d bytes; at most %d are allowed", b, MaxGrammarBytes)}
	}
	g, err := c.compile(head)
	if err != nil {
		var le *LimitError
		var ce *CompileError
		if errors.As(err, &ce) {
			return nil, err // stopped, or over the whole compile's budget: not the schema's fault alone
		}
		if errors.As(err, &le) {
			// Said of the schema: its rules' names mean nothing to
			// whoever wrote it.
			return nil, &SchemaError{Path: c.originOf(le.Rule).path, Msg: "cannot be followed: " + le.Msg}
		}
		return nil, &SchemaError{Path: "#", Msg: fmt.Sprintf("the converted grammar does not compile: %v", err)}
	}
	return g, nil
}

// parseSchema reads a schema's JSON, keeping its objects' key order.
func parseSchema(b *budget, schema []byte) (any, error) {
	if err := b.alloc(2 * len(schema)); err != nil { // the decoder's buffer and the values read
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	v, err := readOrdered(dec, 0, b)
	if err != nil {
		var ce *CompileError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, &SchemaError{Path: "#", Msg: fmt.Sprintf("not JSON: %v", err)}
	}
	return v, nil
}

// size is the length in bytes of the grammar compile(head) would parse,
// known before it is built.
func (c *conv) size(head string) int {
	n := len(head) + len(jsonCommon)
	for k, v := range c.rules {
		n += len(k) + len(" ::= \n") + len(v)
	}
	return n
}

// compile parses head (the rules that use the converted schemas, root
// among them), the converted rules and jsonCommon as one grammar. Its
// errors are Parse's: each caller says them of what it was given.
func (c *conv) compile(head string) (*Grammar, error) {
	var b strings.Builder
	b.WriteString(head)
	keys := make([]string, 0, len(c.rules))
	for k := range c.rules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s ::= %s\n", k, c.rules[k])
	}
	b.WriteString(jsonCommon)
	return parse(c.b, b.String())
}

// object is a JSON object with its keys in document order (the order
// properties are generated in).
type object struct {
	keys []string
	vals map[string]any
}

func readOrdered(dec *json.Decoder, depth int, b *budget) (any, error) {
	if err := b.step(1); err != nil {
		return nil, err
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if _, open := t.(json.Delim); open && depth >= MaxSchemaDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", MaxSchemaDepth)
	}
	switch d := t.(type) {
	case json.Delim:
		switch d {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := readOrdered(dec, depth+1, b)
				if err != nil {
					return nil, err
				}
				if _, dup := o.vals[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.vals[k] = v
			}
			_, err := dec.Token()
			return o, err
		case '[':
			var a []any
			for dec.More() {
				v, err := readOrdered(dec, depth+1, b)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
	}
	return t, nil
}

// marshal writes a value from readOrdered back as compact JSON.
func marshal(v any) string {
	switch x := v.(type) {
	case *object:
		var b strings.Builder
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			b.WriteString(marshal(x.vals[k]))
		}
		b.WriteByte('}')
		return b.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = marshal(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case nil:
		return "null"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// conv converts JSON schemas into GBNF rules. Several schemas (the
// parameters of several tools) may be converted into one rule set: rule
// names are numbered across all of them, and each schema's references
// resolve within it, so two schemas' rules never collide.
type conv struct {
	rules map[string]string // rule name → GBNF alternatives
	paths map[string]origin // rule name → the schema it is for
	n     int

	// Of the schema being converted:
	id    int               // which of the rule set's schemas (origin.schema)
	root  any               // the whole schema, which "$ref"s point into
	refs  map[string]string // $ref target → its rule
	depth int               // schemas being converted inside one another

	b       *budget // the compile's steps, bytes and context
	built   int     // bytes of the rules made so far (the grammar's size, nearly)
	counted int     // of them, those counted in b already
}

// origin is the schema a rule was made for: which of the converted
// schemas, and where in it (a JSON pointer).
type origin struct {
	schema int // -1: no schema's (a rule around them)
	path   string
}

func newConv(b *budget) *conv {
	return &conv{rules: map[string]string{}, paths: map[string]origin{}, b: b}
}

// oversize is the error of a schema whose rules pass MaxGrammarBytes
// while it converts.
func (c *conv) oversize(path string) error {
	with := ""
	if c.id > 0 {
		with = fmt.Sprintf(" (with the %d schemas before it)", c.id)
	}
	return &SchemaError{Path: path, Msg: fmt.Sprintf("the schema converts%s to a grammar of more than %d bytes, the most allowed", with, MaxGrammarBytes)}
}

// setRule sets a rule's body, counting its bytes: a schema is refused as
// soon as its rules outgrow MaxGrammarBytes, not after all are made.
func (c *conv) setRule(name, body string) {
	c.rules[name] = body
	c.built += len(name) + len(" ::= \n") + len(body)
}

// convert adds the rules of schema v (from parseSchema), the id-th schema
// of the rule set, and returns the GBNF expression of the values valid
// against it.
func (c *conv) convert(v any, id int) (string, error) {
	c.id, c.root, c.refs = id, v, map[string]string{}
	return c.schema(v, "#")
}

// MaxSchemaDepth bounds how deeply a schema's JSON nests, and how many
// schemas (through "$ref" too) are converted inside one another: both
// recurse. The runtime reads request JSON to 64 levels, so a schema
// within a request never nests this deep.
const MaxSchemaDepth = 128

// newRule names a fresh rule for the schema at path.
func (c *conv) newRule(path, body string) string {
	c.n++
	name := fmt.Sprintf("s%d", c.n)
	c.setRule(name, body)
	c.paths[name] = origin{c.id, path}
	return name
}

// originOf is the schema a rule of the converted grammar came from: its
// own, or that of the rule a parser helper ("s3-2") was made inside.
func (c *conv) originOf(rule string) origin {
	for {
		if o, ok := c.paths[rule]; ok {
			return o
		}
		i := strings.LastIndexByte(rule, '-')
		if i < 0 {
			return origin{schema: -1, path: "#"}
		}
		rule = rule[:i]
	}
}

// annotations are keywords that do not constrain the value.
var annotations = map[string]bool{
	"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "strict": true,
}

// gbnfLiteral is s as a GBNF string literal matching exactly its bytes.
func gbnfLiteral(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func num(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// count reads a non-negative integer keyword.
func count(o *object, key, path string) (int, bool, error) {
	v, ok := o.vals[key]
	if !ok {
		return 0, false, nil
	}
	f, isNum := num(v)
	if !isNum || f < 0 || f != math.Trunc(f) || f > MaxRepeat {
		return 0, false, &SchemaError{Path: path, Msg: fmt.Sprintf("%q must be an integer in [0, %d]", key, MaxRepeat)}
	}
	return int(f), true, nil
}

// schema returns a GBNF expression (a rule name or a literal) for the
// values valid against s.
func (c *conv) schema(s any, path string) (string, error) {
	if c.depth >= MaxSchemaDepth {
		return "", &SchemaError{Path: path, Msg: fmt.Sprintf("schemas nest (through $ref too) deeper than %d", MaxSchemaDepth)}
	}
	if c.built > MaxGrammarBytes {
		return "", c.oversize(path)
	}
	if err := c.b.step(1); err != nil {
		return "", err
	}
	if err := c.b.alloc(c.built - c.counted); err != nil {
		return "", err
	}
	c.counted = c.built
	c.depth++
	defer func() { c.depth-- }()
	switch x := s.(type) {
	case bool:
		if x {
			return "json-value", nil
		}
		return "", &SchemaError{Path: path, Msg: "the schema false admits no value"}
	case *object:
		return c.object(x, path)
	}
	return "", &SchemaError{Path: path, Msg: fmt.Sprintf("a schema must be an object or a boolean, got %s", marshal(s))}
}

func (c *conv) object(o *object, path string) (string, error) {
	for _, k := range o.keys {
		switch k {
		case "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
			"enum", "const", "anyOf", "oneOf", "$ref", "minLength", "maxLength", "pattern", "format":
		default:
			if !annotations[k] {
				return "", &SchemaError{Path: path, Msg: fmt.Sprintf("keyword %q is not supported", k)}
			}
		}
	}
	if ref, ok := o.vals["$ref"]; ok {
		return c.ref(ref, path)
	}
	if v, ok := o.vals["const"]; ok {
		return gbnfLiteral(marshal(v)) + " ws", nil
	}
	if v, ok := o.vals["enum"]; ok {
		list, isList := v.([]any)
		if !isList || len(list) == 0 {
			return "", &SchemaError{Path: path + "/enum", Msg: "enum must be a non-empty array"}
		}
		alts := make([]string, len(list))
		for i, e := range list {
			alts[i] = gbnfLiteral(marshal(e))
		}
		return c.newRule(path, "("+strings.Join(alts, " | ")+") ws"), nil
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		v, ok := o.vals[k]
		if !ok {
			continue
		}
		list, isList := v.([]any)
		if !isList || len(list) == 0 {
			return "", &SchemaError{Path: path + "/" + k, Msg: k + " must be a non-empty array"}
		}
		alts := make([]string, len(list))
		for i, e := range list {
			var err error
			if alts[i], err = c.schema(e, fmt.Sprintf("%s/%s/%d", path, k, i)); err != nil {
				return "", err
			}
		}
		return c.newRule(path, strings.Join(alts, " | ")), nil
	}
	var types []string
	switch t := o.vals["type"].(type) {
	case nil:
		switch {
		case o.vals["properties"] != nil || o.vals["additionalProperties"] != nil:
			types = []string{"object"}
		case o.vals["items"] != nil:
			types = []string{"array"}
		case o.vals["pattern"] != nil || o.vals["format"] != nil || o.vals["minLength"] != nil || o.vals["maxLength"] != nil:
			types = []string{"string"}
		default:
			return "json-value", nil
		}
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				return "", &SchemaError{Path: path + "/type", Msg: "type must be a string or an array of strings"}
			}
			types = append(types, s)
		}
	default:
		return "", &SchemaError{Path: path + "/type", Msg: "type must be a string or an array of strings"}
	}
	alts := make([]string, 0, len(types))
	for _, t := range types {
		var e string
		var err error
		switch t {
		case "string":
			e, err = c.str(o, path)
		case "number":
			e = "json-number"
		case "integer":
			e = "json-integer"
		case "boolean":
			e = "json-boolean"
		case "null":
			e = "json-null"
		case "object":
			e, err = c.obj(o, path)
		case "array":
			e, err = c.arr(o, path)
		default:
			return "", &SchemaError{Path: path + "/type", Msg: fmt.Sprintf("unknown type %q", t)}
		}
		if err != nil {
			return "", err
		}
		alts = append(alts, e)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return c.newRule(path, strings.Join(alts, " | ")), nil
}

// ref resolves a local reference, giving each target one rule so that
// recursive schemas make recursive grammars.
func (c *conv) ref(v any, path string) (string, error) {
	ref, ok := v.(string)
	if !ok {
		return "", &SchemaError{Path: path + "/$ref", Msg: "$ref must be a string"}
	}
	if name, ok := c.refs[ref]; ok {
		return name, nil
	}
	if !strings.HasPrefix(ref, "#") {
		return "", &SchemaError{Path: path + "/$ref", Msg: fmt.Sprintf("only local references (#/...) are supported, got %q", ref)}
	}
	target := c.root
	for _, seg := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		o, isObj := target.(*object)
		if !isObj || o.vals[seg] == nil {
			return "", &SchemaError{Path: path + "/$ref", Msg: fmt.Sprintf("reference %q does not resolve", ref)}
		}
		target = o.vals[seg]
	}
	c.n++
	name := fmt.Sprintf("ref%d", c.n)
	c.refs[ref] = name
	c.paths[name] = origin{c.id, ref}
	c.rules[name] = "json-null" // placeholder until resolved (recursion)
	body, err := c.schema(target, ref)
	if err != nil {
		return "", err
	}
	c.setRule(name, body)
	return name, nil
}

func (c *conv) str(o *object, path string) (string, error) {
	if p, ok := o.vals["pattern"]; ok {
		ps, isStr := p.(string)
		if !isStr {
			return "", &SchemaError{Path: path + "/pattern", Msg: "pattern must be a string"}
		}
		body, err := regexToGBNF(ps, c.b)
		if err != nil {
			var ce *CompileError
			if errors.As(err, &ce) {
				return "", err
			}
			return "", &SchemaError{Path: path + "/pattern", Msg: err.Error()}
		}
		return c.newRule(path, `"\"" `+body+` "\"" ws`), nil
	}
	if f, ok := o.vals["format"]; ok {
		fs, _ := f.(string)
		const d2 = "[0-9]{2}"
		date := `[0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])`
		tm := `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ` + d2 + ` ":" ` + d2 + `)`
		var body string
		switch fs {
		case "date":
			body = date
		case "time":
			body = tm
		case "date-time":
			body = date + ` "T" ` + tm
		case "uuid":
			h := "[0-9a-f]"
			body = fmt.Sprintf(`%s{8} "-" %s{4} "-" %s{4} "-" %s{4} "-" %s{12}`, h, h, h, h, h)
		default:
			return "", &SchemaError{Path: path + "/format", Msg: fmt.Sprintf("format %q is not supported (date, time, date-time, uuid are)", fs)}
		}
		return c.newRule(path, `"\"" `+body+` "\"" ws`), nil
	}
	lo, hasLo, err := count(o, "minLength", path)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := count(o, "maxLength", path)
	if err != nil {
		return "", err
	}
	if !hasLo && !hasHi {
		return "json-string", nil
	}
	if hasHi && hi < lo {
		return "", &SchemaError{Path: path, Msg: "maxLength is below minLength"}
	}
	rep := fmt.Sprintf("{%d,}", lo)
	if hasHi {
		rep = fmt.Sprintf("{%d,%d}", lo, hi)
	}
	return c.newRule(path, `"\"" json-char`+rep+` "\"" ws`), nil
}

func (c *conv) obj(o *object, path string) (string, error) {
	props, _ := o.vals["properties"].(*object)
	if o.vals["properties"] != nil && props == nil {
		return "", &SchemaError{Path: path + "/properties", Msg: "properties must be an object"}
	}
	required := map[string]bool{}
	if r, ok := o.vals["required"]; ok {
		list, isList := r.([]any)
		if !isList {
			return "", &SchemaError{Path: path + "/required", Msg: "required must be an array of strings"}
		}
		for _, e := range list {
			s, isStr := e.(string)
			if !isStr {
				return "", &SchemaError{Path: path + "/required", Msg: "required must be an array of strings"}
			}
			if props == nil || props.vals[s] == nil {
				return "", &SchemaError{Path: path + "/required", Msg: fmt.Sprintf("required property %q has no schema in properties", s)}
			}
			required[s] = true
		}
	}
	if props == nil || len(props.keys) == 0 {
		ap, ok := o.vals["additionalProperties"]
		if !ok || ap == true {
			return "json-object", nil
		}
		if ap == false {
			return `"{" ws "}" ws`, nil
		}
		v, err := c.schema(ap, path+"/additionalProperties")
		if err != nil {
			return "", err
		}
		kv := `json-string ":" ws ` + v
		return c.newRule(path, `"{" ws (`+kv+` ("," ws `+kv+`)*)? "}" ws`), nil
	}
	kvs := make([]string, len(props.keys))
	for i, k := range props.keys {
		v, err := c.schema(props.vals[k], path+"/properties/"+k)
		if err != nil {
			return "", err
		}
		kb, _ := json.Marshal(k)
		kvs[i] = gbnfLiteral(string(kb)) + ` ws ":" ws ` + v
	}
	// rest(i, emitted): properties i.. given whether one came before
	// (which decides the comma); 2n rules, however many are optional.
	names := map[[2]int]string{}
	var rest func(i int, emitted bool) string
	rest = func(i int, emitted bool) string {
		if i == len(kvs) || c.built > MaxGrammarBytes {
			return `""` // the end, or past the size limit: refused below
		}
		key := [2]int{i, 0}
		if emitted {
			key[1] = 1
		}
		if n, ok := names[key]; ok {
			return n
		}
		sep := ""
		if emitted {
			sep = `"," ws `
		}
		with := sep + kvs[i] + " " + rest(i+1, true)
		body := with
		if !required[props.keys[i]] {
			body = with + " | " + rest(i+1, emitted)
		}
		n := c.newRule(path, body)
		names[key] = n
		return n
	}
	first := rest(0, false)
	if c.built > MaxGrammarBytes {
		return "", c.oversize(path)
	}
	return c.newRule(path, `"{" ws `+first+` "}" ws`), nil
}

func (c *conv) arr(o *object, path string) (string, error) {
	item := "json-value"
	if it, ok := o.vals["items"]; ok {
		var err error
		if item, err = c.schema(it, path+"/items"); err != nil {
			return "", err
		}
	}
	lo, _, err := count(o, "minItems", path)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := count(o, "maxItems", path)
	if err != nil {
		return "", err
	}
	if hasHi && hi < lo {
		return "", &SchemaError{Path: path, Msg: "maxItems is below minItems"}
	}
	more := `("," ws ` + item + `)`
	var body string
	switch {
	case hasHi && hi == 0:
		body = `"[" ws "]" ws`
	case lo == 0 && !hasHi:
		body = `"[" ws (` + item + " " + more + `*)? "]" ws`
	case lo == 0:
		body = `"[" ws (` + item + " " + more + `{0,` + strconv.Itoa(hi-1) + `})? "]" ws`
	case !hasHi:
		body = `"[" ws ` + item + " " + more + `{` + strconv.Itoa(lo-1) + `,} "]" ws`
	default:
		body = `"[" ws ` + item + " " + more + `{` + strconv.Itoa(lo-1) + `,` + strconv.Itoa(hi-1) + `} "]" ws`
	}
	return c.newRule(path, body), nil
}
