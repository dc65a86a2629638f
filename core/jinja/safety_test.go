package jinja

import (
	"context"
	"errors"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The limits the attack tests render under: small enough that a test
// that allocated what a runaway template asks for would show in
// TotalAlloc, large enough for every ordinary template.
var testLimits = Limits{Steps: 2_000_000, CallDepth: 100, Output: 4 << 20, Alloc: 32 << 20}

// maxAttackAlloc bounds what one attack may allocate in all (parse and
// render). The budget stops the values a template makes at Alloc; the
// interpreter's own short-lived garbage over millions of steps comes on
// top. An operation that allocated before it checked (the attacks ask
// for 1 to 100 GB) would be far beyond it.
const maxAttackAlloc = 512 << 20

// attempt parses and renders src under testLimits, reporting the error
// and the bytes allocated meanwhile.
func attempt(t *testing.T, src string, lim Limits) (uint64, error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	tmpl, err := Parse(src)
	if err == nil {
		_, err = tmpl.Render(context.Background(), map[string]Value{"messages": NewList([]Value{"hi"})}, Options{Limits: lim})
	}
	runtime.ReadMemStats(&after)
	// A render leaves nothing running behind it.
	require.LessOrEqual(t, runtime.NumGoroutine(), goroutines)
	return after.TotalAlloc - before.TotalAlloc, err
}

func nested(open, middle, close string, n int) string {
	return strings.Repeat(open, n) + middle + strings.Repeat(close, n)
}

// Templates that would overflow the Go stack (a fatal error, not a
// panic) if the parser recursed without a bound: each is refused with a
// SyntaxError.
func TestDeepTemplatesRefused(t *testing.T) {
	cases := map[string]string{
		"parentheses 300k":  "{{ " + nested("(", "1", ")", 300_000) + " }}",
		"brackets 100k":     "{{ " + nested("[", "1", "]", 100_000) + " }}",
		"braces 100k":       "{{ " + nested("{'a': ", "1", "}", 100_000) + " }}",
		"ifs 100k":          nested("{% if 1 %}", "x", "{% endif %}", 100_000),
		"fors 50k":          nested("{% for x in [1] %}", "x", "{% endfor %}", 50_000),
		"macros 50k":        nested("{% macro m() %}", "x", "{% endmacro %}", 50_000),
		"nots 200k":         "{{ " + strings.Repeat("not ", 200_000) + "1 }}",
		"minuses 300k":      "{{ " + strings.Repeat("-", 300_000) + "1 }}",
		"plus chain 200k":   "{{ 1" + strings.Repeat(" + 1", 200_000) + " }}",
		"filter chain 100k": "{{ 'x'" + strings.Repeat("|trim", 100_000) + " }}",
		"attr chain 200k":   "{{ x" + strings.Repeat(".a", 200_000) + " }}",
		"call chain 100k":   "{{ x" + strings.Repeat("()", 100_000) + " }}",
		"inline ifs 100k":   "{{ 1" + strings.Repeat(" if 1 else 1", 100_000) + " }}",
		"and chain 200k":    "{{ 1" + strings.Repeat(" and 1", 200_000) + " }}",
		"tests 100k":        "{{ x" + strings.Repeat(" and x is defined", 100_000) + " }}",
		"unclosed 500k":     "{{ " + strings.Repeat("(", 500_000),
		"set blocks 50k":    nested("{% set x %}", "x", "{% endset %}", 50_000),
		"calls 50k":         nested("{% call m() %}", "x", "{% endcall %}", 50_000),
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			alloc, err := attempt(t, src, testLimits)
			var syntax *SyntaxError
			require.ErrorAs(t, err, &syntax, "got %v", err)
			require.Less(t, alloc, uint64(maxAttackAlloc))
		})
	}
}

