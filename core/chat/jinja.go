package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lmstream/lmstream/core/jinja"
)

// Jinja renders a conversation with a template's own Jinja text, the way
// Hugging Face's apply_chat_template does (core/jinja is an interpreter
// made for that): the messages as a list of dicts, the tools, and the
// variables add_generation_prompt, bos_token, eos_token, plus the
// raise_exception and strftime_now functions. Unlike the hand-written
// families it renders whatever roles the template itself accepts (Qwen2.5's
// "tool", say): checking a conversation is the template's job, through
// raise_exception.
//
// The template is parsed once; Render is safe for concurrent use.
type Jinja struct {
	tmpl     *jinja.Template
	bos, eos string
	// Timeout bounds one render's wall time (budget.go); NewJinja sets
	// DefaultRenderTimeout.
	Timeout time.Duration
	// Limits bound one render's work and memory; NewJinja sets
	// DefaultLimits().
	Limits jinja.Limits
	// Now is the time strftime_now formats; nil means the time of the
	// render. Tests fix it.
	Now func() time.Time
}

// NewJinja parses a template's text. bos and eos are the model's BOS and
// EOS token texts, which templates print as bos_token and eos_token.
func NewJinja(text, bos, eos string) (*Jinja, error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("chat: the chat template is empty")
	}
	tmpl, err := jinja.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return &Jinja{tmpl: tmpl, bos: bos, eos: eos, Timeout: DefaultRenderTimeout, Limits: DefaultLimits()}, nil
}

func (*Jinja) Name() string { return "jinja" }

// Conversation is what a chat template renders, as apply_chat_template
// takes it.
type Conversation struct {
	Messages []Message
	// Tools are the function specs the model may call, each a JSON object
	// ({"type": "function", "function": {"name", "description",
	// "parameters"}}), rendered as the dicts apply_chat_template passes,
	// in their keys' order. nil is no tools (None to the template).
	Tools []json.RawMessage
	// AddGenerationPrompt ends the prompt with what makes the model
	// answer as the assistant.
	AddGenerationPrompt bool
	// Vars are further template variables, apply_chat_template's keyword
	// arguments (enable_thinking, ...): Go values or json.RawMessage.
	Vars map[string]any
}

// TemplateError is a rejection the template itself raised (its
// raise_exception call): the conversation is wrong for this model, so no
// fallback renders it either.
type TemplateError struct{ Msg string }

func (e *TemplateError) Error() string {
	return "chat: the template rejects the conversation: " + e.Msg
}

// Render renders msgs on the calling goroutine, within the timeout.
func (j *Jinja) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	return j.RenderConversation(context.Background(), Conversation{Messages: msgs, AddGenerationPrompt: addGenerationPrompt})
}

// RenderConversation renders c, stopping when ctx ends, the timeout
// passes or the budget runs out; it returns with nothing left running.
func (j *Jinja) RenderConversation(ctx context.Context, c Conversation) (string, error) {
	vars, err := j.variables(c)
	if err != nil {
		return "", err
	}
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.Timeout)
		defer cancel()
	}
	opt := jinja.Options{Limits: j.Limits}
	if j.Now != nil {
		opt.Now = j.Now()
	}
	out, err := j.tmpl.Render(ctx, vars, opt)
	if err != nil {
		return "", renderError(err)
	}
	return out, nil
}

// variables are the template's variables for c, as apply_chat_template
// passes them.
func (j *Jinja) variables(c Conversation) (map[string]jinja.Value, error) {
	msgs := make([]jinja.Value, len(c.Messages))
	for i, m := range c.Messages {
		v, err := m.value()
		if err != nil {
			return nil, fmt.Errorf("chat: message %d: %w", i, err)
		}
		msgs[i] = v
	}
	vars := map[string]jinja.Value{}
	for k, v := range c.Vars {
		val, err := jinja.FromGo(v)
		if err != nil {
			return nil, fmt.Errorf("chat: template variable %q: %w", k, err)
		}
		vars[k] = val
	}
	var tools jinja.Value
	if c.Tools != nil {
		list := make([]jinja.Value, len(c.Tools))
		for i, t := range c.Tools {
			v, err := jinja.FromJSON(t)
			if err != nil {
				return nil, fmt.Errorf("chat: tool %d: %w", i, err)
			}
			list[i] = v
		}
		tools = jinja.NewList(list)
	}
	// What apply_chat_template itself passes wins over Vars of the same
	// name, as its own arguments do.
	vars["messages"] = jinja.NewList(msgs)
	vars["tools"] = tools
	vars["documents"] = nil
	vars["add_generation_prompt"] = c.AddGenerationPrompt
	vars["bos_token"] = j.bos
	vars["eos_token"] = j.eos
	return vars, nil
}

// Model is a model's chat template: its Jinja text rendered by Jinja, or
// when the text does not parse, the hand-written family Detect
// recognises in it. Either part may be missing, not both.
type Model struct {
	Text     string
	jinja    *Jinja   // nil when the text does not parse
	family   Template // nil when Detect does not recognise the text
	jinjaErr error
}

// ForModel prepares a model's template text (tokenizer.chat_template, or a
// caller's override). It fails only when neither Jinja nor a family can
// render it.
func ForModel(text, bos, eos string) (*Model, error) {
	m := &Model{Text: text}
	m.jinja, m.jinjaErr = NewJinja(text, bos, eos)
	fam, famErr := Detect(text)
	if famErr == nil {
		m.family = fam
	}
	if m.jinja == nil && m.family == nil {
		return nil, fmt.Errorf("%v; %v", m.jinjaErr, famErr)
	}
	return m, nil
}

// ForFamily is a Model rendered by a family alone: for a model whose file
// ships no template text but whose family is known (ForArch).
func ForFamily(t Template) *Model { return &Model{family: t} }

// Name is "jinja", or the family's name when only the family can render.
func (m *Model) Name() string {
	if m.jinja != nil {
		return m.jinja.Name()
	}
	return m.family.Name()
}

// Jinja is the model's parsed template, nil when only a family renders.
func (m *Model) Jinja() *Jinja { return m.jinja }

// Render renders msgs.
func (m *Model) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	return m.RenderConversation(context.Background(), Conversation{Messages: msgs, AddGenerationPrompt: addGenerationPrompt})
}

// RenderConversation renders c with the template when it parsed. A
// template that fails at run time fails the render: the interpreter
// renders what jinja2 renders, so the failure is the template's own (or
// the conversation's), and a family that renders something else would
// hide it. Only a template that does not parse falls back to its family,
// which cannot express tools or anything beyond roles and text.
func (m *Model) RenderConversation(ctx context.Context, c Conversation) (string, error) {
	if m.jinja != nil {
		return m.jinja.RenderConversation(ctx, c)
	}
	if err := plainOnly(c); err != nil {
		if m.jinjaErr != nil {
			err = fmt.Errorf("%w (the model's template could not be parsed: %v)", err, m.jinjaErr)
		}
		return "", err
	}
	return m.family.Render(c.Messages, c.AddGenerationPrompt)
}

// plainOnly refuses what a hand-written family cannot render: it would
// drop it silently.
func plainOnly(c Conversation) error {
	if c.Tools != nil {
		return errors.New("chat: the built-in template family cannot render tools")
	}
	if len(c.Vars) > 0 {
		return errors.New("chat: the built-in template family takes no template variables")
	}
	for i, m := range c.Messages {
		if m.ReasoningContent != "" || len(m.ToolCalls) > 0 || m.ToolCallID != "" || m.Name != "" {
			return fmt.Errorf("chat: message %d: the built-in template family renders only a role and text", i)
		}
	}
	return nil
}
