package gguf

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// allTypes are the tensor types quant knows, found by asking it rather than
// listed, so a type added there is exercised here too.
func allTypes() []quant.Type {
	var ts []quant.Type
	for t := range quant.Type(64) {
		if t.Known() {
			ts = append(ts, t)
		}
	}
	return ts
}

func mustArray(t *testing.T, elem ValueType, elems ...Value) Value {
	t.Helper()
	v, err := ArrayOf(elem, elems...)
	require.NoError(t, err)
	return v
}

func mustValue(t *testing.T, x any) Value {
	t.Helper()
	v, err := ValueOf(x)
	require.NoError(t, err)
	return v
}

// testKVs holds every value type, arrays of every type, nested and empty
// arrays, extremes, a NaN with a payload and a token that is not UTF-8.
func testKVs(t *testing.T) []KV {
	nan32 := math.Float32frombits(0x7fa00001) // signalling NaN: must survive bit for bit
	inner := mustArray(t, TypeArray,
		mustValue(t, []uint8{1, 2}),
		mustValue(t, []string{"x", ""}),
		mustArray(t, TypeFloat64),
		mustValue(t, [][]int16{{-1}, {}}),
	)
	pairs := []struct {
		key string
		v   any
	}{
		{"t.u8", uint8(255)},
		{"t.i8", int8(-128)},
		{"t.u16", uint16(65535)},
		{"t.i16", int16(-32768)},
		{"t.u32", uint32(math.MaxUint32)},
		{"t.i32", int32(math.MinInt32)},
		{"t.f32", float32(1.5)},
		{"t.f32nan", nan32},
		{"t.bool", true},
		{"t.false", false},
		{"t.str", "héllo\x00world"},
		{"t.empty", ""},
		{"t.u64", uint64(math.MaxUint64)},
		{"t.i64", int64(math.MinInt64)},
		{"t.f64", math.Inf(-1)},
		{"a.u8", []uint8{0, 1, 255}},
		{"a.i8", []int8{-1, 0, 127}},
		{"a.u16", []uint16{1, 65535}},
		{"a.i16", []int16{-2, 2}},
		{"a.u32", []uint32{7, math.MaxUint32}},
		{"a.i32", []int32{-5, 1 << 30}},
		{"a.f32", []float32{0.25, -1, nan32}},
		{"a.bool", []bool{true, false, true}},
		{"a.str", []string{"<s>", "\xff\xfe bad utf-8", "", "Ġthe"}},
		{"a.u64", []uint64{math.MaxUint64}},
		{"a.i64", []int64{math.MinInt64, 3}},
		{"a.f64", []float64{math.Pi}},
		{"a.empty", mustArray(t, TypeString)},
		{"a.nested", [][]int32{{1, 2}, {}, {3}}},
		{"a.nested3", [][][]string{{{"a"}, {"b", "c"}}, {}}},
		{"a.mixed", inner},
		{"a.fixed", [3]uint16{4, 5, 6}},
	}
	kvs := make([]KV, len(pairs))
	for i, p := range pairs {
		kvs[i] = KV{Key: p.key, Value: mustValue(t, p.v)}
	}
	return kvs
}

type testTensor struct {
	name string
	typ  quant.Type
	dims []int
	data []byte
}

