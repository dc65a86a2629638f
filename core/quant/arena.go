package quant

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
// On Linux the memory is an anonymous mapping outside the Go heap, returned
// to the OS by Free at once: a model's weights are its largest allocation,
// and left to the garbage collector they would count twice toward the heap
// goal and linger until something scavenged them. Every Packed made in the
// arena reads freed memory after Free, so only the arena's owner (the model,
// once nothing can run a forward pass) calls it. Elsewhere the memory is
// ordinary Go memory and Free only drops the arena's reference to it.
type Arena struct {
	buf  []byte // the usable, 2 MiB-aligned region
	free func() // returns the memory; nil when there is nothing to return
	off  int
}

const hugePage = 2 << 20

// NewArena returns an arena of size bytes (see PackedSize to add them up).
func NewArena(size int) *Arena {
	if size <= 0 {
		return &Arena{}
	}
	rounded := (size + hugePage - 1) / hugePage * hugePage
	buf, free := allocArena(rounded)
	return &Arena{buf: buf[:size:size], free: free}
}

// Size is the arena's capacity in bytes (0 after Free).
func (a *Arena) Size() int {
	if a == nil {
		return 0
	}
	return len(a.buf)
}

// Free returns the arena's memory. Nothing packed in it may be used
// afterwards; a second call does nothing.
func (a *Arena) Free() {
	if a == nil {
		return
	}
	free := a.free
	a.buf, a.free, a.off = nil, nil, 0
	if free != nil {
		free()
	}
}

// Bytes hands out the next n bytes of the arena (64-byte aligned, on its
// huge pages), or nil when it is too small: memory that a measurement
// reads the way the kernels read packed weights (lmsbench's bandwidth
// probe).
func (a *Arena) Bytes(n int) []byte { return a.alloc(n) }

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
