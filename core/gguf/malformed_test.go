package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBaseRawIsValid(t *testing.T) {
	f, err := Parse(baseRaw().bytes())
	require.NoError(t, err)
	require.Len(t, f.KV, 4)
	require.Len(t, f.Tensors, 2)
	q, ok := f.Tensor("blk.q")
	require.True(t, ok)
	require.Len(t, q.Data, 68)
	list, err := f.Int32s("test.list")
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2, 3}, list)
}

// nestedArrays is an array body nested depth levels deep, innermost empty.
func nestedArrays(depth int) []byte {
	b := cat(le32(uint32(TypeUint8)), le64(0))
	for range depth - 1 {
		b = cat(le32(uint32(TypeArray)), le64(1), b)
	}
	return b
}

type malformed struct {
	name  string
	file  func() []byte
	where string   // expected FormatError.Where
	want  []string // substrings of the message
}

func withKV(i int, kv rawKV) func() []byte {
	return func() []byte {
		r := baseRaw()
		r.kvs[i] = kv
		return r.bytes()
	}
}

func withTensor(i int, edit func(*rawTensor)) func() []byte {
	return func() []byte {
		r := baseRaw()
		edit(&r.tensors[i])
		return r.bytes()
	}
}

func withFile(edit func(*rawFile)) func() []byte {
	return func() []byte {
		r := baseRaw()
		edit(&r)
		return r.bytes()
	}
}

