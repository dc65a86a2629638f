package loop

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/lmstream/lmstream/core/chat"
	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/status"
)

// Limits on the chat fields, as OpenAI's API has them: bounds on what a
// request makes the template render and the parser match.
const (
	MaxTools     = 128 // "tools" entries
	MaxToolCalls = 128 // calls in one assistant message
)

// Tool choices: whether the model may, must or must not call a tool.
const (
	ToolChoiceAuto     = "auto"     // the model decides (the default with tools)
	ToolChoiceNone     = "none"     // the model answers in text; tools are not shown
	ToolChoiceRequired = "required" // at least one call, constrained to parse
	ToolChoiceFunction = "function" // a call of ChatOptions.ToolName, constrained
)

// Reasoning formats: where a thinking model's reasoning goes.
const (
	ReasoningSeparate = "auto" // in the reply's reasoning (OpenAI's reasoning_content)
	ReasoningInline   = "none" // left in the content, markers and all
)

// ChatOptions are the fields that shape a chat beyond its messages.
type ChatOptions struct {
	// Tools are the functions the model may call, as OpenAI sends them:
	// {"type": "function", "function": {"name", "description",
	// "parameters", "strict"}}, each kept as its JSON text for the
	// template.
	Tools []json.RawMessage
	// Functions are the tools' names and parameter schemas, in order.
	Functions []Function
	// ToolChoice is one of the ToolChoice constants; ToolName names the
	// function ToolChoiceFunction asks for.
	ToolChoice string
	ToolName   string
	// ParallelToolCalls lets the model make several calls in one answer
	// (OpenAI's default).
	ParallelToolCalls bool
	// Reasoning is ReasoningSeparate or ReasoningInline.
	Reasoning string
	// TemplateVars are further variables for the chat template
	// ("chat_template_kwargs": enable_thinking and the like).
	TemplateVars map[string]json.RawMessage
}

// Function is one tool's name and parameters' JSON schema (nil: none given).
type Function struct {
	Name       string
	Parameters json.RawMessage
	Strict     bool
}

// takeChatOptions reads "tools", "tool_choice", "parallel_tool_calls",
// "reasoning_format" and "chat_template_kwargs"; all of them shape a chat,
// so they need "messages".
func takeChatOptions(f *jsonstrict.Fields, chatRequest bool) (ChatOptions, error) {
	o := ChatOptions{ToolChoice: ToolChoiceAuto, ParallelToolCalls: true, Reasoning: ReasoningSeparate}
	if !chatRequest {
		for _, k := range []string{"tools", "tool_choice", "parallel_tool_calls", "reasoning_format", "chat_template_kwargs"} {
			if f.Kind(k) != "" {
				return o, f.Errorf(k, `needs "messages": it shapes a chat`)
			}
		}
		return o, nil
	}
	if _, err := f.Take("tools", &o.Tools); err != nil {
		return o, err
	}
	if len(o.Tools) > MaxTools {
		return o, f.Errorf("tools", "holds %d tools; at most %d are allowed", len(o.Tools), MaxTools)
	}
	seen := map[string]bool{}
	for i, raw := range o.Tools {
		fn, err := parseTool(raw)
		if err != nil {
			return o, f.Errorf("tools", "[%d] %v", i, err)
		}
		if seen[fn.Name] {
			return o, f.Errorf("tools", "[%d] names the function %q again", i, fn.Name)
		}
		seen[fn.Name] = true
		o.Functions = append(o.Functions, fn)
	}
	if err := takeToolChoice(f, &o, seen); err != nil {
		return o, err
	}
	if _, err := f.Take("parallel_tool_calls", &o.ParallelToolCalls); err != nil {
		return o, err
	}
	if _, err := f.Take("reasoning_format", &o.Reasoning); err != nil {
		return o, err
	}
	if o.Reasoning != ReasoningSeparate && o.Reasoning != ReasoningInline {
		return o, f.Errorf("reasoning_format", `must be "auto" (reasoning apart from the content) or "none" (left inline), got %q`, o.Reasoning)
	}
	var vars json.RawMessage
	if given, err := f.Take("chat_template_kwargs", &vars); err != nil {
		return o, err
	} else if given {
		if err := json.Unmarshal(vars, &o.TemplateVars); err != nil || o.TemplateVars == nil {
			return o, f.Errorf("chat_template_kwargs", "must be an object of template variables")
		}
	}
	return o, nil
}

