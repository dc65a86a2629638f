package chat

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// conversations (chat_test.go) rendered by Jinja must equal what the
// hand-written families give: the families were checked byte for byte
// against Python's jinja2, so this checks gonja against jinja2 too.
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

// Gemma 3's template uses a conditional expression in parentheses, which
// gonja cannot parse: ForModel falls back to the Gemma family. The same
// template with that expression written as an if block compiles, and must
// render every conversation as the family does.
func TestJinjaGemma(t *testing.T) {
	m, err := ForModel(gemmaTemplate, "<bos>", "<eos>")
	require.NoError(t, err)
	require.Equal(t, "gemma", m.Name())
	hoisted := strings.Replace(gemmaTemplate,
		`{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}`,
		`{{ '<start_of_turn>' + role + '\n' }}{%- if loop.first -%}{{ first_user_prefix }}{%- endif -%}`, 1)
	require.NotEqual(t, gemmaTemplate, hoisted)
	jinjaMatchesFamily(t, hoisted, "<bos>", "<eos>", true) // messages[0] of none fails in jinja2 too
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

	// A template that compiles but fails at render time falls back too.
	failing := "<|im_start|><|im_end|>{{ messages[0].content.no_such_method() }}"
	m, err = ForModel(failing, "", "")
	require.NoError(t, err)
	require.Equal(t, "jinja", m.Name())
	got, err = m.Render([]Message{user("Hi")}, false)
	require.NoError(t, err)
	require.Equal(t, "<|im_start|>user\nHi<|im_end|>\n", got)
}

func TestModelNeitherRenders(t *testing.T) {
	_, err := ForModel("{% if %}", "", "")
	require.Error(t, err)
	_, err = ForModel("   ", "", "")
	require.Error(t, err)
}

func TestJinjaNoFileAccess(t *testing.T) {
	m, err := NewJinja(`{% include "/etc/passwd" %}`, "", "")
	if err == nil {
		_, err = m.Render([]Message{user("x")}, false)
	}
	require.Error(t, err)
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