func malformedCorpus() []malformed {
	const huge = uint64(1) << 60
	return []malformed{
		{"bad magic", withFile(func(r *rawFile) { r.magic = "GGML" }), "header", []string{"magic", `"GGML"`}},
		{"empty", func() []byte { return nil }, "header", []string{"magic"}},
		{"version 1", withFile(func(r *rawFile) { r.version = 1 }), "header", []string{"version 1", "32-bit"}},
		{"version 99", withFile(func(r *rawFile) { r.version = 99 }), "header", []string{"version 99"}},
		{"big-endian", withFile(func(r *rawFile) { r.version = 3 << 24 }), "header", []string{"big-endian"}},
		{"huge tensor count", withFile(func(r *rawFile) { r.nTensors = u64p(huge) }), "header", []string{"tensor count 1152921504606846976"}},
		{"huge kv count", withFile(func(r *rawFile) { r.nKV = u64p(huge) }), "header", []string{"metadata count 1152921504606846976"}},
		{"kv count too large for tensors", withFile(func(r *rawFile) { r.nKV = u64p(30) }), "header", []string{"metadata count 30"}},
		{"huge key length", withKV(0, rawKV{raw: cat(le64(1<<40), []byte("general"))}), "kv #0", []string{"key length 1099511627776"}},
		{"huge string length", withKV(0, rawKV{key: "general.architecture", typ: 8, val: cat(le64(1<<40), []byte("llama"))}), `kv "general.architecture"`, []string{"length 1099511627776", "past the end"}},
		{"huge array length", withKV(3, rawKV{key: "test.list", typ: 9, val: cat(le32(4), le64(1<<62), le32(1))}), `kv "test.list"`, []string{"array of 4611686018427387904 uint32"}},
		{"huge string array", withKV(3, rawKV{key: "test.list", typ: 9, val: cat(le32(8), le64(1<<40))}), `kv "test.list"`, []string{"array of 1099511627776 string"}},
		{"huge string in array", withKV(3, rawKV{key: "test.list", typ: 9, val: cat(le32(8), le64(2), rawStr("ok"), le64(1<<40))}), `kv "test.list"`, []string{"string element 1", "1099511627776"}},
		{"huge array of arrays", withKV(3, rawKV{key: "test.list", typ: 9, val: cat(le32(9), le64(huge))}), `kv "test.list"`, []string{"array of 1152921504606846976 array"}},
		{"nested array bomb", withKV(3, rawKV{key: "test.list", typ: 9, val: nestedArrays(10000)}), `kv "test.list"`, []string{"nested deeper than 8"}},
		{"nesting one too deep", withKV(3, rawKV{key: "test.list", typ: 9, val: nestedArrays(MaxArrayDepth + 1)}), `kv "test.list"`, []string{"nested deeper"}},
		{"unknown value type", withKV(2, rawKV{key: "test.flag", typ: 13, val: []byte{1}}), `kv "test.flag"`, []string{"unknown value type 13"}},
		{"unknown element type", withKV(3, rawKV{key: "test.list", typ: 9, val: cat(le32(77), le64(0))}), `kv "test.list"`, []string{"unknown array element type 77"}},
		{"bad bool", withKV(2, rawKV{key: "test.flag", typ: 7, val: []byte{2}}), `kv "test.flag"`, []string{"bool value is 2"}},
		{"bad bool in array", withKV(3, rawKV{key: "test.list", typ: 9, val: cat(le32(7), le64(3), []byte{0, 1, 7})}), `kv "test.list"`, []string{"bool element 2 is 7"}},
		{"duplicate key", withKV(2, rawKV{key: "general.architecture", typ: 7, val: []byte{1}}), `kv "general.architecture"`, []string{"duplicate key", "kv #0"}},
		{"empty key", withKV(2, rawKV{key: "", typ: 7, val: []byte{1}}), "kv #2", []string{"empty key"}},
		{"invalid UTF-8 key", withKV(2, rawKV{key: "test.\xff", typ: 7, val: []byte{1}}), "kv #2", []string{"UTF-8"}},
		{"alignment 0", withKV(1, rawKV{key: "general.alignment", typ: 4, val: le32(0)}), `kv "general.alignment"`, []string{"alignment 0", "power of two"}},
		{"alignment 3", withKV(1, rawKV{key: "general.alignment", typ: 4, val: le32(3)}), `kv "general.alignment"`, []string{"alignment 3", "power of two"}},
		{"alignment a string", withKV(1, rawKV{key: "general.alignment", typ: 8, val: rawStr("32")}), `kv "general.alignment"`, []string{"string", "want uint32"}},
		{"n_dims 0", withTensor(1, func(t *rawTensor) { t.dims = nil }), `tensor "blk.q"`, []string{"0 dimensions"}},
		{"n_dims 5", withTensor(1, func(t *rawTensor) { t.dims = []uint64{32, 1, 1, 1, 1} }), `tensor "blk.q"`, []string{"5 dimensions"}},
		{"zero dim", withTensor(0, func(t *rawTensor) { t.dims = []uint64{8, 0} }), `tensor "tok.weight"`, []string{"dimension 1 is 0"}},
		{"dims overflow", withTensor(0, func(t *rawTensor) { t.dims = []uint64{1 << 32, 1 << 32, 1 << 32} }), `tensor "tok.weight"`, []string{"overflow"}},
		{"dims overflow int64", withTensor(0, func(t *rawTensor) { t.dims = []uint64{1 << 63} }), `tensor "tok.weight"`, []string{"overflow"}},
		{"unknown type", withTensor(1, func(t *rawTensor) { t.typ = 99 }), `tensor "blk.q"`, []string{"unknown tensor type 99"}},
		{"unsupported type", withTensor(1, func(t *rawTensor) { t.typ = 19 }), `tensor "blk.q"`, []string{"tensor type IQ1_S (19) is not supported"}},
		{"partial block", withTensor(1, func(t *rawTensor) { t.dims = []uint64{33, 2} }), `tensor "blk.q"`, []string{"Q8_0", "33", "whole number"}},
		{"misaligned offset", withTensor(1, func(t *rawTensor) { t.off = 80 }), `tensor "blk.q"`, []string{"offset 80", "alignment 32"}},
		{"overlapping tensors", withTensor(1, func(t *rawTensor) { t.off = 32 }), `tensor "blk.q"`, []string{"overlaps", `"tok.weight"`, "[32, 100)", "[0, 64)"}},
		{"same offset", withTensor(1, func(t *rawTensor) { t.off = 0 }), `tensor "blk.q"`, []string{"overlaps", `"tok.weight"`}},
		{"tensor past the end", withTensor(1, func(t *rawTensor) { t.dims = []uint64{32, 3} }), `tensor "blk.q"`, []string{"past the end"}},
		{"offset past the end", withTensor(1, func(t *rawTensor) { t.off = 1 << 62 }), `tensor "blk.q"`, []string{"past the end"}},
		{"huge row", withTensor(0, func(t *rawTensor) { t.dims = []uint64{1 << 60} }), `tensor "tok.weight"`, []string{"larger than"}},
		{"huge rows", withTensor(0, func(t *rawTensor) { t.dims = []uint64{8, 1 << 58} }), `tensor "tok.weight"`, []string{"past the end"}},
		{"duplicate tensor", withTensor(1, func(t *rawTensor) { t.name = "tok.weight" }), `tensor "tok.weight"`, []string{"duplicate tensor name"}},
		{"empty tensor name", withTensor(1, func(t *rawTensor) { t.name = "" }), "tensor #1", []string{"empty tensor name"}},
		{"huge tensor name", withTensor(1, func(t *rawTensor) { t.raw = cat(le64(1<<50), []byte("blk")) }), "tensor #1", []string{"name length 1125899906842624"}},
		{"data missing", withFile(func(r *rawFile) { r.dataLen = 0; r.alignment = 0 }), "header", []string{"padding before the data section"}},
	}
}

