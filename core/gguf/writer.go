package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"unicode/utf8"

	"github.com/lmstream/lmstream/core/quant"
)

// Writer builds a GGUF file: metadata in the order added, then tensors in
// the order added, each at the next aligned offset. It refuses, when they
// are added, the things Parse would reject, so what it writes always
// parses. The alignment is DefaultAlignment unless set with
// AddKV(AlignmentKey, uint32(n)).
type Writer struct {
	// Version is the version written: 3 (the default) or 2, which differ
	// only in byte order support and are laid out alike.
	Version uint32

	kvs       []KV
	keys      map[string]bool
	tensors   []writerTensor
	names     map[string]bool
	alignment int
}

type writerTensor struct {
	name string
	typ  quant.Type
	dims []int
	data []byte
}

// NewWriter returns an empty version 3 writer.
func NewWriter() *Writer {
	return &Writer{
		Version:   3,
		keys:      make(map[string]bool),
		names:     make(map[string]bool),
		alignment: DefaultAlignment,
	}
}

// AddKV adds a metadata pair; v is anything ValueOf accepts.
func (w *Writer) AddKV(key string, v any) error {
	if key == "" || !utf8.ValidString(key) {
		return fmt.Errorf("gguf: key %q: keys must be non-empty UTF-8", key)
	}
	if w.keys[key] {
		return fmt.Errorf("gguf: key %q added twice", key)
	}
	val, err := ValueOf(v)
	if err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	if d := arrayDepth(val); d > MaxArrayDepth {
		return fmt.Errorf("gguf: key %q: arrays nested %d deep, readers accept %d", key, d, MaxArrayDepth)
	}
	if key == AlignmentKey {
		a, ok := val.AsUint64()
		if val.typ != TypeUint32 || !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: key %q: alignment must be a uint32 power of two, got %s %s", key, val.describe(), val)
		}
		w.alignment = int(a)
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Value: val})
	return nil
}

// arrayDepth is how deeply arrays nest in v: 0 for a scalar.
func arrayDepth(v Value) int {
	if v.arr == nil {
		return 0
	}
	d := 0
	for _, e := range v.arr.vals {
		d = max(d, arrayDepth(e))
	}
	return d + 1
}

// AddTensor adds a tensor with dims in GGML order (ne0 first). data must be
// exactly the tensor's size; it is kept, not copied, until WriteTo.
func (w *Writer) AddTensor(name string, t quant.Type, dims []int, data []byte) error {
	if name == "" || !utf8.ValidString(name) {
		return fmt.Errorf("gguf: tensor %q: names must be non-empty UTF-8", name)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: tensor %q added twice", name)
	}
	if err := t.Support(); err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if len(dims) < 1 || len(dims) > MaxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions, want 1 to %d", name, len(dims), MaxDims)
	}
	rows := uint64(1)
	for i, d := range dims {
		if d < 1 {
			return fmt.Errorf("gguf: tensor %q: dimension %d is %d", name, i, d)
		}
		if i > 0 {
			hi, lo := bits.Mul64(rows, uint64(d))
			if hi != 0 || lo > math.MaxInt {
				return fmt.Errorf("gguf: tensor %q: dimensions %v overflow", name, dims)
			}
			rows = lo
		}
	}
	rowBytes, err := t.RowBytes(dims[0])
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	if hi, size := bits.Mul64(uint64(rowBytes), rows); hi != 0 || size != uint64(len(data)) {
		return fmt.Errorf("gguf: tensor %q: %s %v takes %d rows of %d bytes, got %d bytes", name, t, dims, rows, rowBytes, len(data))
	}
	w.names[name] = true
	w.tensors = append(w.tensors, writerTensor{name: name, typ: t, dims: append([]int(nil), dims...), data: data})
	return nil
}

// header encodes everything before the data section, padding included.
func (w *Writer) header() []byte {
	b := append([]byte(nil), Magic...)
	b = binary.LittleEndian.AppendUint32(b, w.Version)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(w.tensors)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		b = appendString(b, kv.Key)
		b = binary.LittleEndian.AppendUint32(b, uint32(kv.Value.typ))
		b = appendValue(b, kv.Value)
	}
	off := 0
	for _, t := range w.tensors {
		b = appendString(b, t.name)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t.dims)))
		for _, d := range t.dims {
			b = binary.LittleEndian.AppendUint64(b, uint64(d))
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(t.typ))
		b = binary.LittleEndian.AppendUint64(b, uint64(off))
		off = alignUp(off+len(t.data), w.alignment)
	}
	return append(b, make([]byte, alignUp(len(b), w.alignment)-len(b))...)
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue encodes v's payload (not its type tag).
func appendValue(b []byte, v Value) []byte {
	switch v.typ {
	case TypeString:
		return appendString(b, v.str)
	case TypeArray:
		return appendArray(b, v.arr)
	}
	return appendScalar(b, v.typ, v.bits)
}

func appendArray(b []byte, a *array) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(a.elem))
	b = binary.LittleEndian.AppendUint64(b, uint64(a.n))
	switch a.elem {
	case TypeString:
		for _, s := range a.strs {
			b = appendString(b, s)
		}
	case TypeArray:
		for _, e := range a.vals {
			b = appendArray(b, e.arr)
		}
	default:
		b = append(b, a.raw...)
	}
	return b
}

// WriteTo writes the file to out. The last tensor is not padded, so the
// file ends where its data does.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	if w.Version != 2 && w.Version != 3 {
		return 0, fmt.Errorf("gguf: cannot write version %d, only 2 or 3", w.Version)
	}
	hdr := w.header()
	n, err := out.Write(hdr)
	total := int64(n)
	if err != nil {
		return total, err
	}
	pad := make([]byte, w.alignment)
	for i, t := range w.tensors {
		n, err = out.Write(t.data)
		total += int64(n)
		if err != nil {
			return total, err
		}
		if i < len(w.tensors)-1 {
			n, err = out.Write(pad[:alignUp(len(t.data), w.alignment)-len(t.data)])
			total += int64(n)
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// WriteFile writes the file to path, removing it again if writing fails.
func (w *Writer) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	_, err = w.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(fmt.Errorf("gguf: writing %s: %w", path, err), os.Remove(path))
	}
	return nil
}
