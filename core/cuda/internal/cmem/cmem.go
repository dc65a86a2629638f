// Package cmem hands out small blocks of memory outside the Go heap.
//
// The CUDA driver and NVRTC are called through purego, under the same rules
// as cgo: C code may not keep a Go pointer past the call, and Go memory passed
// to C may not itself hold Go pointers. An array of pointers (cuLaunchKernel's
// extra array, NVRTC's option list) therefore has to live elsewhere, and so
// does anything the driver reads after the call returns. An anonymous mmap is
// such a place, needs no cgo (test binaries are built with CGO_ENABLED=0),
// is page-aligned and never moves.
package cmem

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Block is one anonymous mapping. It is not safe for concurrent Free.
type Block struct {
	b []byte
}

// New maps n bytes (rounded up to a page), zeroed.
func New(n int) (*Block, error) {
	if n <= 0 {
		n = 1
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("cmem: mmap %d bytes: %w", n, err)
	}
	return &Block{b: b[:n:n]}, nil
}

// Bytes is the whole block as a slice over non-Go memory; it is invalid
// after Free.
func (m *Block) Bytes() []byte { return m.b }

// Ptr is the address of byte off.
func (m *Block) Ptr(off int) unsafe.Pointer { return unsafe.Pointer(&m.b[off]) }

// Addr is the address of byte off as an integer, for storing into arrays
// that C reads (the block never moves, so the integer stays valid).
func (m *Block) Addr(off int) uintptr { return uintptr(unsafe.Pointer(&m.b[off])) }

// PutWord stores v as a native 64-bit word at off (8-byte aligned).
func (m *Block) PutWord(off int, v uintptr) {
	if off%8 != 0 {
		panic("cmem: unaligned word")
	}
	*(*uintptr)(unsafe.Pointer(&m.b[off])) = v
}

// Free unmaps the block; a second Free does nothing.
func (m *Block) Free() error {
	if m == nil || m.b == nil {
		return nil
	}
	b := m.b
	m.b = nil
	return syscall.Munmap(b[:cap(b)])
}