// randomTensors makes a tensor of every type with random dims (1 to 4 of
// them, ne0 a whole number of blocks) and random bytes.
func randomTensors(t *testing.T, rng *rand.Rand) []testTensor {
	var ts []testTensor
	for _, typ := range allTypes() {
		dims := []int{typ.BlockElems() * (1 + rng.IntN(3))}
		for range rng.IntN(4) {
			dims = append(dims, 1+rng.IntN(3))
		}
		rowBytes, err := typ.RowBytes(dims[0])
		require.NoError(t, err)
		rows := 1
		for _, d := range dims[1:] {
			rows *= d
		}
		data := make([]byte, rowBytes*rows)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		ts = append(ts, testTensor{name: "t." + typ.String(), typ: typ, dims: dims, data: data})
	}
	rng.Shuffle(len(ts), func(i, j int) { ts[i], ts[j] = ts[j], ts[i] })
	return ts
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name      string
		version   uint32
		alignment uint32 // 0: leave the default
	}{
		{"v3-default-alignment", 3, 0},
		{"v2-align-64", 2, 64},
		{"v3-align-1", 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tc.alignment)))
			base := testKVs(t)
			kvs := base
			tensors := randomTensors(t, rng)
			w := NewWriter()
			w.Version = tc.version
			wantAlign := DefaultAlignment
			if tc.alignment != 0 {
				require.NoError(t, w.AddKV(AlignmentKey, tc.alignment))
				kvs = append([]KV{{AlignmentKey, mustValue(t, tc.alignment)}}, base...)
				wantAlign = int(tc.alignment)
			}
			for _, kv := range base {
				require.NoError(t, w.AddKV(kv.Key, kv.Value))
			}
			for _, tt := range tensors {
				require.NoError(t, w.AddTensor(tt.name, tt.typ, tt.dims, tt.data))
			}

			var buf bytes.Buffer
			n, err := w.WriteTo(&buf)
			require.NoError(t, err)
			require.EqualValues(t, buf.Len(), n)
			path := filepath.Join(t.TempDir(), "rt.gguf")
			require.NoError(t, w.WriteFile(path))

			parsed, err := Parse(buf.Bytes())
			require.NoError(t, err)
			opened, err := Open(path)
			require.NoError(t, err)

			for _, f := range []*File{parsed, opened} {
				require.Equal(t, tc.version, f.Version)
				require.Equal(t, wantAlign, f.Alignment)
				require.Zero(t, f.DataOffset%wantAlign)
				require.Len(t, f.KV, len(kvs))
				for i, kv := range kvs {
					require.Equal(t, kv.Key, f.KV[i].Key)
					require.Truef(t, kv.Value.Equal(f.KV[i].Value), "%s: wrote %v, read %v", kv.Key, kv.Value, f.KV[i].Value)
					got, ok := f.Lookup(kv.Key)
					require.True(t, ok)
					require.True(t, kv.Value.Equal(got))
				}
				require.Len(t, f.Tensors, len(tensors))
				for i, want := range tensors {
					got := &f.Tensors[i]
					require.Equal(t, want.name, got.Name)
					byName, ok := f.Tensor(want.name)
					require.True(t, ok)
					require.Same(t, got, byName)
					require.Equal(t, want.typ, got.Type)
					require.Equal(t, want.dims, got.Dims)
					require.Zero(t, got.Offset%uint64(wantAlign))
					require.Equal(t, want.data, got.Data)
					require.Equal(t, len(want.data), got.RowBytes()*got.Rows())
					elems := 1
					for _, d := range want.dims {
						elems *= d
					}
					require.Equal(t, elems, got.Elems())
				}
				_, ok := f.Tensor("absent")
				require.False(t, ok)
			}

			// The mapping is dropped on Close and tensor data with it;
			// metadata was copied and outlives it.
			require.NoError(t, opened.Close())
			require.Nil(t, opened.Tensors[0].Data)
			require.NoError(t, opened.Close(), "second Close")
			s, err := opened.Strings("a.str")
			require.NoError(t, err)
			require.Equal(t, "\xff\xfe bad utf-8", s[1])
			require.NoError(t, parsed.Close())
		})
	}
}

