// Package cu is the part of the CUDA driver API that lmstream uses, called
// through purego so that liblmstream.so links no CUDA library: libcuda.so.1
// is opened at run time by Open, and a machine without it gets an error that
// names every place looked at.
//
// Layers:
//
//   - Driver (driver.go) is a struct of plain func fields, one per driver entry
//     point, returning the raw CUresult. Open fills it with purego.SyscallN
//     trampolines; tests fill it with Go fakes, so everything above it runs
//     without a GPU.
//   - Context (context.go) is one device's primary context plus typed helpers:
//     memory (memory.go), streams and events (stream.go), modules and kernel
//     launches (module.go, args.go), graphs by stream capture (graph.go).
//     Every non-zero CUresult comes back as *Error (error.go).
//
// Threads. The driver keeps the current context per OS thread. Every Context
// method assumes its context is current on the calling thread: NewContext
// makes it current, and a goroutine that may have moved (or any other
// goroutine) must call runtime.LockOSThread and Context.Bind first, or use
// Context.Enter, which does both. The engine does this once per step.
//
// Memory rules. purego calls obey cgo's pointer rules even when built with
// CGO_ENABLED=0: Go memory handed to the driver must hold no Go pointers and
// must not be kept after the call. So synchronous copies take Go slices,
// asynchronous copies take pinned HostBufs (driver memory), and the launch
// argument block and its extra array live in an mmap'd arena per Context.
package cu
