package cu

import (
	"encoding/binary"
	"math"
)

// ArgWriter packs a kernel's argument struct with the C (x86-64 and CUDA,
// which agree) layout rules: each field at the next multiple of its own
// alignment, and the whole struct padded to a multiple of its largest
// field's alignment, so Bytes is sizeof(Args). Write the fields in
// declaration order; Offset tells where the next one goes (for layout tests
// against the .cu struct).
//
//	struct Args { const float* x; int n; float eps; long long m; int k; };
//	var w cu.ArgWriter
//	w.Ptr(x); w.I32(n); w.F32(eps); w.I64(m); w.I32(k) // offsets 0, 8, 12, 16, 24
//	ctx.Launch(f, grid, block, 0, s, w.Bytes())          // 32 bytes
type ArgWriter struct {
	b        []byte
	maxAlign int
}

// Reset empties the writer, keeping its buffer, for reuse per launch.
func (w *ArgWriter) Reset() { w.b, w.maxAlign = w.b[:0], 0 }

// Offset is where the next field of alignment 1 would go (the current size).
func (w *ArgWriter) Offset() int { return len(w.b) }

// Align pads to a multiple of n (a power of two), counting n toward the
// struct's alignment, as a field of alignment n would.
func (w *ArgWriter) Align(n int) {
	if n > w.maxAlign {
		w.maxAlign = n
	}
	for len(w.b)%n != 0 {
		w.b = append(w.b, 0)
	}
}

// Pad8 aligns the next field to 8 bytes.
func (w *ArgWriter) Pad8() { w.Align(8) }

func (w *ArgWriter) put(align int, v uint64) {
	w.Align(align)
	switch align {
	case 1:
		w.b = append(w.b, byte(v))
	case 2:
		w.b = binary.LittleEndian.AppendUint16(w.b, uint16(v))
	case 4:
		w.b = binary.LittleEndian.AppendUint32(w.b, uint32(v))
	default:
		w.b = binary.LittleEndian.AppendUint64(w.b, v)
	}
}

// Ptr appends a device pointer (8 bytes, 8-aligned).
func (w *ArgWriter) Ptr(p DevicePtr) { w.put(8, uint64(p)) }

// I64 appends a long long.
func (w *ArgWriter) I64(v int64) { w.put(8, uint64(v)) }

// U64 appends an unsigned long long.
func (w *ArgWriter) U64(v uint64) { w.put(8, v) }

// I32 appends an int.
func (w *ArgWriter) I32(v int32) { w.put(4, uint64(uint32(v))) }

// U32 appends an unsigned int.
func (w *ArgWriter) U32(v uint32) { w.put(4, uint64(v)) }

// F32 appends a float.
func (w *ArgWriter) F32(v float32) { w.put(4, uint64(math.Float32bits(v))) }

// U16 appends an unsigned short (or the bits of a __half).
func (w *ArgWriter) U16(v uint16) { w.put(2, uint64(v)) }

// U8 appends an unsigned char.
func (w *ArgWriter) U8(v uint8) { w.put(1, uint64(v)) }

// Bytes is the packed struct, padded to its alignment: with any 8-byte field
// (a pointer), a multiple of 8. It aliases the writer's buffer until the
// next write or Reset.
func (w *ArgWriter) Bytes() []byte {
	if w.maxAlign > 0 {
		for len(w.b)%w.maxAlign != 0 {
			w.b = append(w.b, 0)
		}
	}
	return w.b
}
