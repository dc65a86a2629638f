package cu

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uintptr

// Add is p offset by n bytes.
func (p DevicePtr) Add(n int) DevicePtr { return p + DevicePtr(n) }

// Alloc is cuMemAlloc: n bytes of device memory, 256-byte aligned.
func (c *Context) Alloc(n int) (DevicePtr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("cuda: Alloc(%d): size must be positive", n)
	}
	var p uintptr
	if err := c.d.check("cuMemAlloc_v2", c.d.MemAlloc(unsafe.Pointer(&p), uintptr(n))); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// Free is cuMemFree; freeing 0 does nothing.
func (c *Context) Free(p DevicePtr) error {
	if p == 0 {
		return nil
	}
	return c.d.check("cuMemFree_v2", c.d.MemFree(uintptr(p)))
}

// HtoD copies src to dst and returns when the copy is done. It orders after
// work already queued on the legacy default stream and on Streams (which are
// created blocking).
func (c *Context) HtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return c.d.check("cuMemcpyHtoD_v2", c.d.MemcpyHtoD(uintptr(dst), unsafe.Pointer(&src[0]), uintptr(len(src))))
}

// DtoH copies len(dst) bytes from src into dst and returns when done.
func (c *Context) DtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.d.check("cuMemcpyDtoH_v2", c.d.MemcpyDtoH(unsafe.Pointer(&dst[0]), uintptr(src), uintptr(len(dst))))
}

// Memset sets n bytes at p to v (cuMemsetD8).
func (c *Context) Memset(p DevicePtr, v byte, n int) error {
	if n <= 0 {
		return nil
	}
	return c.d.check("cuMemsetD8_v2", c.d.MemsetD8(uintptr(p), v, uintptr(n)))
}

// MemsetAsync queues cuMemsetD8Async on s (nil: the legacy default stream);
// unlike Memset it can be captured into a graph.
func (c *Context) MemsetAsync(p DevicePtr, v byte, n int, s *Stream) error {
	if n <= 0 {
		return nil
	}
	return c.d.check("cuMemsetD8Async", c.d.MemsetD8Async(uintptr(p), v, uintptr(n), s.handle()))
}

// DtoDAsync queues a device-to-device copy of n bytes on s.
func (c *Context) DtoDAsync(dst, src DevicePtr, n int, s *Stream) error {
	if n <= 0 {
		return nil
	}
	return c.d.check("cuMemcpyDtoDAsync_v2", c.d.MemcpyDtoDAsync(uintptr(dst), uintptr(src), uintptr(n), s.handle()))
}

// HostBuf is page-locked host memory from cuMemHostAlloc: the only host
// memory the asynchronous copies accept, since the driver reads it after the
// call returns (Go memory may not be used that way).
type HostBuf struct {
	c *Context
	p unsafe.Pointer
	n int
}

// HostAlloc allocates n bytes of pinned host memory.
func (c *Context) HostAlloc(n int) (*HostBuf, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: HostAlloc(%d): size must be positive", n)
	}
	var p unsafe.Pointer
	if err := c.d.check("cuMemHostAlloc", c.d.MemHostAlloc(unsafe.Pointer(&p), uintptr(n), 0)); err != nil {
		return nil, err
	}
	return &HostBuf{c: c, p: p, n: n}, nil
}

// Bytes is the buffer as a slice over the pinned (non-Go) memory; it is
// invalid after Free, and must not be written while a copy from it is in
// flight.
func (h *HostBuf) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Len is the buffer's size in bytes.
func (h *HostBuf) Len() int { return h.n }

// Free releases the buffer; a second Free does nothing.
func (h *HostBuf) Free() error {
	if h == nil || h.p == nil {
		return nil
	}
	p := h.p
	h.p, h.n = nil, 0
	return h.c.d.check("cuMemFreeHost", h.c.d.MemFreeHost(p))
}

func (h *HostBuf) span(call string, off, n int) (unsafe.Pointer, error) {
	if h == nil || h.p == nil {
		return nil, fmt.Errorf("cuda: %s: host buffer is nil or freed", call)
	}
	if off < 0 || n < 0 || off+n > h.n {
		return nil, fmt.Errorf("cuda: %s: bytes [%d, %d) outside a %d-byte host buffer", call, off, off+n, h.n)
	}
	return unsafe.Add(h.p, off), nil
}

// HtoDAsync queues a copy of src[off:off+n] to dst on s (nil: the legacy
// default stream).
func (c *Context) HtoDAsync(dst DevicePtr, src *HostBuf, off, n int, s *Stream) error {
	p, err := src.span("HtoDAsync", off, n)
	if err != nil || n == 0 {
		return err
	}
	return c.d.check("cuMemcpyHtoDAsync_v2", c.d.MemcpyHtoDAsync(uintptr(dst), p, uintptr(n), s.handle()))
}

// DtoHAsync queues a copy of n bytes from src into dst[off:off+n] on s; the
// bytes are there once the stream (or a later event) is synchronized.
func (c *Context) DtoHAsync(dst *HostBuf, off int, src DevicePtr, n int, s *Stream) error {
	p, err := dst.span("DtoHAsync", off, n)
	if err != nil || n == 0 {
		return err
	}
	return c.d.check("cuMemcpyDtoHAsync_v2", c.d.MemcpyDtoHAsync(p, uintptr(src), uintptr(n), s.handle()))
}