func TestValueAccessors(t *testing.T) {
	v := mustValue(t, [][]int32{{1, 2}, {3}})
	require.Equal(t, TypeArray, v.Type())
	require.Equal(t, TypeArray, v.ElemType())
	require.Equal(t, 2, v.Len())
	row, ok := v.Index(0).AsInt32s()
	require.True(t, ok)
	require.Equal(t, []int32{1, 2}, row)
	x, ok := v.Index(1).Index(0).AsInt64()
	require.True(t, ok)
	require.EqualValues(t, 3, x)
	require.Panics(t, func() { v.Index(2) })
	require.Panics(t, func() { mustValue(t, "s").Index(0) })

	_, ok = mustValue(t, int8(-1)).AsUint64()
	require.False(t, ok, "negative as uint64")
	_, ok = mustValue(t, uint64(math.MaxUint64)).AsInt64()
	require.False(t, ok, "2^64-1 as int64")
	f, ok := mustValue(t, float32(0.5)).AsFloat64()
	require.True(t, ok)
	require.Equal(t, 0.5, f)
	_, ok = mustValue(t, "1").AsFloat64()
	require.False(t, ok)

	// AsStrings copies the slice, so callers cannot corrupt the value.
	sv := mustValue(t, []string{"a", "b"})
	s, _ := sv.AsStrings()
	s[0] = "z"
	s2, _ := sv.AsStrings()
	require.Equal(t, []string{"a", "b"}, s2)

	require.Equal(t, `"a\x00"`, mustValue(t, "a\x00").String())
	require.Equal(t, "[1 2 3]", mustValue(t, []uint8{1, 2, 3}).String())
	require.Equal(t, "[0 1 2 3 4 5 6 7 ... (10 int16)]", mustValue(t, []int16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}).String())
	require.Equal(t, "-7", mustValue(t, int64(-7)).String())

	// String stays short however big and deep the array.
	deep := mustValue(t, [][][]uint32{{{1, 2, 3, 4, 5, 6, 7, 8, 9}}})
	for range 5 {
		deep = mustArray(t, TypeArray, deep, deep, deep, deep, deep, deep, deep, deep, deep)
	}
	require.Less(t, len(deep.String()), 1000)
	require.Contains(t, deep.String(), "... (9 array)")
	long := strings.Repeat("x", 1<<20)
	require.Less(t, len(mustValue(t, long).String()), 200)

	type token string // named types convert by kind
	require.True(t, mustValue(t, []token{"a"}).Equal(mustValue(t, []string{"a"})))

	for _, bad := range []any{nil, 1, uint(1), []int{1}, map[string]int{}, struct{}{}, []Value{}} {
		_, err := ValueOf(bad)
		require.Errorf(t, err, "%T", bad)
	}
	_, err := ArrayOf(TypeUint8, mustValue(t, int8(1)))
	require.ErrorContains(t, err, "element 0")
	_, err = ArrayOf(ValueType(13))
	require.Error(t, err)
}

