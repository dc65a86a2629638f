package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Jinja renders a conversation with a template's own Jinja text, the way
// Hugging Face's apply_chat_template does: trim_blocks and lstrip_blocks
// on, the messages as a list of {"role", "content"} maps, and the
// variables add_generation_prompt, bos_token, eos_token and the
// raise_exception function. Unlike the hand-written families it renders
// whatever roles the template itself accepts (Qwen2.5's "tool", say):
// checking a conversation is the template's job, through raise_exception.
type Jinja struct {
	tmpl     *exec.Template
	bos, eos string
	// Timeout bounds one render (budget.go); NewJinja sets
	// DefaultRenderTimeout.
	Timeout time.Duration
}

// rootName is the one template a Jinja's loader serves: a model's template
// must not read files through {% include %} or {% import %}.
const rootName = "/chat_template"

// hfConfig is the environment apply_chat_template renders in.
func hfConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	return c
}

// NewJinja compiles a template's text. bos and eos are the model's BOS and
// EOS token texts, which templates print as bos_token and eos_token.
func NewJinja(text, bos, eos string) (j *Jinja, err error) {
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("chat: the chat template is empty")
	}
	// The parser is a third-party library fed untrusted text (a model file,
	// a config field): a panic in it is a failed compile, not a crash.
	defer func() {
		if p := recover(); p != nil {
			j, err = nil, fmt.Errorf("chat: jinja: %v", p)
		}
	}()
	loader, err := loaders.NewMemoryLoader(map[string]string{rootName: text})
	if err != nil {
		return nil, fmt.Errorf("chat: jinja: %w", err)
	}
	tmpl, err := exec.NewTemplate(rootName, hfConfig(), loader, checkedEnvironment)
	if err != nil {
		return nil, fmt.Errorf("chat: jinja: %w", err)
	}
	return &Jinja{tmpl: tmpl, bos: bos, eos: eos, Timeout: DefaultRenderTimeout}, nil
}

func (*Jinja) Name() string { return "jinja" }

// TemplateError is a rejection the template itself raised (its
// raise_exception call): the conversation is wrong for this model, so no
// fallback renders it either.
type TemplateError struct{ Msg string }

func (e *TemplateError) Error() string {
	return "chat: the template rejects the conversation: " + e.Msg
}

// checkedEnvironment is gonja's default one with every tag checked
// against the render budget (budget.go).
var checkedEnvironment = &exec.Environment{
	Context:           gonja.DefaultEnvironment.Context,
	Filters:           gonja.DefaultEnvironment.Filters,
	Tests:             gonja.DefaultEnvironment.Tests,
	ControlStructures: checkedStructures,
	Methods:           gonja.DefaultEnvironment.Methods,
}

// Render renders on a goroutine of its own and waits at most the timeout
// (and a grace period): gonja cannot be cancelled, so a runaway template
// is stopped by the budget's hooks, and when none is reached in time the
// caller gets a BudgetError while the goroutine winds down on its own.
func (j *Jinja) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	b := &renderBudget{deadline: time.Now().Add(j.Timeout)}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned render never blocks
	go func() {
		out, err := j.render(b, msgs, addGenerationPrompt)
		done <- result{out, err}
	}()
	timer := time.NewTimer(j.Timeout + renderGrace)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.out, r.err
	case <-timer.C:
		return "", b.fail("rendering the chat template did not finish within %v", j.Timeout)
	}
}

func (j *Jinja) render(b *renderBudget, msgs []Message, addGenerationPrompt bool) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("chat: jinja: %v", p)
		}
	}()
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	var raised *TemplateError
	ctx := exec.NewContext(map[string]any{
		"messages":              list,
		"add_generation_prompt": addGenerationPrompt,
		"bos_token":             j.bos,
		"eos_token":             j.eos,
		"raise_exception": func(msg string) (string, error) {
			raised = &TemplateError{Msg: msg}
			return "", raised
		},
		"range":   boundedRange(b),
		budgetKey: b,
	})
	w := &budgetWriter{b: b}
	err = j.tmpl.Execute(w, ctx)
	if raised != nil {
		return "", raised
	}
	// The budget's error is the cause whatever gonja wrapped it in.
	if stop, _ := b.stopped.Load().(error); stop != nil {
		return "", stop
	}
	if err != nil {
		return "", fmt.Errorf("chat: jinja: %w", err)
	}
	return string(w.buf), nil
}

// Model is a model's chat template: its Jinja text rendered by Jinja, and
// when that cannot be compiled or fails to render a conversation, the
// hand-written family Detect recognises in the same text. Either part may
// be missing, not both.
type Model struct {
	Text     string
	jinja    *Jinja   // nil when the text does not compile
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

// Render renders with Jinja, falling back to the family when Jinja fails
// for any reason but the template's own rejection or a runaway render
// (a template that loops without end is broken, not merely beyond gonja).
func (m *Model) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	if m.jinja == nil {
		return m.family.Render(msgs, addGenerationPrompt)
	}
	out, err := m.jinja.Render(msgs, addGenerationPrompt)
	var rejected *TemplateError
	var budget *BudgetError
	if err == nil || errors.As(err, &rejected) || errors.As(err, &budget) || m.family == nil {
		return out, err
	}
	return m.family.Render(msgs, addGenerationPrompt)
}
