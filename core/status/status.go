// Package status holds the status codes of the C ABI and the error type that
// carries one through the Go layers, so that an error raised deep in the
// runtime reaches a C caller (or an error terminal chunk) with a code a
// program can branch on and a message a person can read.
package status

import (
	"errors"
	"fmt"
)

// Code is a status code of include/lmstream.h. Zero and positive values are
// outcomes; negative values are errors. The values never change.
type Code int32

const (
	OK          Code = 0 // LMS_OK: success; a pop returned chunks
	Empty       Code = 1 // LMS_EMPTY: no chunk is pending now (or before the timeout)
	Done        Code = 2 // LMS_DONE: the terminal chunk was already popped; nothing more will come
	Interrupted Code = 3 // LMS_INTERRUPTED: a consume handler asked to stop; the request was cancelled

	InvalidArgument Code = -1  // LMS_ERR_INVALID_ARGUMENT: a NULL pointer or out-of-range value
	InvalidHandle   Code = -2  // LMS_ERR_INVALID_HANDLE: zero, stale, released or forged handle
	BadJSON         Code = -3  // LMS_ERR_BAD_JSON: not parseable JSON
	InvalidRequest  Code = -4  // LMS_ERR_INVALID_REQUEST: well-formed JSON with a bad field
	Model           Code = -5  // LMS_ERR_MODEL: the model could not be loaded or used
	PromptTooLong   Code = -6  // LMS_ERR_PROMPT_TOO_LONG: the prompt does not fit the context
	Capacity        Code = -7  // LMS_ERR_CAPACITY: queue full, or the request can never fit the cache
	BufferTooSmall  Code = -8  // LMS_ERR_BUFFER_TOO_SMALL: a caller buffer cannot hold one whole chunk
	Forked          Code = -9  // LMS_ERR_FORKED: called in a child process after fork()
	Backend         Code = -10 // LMS_ERR_BACKEND: the backend failed during generation
	Internal        Code = -11 // LMS_ERR_INTERNAL: a recovered Go panic or broken invariant
	Shutdown        Code = -12 // LMS_ERR_SHUTDOWN: the runtime was destroyed
	Closed          Code = -13 // LMS_ERR_CLOSED: the channel was released while a call waited on it
	State           Code = -14 // LMS_ERR_STATE: the call is not allowed in the object's current state
)

var names = map[Code]string{
	OK:              "ok",
	Empty:           "no chunk pending",
	Done:            "stream finished",
	Interrupted:     "consumer interrupted the stream",
	InvalidArgument: "invalid argument",
	InvalidHandle:   "invalid handle",
	BadJSON:         "malformed JSON",
	InvalidRequest:  "invalid request",
	Model:           "model error",
	PromptTooLong:   "prompt too long",
	Capacity:        "capacity exceeded",
	BufferTooSmall:  "buffer too small",
	Forked:          "called in a forked child process",
	Backend:         "backend error",
	Internal:        "internal error",
	Shutdown:        "runtime shut down",
	Closed:          "channel closed",
	State:           "invalid state",
}

var idents = map[Code]string{
	OK: "ok", Empty: "empty", Done: "done", Interrupted: "interrupted",
	InvalidArgument: "invalid_argument", InvalidHandle: "invalid_handle", BadJSON: "bad_json",
	InvalidRequest: "invalid_request", Model: "model", PromptTooLong: "prompt_too_long",
	Capacity: "capacity", BufferTooSmall: "buffer_too_small", Forked: "forked",
	Backend: "backend", Internal: "internal", Shutdown: "shutdown", Closed: "closed", State: "state",
}

// Ident is the code's identifier in snake case ("bad_json"), as the
// conformance vectors and the bindings' exception names use it.
func (c Code) Ident() string { return idents[c] }

// String names the code, as lms_strerror does.
func (c Code) String() string {
	if s, ok := names[c]; ok {
		return s
	}
	return fmt.Sprintf("unknown status %d", int32(c))
}

// Error is an error with a status code.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Code.String()
	}
	return e.Msg
}

// Errorf makes an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf extracts the status code of err: OK for nil, the code of a wrapped
// *Error, Internal for anything else.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}
