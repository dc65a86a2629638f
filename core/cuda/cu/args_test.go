package cu

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Layouts computed by hand from the C rules (each field at a multiple of its
// alignment; sizeof a multiple of the largest alignment), as gcc and nvcc
// lay them out on x86-64.
func TestArgWriterOffsets(t *testing.T) {
	type field struct {
		kind string
		off  int
	}
	cases := []struct {
		name   string
		fields []field
		size   int
	}{
		// struct { const float* x; int n; float eps; long long m; int k; }
		{"ptr-int-float-i64-int", []field{{"p", 0}, {"i32", 8}, {"f32", 12}, {"i64", 16}, {"i32", 24}}, 32},
		// struct { int n; const void* p; }: 4 bytes of padding before p.
		{"int-ptr", []field{{"i32", 0}, {"p", 8}}, 16},
		// struct { int a; unsigned b; float c; }: alignment 4, sizeof 12.
		{"ints-only", []field{{"i32", 0}, {"u32", 4}, {"f32", 8}}, 12},
		// struct { unsigned short h; unsigned char c; int i; unsigned short g; }
		{"small-types", []field{{"u16", 0}, {"u8", 2}, {"i32", 4}, {"u16", 8}}, 12},
		// struct { void* a; unsigned char c; }: tail padding to 16.
		{"tail-pad", []field{{"p", 0}, {"u8", 8}}, 16},
		// struct { int a; int b; int c; Pad8; void* p }: explicit Pad8 is a no-op before a pointer.
		{"pad8", []field{{"i32", 0}, {"i32", 4}, {"i32", 8}, {"pad8", 16}, {"p", 16}}, 24},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var w ArgWriter
			for i, f := range tc.fields {
				switch f.kind {
				case "p":
					w.Ptr(DevicePtr(0x1000 + i))
				case "i32":
					w.I32(int32(-i))
				case "u32":
					w.U32(uint32(i))
				case "f32":
					w.F32(float32(i) + 0.5)
				case "i64":
					w.I64(-int64(i))
				case "u16":
					w.U16(uint16(i))
				case "u8":
					w.U8(uint8(i))
				case "pad8":
					w.Pad8()
				}
				if f.kind != "pad8" {
					// The field just written ends at Offset; it started at f.off.
					size := map[string]int{"p": 8, "i32": 4, "u32": 4, "f32": 4, "i64": 8, "u16": 2, "u8": 1}[f.kind]
					require.Equal(t, f.off+size, w.Offset(), "field %d (%s)", i, f.kind)
				} else {
					require.Equal(t, f.off, w.Offset())
				}
			}
			require.Len(t, w.Bytes(), tc.size)
		})
	}
}

func TestArgWriterValues(t *testing.T) {
	var w ArgWriter
	w.I32(5)
	w.Ptr(0x0102030405060708)
	w.F32(-1.25)
	w.I64(-2)
	w.U16(0x3c00)
	b := w.Bytes()
	require.Len(t, b, 40) // the u16 at 32, then tail padding to 8
	le := binary.LittleEndian
	require.Equal(t, uint32(5), le.Uint32(b[0:]))
	require.Equal(t, []byte{0, 0, 0, 0}, b[4:8])
	require.Equal(t, uint64(0x0102030405060708), le.Uint64(b[8:]))
	require.Equal(t, float32(-1.25), math.Float32frombits(le.Uint32(b[16:])))
	require.Equal(t, uint64(math.MaxUint64-1), le.Uint64(b[24-0:]))
	w.Reset()
	require.Empty(t, w.Bytes())
	w.U32(1)
	require.Len(t, w.Bytes(), 4)
}
