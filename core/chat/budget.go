package chat

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	controlStructures "github.com/nikolalohinski/gonja/v2/builtins/control_structures"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// A chat template is code from a model file or a config field, and Jinja
// can loop for as long as it likes ({% for %} over range(10**12), a macro
// that calls itself). gonja has no cancellation, so a render is fenced in
// from both sides:
//
//   - from inside, by hooks the template cannot avoid: every control
//     structure it executes, every macro call, every range() and every byte
//     it writes checks a per-render budget (a deadline, a macro depth, an
//     output size), and the first check that fails makes the render return
//     that error;
//   - from outside, by running the render on its own goroutine and waiting
//     at most the deadline plus a grace period, so a render stuck inside a
//     single gonja operation that no hook sees (materialising a huge list)
//     still answers its caller in time. That goroutine then finishes on its
//     own, and every hook it passes fails at once.
//
// The limits are generous for real templates, which render a conversation
// in microseconds to milliseconds with a handful of nested macro calls.
const (
	// DefaultRenderTimeout bounds one render's wall time.
	DefaultRenderTimeout = 2 * time.Second
	// renderGrace is how long past the deadline the caller waits for the
	// render goroutine to notice it before giving up on it.
	renderGrace = 250 * time.Millisecond
	// maxMacroDepth bounds macro recursion, as Python's recursion limit
	// bounds jinja2's; each level costs Go stack, which is never returned
	// by a stack overflow but a fatal error.
	maxMacroDepth = 200
	// maxRange is the most items one range() call yields, jinja2's sandbox
	// MAX_RANGE: gonja materialises a loop's items before running it.
	maxRange = 100_000
	// maxRenderBytes bounds the rendered prompt; no context holds more.
	maxRenderBytes = 64 << 20
)

// BudgetError is a render stopped by its budget: the template runs away
// (or is far too slow), which no fallback should hide.
type BudgetError struct{ Msg string }

func (e *BudgetError) Error() string { return "chat: jinja: " + e.Msg }

// budgetKey is the context variable through which hooks find their
// render's budget (a renderer carries no other per-render state).
const budgetKey = "__lmstream_render_budget__"

type renderBudget struct {
	deadline time.Time
	depth    int          // macro calls in progress (one goroutine: no lock)
	bytes    int          // written to the output
	stopped  atomic.Value // error: set once the caller gave up
}

func (b *renderBudget) check() error {
	if err, _ := b.stopped.Load().(error); err != nil {
		return err
	}
	if time.Now().After(b.deadline) {
		return b.fail("rendering the chat template took too long (it may loop without end)")
	}
	return nil
}

// fail stops the render for good: gonja wraps errors in values and
// messages on their way out, so Render reports the first one from here
// rather than whatever reaches the top.
func (b *renderBudget) fail(format string, args ...any) error {
	err := &BudgetError{Msg: fmt.Sprintf(format, args...)}
	b.stopped.CompareAndSwap(nil, error(err))
	return b.stopped.Load().(error)
}

// budgetFrom finds the render's budget; a renderer without one (never the
// case through Render) runs unchecked rather than failing.
func budgetFrom(r *exec.Renderer) *renderBudget {
	if v, ok := r.Environment.Context.Get(budgetKey); ok {
		if b, ok := v.(*renderBudget); ok {
			return b
		}
	}
	return nil
}

// budgetWriter is the render's output: it refuses bytes past the budget,
// which also stops any loop that writes as it goes.
type budgetWriter struct {
	b   *renderBudget
	buf []byte
}

