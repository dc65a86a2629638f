package jinja

import (
	"context"
	"fmt"
)

// Limits bound one render. The budget they set is the interpreter's own
// state: a template can neither read nor change it.
type Limits struct {
	// Steps is how much work a render may do: every statement and
	// expression evaluated and every loop pass costs a step, and
	// operations that scan data cost one per 64 bytes or items.
	Steps int64
	// CallDepth bounds nested macro calls and recursive loop() calls.
	CallDepth int
	// Output bounds the rendered text, and any one value the template
	// builds (a string, a list's items).
	Output int
	// Alloc bounds the bytes of all the values a render creates, so that
	// a loop building values it throws away stops too.
	Alloc int64
}

// DefaultLimits are far beyond what real chat templates need (they
// render a conversation in well under a million steps and a few nested
// macro calls) and small enough that a runaway template fails within a
// second or so and a few hundred megabytes.
func DefaultLimits() Limits {
	return Limits{Steps: 20_000_000, CallDepth: 200, Output: 16 << 20, Alloc: 256 << 20}
}

// maxEvalDepth bounds the evaluator's recursion (statements within
// statements, expressions within expressions, across macro calls): the
// parser bounds one template's nesting, this the nesting of calls on top
// of it, so the Go stack stays a few megabytes at most.
const maxEvalDepth = 8192

// checkEvery is how many steps pass between looks at the context.
const checkEvery = 1024

// budget is a render's accounting.
type budget struct {
	ctx       context.Context
	lim       Limits
	steps     int64
	nextCheck int64
	allocated int64
	depth     int // evaluator recursion
	calls     int // macro and loop() calls in progress
	failed    *LimitError
}

func (b *budget) init(ctx context.Context, lim Limits) {
	b.ctx, b.lim = ctx, lim
	b.nextCheck = min(checkEvery, lim.Steps+1)
}

func (b *budget) fail(format string, args ...any) *LimitError {
	if b.failed == nil {
		b.failed = &LimitError{Msg: fmt.Sprintf(format, args...)}
	}
	return b.failed
}

// step charges one step.
func (b *budget) step() error {
	b.steps++
	if b.steps >= b.nextCheck {
		return b.check()
	}
	return nil
}

// scan charges for work proportional to n bytes: a step per 64.
func (b *budget) scan(n int) error { return b.spend(int64(n>>6) + 1) }

// spend charges n steps at once (a step per item of a list an operation
// goes through).
func (b *budget) spend(n int64) error {
	if n < 0 || n > b.lim.Steps {
		n = b.lim.Steps + 1
	}
	b.steps += n
	if b.steps >= b.nextCheck {
		return b.check()
	}
	return nil
}

// size charges for an operation on v in proportion to v's size: a step
// per 64 bytes of a string, a step per item of a list or dict. Every
// method, filter and test call pays it for its operand, so no call on a
// large value is cheap however it is repeated.
func (b *budget) size(v Value) error {
	switch x := v.(type) {
	case string:
		return b.scan(len(x))
	case Markup:
		return b.scan(len(x))
	case *List:
		return b.spend(int64(len(x.Items)))
	case *Dict:
		return b.spend(int64(x.Len()))
	case *Generator:
		return b.spend(int64(len(x.items)))
	}
	return nil
}

func (b *budget) check() error {
	if b.failed != nil {
		return b.failed
	}
	if b.steps > b.lim.Steps {
		return b.fail("the template ran for more than %d steps (it may loop without end)", b.lim.Steps)
	}
	if err := b.ctx.Err(); err != nil {
		b.fail("the render was stopped: %v", err)
		b.failed.cause = err
		return b.failed
	}
	b.nextCheck = min(b.steps+checkEvery, b.lim.Steps+1)
	return nil
}

// alloc asks for n bytes for one new value before it is made.
func (b *budget) alloc(n int64) error {
	if b.failed != nil {
		return b.failed
	}
	if n > int64(b.lim.Output) || n < 0 {
		return b.fail("the template would build a value of %d bytes; at most %d are allowed", n, b.lim.Output)
	}
	b.allocated += n
	if b.allocated > b.lim.Alloc {
		return b.fail("the template allocated more than %d bytes", b.lim.Alloc)
	}
	return nil
}

// allocItems asks for a list of n items of itemBytes each, guarding the
// product against overflow.
func (b *budget) allocItems(n, itemBytes int64) error {
	if n < 0 || (n > 0 && n > int64(b.lim.Output)/itemBytes+1) {
		return b.fail("the template would build a list of %d items, too many", n)
	}
	return b.alloc(n * itemBytes)
}

// itemBytes is what a list item costs (an interface value), and
// entryBytes an entry in a dict (key, value, its hash key and its index
// entry).
const (
	itemBytes  = 16
	entryBytes = 160
)

// enter counts one level of the evaluator's recursion.
func (b *budget) enter() error {
	b.depth++
	if b.depth > maxEvalDepth {
		return b.fail("the template nests calls deeper than the interpreter allows (%d levels)", maxEvalDepth)
	}
	return nil
}

func (b *budget) leave() { b.depth-- }

// sbuf is a string being built under the budget: every write checks the
// size limit and charges the allocation before it copies. The first
// failure sticks (err) and later writes do nothing, so builders can write
// freely and check once.
type sbuf struct {
	b   *budget
	buf []byte
	err error
}

func (s *sbuf) WriteString(x string) {
	if s.err != nil {
		return
	}
	if len(s.buf)+len(x) > s.b.lim.Output {
		s.err = s.b.fail("the template would build text of more than %d bytes", s.b.lim.Output)
		return
	}
	if err := s.b.alloc(int64(len(x))); err != nil {
		s.err = err
		return
	}
	s.buf = append(s.buf, x...)
}

func (s *sbuf) WriteByte(c byte) error {
	if s.err != nil {
		return s.err
	}
	if len(s.buf) >= s.b.lim.Output {
		s.err = s.b.fail("the template would build text of more than %d bytes", s.b.lim.Output)
		return s.err
	}
	s.b.allocated++
	s.buf = append(s.buf, c)
	return nil
}

func (s *sbuf) String() string { return string(s.buf) }
