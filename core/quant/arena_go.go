package quant

import "unsafe"

// goArena is an arena in Go memory, 2 MiB-aligned inside a larger slice;
// the garbage collector frees it once no Packed made in it is reachable, so
// there is nothing to return by hand.
func goArena(size int) ([]byte, func()) {
	raw := make([]byte, size+hugePage)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) & (hugePage - 1))
	return raw[off : off+size : off+size], nil
}
