package engine

import (
	"context"
	"strings"

	"github.com/lmstream/lmstream/core/chat"
	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/reply"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

// chatTurn is a chat request made ready: the prompt, how its answer is
// parsed, and the constraint a forced tool call puts on it.
type chatTurn struct {
	prompt  string
	reply   streaming.ReplyParser // nil: the answer is text only
	grammar *grammar.Grammar      // nil: unconstrained
	lazy    *trigger              // strict tools' calls under "auto"; nil: none
}

// prepareChat renders a request's messages with the model's template,
// with its tools unless tool_choice is "none", and chooses the answer's
// parser from the template's syntax (reply.Detect, at load).
func (b *Backend) prepareChat(req *loop.Request) (*chatTurn, error) {
	o := &req.Chat
	text, showTools, err := b.renderChat(req.Messages, true, o)
	if err != nil {
		return nil, err
	}
	t := &chatTurn{prompt: text}
	opts := reply.Options{
		Tools:     showTools,
		Reasoning: b.thinks && o.Reasoning == loop.ReasoningSeparate,
		Prompt:    text,
	}
	if showTools {
		if !o.ParallelToolCalls {
			opts.MaxCalls = 1
		}
		for _, f := range o.Functions {
			opts.ToolNames = append(opts.ToolNames, f.Name)
		}
	}
	if forcesCalls(o) {
		if req.Grammar != nil {
			return nil, status.Errorf(status.InvalidRequest, `request: tool_choice %q constrains the answer to a call; it cannot be combined with "response_format" or "grammar"`, o.ToolChoice)
		}
		if t.grammar, opts.ForcedPrefix, err = b.forcedCalls(req.Context(), o, opts.MaxCalls); err != nil {
			return nil, err
		}
		if o.ToolChoice == loop.ToolChoiceFunction {
			opts.MaxCalls = 1
		}
		t.prompt += opts.ForcedPrefix
		opts.Prompt = t.prompt
	}
	if o.ToolChoice == loop.ToolChoiceAuto && showTools && anyStrict(o.Functions) {
		if req.Grammar != nil {
			return nil, status.Errorf(status.InvalidRequest, `request: a "strict" tool under tool_choice "auto" constrains the calls the answer makes; it cannot be combined with "response_format" or "grammar"`)
		}
		if t.lazy, err = b.lazyCalls(req.Context(), o, opts.MaxCalls); err != nil {
			return nil, err
		}
	}
	if opts.Tools || opts.Reasoning {
		t.reply = reply.New(b.replyFormat, opts)
	}
	return t, nil
}

// renderChat renders msgs with a chat's options as a request renders
// them: its template variables set, its tools shown unless tool_choice is
// "none". showTools says whether they were. A template that ignores the
// tools, or renders them in a call syntax the reply parser does not know,
// is an error: the caller would wait for calls that never come.
func (b *Backend) renderChat(msgs []loop.Message, addGenerationPrompt bool, o *loop.ChatOptions) (text string, showTools bool, err error) {
	if b.template == nil {
		return "", false, status.Errorf(status.InvalidRequest, "request: \"messages\" cannot be used: %v", b.tmplErr)
	}
	conv := chat.Conversation{Messages: msgs, AddGenerationPrompt: addGenerationPrompt}
	if len(o.TemplateVars) > 0 {
		conv.Vars = make(map[string]any, len(o.TemplateVars))
		for k, v := range o.TemplateVars {
			conv.Vars[k] = v
		}
	}
	showTools = len(o.Tools) > 0 && o.ToolChoice != loop.ToolChoiceNone
	if showTools {
		conv.Tools = o.Tools
	}
	if text, err = b.render(conv); err != nil {
		return "", false, err
	}
	if showTools {
		conv.Tools = nil
		without, err := b.render(conv)
		if err != nil {
			return "", false, err
		}
		if without == text {
			return "", false, loop.ErrNoTools()
		}
		if b.replyFormat == reply.None {
			return "", false, status.Errorf(status.InvalidRequest, `request field "tools": this model's chat template renders tools, but in a call syntax lmstream does not know, so its calls could not be returned`)
		}
	}
	return text, showTools, nil
}

func (b *Backend) render(conv chat.Conversation) (string, error) {
	text, err := b.template.RenderConversation(context.Background(), conv)
	if err != nil {
		return "", status.Errorf(status.InvalidRequest, "request: %v", err)
	}
	return text, nil
}

// forcedCalls is the grammar that makes the answer one or more calls
// (tool_choice "required") or a call of the named function, in the
// model's call syntax, and the text that opens the first call when it is
// a special token: grammars match text, and a special token's text is
// not something the model can spell.
func (b *Backend) forcedCalls(ctx context.Context, o *loop.ChatOptions, maxCalls int) (*grammar.Grammar, string, error) {
	shape, prefix, err := b.forcedSyntax(o)
	if err != nil {
		return nil, "", err
	}
	shape.MaxCalls = maxCalls
	var tools []grammar.Tool
	for _, f := range o.Functions {
		if o.ToolChoice == loop.ToolChoiceFunction && f.Name != o.ToolName {
			continue
		}
		tools = append(tools, grammar.Tool{Name: f.Name, Parameters: f.Parameters})
	}
	if o.ToolChoice == loop.ToolChoiceFunction {
		shape.MaxCalls = 1
	}
	g, err := grammar.ToolCallsContext(ctx, shape, tools)
	if err != nil {
		return nil, "", loop.CompileStatus(err, func(err error) error {
			return status.Errorf(status.InvalidRequest, `request field "tools": %v`, err)
		})
	}
	if g, err = b.vocabTrie().Fit(g); err != nil {
		return nil, "", status.Errorf(status.InvalidRequest, `request field "tools": the calls' grammar cannot be written with this model's tokens: %v`, err)
	}
	return g, prefix, nil
}

// forcedSyntax is forcedShape for this model, or the error of a
// tool_choice its syntax cannot force.
func (b *Backend) forcedSyntax(o *loop.ChatOptions) (grammar.CallShape, string, error) {
	shape, prefix, ok := forcedShape(b.replyFormat, b.info.ChatTemplate)
	if !ok {
		return shape, "", status.Errorf(status.InvalidRequest, `request field "tool_choice": %q is not supported for this model's tool-call syntax (%s); use "auto"`, o.ToolChoice, b.replyFormat)
	}
	return shape, prefix, nil
}

// forcesCalls says whether a chat's tool_choice constrains the answer to
// calls.
func forcesCalls(o *loop.ChatOptions) bool {
	return o.ToolChoice == loop.ToolChoiceRequired || o.ToolChoice == loop.ToolChoiceFunction
}

// forcedShape is how a call syntax writes calls, for the grammar of a
// forced call, and the prefix that opens them. Syntaxes whose calls need
// special tokens between calls or around their parts (DeepSeek's, the
// newer Mistral one with [ARGS], harmony's channels, Qwen3-Coder's XML)
// have no shape here: tool_choice "auto" serves them.
func forcedShape(f reply.Format, template string) (grammar.CallShape, string, bool) {
	switch f {
	case reply.Hermes:
		return grammar.CallShape{Begin: "<tool_call>\n", End: "\n</tool_call>", Sep: "\n", NameKey: "name", ArgsKey: "arguments"}, "", true
	case reply.Llama3:
		return grammar.CallShape{Sep: "; ", NameKey: "name", ArgsKey: "parameters"}, "", true
	case reply.Mistral:
		if strings.Contains(template, "[ARGS]") {
			return grammar.CallShape{}, "", false
		}
		return grammar.CallShape{ListOpen: "[", ListClose: "]", Sep: ", ", NameKey: "name", ArgsKey: "arguments"}, "[TOOL_CALLS]", true
	case reply.Granite:
		return grammar.CallShape{ListOpen: "[", ListClose: "]", Sep: ", ", NameKey: "name", ArgsKey: "arguments"}, "<|tool_call|>", true
	}
	return grammar.CallShape{}, "", false
}

func anyStrict(fs []loop.Function) bool {
	for _, f := range fs {
		if f.Strict {
			return true
		}
	}
	return false
}

// lazyCalls is the trigger of a lazy constraint for tool_choice "auto"
// with strict tools (lazy.go): the answer is free until it begins a call,
// and the call then follows the grammar of calls that name any tool, the
// strict ones with arguments valid by their schemas and the others with
// any JSON object, so a call of any tool still parses.
//
// Hermes calls begin at "<tool_call>", and Qwen2.5's smaller models often
// answer with the bare call object instead, alone or in a ```json fence,
// which reply's Hermes parser takes as a call: a reply that begins with
// "{", "```json\n{" or "```\n{" is held to one such call. Llama 3's calls
// have no marker: a reply that begins with "{" is taken for its calls, as
// its parser reads a reply that is only JSON. Mistral's and Granite's
// begin at their call token. A syntax with no plain-text shape of calls
// (see forcedShape) is refused rather than served unconstrained: a
// "strict" schema is a promise that the arguments validate.
func (b *Backend) lazyCalls(ctx context.Context, o *loop.ChatOptions, maxCalls int) (*trigger, error) {
	shape, prefix, ok := forcedShape(b.replyFormat, b.info.ChatTemplate)
	if !ok || b.replyFormat == reply.None {
		return nil, status.Errorf(status.InvalidRequest, `request field "tools": a "strict" schema cannot be enforced in this model's tool-call syntax (%s); set "strict" to false (its calls are then parsed unconstrained)`, b.replyFormat)
	}
	tools := make([]grammar.Tool, len(o.Functions))
	for i, f := range o.Functions {
		tools[i].Name = f.Name
		if f.Strict {
			tools[i].Parameters = f.Parameters
		}
	}
	compile := func(s grammar.CallShape) (*grammar.Grammar, error) {
		g, err := grammar.ToolCallsContext(ctx, s, tools)
		if err != nil {
			return nil, loop.CompileStatus(err, func(err error) error {
				return status.Errorf(status.InvalidRequest, `request field "tools": %v`, err)
			})
		}
		if g, err = b.vocabTrie().Fit(g); err != nil {
			return nil, status.Errorf(status.InvalidRequest, `request field "tools": the calls' grammar cannot be written with this model's tokens: %v`, err)
		}
		return g, nil
	}
	shape.MaxCalls, shape.Trail = maxCalls, true
	g, err := compile(shape)
	if err != nil {
		return nil, err
	}
	var trig *trigger
	switch b.replyFormat {
	case reply.Hermes:
		bare := shape
		bare.Begin, bare.End, bare.Sep, bare.MaxCalls = "", "", "", 1
		gb, cerr := compile(bare)
		if cerr != nil {
			return nil, cerr
		}
		fenced := bare
		fenced.End = "\n```"
		gf, cerr := compile(fenced)
		if cerr != nil {
			return nil, cerr
		}
		opener := reply.Hermes.CallOpeners()[0]
		trig, err = newTrigger(opener, g.Start().Advance([]byte(opener)), []lead{
			{text: "{", after: gb.Start().Advance([]byte("{"))},
			{text: "```json\n{", after: gf.Start().Advance([]byte("{"))},
			{text: "```\n{", after: gf.Start().Advance([]byte("{"))},
		})
	case reply.Llama3:
		trig, err = newTrigger("", grammar.State{}, []lead{{text: "{", after: g.Start().Advance([]byte("{"))}})
	default: // a call token opens the calls, and the shape follows it
		trig, err = newTrigger(prefix, g.Start(), nil)
	}
	if err != nil {
		return nil, status.Errorf(status.Internal, "tool calls: %v", err)
	}
	b.vocabTrie() // built once, on the first constrained request
	return trig, nil
}
