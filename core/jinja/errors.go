package jinja

import "fmt"

// SyntaxError is a template Parse refuses: text jinja2 cannot compile
// either, or one that reaches for what a chat template may not have
// (another template, more nesting than the parser allows).
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("jinja: line %d: %s", e.Line, e.Msg) }

// Error is a render that failed the way jinja2's would: an undefined
// value used, a type error, a call with the wrong arguments. Kind is the
// Python exception jinja2 raises for it (TypeError, UndefinedError, ...).
type Error struct {
	Line int
	Kind string
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("jinja: line %d: %s: %s", e.Line, e.Kind, e.Msg)
	}
	return fmt.Sprintf("jinja: %s: %s", e.Kind, e.Msg)
}

// RaiseError is the template's own raise_exception(msg): the template
// refuses what it was given.
type RaiseError struct{ Msg string }

func (e *RaiseError) Error() string { return "jinja: the template raised: " + e.Msg }

// LimitError is a render stopped by its budget (Limits) or its context:
// the template runs away, or the caller stopped waiting.
type LimitError struct {
	Msg   string
	cause error // the context's error, when that is what stopped it
}

func (e *LimitError) Error() string { return "jinja: " + e.Msg }
func (e *LimitError) Unwrap() error { return e.cause }

// Python's exception names, as Error.Kind.
const (
	kindType      = "TypeError"
	kindValue     = "ValueError"
	kindUndefined = "UndefinedError"
	kindSecurity  = "SecurityError"
	kindZeroDiv   = "ZeroDivisionError"
	kindOverflow  = "OverflowError"
	kindIndex     = "IndexError"
	kindKey       = "KeyError"
	kindRuntime   = "TemplateRuntimeError"
	kindAttribute = "AttributeError"
)

func errorf(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

func typeErrorf(format string, args ...any) *Error { return errorf(kindType, format, args...) }