func (w *budgetWriter) Write(p []byte) (int, error) {
	if err := w.b.check(); err != nil {
		return 0, err
	}
	if len(w.buf)+len(p) > maxRenderBytes {
		return 0, w.b.fail("the rendered chat template exceeds %d bytes", maxRenderBytes)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// boundedRange replaces Jinja's range(): the same arguments, at most
// maxRange items, and a budget check per call (each pass of an outer loop
// calls it again).
func boundedRange(b *renderBudget) func(*exec.Evaluator, *exec.VarArgs) ([]int, error) {
	return func(_ *exec.Evaluator, params *exec.VarArgs) ([]int, error) {
		if err := b.check(); err != nil {
			return nil, err
		}
		start, stop, step := 0, 0, 1
		ints := make([]int, len(params.Args))
		for i, a := range params.Args {
			if !a.IsInteger() {
				return nil, errors.New("range: expected integer arguments [start, ]stop[, step]")
			}
			ints[i] = a.Integer()
		}
		switch len(ints) {
		case 1:
			stop = ints[0]
		case 2:
			start, stop = ints[0], ints[1]
		case 3:
			start, stop, step = ints[0], ints[1], ints[2]
		default:
			return nil, errors.New("range: expected integer arguments [start, ]stop[, step]")
		}
		if step == 0 {
			return nil, errors.New("range: step cannot be 0")
		}
		var n int64
		if step > 0 && stop > start {
			n = (int64(stop) - int64(start) + int64(step) - 1) / int64(step)
		} else if step < 0 && stop < start {
			n = (int64(start) - int64(stop) - int64(step) - 1) / -int64(step)
		}
		if n > maxRange {
			return nil, b.fail("range() of %d items exceeds the limit of %d", n, maxRange)
		}
		out := make([]int, 0, n)
		for i := int64(0); i < n; i++ {
			out = append(out, start+int(i)*step)
		}
		return out, nil
	}
}

// checked wraps a control structure so that executing it checks the
// budget first: any loop whose body holds a tag ({% if %}, {% set %}) is
// then checked on every pass.
type checked struct {
	nodes.ControlStructure
	inner exec.ControlStructure
}

func (c *checked) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	b := budgetFrom(r)
	if b != nil {
		if err := b.check(); err != nil {
			return err
		}
	}
	return c.inner.Execute(r, tag)
}

// checkedMacro is a {% macro %} tag. Executing the tag defines the macro
// in the context; this replaces that function by one that checks the
// budget and counts its depth on every call, since a macro's body that
// only outputs expressions passes no other hook.
type checkedMacro struct {
	checked
	name string
}

func (c *checkedMacro) Execute(r *exec.Renderer, tag *nodes.ControlStructureBlock) error {
	if err := c.checked.Execute(r, tag); err != nil {
		return err
	}
	b := budgetFrom(r)
	if b == nil {
		return nil
	}
	v, ok := r.Environment.Context.Get(c.name)
	if !ok {
		return nil
	}
	m, ok := v.(exec.Macro)
	if !ok {
		return nil
	}
	name := c.name
	r.Environment.Context.Set(name, exec.Macro(func(params *exec.VarArgs) *exec.Value {
		if err := b.check(); err != nil {
			return exec.AsValue(err)
		}
		if b.depth >= maxMacroDepth {
			return exec.AsValue(b.fail("macro %q nests deeper than %d calls", name, maxMacroDepth))
		}
		b.depth++
		defer func() { b.depth-- }()
		return m(params)
	}))
	return nil
}

// recursionGuard opens the body of a {% for ... recursive %} loop. The
// body's loop() recursion calls gonja directly, past every tag, so the
// guard wraps the loop() function the body sees, as checkedMacro wraps a
// macro.
type recursionGuard struct {
	nodes.ControlStructure // the loop's, for positions in messages
}

func (g *recursionGuard) Execute(r *exec.Renderer, _ *nodes.ControlStructureBlock) error {
	b := budgetFrom(r)
	if b == nil {
		return nil
	}
	if err := b.check(); err != nil {
		return err
	}
	v, ok := r.Environment.Context.Get("loop")
	if !ok {
		return nil
	}
	recurse, ok := v.(func(*exec.VarArgs) *exec.Value)
	if !ok {
		return nil
	}
	r.Environment.Context.Set("loop", func(va *exec.VarArgs) *exec.Value {
		if err := b.check(); err != nil {
			return exec.AsValue(err)
		}
		if b.depth >= maxMacroDepth {
			return exec.AsValue(b.fail("a recursive loop nests deeper than %d calls", maxMacroDepth))
		}
		b.depth++
		defer func() { b.depth-- }()
		return recurse(va)
	})
	return nil
}

// checkedStructures is gonja's set of tags with every tag checked.
var checkedStructures = func() *exec.ControlStructureSet {
	set := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{})
	set.Update(builtins.ControlStructures)
	for _, name := range []string{
		"autoescape", "block", "extends", "filter", "for", "from", "if",
		"import", "include", "macro", "raw", "set", "with", "do", "break",
		"continue", "trans", "call",
	} {
		parse, ok := set.Get(name)
		if !ok {
			continue
		}
		_ = set.Replace(name, func(p *parser.Parser, args *parser.Parser) (nodes.ControlStructure, error) {
			cs, err := parse(p, args)
			if err != nil {
				return nil, err
			}
			inner, ok := cs.(exec.ControlStructure)
			if !ok {
				return cs, nil
			}
			if f, ok := cs.(*controlStructures.ForControlStructure); ok && f.Recursive && f.BodyWrapper != nil {
				guard := &nodes.ControlStructureBlock{
					Location:         f.BodyWrapper.Location,
					Name:             "for",
					ControlStructure: &recursionGuard{ControlStructure: cs},
				}
				f.BodyWrapper.Nodes = append([]nodes.Node{guard}, f.BodyWrapper.Nodes...)
			}
			c := checked{ControlStructure: cs, inner: inner}
			if m, ok := cs.(*controlStructures.MacroControlStructure); ok {
				return &checkedMacro{checked: c, name: m.Name}, nil
			}
			return &c, nil
		})
	}
	return set
}()
