package cu

import "unsafe"

// Typed synchronous copies. Host slices are viewed as bytes in place (the
// element types hold no pointers, so cgo's rules allow passing them).

func asBytes[T float32 | int32 | uint32 | uint16 | int8 | uint8](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// HtoDFloat32 copies src to dst.
func (c *Context) HtoDFloat32(dst DevicePtr, src []float32) error { return c.HtoD(dst, asBytes(src)) }

// HtoDInt32 copies src to dst.
func (c *Context) HtoDInt32(dst DevicePtr, src []int32) error { return c.HtoD(dst, asBytes(src)) }

// HtoDUint32 copies src to dst.
func (c *Context) HtoDUint32(dst DevicePtr, src []uint32) error { return c.HtoD(dst, asBytes(src)) }

// HtoDUint16 copies src (f16 bits, for example) to dst.
func (c *Context) HtoDUint16(dst DevicePtr, src []uint16) error { return c.HtoD(dst, asBytes(src)) }

// DtoHFloat32 fills dst from src.
func (c *Context) DtoHFloat32(dst []float32, src DevicePtr) error { return c.DtoH(asBytes(dst), src) }

// DtoHInt32 fills dst from src.
func (c *Context) DtoHInt32(dst []int32, src DevicePtr) error { return c.DtoH(asBytes(dst), src) }

// DtoHUint32 fills dst from src.
func (c *Context) DtoHUint32(dst []uint32, src DevicePtr) error { return c.DtoH(asBytes(dst), src) }

// DtoHUint16 fills dst from src.
func (c *Context) DtoHUint16(dst []uint16, src DevicePtr) error { return c.DtoH(asBytes(dst), src) }
