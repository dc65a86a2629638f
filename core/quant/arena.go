package quant

import "unsafe"

// Arena is one allocation that holds the packed copies of many matrices
// (a model's worth), so that they can sit on transparent huge pages.
//
// Why: the batched kernels stream ~90 MB of packed weights per forward pass.
// On 4 KiB pages that is ~23,000 pages a pass, far more than the TLB holds,
// and the hardware prefetchers stop at every page boundary; one matrix of
// the default model is only 0.1–0.5 MB, too small to get a 2 MiB page of its
// own. Packing every matrix into one 2 MiB-aligned region and advising the
// kernel (MADV_HUGEPAGE, where the OS has it) removes both costs.
//
// The memory is ordinary Go memory: it lives as long as a Packed made in it
// is reachable, and the advice is only a hint (an OS without it, or a kernel
// with transparent huge pages off, just gets 4 KiB pages).
type Arena struct {
	buf []byte
	off int
}

const hugePage = 2 << 20

// NewArena returns an arena of size bytes (see PackedSize to add them up).
func NewArena(size int) *Arena {
	if size <= 0 {
		return &Arena{}
	}
	rounded := (size + hugePage - 1) / hugePage * hugePage
	raw := make([]byte, rounded+hugePage)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (hugePage - 1))
	adviseHugePages(raw[off : off+rounded])
	buf := raw[off : off+size : off+size]
	return &Arena{buf: buf}
}

// alloc hands out the next n bytes, 64-byte aligned, or nil when the arena
// is nil or too small (the caller then allocates on its own).
func (a *Arena) alloc(n int) []byte {
	if a == nil {
		return nil
	}
	start := (a.off + 63) &^ 63
	if start+n > len(a.buf) {
		return nil
	}
	a.off = start + n
	return a.buf[start : start+n : start+n]
}

// PackedSize is the bytes Prepack allocates for a rows×cols matrix of type
// wt on this CPU (0 when the matrix keeps its stored layout), plus the
// alignment an Arena may add.
func PackedSize(wt Type, rows, cols int) int {
	groups, gb := packedShape(wt, rows, cols)
	if groups == 0 {
		return 0
	}
	return groups*gb + 63
}
