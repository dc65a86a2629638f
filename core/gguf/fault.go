package gguf

import (
	"fmt"
	"runtime/debug"
	"unsafe"
)

// Reading a mapped file is reading memory the kernel may take away: when
// the file is truncated, a page past the new end raises SIGBUS on its next
// touch, which by default kills the whole process, and in a library that
// process is someone else's. Go can turn such a fault in the goroutine that
// asked for it (runtime/debug.SetPanicOnFault) into a panic; Guard turns the
// panic into an error for the mapping's faults.
//
// Guard only protects the goroutine that calls it. Code that hands mapped
// bytes to other goroutines (a worker pool) is not covered, so a user of
// tensor data must either read it on the guarded goroutine or take a copy
// there; core/model does the latter at load.

// FaultError is what Guard returns for a fault reading the mapping.
type FaultError struct {
	Path   string
	Offset int // the byte of the file whose page was gone
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("gguf: %s: reading byte %d of the mapped file faulted: the file was truncated or changed in place while in use", e.Path, e.Offset)
}

// Guard runs fn with faults on this goroutine turned into panics, and turns
// a fault at an address inside the file's mapping into an error saying the
// file changed under it. Other panics, and faults elsewhere, propagate.
func (f *File) Guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if fault, ok := p.(interface{ Addr() uintptr }); ok {
			if off, in := f.mappedOffset(fault.Addr()); in {
				err = &FaultError{Path: f.path, Offset: off}
				return
			}
		}
		panic(p)
	}()
	return fn()
}

// mappedOffset says whether addr lies in the file's mapping, and where.
func (f *File) mappedOffset(addr uintptr) (int, bool) {
	if len(f.mapping) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(f.mapping)))
	if addr < base || addr-base >= uintptr(len(f.mapping)) {
		return 0, false
	}
	return int(addr - base), true
}

// Unchanged returns an error when the file Open mapped no longer has the
// size and modification time it had when it was opened: it was truncated,
// grown or written to, so bytes read from the mapping may be another
// file's. It is one fstat. A File from Parse is always unchanged.
func (f *File) Unchanged() error {
	if f.changed == nil {
		return nil
	}
	return f.changed()
}
