package chat

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The attacks of issue 47, each of which aborted the process (a stack
// overflow or out of memory, both fatal in Go) or left a render running
// under the previous engine: each now fails its parse or its render with
// an error, and leaves no goroutine behind.
func TestHostileTemplatesFail(t *testing.T) {
	parseRefused := map[string]string{
		"extends itself":      "{% extends '/chat_template' %}",
		"parentheses 300k":    "{{ " + strings.Repeat("(", 300_000) + "1" + strings.Repeat(")", 300_000) + " }}",
		"brackets 100k":       "{{ " + strings.Repeat("[", 100_000) + "1" + strings.Repeat("]", 100_000) + " }}",
		"include another":     "{% include 'x' %}",
		"blocks nested 100k":  strings.Repeat("{% if 1 %}", 100_000) + strings.Repeat("{% endif %}", 100_000),
		"filter chain 100k":   "{{ 'x'" + strings.Repeat("|trim", 100_000) + " }}",
		"attribute chain 1e5": "{{ x" + strings.Repeat(".a", 100_000) + " }}",
	}
	for name, src := range parseRefused {
		t.Run(name, func(t *testing.T) {
			_, err := NewJinja(src, "", "")
			require.Error(t, err)
			_, err = ForModel(src, "", "")
			require.Error(t, err)
		})
	}
	budgetStops := map[string]string{
		"budget variable set, then recursion": "{% set __lmstream_render_budget__ = 0 %}{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		"center 1e11":                         "{{ 'x' | center(100000000000) }}",
		"repeat 1e11":                         "{{ 'x' * 100000000000 }}",
		"chained replace":                     "{{ 'x'" + strings.Repeat("|replace('x', 'xxxxxxxxxx')", 12) + " }}",
		"repeat 1e9":                          "{{ 'x' * 1000000000 }}",
		"indent 1e9":                          "{{ 'x' | indent(1000000000) }}",
		"endless loop":                        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
		"recursive loop":                      "{% for m in [messages] recursive %}{{ loop([m]) }}{% endfor %}",
		"mutually recursive macros":           "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}x{{ a() }}{% endmacro %}{{ a() }}",
	}
	for name, src := range budgetStops {
		t.Run(name, func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			m, err := ForModel(src, "", "")
			require.NoError(t, err)
			_, err = m.Render([]Message{user("hi")}, true)
			var budget *BudgetError
			require.ErrorAs(t, err, &budget, "got %v", err)
			require.LessOrEqual(t, runtime.NumGoroutine(), goroutines)
		})
	}
}

// A runaway template is an error through Model too: the family its text
// looks like does not paper over it.
func TestModelDoesNotFallBackOnRunaway(t *testing.T) {
	src := qwen2Template + "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"
	m, err := ForModel(src, "", "<|im_end|>")
	require.NoError(t, err)
	_, err = m.Render([]Message{user("hi")}, true)
	var budget *BudgetError
	require.ErrorAs(t, err, &budget)
}

// A render whose caller stops waiting (its context cancelled, or the
// timeout passed) returns at once with a BudgetError, and nothing of it
// keeps running.
func TestAbandonedRenderStops(t *testing.T) {
	j, err := NewJinja("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "", "")
	require.NoError(t, err)
	j.Limits.Steps = 1 << 62 // only the context stops it
	goroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = j.RenderConversation(ctx, Conversation{})
	var budget *BudgetError
	require.ErrorAs(t, err, &budget)
	require.Contains(t, err.Error(), "context canceled")
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines)
}
