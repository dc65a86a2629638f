package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// conversations (chat_test.go) rendered by Jinja must equal what the
// hand-written families give: the families were checked byte for byte
// against Python's jinja2, so this checks the interpreter against jinja2 too.
func jinjaMatchesFamily(t *testing.T, tmpl, bos, eos string, skipEmpty bool) {
	t.Helper()
	j, err := NewJinja(tmpl, bos, eos)
	require.NoError(t, err)
	fam, err := Detect(tmpl)
	require.NoError(t, err)
	n := 0
	for i, conv := range conversations {
		if skipEmpty && len(conv) == 0 {
			continue
		}
		for _, gen := range []bool{false, true} {
			want, err := fam.Render(conv, gen)
			if err != nil {
				continue // a conversation the family refuses (roles out of order)
			}
			got, err := j.Render(conv, gen)
			require.NoError(t, err, "conversation %d", i)
			require.Equal(t, want, got, "conversation %d, generation prompt %v", i, gen)
			n++
		}
	}
	require.NotZero(t, n)
	t.Logf("%s: %d renderings identical", fam.Name(), n)
}

func TestJinjaMatchesSmolLM2(t *testing.T) {
	jinjaMatchesFamily(t, modelTemplate(t), "<|im_start|>", "<|im_end|>", false)
}

func TestJinjaMatchesQwen25(t *testing.T) {
	jinjaMatchesFamily(t, qwen25Template, "", "<|im_end|>", true)
}

func TestJinjaMatchesOtherFamilies(t *testing.T) {
	jinjaMatchesFamily(t, qwen2Template, "", "<|im_end|>", false)
	jinjaMatchesFamily(t, llama3Template, "<|begin_of_text|>", "<|eot_id|>", false)
	jinjaMatchesFamily(t, zephyrTemplate, "<s>", "</s>", false)
}

// Gemma 3's template (a conditional expression in parentheses, which
// gonja could not parse) renders every conversation as the family does.
func TestJinjaGemma(t *testing.T) {
	m, err := ForModel(gemmaTemplate, "<bos>", "<eos>")
	require.NoError(t, err)
	require.Equal(t, "jinja", m.Name())
	jinjaMatchesFamily(t, gemmaTemplate, "<bos>", "<eos>", true) // messages[0] of none fails in jinja2 too
}

func TestJinjaRaiseException(t *testing.T) {
	m, err := ForModel(llama2Template, "<s>", "</s>")
	require.NoError(t, err)
	_, err = m.Render([]Message{asst("first"), user("second")}, true)
	var rejected *TemplateError
	require.ErrorAs(t, err, &rejected)
	require.Contains(t, rejected.Msg, "Conversation roles must alternate")
}

func TestModelFallsBackToFamily(t *testing.T) {
	// Broken Jinja that still carries ChatML's markers: the family renders.
	broken := "{% for m in messages %}<|im_start|>{{ m.role }<|im_end|>"
	m, err := ForModel(broken, "", "<|im_end|>")
	require.NoError(t, err)
	require.Equal(t, "chatml", m.Name())
	got, err := m.Render([]Message{user("Hi")}, true)
	require.NoError(t, err)
	require.Equal(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", got)

	// The family cannot render tools or tool calls: it refuses rather
	// than drop them.
	_, err = m.RenderConversation(context.Background(), Conversation{Messages: []Message{user("Hi")}, Tools: []json.RawMessage{[]byte(`{"type": "function"}`)}})
	require.ErrorContains(t, err, "cannot render tools")
	_, err = m.Render([]Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Function: FunctionCall{Name: "f"}}}}}, false)
	require.ErrorContains(t, err, "renders only a role and text")
}

// A template that parses but fails at run time fails the render, as it
// does in jinja2: the family's rendering would hide the failure.
func TestModelDoesNotFallBackOnRenderErrors(t *testing.T) {
	failing := "<|im_start|><|im_end|>{{ messages[0].content.no_such_method() }}"
	m, err := ForModel(failing, "", "")
	require.NoError(t, err)
	require.Equal(t, "jinja", m.Name())
	_, err = m.Render([]Message{user("Hi")}, false)
	var failed *RenderError
	require.ErrorAs(t, err, &failed)
	require.Equal(t, "UndefinedError", failed.Kind)
}

func TestModelNeitherRenders(t *testing.T) {
	_, err := ForModel("{% if %}", "", "")
	require.Error(t, err)
	_, err = ForModel("   ", "", "")
	require.Error(t, err)
}

func TestJinjaNoFileAccess(t *testing.T) {
	for _, src := range []string{`{% include "/etc/passwd" %}`, `{% extends '/chat_template' %}`, `{% import 'x' as y %}`} {
		_, err := NewJinja(src, "", "")
		require.ErrorContains(t, err, "cannot load other templates", src)
	}
}

func TestJinjaRendersOtherRoles(t *testing.T) {
	// Qwen2.5's template knows a "tool" role, which no family accepts.
	m, err := ForModel(qwen25Template, "", "<|im_end|>")
	require.NoError(t, err)
	got, err := m.Render([]Message{user("2+2?"), {Role: "tool", Content: "4"}}, true)
	require.NoError(t, err)
	require.Contains(t, got, "<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
}

// Requests render on their submitting goroutines, concurrently, with one
// compiled template per model.
func TestJinjaConcurrentRender(t *testing.T) {
	m, err := ForModel(qwen25Template, "", "<|im_end|>")
	require.NoError(t, err)
	want, err := m.Render([]Message{user("Hi")}, true)
	require.NoError(t, err)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 50 {
				got, err := m.Render([]Message{user("Hi")}, true)
				if err == nil && got != want {
					err = fmt.Errorf("got %q", got)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}
