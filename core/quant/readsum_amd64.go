//go:build amd64 && !noasm

package quant

import "unsafe"

//go:noescape
func readSumAVX2(p *byte, n int) uint64

// readSum: len(b) is a multiple of 128.
func readSum(b []byte) uint64 {
	if len(b) == 0 || !hasAVX2() {
		return readSumGeneric(b)
	}
	return readSumAVX2(unsafe.SliceData(b), len(b))
}