func TestGetters(t *testing.T) {
	w := NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"s", "llama"}, {"u8", uint8(30)}, {"neg", int32(-1)}, {"big", uint64(1 << 40)},
		{"f64", 0.5}, {"f32", float32(2)}, {"b", true},
		{"toks", []string{"a", "b"}}, {"scores", []float32{1, 2}}, {"types", []uint8{1, 3}},
		{"wide", []uint32{1, 1 << 31}}, {"nested", [][]int32{{1}}},
	} {
		require.NoError(t, w.AddKV(kv.k, kv.v))
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	f, err := Parse(buf.Bytes())
	require.NoError(t, err)

	s, err := f.String("s")
	require.NoError(t, err)
	require.Equal(t, "llama", s)
	u, err := f.Uint32("u8") // any integer type that fits
	require.NoError(t, err)
	require.EqualValues(t, 30, u)
	n, err := f.Int("neg")
	require.NoError(t, err)
	require.Equal(t, -1, n)
	if strconv.IntSize == 64 {
		n, err = f.Int("big")
		require.NoError(t, err)
		require.EqualValues(t, int64(1)<<40, n)
	}
	x, err := f.Float32("f64")
	require.NoError(t, err)
	require.Equal(t, float32(0.5), x)
	b, err := f.Bool("b")
	require.NoError(t, err)
	require.True(t, b)
	toks, err := f.Strings("toks")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, toks)
	scores, err := f.Float32s("scores")
	require.NoError(t, err)
	require.Equal(t, []float32{1, 2}, scores)
	types, err := f.Int32s("types")
	require.NoError(t, err)
	require.Equal(t, []int32{1, 3}, types)

	_, err = f.String("missing")
	require.ErrorIs(t, err, ErrKeyNotFound)
	require.ErrorContains(t, err, `"missing"`)
	for _, c := range []struct {
		err  error
		want []string
	}{
		{second(f.String("u8")), []string{`"u8"`, "uint8", "want string"}},
		{second(f.Uint32("neg")), []string{`"neg"`, "int32", "uint32"}},
		{second(f.Uint32("big")), []string{`"big"`, "1099511627776", "uint32"}},
		{second(f.Uint32("s")), []string{`"s"`, "string", "integer"}},
		{second(f.Int("f32")), []string{`"f32"`, "float32", "integer"}},
		{second(f.Float32("b")), []string{`"b"`, "bool", "float"}},
		{second(f.Bool("u8")), []string{`"u8"`, "uint8", "bool"}},
		{second(f.Strings("scores")), []string{`"scores"`, "array of float32", "array of string"}},
		{second(f.Float32s("toks")), []string{`"toks"`, "array of string", "array of float32"}},
		{second(f.Int32s("wide")), []string{`"wide"`, "uint32", "int32"}},
		{second(f.Int32s("nested")), []string{`"nested"`, "array of array", "array of int32"}},
		{second(f.Int32s("s")), []string{`"s"`, "string", "array of int32"}},
	} {
		require.Error(t, c.err)
		require.False(t, errors.Is(c.err, ErrKeyNotFound))
		for _, w := range c.want {
			require.ErrorContains(t, c.err, w)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestWriterRefuses(t *testing.T) {
	w := NewWriter()
	require.NoError(t, w.AddKV("k", uint32(1)))
	require.ErrorContains(t, w.AddKV("k", uint32(2)), "twice")
	require.ErrorContains(t, w.AddKV("n", 5), "sized type")
	require.ErrorContains(t, w.AddKV("", "x"), "non-empty")
	require.ErrorContains(t, w.AddKV("\xff", "x"), "UTF-8")
	require.ErrorContains(t, w.AddKV(AlignmentKey, uint32(3)), "power of two")
	require.ErrorContains(t, w.AddKV(AlignmentKey, uint64(64)), "uint32")
	deep := mustValue(t, []uint8{1})
	for range MaxArrayDepth {
		deep = mustArray(t, TypeArray, deep)
	}
	require.ErrorContains(t, w.AddKV("deep", deep), "nested")

	f32 := make([]byte, 16)
	require.NoError(t, w.AddTensor("a", quant.F32, []int{4}, f32))
	require.ErrorContains(t, w.AddTensor("a", quant.F32, []int{4}, f32), "twice")
	require.ErrorContains(t, w.AddTensor("b", quant.F32, []int{5}, f32), "got 16 bytes")
	require.ErrorContains(t, w.AddTensor("c", quant.Type(99), []int{4}, f32), "unknown tensor type 99")
	require.ErrorContains(t, w.AddTensor("d", quant.F32, []int{4, 0}, f32), "dimension 1 is 0")
	require.ErrorContains(t, w.AddTensor("e", quant.F32, []int{1, 1, 1, 1, 1}, f32), "5 dimensions")
	require.ErrorContains(t, w.AddTensor("f", quant.Q4_0, []int{16}, f32), "whole number")
	require.ErrorContains(t, w.AddTensor("g", quant.F32, []int{1, 1 << 30, 1 << 30, 1 << 30}, f32), "overflow")
	require.ErrorContains(t, w.AddTensor("", quant.F32, []int{4}, f32), "non-empty")
	w.Version = 1
	_, err := w.WriteTo(&bytes.Buffer{})
	require.ErrorContains(t, err, "version 1")
}
