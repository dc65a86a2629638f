package quant

import (
	"encoding/binary"
	"sync"
	"unsafe"
)

// amxMinActs is the fewest activation rows a call hands to the tile unit.
// Up to p8MaxActs rows the VNNI pair kernels take a call's rows in one
// pass over the weights, and there the work per super-block that does not
// shrink with the rows (splitting the nibbles into B tiles, unpacking the
// scales) costs the tile unit more than it saves. One row more and the
// pair kernels need two passes, each decoding the weights again, while the
// tile unit still needs one. On a 2-core AMX Xeon (family 6 model 207),
// 2 threads, the Qwen2.5-Coder 1.5B Q4_K_M forward pass, 60 interleaved
// rounds, median (min) ms, VNNI → AMX: N = 8 70.0 (54.6) → 86.5 (63.4);
// N = 9 92.6 (74.3) → 87.1 (65.1); N = 10 94.1 (80.1) → 90.5 (69.4). The
// 0.5B's smaller matrices come out even at 9 and 10 (44.0 → 43.5, 45.4 →
// 44.4). At 10, where this limit stood before, a verify pass of 9 tokens
// cost the two-pass VNNI price.
const amxMinActs = p8MaxActs + 1

// amxMaxActs is the most activation rows one AMX call takes: a tile's 16
// rows.
const amxMaxActs = 16

// amxActs lays out, for the AMX kernels, the n Q8_K activation rows in
// xq (row stride xs, nb blocks) so that every tile row the kernels load
// is within one cache line: read in place, a Q8_K block's quants start 4
// bytes into it, and half of Q4_K's 32-byte tile rows and all of Q6_K's
// 64-byte ones straddled two lines (the tile loads then cost 8–12% more of
// a call). The rows go in calls as matmulPacked8 splits them: call by
// call from token n0 at n0·nb·stride, and within a call block b of its
// token j at (b·na + j)·stride, stride (amxActStride) being
//   - for Q6_K, 256: the block's quants;
//   - for Q4_K, 320: the quants, then what the kernel's finish reads of
//     the block: the sums of its eight 32-element sub-blocks as four int16
//     pairs (B_0, B_1) … (B_6, B_7), then its f32 scale. Each B_s is the
//     exact sum of two of the block's 16-element sums (|B_s| ≤ 32·127),
//     computed once per matmul instead of once per row group.
//
// The buffer is 64-byte aligned.
func amxActs(wt Type, xq []byte, n, nb, xs, calls int, buf []byte) []byte {
	stride := amxActStride(wt)
	buf = aligned64(buf, n*nb*stride)
	bb := Q8_K.BlockBytes()
	n0 := 0
	for c := 0; c < calls; c++ {
		na := (n - n0) / (calls - c)
		call := buf[n0*nb*stride:]
		for b := 0; b < nb; b++ {
			for j := 0; j < na; j++ {
				blk := xq[(n0+j)*xs+b*bb : (n0+j)*xs+(b+1)*bb]
				dst := call[(b*na+j)*stride : (b*na+j+1)*stride]
				copy(dst, blk[4:260])
				if wt != Q4_K {
					continue
				}
				for s := 0; s < 8; s++ {
					lo := int16(binary.LittleEndian.Uint16(blk[260+4*s:]))
					hi := int16(binary.LittleEndian.Uint16(blk[262+4*s:]))
					binary.LittleEndian.PutUint16(dst[256+2*s:], uint16(lo+hi))
				}
				copy(dst[272:276], blk[0:4])
			}
		}
		n0 += na
	}
	return buf
}

// amxActStride is a token's bytes per block in amxActs' layout for wt.
func amxActStride(wt Type) int {
	if wt == Q4_K {
		return 320
	}
	return 256
}

// aligned64 returns a 64-byte aligned slice of size bytes, buf's memory
// where it is aligned and large enough.
func aligned64(buf []byte, size int) []byte {
	if cap(buf) >= size && uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%64 == 0 {
		return buf[:size]
	}
	b := make([]byte, size+64)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) % 64)
	return b[off : off+size]
}

var amxActsPool = sync.Pool{New: func() any { return new([]byte) }}