func TestMalformed(t *testing.T) {
	for _, c := range malformedCorpus() {
		t.Run(c.name, func(t *testing.T) {
			data := c.file()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			f, err := Parse(data)
			runtime.ReadMemStats(&after)
			require.Nil(t, f)
			require.Error(t, err)
			var fe *FormatError
			require.True(t, errors.As(err, &fe), "%T is not a *FormatError", err)
			require.Equal(t, c.where, fe.Where, "%v", err)
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
			require.True(t, fe.Offset >= 0 && fe.Offset <= len(data), "offset %d outside the %d-byte file", fe.Offset, len(data))
			// Claims of 2^60 things must fail without allocating for them:
			// a few KB of bookkeeping is all a file this small may cost.
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10), "allocated while failing")
			t.Log(err)
		})
	}
}

// TestMalformedOffsets pins a few byte offsets, so errors point at the
// field at fault and not merely near it.
func TestMalformedOffsets(t *testing.T) {
	at := func(data []byte) int {
		_, err := Parse(data)
		var fe *FormatError
		require.True(t, errors.As(err, &fe), "%v", err)
		return fe.Offset
	}
	require.Equal(t, 4, at(withFile(func(r *rawFile) { r.version = 1 })()))
	require.Equal(t, 8, at(withFile(func(r *rawFile) { r.nTensors = u64p(1 << 60) })()))

	r := baseRaw()
	r.kvs[2].val = []byte{9}
	data := r.bytes()
	require.Equal(t, 9, int(data[at(data)]), "bad bool offset")

	r = baseRaw()
	r.tensors[1].off = 16
	data = r.bytes()
	off := at(data)
	require.Equal(t, le64(16), data[off:off+8], "misaligned offset's offset")
}

// TestTruncated cuts the base file at every byte: each prefix must fail.
// The last tensor ends the file, so even the last byte is missed.
func TestTruncated(t *testing.T) {
	data := baseRaw().bytes()
	_, err := Parse(data)
	require.NoError(t, err)
	for n := range len(data) {
		f, err := Parse(data[:n:n])
		require.Errorf(t, err, "prefix of %d bytes parsed", n)
		require.Nil(t, f)
		var fe *FormatError
		require.True(t, errors.As(err, &fe))
		require.LessOrEqual(t, fe.Offset, n)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "absent.gguf"))
	require.ErrorIs(t, err, os.ErrNotExist)

	empty := filepath.Join(dir, "empty.gguf")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = Open(empty)
	require.ErrorContains(t, err, "empty.gguf")
	require.ErrorContains(t, err, "magic")

	bad := filepath.Join(dir, "bad.gguf")
	r := baseRaw()
	r.tensors[1].typ = 99
	require.NoError(t, os.WriteFile(bad, r.bytes(), 0o644))
	_, err = Open(bad)
	var fe *FormatError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, bad, fe.Path)
	require.True(t, strings.HasPrefix(err.Error(), "gguf: "+bad+`: tensor "blk.q": unknown tensor type 99`), err.Error())
}
