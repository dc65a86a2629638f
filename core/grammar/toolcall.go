package grammar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Tool is a function a call may name, with its parameters' JSON schema
// (nil, null or {}: any JSON object).
type Tool struct {
	Name       string
	Parameters []byte
}

// CallShape is how a model family writes calls around the JSON object
// {"<NameKey>": "NAME", "<ArgsKey>": ARGS}.
type CallShape struct {
	// Begin and End are the text around each call: Hermes "<tool_call>\n"
	// and "\n</tool_call>"; Llama 3 "" and "".
	Begin, End string
	// Sep is the text between two calls: Hermes "\n"; Llama 3 "; ";
	// JSON-list formats ", ".
	Sep string
	// ListOpen and ListClose are the text around all the calls, for the
	// formats that write them as a JSON list (Mistral and Granite "[" and
	// "]"), else "".
	ListOpen, ListClose string
	// NameKey and ArgsKey are the call object's keys, in that order:
	// "name" and "arguments" (Llama 3: "parameters").
	NameKey, ArgsKey string
	// MaxCalls bounds the calls: 1 when parallel calls are off; 0 for any
	// number (at least one).
	MaxCalls int
	// Trail lets JSON's whitespace follow the last call (ListClose), so a
	// model that ends its line before its end token is not held to write
	// another call where Sep is a newline.
	Trail bool
}

// MaxTools bounds the tools of one grammar (OpenAI's limit too). Every
// tool is a way the output may go on where a call's name begins, and the
// matcher follows at most MaxBranches of those at once.
const MaxTools = 128

// ToolError is a tool ToolCalls cannot make a grammar of: its name, or
// its schema (Err is then a *SchemaError).
type ToolError struct {
	Index int    // in the tools given to ToolCalls
	Name  string // the tool's name as given
	Err   error
}

func (e *ToolError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("tool %d: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("tool %q: %v", e.Name, e.Err)
}

func (e *ToolError) Unwrap() error { return e.Err }

// ToolCalls is the grammar of one or more calls, each naming one of tools
// with arguments that validate against that tool's schema (FromSchema's
// rules; each tool's "$ref"s resolve within its own schema). The call
// object's keys come in the fixed order name then arguments, with JSON's
// whitespace between tokens as FromSchema allows it, and the name is the
// tool's exact name as a JSON string. Nothing may come before the first
// call or after the last (ListOpen and ListClose aside): the text a model
// writes before its calls is not this grammar's to constrain.
//
// Arguments are a JSON object by the calling convention, so a schema
// whose top-level "type" is anything else is refused, and one that does
// not constrain the value at all ({}, true) admits any object.
func ToolCalls(shape CallShape, tools []Tool) (*Grammar, error) {
	return ToolCallsContext(context.Background(), shape, tools)
}

// ToolCallsContext is ToolCalls within MaxCompileSteps and
// MaxCompileBytes, stopped (a *CompileError wrapping ctx's error) soon
// after ctx is done.
func ToolCallsContext(ctx context.Context, shape CallShape, tools []Tool) (*Grammar, error) {
	if err := shape.check(); err != nil {
		return nil, err
	}
	switch {
	case len(tools) == 0:
		return nil, errors.New("tool calls: no tools to call")
	case len(tools) > MaxTools:
		return nil, fmt.Errorf("tool calls: %d tools; at most %d are allowed", len(tools), MaxTools)
	}
	c := newConv(newBudget(ctx))
	seen := make(map[string]bool, len(tools))
	nameKey := gbnfLiteral(jsonQuote(shape.NameKey)) + ` ws ":" ws `
	argsKey := `"," ws ` + gbnfLiteral(jsonQuote(shape.ArgsKey)) + ` ws ":" ws `
	var head strings.Builder
	alts := make([]string, len(tools))
	for i, t := range tools {
		fail := func(err error) error { return &ToolError{Index: i, Name: t.Name, Err: err} }
		switch {
		case t.Name == "":
			return nil, fail(errors.New("the name is empty"))
		case !utf8.ValidString(t.Name):
			return nil, fail(errors.New("the name is not valid UTF-8"))
		case seen[t.Name]:
			return nil, fail(errors.New("the name is given to two tools"))
		}
		seen[t.Name] = true
		args, err := c.arguments(t.Parameters, i)
		if err != nil {
			return nil, fail(err)
		}
		// One rule per tool, its name and arguments, so that a limit
		// reached in it is said of the tool.
		rule := fmt.Sprintf("tool%d", i)
		c.paths[rule] = origin{schema: i, path: "#"}
		fmt.Fprintf(&head, "%s ::= %s ws %s%s\n", rule, gbnfLiteral(jsonQuote(t.Name)), argsKey, args)
		alts[i] = rule
	}
	// A call's arguments end in whitespace (every value's rule does);
	// the call object's own "}" ends it, with the shape's End right after.
	call := seq(lit(shape.Begin), `"{" ws`, nameKey+"("+strings.Join(alts, " | ")+`) "}"`, lit(shape.End))
	more := "(" + seq(lit(shape.Sep), "call") + ")"
	switch shape.MaxCalls {
	case 0:
		more += "*"
	case 1:
		more = ""
	default:
		more += fmt.Sprintf("{0,%d}", shape.MaxCalls-1)
	}
	trail := ""
	if shape.Trail {
		trail = "ws"
	}
	root := "root ::= " + seq(lit(shape.ListOpen), "call", more, lit(shape.ListClose), trail)
	head.WriteString("call ::= " + call + "\n")
	text := root + "\n" + head.String()
	if b := c.size(text); b > MaxGrammarBytes {
		return nil, fmt.Errorf("tool calls: the %d tools' schemas convert to a grammar of %d bytes; at most %d are allowed", len(tools), b, MaxGrammarBytes)
	}
	g, err := c.compile(text)
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			if o := c.originOf(le.Rule); o.schema >= 0 {
				t := tools[o.schema]
				return nil, &ToolError{Index: o.schema, Name: t.Name, Err: &SchemaError{Path: o.path, Msg: "cannot be followed: " + le.Msg}}
			}
			return nil, fmt.Errorf("tool calls: the grammar of calls to %d tools cannot be followed: %s", len(tools), le.Msg)
		}
		return nil, fmt.Errorf("tool calls: the grammar does not compile: %w", err)
	}
	return g, nil
}

