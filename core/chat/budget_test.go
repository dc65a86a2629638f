package chat

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Templates that never end (or would take ages, or eat memory) each stop
// with a BudgetError, promptly, whichever hook catches them.
func TestJinjaRunawayTemplatesStop(t *testing.T) {
	cases := map[string]string{
		"self-recursive macro":        "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
		"mutually recursive macros":   "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}x{{ a() }}{% endmacro %}{{ a() }}",
		"huge range":                  "{% for i in range(1000000000000) %}{{ i }}{% endfor %}",
		"nested loops, silent":        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
		"nested loops with tags":      "{% for i in range(100000) %}{% for j in range(100000) %}{% if j %}{% endif %}{% endfor %}{% endfor %}",
		"nested loops writing output": "{% for i in range(100000) %}{% for j in range(100000) %}{{ messages }}{% endfor %}{% endfor %}",
		"recursive loop":              "{% for m in [messages] recursive %}{{ loop([m]) }}{% endfor %}",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			j, err := NewJinja(src, "", "")
			require.NoError(t, err)
			j.Timeout = 300 * time.Millisecond
			start := time.Now()
			_, err = j.Render([]Message{user("hi")}, true)
			took := time.Since(start)
			var budget *BudgetError
			require.ErrorAs(t, err, &budget, "got %v", err)
			t.Logf("%v after %v", err, took)
			// The caller never waits past the timeout and the grace period
			// (plus scheduling slack on a loaded machine).
			require.Less(t, took, j.Timeout+renderGrace+2*time.Second)
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

// Ordinary templates keep rendering under the hooks, range() included,
// and recursion that ends stays allowed.
func TestJinjaBudgetLeavesFiniteTemplatesAlone(t *testing.T) {
	src := "{% macro f(n) %}{% if n > 0 %}{{ n }},{{ f(n - 1) }}{% endif %}{% endmacro %}" +
		"{{ f(50) }}|{% for m in [[[1], 2], 3] recursive %}{% if m is iterable %}{{ loop(m) }}{% else %}{{ m }}{% endif %}{% endfor %}|{% for i in range(2, 11, 4) %}{{ i }}{% endfor %}|{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}|{{ messages[0].content }}"
	j, err := NewJinja(src, "", "")
	require.NoError(t, err)
	out, err := j.Render([]Message{user("hi")}, true)
	require.NoError(t, err)
	var want strings.Builder
	for n := 50; n > 0; n-- {
		want.WriteString(strconv.Itoa(n) + ",")
	}
	require.Equal(t, want.String()+"|123|2610|321|hi", out)
}

// An abandoned render's goroutine ends: the hooks it meets after the
// deadline all fail, so goroutines do not pile up render after render.
func TestJinjaAbandonedRendersWindDown(t *testing.T) {
	j, err := NewJinja("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "", "")
	require.NoError(t, err)
	j.Timeout = 50 * time.Millisecond
	before := runtime.NumGoroutine()
	for i := 0; i < 5; i++ {
		_, err := j.Render(nil, true)
		require.Error(t, err)
	}
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+1 },
		10*time.Second, 10*time.Millisecond)
}