// parseTool checks one "tools" entry and returns its function.
func parseTool(raw json.RawMessage) (Function, error) {
	var t struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		} `json:"function"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return Function{}, fmt.Errorf(`must be {"type": "function", "function": {"name", "description", "parameters", "strict"}}: %v`, err)
	}
	if t.Type != "function" {
		return Function{}, fmt.Errorf(`has type %q; only "function" tools exist`, t.Type)
	}
	if t.Function == nil || t.Function.Name == "" {
		return Function{}, fmt.Errorf(`needs "function": {"name": ...}`)
	}
	fn := Function{Name: t.Function.Name, Parameters: t.Function.Parameters}
	if t.Function.Strict != nil {
		fn.Strict = *t.Function.Strict
	}
	if p := bytes.TrimSpace(fn.Parameters); len(p) > 0 && (p[0] != '{' || string(p) == "null") {
		return Function{}, fmt.Errorf(`function %q: "parameters" must be a JSON schema object`, fn.Name)
	}
	return fn, nil
}

// takeToolChoice reads "tool_choice": "auto", "none", "required", or
// {"type": "function", "function": {"name": ...}} naming one of the tools.
func takeToolChoice(f *jsonstrict.Fields, o *ChatOptions, names map[string]bool) error {
	switch f.Kind("tool_choice") {
	case "":
		if len(o.Tools) == 0 {
			o.ToolChoice = ToolChoiceNone
		}
		return nil
	case "string":
		if _, err := f.Take("tool_choice", &o.ToolChoice); err != nil {
			return err
		}
		switch o.ToolChoice {
		case ToolChoiceAuto, ToolChoiceNone, ToolChoiceRequired:
		default:
			return f.Errorf("tool_choice", `must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}, got %q`, o.ToolChoice)
		}
	case "object":
		var c struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if _, err := f.Take("tool_choice", &c); err != nil {
			return err
		}
		if c.Type != "function" || c.Function.Name == "" {
			return f.Errorf("tool_choice", `as an object must be {"type": "function", "function": {"name": ...}}`)
		}
		o.ToolChoice, o.ToolName = ToolChoiceFunction, c.Function.Name
		if !names[c.Function.Name] {
			return f.Errorf("tool_choice", "names the function %q, which is not among the request's tools", c.Function.Name)
		}
	default:
		return f.Errorf("tool_choice", `must be a string or an object, got %s`, f.Kind("tool_choice"))
	}
	if len(o.Tools) == 0 && o.ToolChoice != ToolChoiceNone {
		return f.Errorf("tool_choice", `is %q but the request has no "tools"`, o.ToolChoice)
	}
	return nil
}

// normalizeCall checks an assistant message's tool call, and turns
// arguments sent as OpenAI sends them (a JSON string holding an object)
// into the object itself, which is what templates were written for
// (they iterate over it or render it with tojson).
func normalizeCall(c *chat.ToolCall) error {
	if c.Function.Name == "" {
		return fmt.Errorf(`needs "function": {"name": ...}`)
	}
	args := bytes.TrimSpace(c.Function.Arguments)
	if len(args) == 0 || args[0] != '"' {
		return nil
	}
	var text string
	if err := json.Unmarshal(args, &text); err != nil {
		return fmt.Errorf("arguments: %v", err)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &obj) == nil && obj != nil {
		c.Function.Arguments = json.RawMessage(text)
	}
	return nil
}

// ErrNoTools is why a model whose chat template does not render tools
// cannot take a request with them.
func ErrNoTools() error {
	return status.Errorf(status.InvalidRequest, `request field "tools": this model's chat template does not show tools to the model (it renders the same prompt with and without them); describe them in a system message instead`)
}
