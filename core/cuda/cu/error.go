package cu

import (
	"errors"
	"fmt"
	"unsafe"
)

// Error is a failed driver call: the CUresult, its name and description as
// cuGetErrorName/cuGetErrorString give them, and the C function called.
type Error struct {
	Code uint32 // CUresult
	Name string // "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // "out of memory"
	Call string // "cuMemAlloc_v2"
}

func (e *Error) Error() string {
	msg := ""
	if e.Msg != "" {
		msg = ": " + e.Msg
	}
	return fmt.Sprintf("cuda: %s: %s (%d)%s", e.Call, e.Name, e.Code, msg)
}

// Some CUresult values callers test for (see IsCode).
const (
	ErrInvalidValue             = 1
	ErrOutOfMemory              = 2
	ErrNotInitialized           = 3
	ErrNoDevice                 = 100
	ErrInvalidDevice            = 101
	ErrInvalidImage             = 200
	ErrInvalidContext           = 201
	ErrNoBinaryForGPU           = 209
	ErrNotFound                 = 500
	ErrNotReady                 = 600
	ErrIllegalAddress           = 700
	ErrLaunchOutOfRes           = 701
	ErrLaunchFailed             = 719
	ErrStreamCaptureUnsupported = 900
)

// IsCode reports whether err is (or wraps) a driver *Error with CUresult code.
func IsCode(err error, code uint32) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// check turns a CUresult into nil or an *Error for the named call.
func (d *Driver) check(call string, res uint32) error {
	if res == 0 {
		return nil
	}
	e := &Error{Code: res, Name: d.errorText(d.GetErrorName, res), Msg: d.errorText(d.GetErrorString, res), Call: call}
	if e.Name == "" {
		e.Name = fmt.Sprintf("CUresult(%d)", res)
	}
	return e
}

// errorText asks the driver for a static string describing res, or "" when
// the driver does not know the code (or a fake lacks the function).
func (d *Driver) errorText(get func(uint32, unsafe.Pointer) uint32, res uint32) string {
	if get != nil {
		var p unsafe.Pointer // const char* into the driver's static data
		if get(res, unsafe.Pointer(&p)) == 0 && p != nil {
			return cString(p)
		}
	}
	return ""
}

// cString copies a NUL-terminated C string (at most 4 KiB of it).
func cString(p unsafe.Pointer) string {
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}