// A chat template has only itself: it cannot load another, itself
// included ({% extends '/chat_template' %} recursed without end in the
// engine before this one).
func TestLoadingTemplatesRefused(t *testing.T) {
	for _, src := range []string{
		"{% extends '/chat_template' %}",
		"{% include '/chat_template' %}",
		"{% import '/chat_template' as x %}",
		"{% from '/chat_template' import x %}",
	} {
		_, err := Parse(src)
		var syntax *SyntaxError
		require.ErrorAs(t, err, &syntax, src)
		require.Contains(t, err.Error(), "cannot load other templates")
	}
}

// Templates that ask for too much work or memory stop with a LimitError,
// having allocated no more than the budget lets them: every operation
// that makes a value asks the budget before it allocates.
func TestRunawayTemplatesStop(t *testing.T) {
	cases := map[string]string{
		"budget variable is just a variable": "{% set __lmstream_render_budget__ = 0 %}{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		"self-recursive macro":               "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
		"mutually recursive macros":          "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}x{{ a() }}{% endmacro %}{{ a() }}",
		"recursive loop":                     "{% for m in [1] recursive %}{{ loop([m]) }}{% endfor %}",
		"recursive loop, wide":               "{% for i in range(1000) recursive %}{{ loop(range(1000)) }}{% endfor %}",
		"center 1e11":                        "{{ 'x' | center(100000000000) }}",
		"repeat 1e11":                        "{{ 'x' * 100000000000 }}",
		"repeat 1e9":                         "{{ 'x' * 1000000000 }}",
		"list repeat 1e11":                   "{{ [1, 2] * 100000000000 }}",
		"int times string":                   "{{ 100000000000 * 'abc' }}",
		"chained replace":                    "{{ 'x'" + strings.Repeat("|replace('x', 'xxxxxxxxxx')", 12) + " }}",
		"replace method":                     "{% set s = 'x' * 1000 %}{{ s.replace('x', s).replace('x', s) }}",
		"replace empty":                      "{{ ('x' * 1000000).replace('', 'yyyyyyyyyyyyyyyyyyyyyy') }}",
		"indent 1e9":                         "{{ 'x' | indent(1000000000) }}",
		"indent lines":                       "{{ ('\\n' * 500000) | indent(100) }}",
		"ljust 1e10":                         "{{ 'x'.ljust(10000000000) }}",
		"zfill 1e10":                         "{{ '1'.zfill(10000000000) }}",
		"percent width":                      "{{ '%100000000000s' % 'x' }}",
		"format width":                       "{{ '{:>100000000000}'.format('x') }}",
		"join big":                           "{{ range(100000) | join('x' * 1000) }}",
		"string doubling":                    "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		"string doubling with +":             "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
		"list doubling":                      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
		"long concat":                        "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ ('x' * 64) %}{% endfor %}",
		"many long strings":                  "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [('x' * 1000) ~ i] %}{% endfor %}",
		"output flood":                       "{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}",
		"nested loops":                       "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
		"nested loops with tags":             "{% for i in range(100000) %}{% for j in range(100000) %}{% if j %}{% endif %}{% endfor %}{% endfor %}",
		"nested loops writing":               "{% for i in range(100000) %}{% for j in range(100000) %}{{ messages }}{% endfor %}{% endfor %}",
		"range too big":                      "{% for i in range(1000000000000) %}{% endfor %}",
		"many small lists":                   "{% for i in range(100000) %}{% set x = range(10000) | list %}{% endfor %}",
		"dict building":                      "{% set ns = namespace(d={}) %}{% for i in range(100000) %}{% set ns.d = dict(ns.d, **{('k' ~ i): i}) %}{% endfor %}",
		"membership in big list":             "{% set l = range(100000) | list %}{% for i in range(100000) %}{% if -1 in l %}{% endif %}{% endfor %}",
		"length of big string":               "{% set s = 'x' * 1000000 %}{% for i in range(1000000) %}{{ s | length and '' }}{% endfor %}",
		"method on big string":               "{% set s = 'x' * 1000000 %}{% for i in range(1000000) %}{{ s.isupper() and '' }}{% endfor %}",
		"sort big":                           "{% for i in range(1000) %}{% set x = range(100000) | sort %}{% endfor %}",
		"tojson big":                         "{% for i in range(1000) %}{% set x = range(100000) | list | tojson %}{% endfor %}",
		"tojson indent":                      "{{ [[[[1]]]] | tojson(indent=1000000000) }}",
		"strftime flood":                     "{% for i in range(100000) %}{% set x = strftime_now('%Y' * 10000) %}{% endfor %}",
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			alloc, err := attempt(t, src, testLimits)
			var e *Error
			var limit *LimitError
			if !errors.As(err, &limit) {
				// Python's own limits (MAX_RANGE) come first in a few;
				// they are errors too.
				require.ErrorAs(t, err, &e, "got %v", err)
			}
			t.Logf("%v; %d MiB allocated", err, alloc>>20)
			require.Less(t, alloc, uint64(maxAttackAlloc))
		})
	}
}

