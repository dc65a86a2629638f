package jinja

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// fuzzLimits keep each execution short: a runaway template is stopped
// within 200k steps and a few megabytes.
var fuzzLimits = Limits{Steps: 200_000, CallDepth: 50, Output: 1 << 20, Alloc: 8 << 20}

// fuzzMemoryLimit is the fuzzing worker's soft memory limit.
const fuzzMemoryLimit = 512 << 20

// fuzzVars are what a chat template sees: messages with tool calls and
// reasoning, tools, and the usual flags.
var fuzzVars = func() map[string]Value {
	msgs, err := FromJSON([]byte(`[
		{"role": "system", "content": "Be brief."},
		{"role": "user", "content": "Weather in Paris? Café ☕"},
		{"role": "assistant", "content": "", "reasoning_content": "Call the tool.", "tool_calls": [
			{"id": "call0001a", "type": "function", "function": {"name": "get_weather", "arguments": {"location": "Paris", "n": [1, 2.5, null, true]}}}]},
		{"role": "tool", "content": "{\"temperature\": 18}", "tool_call_id": "call0001a", "name": "get_weather"},
		{"role": "assistant", "content": "18°C."}]`))
	if err != nil {
		panic(err)
	}
	tools, err := FromJSON([]byte(`[{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
		"parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}]`))
	if err != nil {
		panic(err)
	}
	return map[string]Value{
		"messages": msgs, "tools": tools, "documents": nil, "add_generation_prompt": true,
		"bos_token": "<s>", "eos_token": "</s>", "enable_thinking": true,
	}
}()

// FuzzTemplate parses and renders random and mutated templates, seeded
// with the corpus, the jinja2 cases and the attacks: whatever the text,
// the interpreter returns (no panic escapes, none is recovered from as an
// interpreter bug), within its step and memory budget, and leaves no
// goroutine behind.
func FuzzTemplate(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(corpusDir, "templates", "*.jinja"))
	for _, p := range paths {
		if src, err := os.ReadFile(p); err == nil {
			f.Add(string(src))
		}
	}
	if data, err := os.ReadFile("testdata/cases.json"); err == nil {
		var cases []jinjaCase
		if json.Unmarshal(data, &cases) == nil {
			for _, c := range cases {
				f.Add(c.Template)
			}
		}
	}
	for _, src := range []string{
		"{% extends '/chat_template' %}",
		"{{ " + strings.Repeat("(", 1000) + "1" + strings.Repeat(")", 1000) + " }}",
		"{% set __lmstream_render_budget__ = 0 %}{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		"{{ 'x' | center(100000000000) }}",
		"{{ 'x' * 100000000000 }}",
		"{{ 'x'|replace('x', 'xxxxxxxxxx')|replace('x', 'xxxxxxxxxx')|replace('x', 'xxxxxxxxxx') }}",
		"{{ 'x' | indent(1000000000) }}",
		"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
		"{% for m in [1] recursive %}{{ loop([m]) }}{% endfor %}",
		"{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
		"{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}",
	} {
		f.Add(src)
	}
	// The worker runs under a memory limit, and every so often checks
	// that renders leave nothing behind: after a collection the heap is
	// back under a bound that no retained garbage could stay under.
	old := debug.SetMemoryLimit(fuzzMemoryLimit)
	f.Cleanup(func() { debug.SetMemoryLimit(old) })
	execs := 0
	f.Fuzz(func(t *testing.T, src string) {
		execs++
		if execs%500 == 0 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > fuzzMemoryLimit/2 {
				t.Fatalf("%d MiB of heap live between renders", m.HeapAlloc>>20)
			}
		}
		goroutines := runtime.NumGoroutine()
		tmpl, err := Parse(src)
		if err != nil {
			var syntax *SyntaxError
			if !errors.As(err, &syntax) {
				t.Fatalf("Parse failed with %T, not a SyntaxError: %v", err, err)
			}
			return
		}
		out, r, err := tmpl.render(context.Background(), fuzzVars, Options{Limits: fuzzLimits, Now: caseNow})
		var e *Error
		if errors.As(err, &e) && e.Kind == internalError {
			t.Fatalf("the interpreter panicked: %v", err)
		}
		if r.steps > 2*fuzzLimits.Steps+checkEvery {
			t.Fatalf("ran %d steps, budget %d", r.steps, fuzzLimits.Steps)
		}
		if r.allocated > fuzzLimits.Alloc+int64(fuzzLimits.Output) {
			t.Fatalf("allocated %d bytes, budget %d", r.allocated, fuzzLimits.Alloc)
		}
		if len(out) > fuzzLimits.Output {
			t.Fatalf("rendered %d bytes, budget %d", len(out), fuzzLimits.Output)
		}
		if n := runtime.NumGoroutine(); n > goroutines {
			t.Fatalf("%d goroutines after the render, %d before", n, goroutines)
		}
	})
}