// check refuses a shape that cannot be written as asked.
func (s CallShape) check() error {
	switch {
	case s.NameKey == "" || s.ArgsKey == "":
		return errors.New("tool calls: the call shape needs both a name key and an arguments key")
	case s.NameKey == s.ArgsKey:
		return fmt.Errorf("tool calls: the call shape's name and arguments keys are both %q", s.NameKey)
	case s.MaxCalls < 0 || s.MaxCalls > MaxRepeat+1:
		return fmt.Errorf("tool calls: MaxCalls is %d; it must be 0 (any number) or 1 to %d", s.MaxCalls, MaxRepeat+1)
	}
	for _, t := range []string{s.Begin, s.End, s.Sep, s.ListOpen, s.ListClose, s.NameKey, s.ArgsKey} {
		if !utf8.ValidString(t) {
			return fmt.Errorf("tool calls: the call shape's text %q is not valid UTF-8", t)
		}
	}
	return nil
}

// arguments adds the rules of a tool's parameters schema, the id-th
// schema of the rule set, and returns the expression of its arguments.
func (c *conv) arguments(schema []byte, id int) (string, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return "json-object", nil
	}
	v, err := parseSchema(c.b, schema)
	if err != nil || v == nil { // JSON null: no schema, as nil is
		return "json-object", err
	}
	if o, ok := v.(*object); ok {
		if t, has := o.vals["type"]; has && t != "object" {
			return "", &SchemaError{Path: "#/type", Msg: fmt.Sprintf("a call's arguments are a JSON object; the type must be \"object\", not %s", marshal(t))}
		}
	}
	e, err := c.convert(v, id)
	if e == "json-value" {
		e = "json-object"
	}
	return e, err
}

// jsonQuote is s as a JSON string, escaped only where JSON requires it
// (as a model writes it: "<" and "&" are themselves).
func jsonQuote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// seq is the sequence of GBNF expressions parts, the empty ones left out.
func seq(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(p)
	}
	return b.String()
}

// lit is the GBNF literal of a shape's text, or nothing for "".
func lit(s string) string {
	if s == "" {
		return ""
	}
	return gbnfLiteral(s)
}
