package grammar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// cancelAfter is a context that turns cancelled once Err has been asked n
// times: a compile's cancellation, made deterministic. polls counts the
// asks, so a test sees how far the compile went on after the cancel.
type cancelAfter struct {
	context.Context
	n, polls atomic.Int64
}

func newCancelAfter(n int64) *cancelAfter {
	c := &cancelAfter{Context: context.Background()}
	c.n.Store(n)
	return c
}

func (c *cancelAfter) Err() error {
	if c.polls.Add(1) > c.n.Load() {
		return context.Canceled
	}
	return nil
}

// bigSchema is a legal schema whose compile is long: n properties, each
// a string with a pattern.
func bigSchema(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"type": "object", "properties": {`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"p%d": {"type": "string", "pattern": "[a-z]+(-[0-9]{2})?"}`, i)
	}
	b.WriteString(`}, "required": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"p%d"`, i)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

var bigGBNF = "root ::= " + strings.Repeat(`("ab" [c-x]){1000} `, 50)

// A compile whose context is cancelled stops at its next look at the
// context (every pollEvery steps): a client that leaves while its schema
// compiles stops the work, at every stage (reading the schema, converting
// it, parsing and analysing the grammar), and the error says so.
func TestCompileStopsWhenCancelled(t *testing.T) {
	schema := bigSchema(1500)
	tools := []Tool{{Name: "a", Parameters: bigSchema(600)}, {Name: "b", Parameters: bigSchema(600)}}
	compiles := map[string]func(ctx context.Context) error{
		"schema": func(ctx context.Context) error { _, err := FromSchemaContext(ctx, schema); return err },
		"gbnf":   func(ctx context.Context) error { _, err := ParseContext(ctx, bigGBNF); return err },
		"tools": func(ctx context.Context) error {
			_, err := ToolCallsContext(ctx, CallShape{NameKey: "name", ArgsKey: "arguments"}, tools)
			return err
		},
	}
	for name, compile := range compiles {
		// How many polls a whole compile makes.
		whole := newCancelAfter(1 << 62)
		if err := compile(whole); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		total := whole.polls.Load()
		if total < 8 {
			t.Fatalf("%s: the compile polled its context only %d times", name, total)
		}
		// Cancelled before it starts, a quarter in, halfway, near the end.
		for _, at := range []int64{0, total / 4, total / 2, total - 1} {
			ctx := newCancelAfter(at)
			err := compile(ctx)
			var ce *CompileError
			if !errors.Is(err, context.Canceled) || !errors.As(err, &ce) || !strings.Contains(err.Error(), "compile stopped") {
				t.Fatalf("%s cancelled after %d of %d polls: %v", name, at, total, err)
			}
			if got := ctx.polls.Load(); got != at+1 {
				t.Fatalf("%s cancelled after %d polls went on to poll %d times", name, at, got)
			}
		}
	}
}

// The largest grammars the other limits let through stay far inside the
// compile's step and byte budgets, so the budgets refuse only what would
// otherwise run long.
func TestBudgetsLeaveRoomForLegalGrammars(t *testing.T) {
	b := newBudget(context.Background())
	if _, err := parse(b, bigGBNF); err != nil {
		t.Fatal(err)
	}
	if b.steps > MaxCompileSteps/4 || b.bytes > MaxCompileBytes/4 {
		t.Errorf("50,000-element grammar: %d steps, %d bytes", b.steps, b.bytes)
	}
	b = newBudget(context.Background())
	v, err := parseSchema(b, bigSchema(1500))
	if err != nil {
		t.Fatal(err)
	}
	c := newConv(b)
	name, err := c.convert(v, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.compile("root ::= " + name + "\n"); err != nil {
		t.Fatal(err)
	}
	if b.steps > MaxCompileSteps/4 || b.bytes > MaxCompileBytes/4 {
		t.Errorf("1,500-property schema: %d steps, %d bytes", b.steps, b.bytes)
	}
}

// A schema whose grammar would outgrow MaxGrammarBytes is refused while
// it converts, once its rules pass the limit, not after all of them are
// made (20,000 patterned properties used to be converted whole first).
func TestOversizedSchemaStopsEarly(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"type": "object", "properties": {`)
	for i := range 6000 {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, `"p%d": {"type": "string", "pattern": "%s"}`, i, strings.Repeat("x", 200))
	}
	sb.WriteString("}}")
	schema := []byte(sb.String())
	b := newBudget(context.Background())
	v, err := parseSchema(b, schema)
	if err != nil {
		t.Fatal(err)
	}
	c := newConv(b)
	_, err = c.convert(v, 0)
	var se *SchemaError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Fatalf("6,000 long patterns: %v", err)
	}
	if c.built > MaxGrammarBytes+4096 {
		t.Errorf("refused only after %d bytes of rules were made", c.built)
	}
	if _, err := FromSchema(schema); !errors.As(err, &se) {
		t.Errorf("FromSchema: %v", err)
	}
}

// Past its step or byte budget a compile stops with a CompileError that
// names the limit and wraps no context error.
func TestBudgetLimits(t *testing.T) {
	b := newBudget(context.Background())
	b.steps = MaxCompileSteps - 10
	err := b.step(20)
	var ce *CompileError
	if !errors.As(err, &ce) || ce.Err != nil || !strings.Contains(err.Error(), "more than 33554432 steps") {
		t.Errorf("steps: %v", err)
	}
	b = newBudget(context.Background())
	if err := b.alloc(MaxCompileBytes); err != nil {
		t.Fatalf("exactly the budget: %v", err)
	}
	if err := b.alloc(1); !errors.As(err, &ce) || !strings.Contains(err.Error(), "more than 64 MiB") {
		t.Errorf("bytes: %v", err)
	}
	var none *budget
	if none.step(1<<40) != nil || none.alloc(1<<40) != nil {
		t.Error("a nil budget limits")
	}
}
