package nvrtc

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/lmstream/lmstream/core/cuda/internal/cmem"
)

// cStrings lays strings out NUL-terminated in one block outside the Go heap,
// preceded by an array of their addresses: NVRTC's option list is a
// const char* const*, memory holding pointers, which cgo's rules (and so
// purego's) forbid in Go memory.
type cStrings struct {
	b *cmem.Block
	n int
}

func newCStrings(items [][]byte) (*cStrings, error) {
	size := 8 * len(items)
	for _, it := range items {
		size += len(it) + 1
	}
	b, err := cmem.New(size)
	if err != nil {
		return nil, err
	}
	off := 8 * len(items)
	for i, it := range items {
		if bytes.IndexByte(it, 0) >= 0 {
			b.Free()
			return nil, fmt.Errorf("nvrtc: string %d holds a NUL byte", i)
		}
		copy(b.Bytes()[off:], it) // the mapping is zeroed: the NUL is there
		b.PutWord(8*i, b.Addr(off))
		off += len(it) + 1
	}
	return &cStrings{b: b, n: len(items)}, nil
}

// str is the i'th string (a const char*).
func (c *cStrings) str(i int) unsafe.Pointer { return *(*unsafe.Pointer)(c.b.Ptr(8 * i)) }

// array is the address of the pointer array from the i'th entry on (a
// const char* const*), or nil when it would be empty.
func (c *cStrings) array(i int) unsafe.Pointer {
	if i >= c.n {
		return nil
	}
	return c.b.Ptr(8 * i)
}

func (c *cStrings) free() { c.b.Free() }

// Compile compiles one CUDA C source to a cubin with exactly the options
// given (see Options for the ones CompileCached adds). name is the
// program's name in diagnostics ("kernels.cu"). The log is NVRTC's compile
// log, warnings included; on a compile error the returned *Error carries it
// too.
func (n *NVRTC) Compile(src []byte, name string, opts []string) (cubin []byte, log string, err error) {
	items := [][]byte{src, []byte(name)}
	for _, o := range opts {
		items = append(items, []byte(o))
	}
	cs, err := newCStrings(items)
	if err != nil {
		return nil, "", err
	}
	defer cs.free()

	var prog uintptr
	if err := check("nvrtcCreateProgram", n.api.CreateProgram(unsafe.Pointer(&prog), cs.str(0), cs.str(1), 0, nil, nil)); err != nil {
		return nil, "", err
	}
	defer n.api.DestroyProgram(unsafe.Pointer(&prog))

	res := n.api.CompileProgram(prog, int32(len(opts)), cs.array(2))
	log = n.log(prog)
	if res != 0 {
		return nil, log, &Error{Code: res, Call: "nvrtcCompileProgram " + name, Log: log}
	}
	var size uintptr
	if err := check("nvrtcGetCUBINSize", n.api.GetCUBINSize(prog, unsafe.Pointer(&size))); err != nil {
		return nil, log, err
	}
	if size == 0 {
		return nil, log, fmt.Errorf("nvrtc: %s: no cubin (the architecture must be a real one, sm_XY, not compute_XY)", name)
	}
	cubin = make([]byte, size)
	if err := check("nvrtcGetCUBIN", n.api.GetCUBIN(prog, unsafe.Pointer(&cubin[0]))); err != nil {
		return nil, log, err
	}
	return cubin, log, nil
}

// log reads the program's compile log ("" if none or unreadable).
func (n *NVRTC) log(prog uintptr) string {
	var size uintptr
	if n.api.GetProgramLogSize(prog, unsafe.Pointer(&size)) != 0 || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if n.api.GetProgramLog(prog, unsafe.Pointer(&buf[0])) != 0 {
		return ""
	}
	return string(bytes.TrimRight(buf, "\x00"))
}
