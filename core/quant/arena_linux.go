package quant

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// allocArena maps size bytes (a multiple of hugePage) of anonymous memory at
// a 2 MiB boundary and asks for transparent huge pages there. The mapping is
// made one huge page larger than needed and the misaligned head and tail are
// unmapped, so only the aligned region stays. An error from mmap (no address
// space left) falls back to Go memory: the arena is an optimisation, and the
// memory budget checked at runtime creation is what refuses a model too
// large for the machine.
//
// MmapPtr and MunmapPtr, not Mmap and Munmap: the latter track whole
// mappings and refuse to unmap part of one.
func allocArena(size int) ([]byte, func()) {
	total := uintptr(size + hugePage)
	raw, err := unix.MmapPtr(-1, 0, nil, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return goArena(size)
	}
	head := -uintptr(raw) & (hugePage - 1)
	if head > 0 {
		_ = unix.MunmapPtr(raw, head)
	}
	base := unsafe.Add(raw, head)
	if tail := total - head - uintptr(size); tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(base, size), tail)
	}
	buf := unsafe.Slice((*byte)(base), size)
	// An error (THP compiled out, an old kernel) leaves 4 KiB pages, which
	// only costs speed.
	_ = unix.Madvise(buf, unix.MADV_HUGEPAGE)
	return buf, func() { _ = unix.MunmapPtr(base, uintptr(size)) }
}
