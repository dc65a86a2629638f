package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// writeBigTensorFile writes a file whose one F32 tensor spans many pages.
func writeBigTensorFile(t *testing.T) (path string, elems int) {
	t.Helper()
	elems = 64 << 10 // 256 KiB of data: 64 pages
	w := NewWriter()
	require.NoError(t, w.AddKV("general.architecture", "test"))
	data := make([]byte, 4*elems)
	for i := range data {
		data[i] = byte(i)
	}
	require.NoError(t, w.AddTensor("big", quant.F32, []int{elems}, data))
	path = filepath.Join(t.TempDir(), "big.gguf")
	require.NoError(t, w.WriteFile(path))
	return path, elems
}

// TestGuardTurnsTruncationIntoError: reading tensor data of a mapped file
// that was truncated after Open is a SIGBUS; under Guard it is a
// *FaultError naming the byte, and the process lives on. Unchanged notices
// the truncation without touching the mapping.
func TestGuardTurnsTruncationIntoError(t *testing.T) {
	path, _ := writeBigTensorFile(t)
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	tensor, ok := f.Tensor("big")
	require.True(t, ok)
	require.NoError(t, f.Unchanged())

	sum := func() error {
		var s byte
		for _, b := range tensor.Data {
			s += b
		}
		sink = s
		return nil
	}
	require.NoError(t, f.Guard(sum))

	require.NoError(t, os.Truncate(path, int64(f.DataOffset)))
	err = f.Guard(sum)
	var fe *FaultError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, path, fe.Path)
	require.GreaterOrEqual(t, fe.Offset, f.DataOffset)
	require.Less(t, fe.Offset, f.DataOffset+len(tensor.Data))
	require.Contains(t, err.Error(), "truncated")

	err = f.Unchanged()
	require.ErrorContains(t, err, "changed while in use")
	require.ErrorContains(t, err, path)
}

// TestUnchangedFollowsTheMappedFile: replacing the path with another file
// (rename, as installers do) leaves the mapped file intact, so it is no
// change; writing into the mapped file in place is one.
func TestUnchangedFollowsTheMappedFile(t *testing.T) {
	path, _ := writeBigTensorFile(t)
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()

	other := path + ".new"
	require.NoError(t, os.WriteFile(other, []byte("not a model"), 0o644))
	require.NoError(t, os.Rename(other, path))
	require.NoError(t, f.Unchanged())

	f2, err := Open(writeAgain(t))
	require.NoError(t, err)
	defer f2.Close()
	fd, err := os.OpenFile(f2.path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = fd.Write([]byte{0})
	require.NoError(t, err)
	require.NoError(t, fd.Close())
	require.ErrorContains(t, f2.Unchanged(), "changed while in use")
}

var sink byte

func writeAgain(t *testing.T) string { p, _ := writeBigTensorFile(t); return p }

// TestGuardPassesOtherPanicsOn: Guard converts only faults in the mapping;
// a nil dereference or an ordinary panic is not a changed file.
func TestGuardPassesOtherPanicsOn(t *testing.T) {
	path, _ := writeBigTensorFile(t)
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	require.PanicsWithValue(t, "boom", func() { _ = f.Guard(func() error { panic("boom") }) })
	var p *int
	require.Panics(t, func() { _ = f.Guard(func() error { return errors.New(string(rune(*p))) }) })
	want := errors.New("fn's own error")
	require.Equal(t, want, f.Guard(func() error { return want }))

	parsed, err := Parse(mustRead(t, path)) // no mapping: nothing to guard, nothing changes
	require.NoError(t, err)
	require.NoError(t, parsed.Unchanged())
	require.NoError(t, parsed.Guard(func() error { return nil }))
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestIntRangeFullWidth is issue 10's row 7 at the accessor: an id stored
// as uint32 0xFFFFFFFF, uint64 2^32+2 or int64 -2^40 is out of [0, n), not
// -1, 2 or 0 after a cut to 32 bits.
func TestIntRangeFullWidth(t *testing.T) {
	w := NewWriter()
	vals := map[string]any{
		"u32max":   uint32(math.MaxUint32),
		"u64wrap":  uint64(1<<32 + 2),
		"i64neg":   int64(-1 << 40),
		"u64huge":  uint64(math.MaxUint64),
		"i32minus": int32(-1),
		"u8":       uint8(7),
		"u64ok":    uint64(49151),
		"f":        float32(3),
	}
	for _, k := range []string{"u32max", "u64wrap", "i64neg", "u64huge", "i32minus", "u8", "u64ok", "f"} {
		require.NoError(t, w.AddKV(k, vals[k]))
	}
	f := parseWritten(t, w)

	for _, tc := range []struct {
		key, err string
	}{
		{"u32max", `"u32max": uint32 4294967295 is out of the range [0, 49151]`},
		{"u64wrap", `uint64 4294967298 is out of the range`},
		{"i64neg", `int64 -1099511627776 is out of the range`},
		{"u64huge", `uint64 18446744073709551615 is out of the range`},
		{"i32minus", `int32 -1 is out of the range`},
		{"f", `is a float32, want an integer`},
	} {
		_, err := f.IntRange(tc.key, 0, 49151)
		require.ErrorContains(t, err, tc.err, tc.key)
	}
	v, err := f.IntRange("u8", 0, 49151)
	require.NoError(t, err)
	require.Equal(t, 7, v)
	v, err = f.IntRange("u64ok", 0, 49151)
	require.NoError(t, err)
	require.Equal(t, 49151, v)
	v, err = f.IntRange("i32minus", -1, 10)
	require.NoError(t, err)
	require.Equal(t, -1, v)
	_, err = f.IntRange("absent", 0, 1)
	require.ErrorIs(t, err, ErrKeyNotFound)
}

// TestFloat32Overflow: a finite float64 beyond float32's range is an error,
// not a quiet +Inf (a rope base or norm epsilon of Inf makes NaN logits).
func TestFloat32Overflow(t *testing.T) {
	w := NewWriter()
	require.NoError(t, w.AddKV("big", 1e300))
	require.NoError(t, w.AddKV("ok", 1e30))
	require.NoError(t, w.AddKV("inf", math.Inf(1)))
	require.NoError(t, w.AddKV("arr", []float64{1, -1e300}))
	require.NoError(t, w.AddKV("arrok", []float64{1, 2}))
	f := parseWritten(t, w)
	_, err := f.Float32("big")
	require.ErrorContains(t, err, `"big": float64 1e+300 does not fit in a float32`)
	x, err := f.Float32("ok")
	require.NoError(t, err)
	require.InEpsilon(t, 1e30, x, 1e-6)
	x, err = f.Float32("inf")
	require.NoError(t, err)
	require.True(t, math.IsInf(float64(x), 1))
	_, err = f.Float32s("arr")
	require.ErrorContains(t, err, "element 1, float64 -1e+300, does not fit")
	xs, err := f.Float32s("arrok")
	require.NoError(t, err)
	require.Equal(t, []float32{1, 2}, xs)
}

func parseWritten(t *testing.T, w *Writer) *File {
	t.Helper()
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	f, err := Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}
