package grammar

import (
	"context"
	"fmt"
)

// Limits of one compile as a whole (a schema's JSON read, converted,
// parsed and analysed). The limits on its parts (MaxGrammarBytes,
// MaxElements, MaxRules, ...) already keep a compile finite; these keep
// it short and its memory known whatever part the work lands in, and the
// context stops it when the request it is for goes away.
const (
	// MaxCompileSteps bounds the units of work of one compile: a schema
	// node, a pattern character, a converted rule, a grammar element
	// made, one element visited by each pass of the analysis. The
	// largest grammars the other limits let through take a few million.
	MaxCompileSteps = 1 << 25
	// MaxCompileBytes bounds the memory one compile builds up (converted
	// rule text, the GBNF text, the elements and rules), counted before
	// it is allocated.
	MaxCompileBytes = 64 << 20
	// pollEvery is how many steps pass between looks at the context: a
	// cancelled compile stops within that much work (well under a
	// millisecond), and polling costs nothing measurable.
	pollEvery = 1 << 12
)

// elemBytes is what an element costs in a compiled grammar: the struct and
// the two runes of its usual one range.
const elemBytes = 48

// budget counts one compile's steps and bytes and polls its context.
// A nil *budget is unbounded and never cancelled (the grammars the
// package builds from constants).
type budget struct {
	ctx   context.Context
	steps int64
	bytes int64
	poll  int64 // the step count at which the context is looked at next
}

func newBudget(ctx context.Context) *budget {
	if ctx == nil {
		ctx = context.Background()
	}
	return &budget{ctx: ctx, poll: pollEvery}
}

// CompileError is a compile that stopped before it finished: its context
// was done (Err wraps the context's error, so errors.Is(err,
// context.Canceled) holds), or it needed more than MaxCompileSteps steps
// or MaxCompileBytes bytes.
type CompileError struct {
	Msg string
	Err error // the context's error, or nil for a limit
}

func (e *CompileError) Error() string { return "grammar: " + e.Msg }
func (e *CompileError) Unwrap() error { return e.Err }

// step counts n units of work, and every pollEvery of them looks at the
// context.
func (b *budget) step(n int) error {
	if b == nil {
		return nil
	}
	b.steps += int64(n)
	if b.steps > MaxCompileSteps {
		return &CompileError{Msg: fmt.Sprintf("compiling takes more than %d steps; simplify the grammar or schema", MaxCompileSteps)}
	}
	if b.steps >= b.poll {
		b.poll = b.steps + pollEvery
		if err := b.ctx.Err(); err != nil {
			return &CompileError{Msg: fmt.Sprintf("compile stopped after %d steps: %v", b.steps, err), Err: err}
		}
	}
	return nil
}

// alloc counts n bytes about to be allocated.
func (b *budget) alloc(n int) error {
	if b == nil {
		return nil
	}
	if b.bytes += int64(n); b.bytes > MaxCompileBytes {
		return &CompileError{Msg: fmt.Sprintf("compiling needs more than %d MiB; simplify the grammar or schema", MaxCompileBytes>>20)}
	}
	return b.step(1 + n>>6) // building n bytes is work too
}
