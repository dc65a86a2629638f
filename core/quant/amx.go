package quant

import (
	"encoding/binary"
	"sync"
)

// amxMinActs is the fewest activation rows a call hands to the tile unit:
// below it the work per super-block that does not shrink with the rows
// (splitting the nibbles into B tiles, unpacking the scales) costs more
// than the tile unit saves. On a 2-core AMX Xeon, 2 threads, VNNI → AMX:
// BenchmarkPackedQwen (a matrix hot in L3), gate 8960×1536 N = 4 213 →
// 279 µs, N = 8 366–378 → 356–358, N = 12 563–569 → 455–475; but the
// 1.5B model's forward pass (BenchmarkForwardN, weights from DRAM) at N
// = 8 62.3–62.9 → 65.1–67.8 ms, against N = 16 117.5–118 → 102–103.
const amxMinActs = 10

// amxMaxActs is the most activation rows one AMX call takes: a tile's 16
// rows.
const amxMaxActs = 16

// amxActSums lays out, for the AMX kernel, what its finish reads of each
// Q8_K block of the n activation rows in xq (row stride xs, nb blocks):
// at j·xs + 32b, the sums of the block's eight 32-element sub-blocks as
// four int16 pairs (B_0, B_1) … (B_6, B_7), then the block's f32 scale.
// The layout keeps the activations' row stride, so the kernel steps
// through both with one register. Each B_s is the exact sum of two of the
// block's 16-element sums (|B_s| ≤ 32·127), computed once per matmul
// instead of once per row group.
func amxActSums(xq []byte, n, nb, xs int, buf []byte) []byte {
	if cap(buf) < n*xs {
		buf = make([]byte, n*xs)
	}
	buf = buf[:n*xs]
	bb := Q8_K.BlockBytes()
	for j := 0; j < n; j++ {
		for b := 0; b < nb; b++ {
			blk := xq[j*xs+b*bb : j*xs+(b+1)*bb]
			dst := buf[j*xs+32*b : j*xs+32*b+32]
			for s := 0; s < 8; s++ {
				lo := int16(binary.LittleEndian.Uint16(blk[260+4*s:]))
				hi := int16(binary.LittleEndian.Uint16(blk[262+4*s:]))
				binary.LittleEndian.PutUint16(dst[2*s:], uint16(lo+hi))
			}
			copy(dst[16:20], blk[0:4])
		}
	}
	return buf
}

var amxSumsPool = sync.Pool{New: func() any { return new([]byte) }}