// Values that contain themselves, or nest deeper than any input could,
// fail to print, compare or convert instead of recursing without end.
func TestSelfContainingValues(t *testing.T) {
	build := "{% set ns = namespace(l=[]) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}"
	self := "{% set ns = namespace() %}{% set ns.me = ns %}"
	for _, src := range []string{
		build + "{{ ns.l }}",
		build + "{{ ns.l | tojson }}",
		build + "{{ ns.l == ns.l }}",
		build + "{{ ns.l < ns.l }}",
		build + "{{ ns.l in [ns.l] }}",
		"{% set ns = namespace(t=1) %}{% for i in range(5000) %}{% set ns.t = (ns.t,) %}{% endfor %}{{ {ns.t: 1} }}",
		self + "{{ ns }}",
		self + "{{ [ns] | string }}",
	} {
		alloc, err := attempt(t, src, DefaultLimits())
		require.Error(t, err, src)
		require.Less(t, alloc, uint64(maxAttackAlloc))
	}
}

// A cancelled context stops a render that no other limit would stop for
// a long time, and the cause says so.
func TestCancelledRenderStops(t *testing.T) {
	tmpl, err := Parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	lim := DefaultLimits()
	lim.Steps = 1 << 62
	done := make(chan error, 1)
	go func() {
		_, err := tmpl.Render(ctx, nil, Options{Limits: lim})
		done <- err
	}()
	cancel()
	err = <-done
	var limit *LimitError
	require.ErrorAs(t, err, &limit)
	require.ErrorIs(t, err, context.Canceled)
}

// Under a process memory limit far below what the attacks ask for, they
// all still fail cleanly: nothing allocates first and checks after.
func TestAttacksUnderMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(256 << 20)
	defer debug.SetMemoryLimit(old)
	for _, src := range []string{
		"{{ 'x' | center(100000000000) }}",
		"{{ 'x' * 100000000000 }}",
		"{{ 'x'" + strings.Repeat("|replace('x', 'xxxxxxxxxx')", 12) + " }}",
		"{{ 'x' | indent(1000000000) }}",
	} {
		tmpl, err := Parse(src)
		require.NoError(t, err)
		_, err = tmpl.Render(context.Background(), nil, Options{})
		var limit *LimitError
		require.ErrorAs(t, err, &limit, src)
	}
}

// Ordinary templates keep rendering under the budget: recursion that
// ends, ranges, a loop over a long conversation.
func TestBudgetLeavesFiniteTemplatesAlone(t *testing.T) {
	src := "{% macro f(n) %}{% if n > 0 %}{{ n }},{{ f(n - 1) }}{% endif %}{% endmacro %}" +
		"{{ f(50) }}|{% for m in [[[1], 2], 3] recursive %}{% if m is iterable %}{{ loop(m) }}{% else %}{{ m }}{% endif %}{% endfor %}" +
		"|{% for i in range(2, 11, 4) %}{{ i }}{% endfor %}|{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}"
	tmpl, err := Parse(src)
	require.NoError(t, err)
	out, err := tmpl.Render(context.Background(), nil, Options{})
	require.NoError(t, err)
	var want strings.Builder
	for n := 50; n > 0; n-- {
		want.WriteString(strconv.Itoa(n) + ",")
	}
	require.Equal(t, want.String()+"|123|2610|321", out)
}
