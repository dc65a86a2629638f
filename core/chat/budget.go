package chat

import (
	"errors"
	"time"

	"github.com/lmstream/lmstream/core/jinja"
)

// A chat template is code from a model file or a config field, and Jinja
// can loop for as long as it likes ({% for %} over range(10**12), a macro
// that calls itself) or ask for any amount of memory ('x' * 10**11). The
// interpreter (core/jinja) renders under a budget it holds itself, out of
// the template's reach: steps, call depth, the size of the output and of
// any one value, the bytes allocated in all, and a deadline. A render
// runs on its caller's goroutine and returns when any of them runs out.
//
// The limits are generous for real templates: the 68 templates of the
// corpus (testdata/) render a 400-message, 1 MB conversation in at most
// about half a million steps and a few megabytes.

// DefaultRenderTimeout bounds one render's wall time.
const DefaultRenderTimeout = 2 * time.Second

// DefaultLimits are the interpreter's own defaults.
func DefaultLimits() jinja.Limits { return jinja.DefaultLimits() }

// BudgetError is a render stopped by its budget: the template runs away
// (or is far too slow), which no fallback should hide.
type BudgetError struct{ Msg string }

func (e *BudgetError) Error() string { return "chat: jinja: " + e.Msg }

// RenderError is a template that failed at run time as jinja2 would (an
// undefined value used, a type error): Kind is the Python exception.
type RenderError struct {
	Kind, Msg string
	Line      int
}

func (e *RenderError) Error() string {
	return "chat: " + (&jinja.Error{Line: e.Line, Kind: e.Kind, Msg: e.Msg}).Error()
}

// renderError maps the interpreter's errors onto this package's.
func renderError(err error) error {
	var raised *jinja.RaiseError
	var limit *jinja.LimitError
	var failed *jinja.Error
	switch {
	case errors.As(err, &raised):
		return &TemplateError{Msg: raised.Msg}
	case errors.As(err, &limit):
		return &BudgetError{Msg: limit.Msg}
	case errors.As(err, &failed):
		return &RenderError{Kind: failed.Kind, Msg: failed.Msg, Line: failed.Line}
	}
	return err
}
