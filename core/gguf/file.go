package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/lmstream/lmstream/core/quant"
)

const (
	// Magic opens every GGUF file.
	Magic = "GGUF"
	// DefaultAlignment applies when "general.alignment" is absent.
	DefaultAlignment = 32
	// AlignmentKey is the metadata key that sets the data alignment.
	AlignmentKey = "general.alignment"
	// MaxDims is the most dimensions a tensor may have (GGML's limit).
	MaxDims = 4
	// MaxArrayDepth bounds array nesting. Real files nest at most twice;
	// the bound keeps a file of nested one-element arrays from recursing
	// once per 12 bytes.
	MaxArrayDepth = 8
)

// Lower bounds on the encoded size of one metadata pair (key length, a
// one-byte key, type, a one-byte value) and one tensor info (name length,
// n_dims, one dim, type, offset). Counts are checked against the bytes left
// divided by these before anything is allocated for them.
const (
	minKVSize         = 8 + 1 + 4 + 1
	minTensorInfoSize = 8 + 4 + 8 + 4 + 8
	// maxHint caps preallocation from claimed counts.
	maxHint = 1 << 12
)

// ErrKeyNotFound is wrapped by the typed getters when a key is absent.
var ErrKeyNotFound = errors.New("key not found")

// File is a parsed GGUF file. Its methods only read, so it may be used from
// many goroutines at once, up to Close.
type File struct {
	Version   uint32
	Alignment int
	// DataOffset is the byte offset of the data section in the file.
	DataOffset int
	KV         []KV     // in file order
	Tensors    []Tensor // in file order

	kvIndex     map[string]int
	tensorIndex map[string]int
	unmap       func() error
	// Set by Open: the mapping (for telling its faults from others) and
	// the file's identity at open time (for Unchanged).
	path    string
	mapping []byte
	changed func() error
}

// Tensor describes one tensor and holds its bytes.
type Tensor struct {
	Name string
	Type quant.Type
	// Dims are the extents in GGML order: Dims[0] (ne0) is the row length,
	// the contiguous one.
	Dims []int
	// Offset is where the data starts, relative to the data section.
	Offset uint64
	// Data is exactly RowBytes()*Rows() bytes of the file. For a File from
	// Open it points into the read-only mapping: writing to it faults, and
	// it is invalid after Close.
	Data []byte
}

// Elems is the number of elements.
func (t *Tensor) Elems() int {
	n := 1
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows is the number of rows: the product of Dims[1:].
func (t *Tensor) Rows() int {
	n := 1
	for _, d := range t.Dims[min(1, len(t.Dims)):] {
		n *= d
	}
	return n
}

// RowBytes is the size in bytes of one row of Dims[0] elements.
func (t *Tensor) RowBytes() int {
	if len(t.Dims) == 0 {
		return 0
	}
	n, err := t.Type.RowBytes(t.Dims[0])
	if err != nil {
		return 0
	}
	return n
}

func (t *Tensor) String() string {
	return fmt.Sprintf("%s %s %v", t.Name, t.Type, t.Dims)
}

// FormatError reports a malformed file: what is wrong (Msg), in which part
// (Where: the header, a metadata key or a tensor) and at which byte.
type FormatError struct {
	Path   string // set by Open
	Where  string // e.g. `header`, `kv "general.name"`, `tensor "output.weight"`
	Offset int    // byte offset in the file of the field at fault
	Msg    string
}

func (e *FormatError) Error() string {
	s := "gguf: "
	if e.Path != "" {
		s += e.Path + ": "
	}
	return s + e.Where + ": " + e.Msg + " (at byte " + strconv.Itoa(e.Offset) + ")"
}

// where names the part of the file being decoded. It is formatted only when
// an error is made, so the happy path pays no Sprintf per field.
type where struct {
	what  string // "header", "kv", "tensor"
	name  string // key or tensor name once read
	index int
}

func (w where) String() string {
	switch {
	case w.what == "header":
		return "header"
	case w.name != "":
		return w.what + " " + quoteShort(w.name)
	}
	return w.what + " #" + strconv.Itoa(w.index)
}

// quoteShort quotes s for an error message, eliding the middle of a long
// one: a hostile file may hold a megabyte-long key.
func quoteShort(s string) string {
	const keep = 48
	if len(s) > 2*keep {
		return strconv.Quote(s[:keep]) + "..." + strconv.Quote(s[len(s)-keep:])
	}
	return strconv.Quote(s)
}

type decoder struct {
	b   []byte
	off int
}

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) fail(w where, at int, format string, args ...any) error {
	return &FormatError{Where: w.String(), Offset: at, Msg: fmt.Sprintf(format, args...)}
}

// need checks that n more bytes are there for the named field.
func (d *decoder) need(w where, n int, field string) error {
	if d.left() < n {
		return d.fail(w, d.off, "file ends inside the %s: %d bytes needed, %d left", field, n, d.left())
	}
	return nil
}

func (d *decoder) u32(w where, field string) (uint32, error) {
	if err := d.need(w, 4, field); err != nil {
		return 0, err
	}
	x := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return x, nil
}

func (d *decoder) u64(w where, field string) (uint64, error) {
	if err := d.need(w, 8, field); err != nil {
		return 0, err
	}
	x := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return x, nil
}

// str reads a length-prefixed string, copying it out of the file.
func (d *decoder) str(w where, field string) (string, error) {
	at := d.off
	n, err := d.u64(w, field+" length")
	if err != nil {
		return "", err
	}
	if n > uint64(d.left()) {
		return "", d.fail(w, at, "%s length %d runs past the end of the file (%d bytes left)", field, n, d.left())
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s, nil
}

// Parse decodes and validates a GGUF file held in data. Tensor data slices
// point into data, which must stay unmodified while they are used; metadata
// is copied.
func Parse(data []byte) (*File, error) {
	d := &decoder{b: data}
	f, err := d.parse()
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (d *decoder) parse() (*File, error) {
	hdr := where{what: "header"}
	if err := d.need(hdr, 4, "magic"); err != nil {
		return nil, err
	}
	if m := string(d.b[:4]); m != Magic {
		return nil, d.fail(hdr, 0, "bad magic %q, want %q: not a GGUF file", m, Magic)
	}
	d.off = 4
	version, err := d.u32(hdr, "version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, d.fail(hdr, 4, "GGUF version 1 is not supported (it used 32-bit counts); want version 2 or 3")
	case bits.ReverseBytes32(version) <= 3:
		return nil, d.fail(hdr, 4, "version %#x is byte-swapped: big-endian GGUF files are not supported", version)
	default:
		return nil, d.fail(hdr, 4, "unsupported GGUF version %d, want 2 or 3", version)
	}
	countsAt := d.off
	nTensors, err := d.u64(hdr, "tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := d.u64(hdr, "metadata count")
	if err != nil {
		return nil, err
	}
	// Fail fast on counts the file cannot hold, before allocating for them.
	left := uint64(d.left())
	if nTensors > left/minTensorInfoSize {
		return nil, d.fail(hdr, countsAt, "tensor count %d cannot fit in the %d bytes left (each tensor info takes at least %d)", nTensors, left, minTensorInfoSize)
	}
	if nKV > left/minKVSize || nKV*minKVSize > left-nTensors*minTensorInfoSize {
		return nil, d.fail(hdr, countsAt+8, "metadata count %d cannot fit in the %d bytes left beside %d tensor infos", nKV, left, nTensors)
	}

	// The counts are plausible now but still only claims: size the tables
	// for real models and let them grow with what is actually decoded.
	kvHint, tensorHint := min(nKV, maxHint), min(nTensors, maxHint)
	f := &File{
		Version:     version,
		Alignment:   DefaultAlignment,
		KV:          make([]KV, 0, kvHint),
		Tensors:     make([]Tensor, 0, tensorHint),
		kvIndex:     make(map[string]int, kvHint),
		tensorIndex: make(map[string]int, tensorHint),
	}
	alignAt := -1
	for i := range int(nKV) {
		w := where{what: "kv", index: i}
		keyAt := d.off
		key, err := d.str(w, "key")
		if err != nil {
			return nil, err
		}
		if key == "" {
			return nil, d.fail(w, keyAt, "empty key")
		}
		if !utf8.ValidString(key) {
			return nil, d.fail(w, keyAt, "key %s is not valid UTF-8", quoteShort(key))
		}
		w.name = key
		if j, dup := f.kvIndex[key]; dup {
			return nil, d.fail(w, keyAt, "duplicate key (first at kv #%d)", j)
		}
		typeAt := d.off
		t, err := d.u32(w, "value type")
		if err != nil {
			return nil, err
		}
		if key == AlignmentKey {
			alignAt = d.off
		}
		v, err := d.value(w, typeAt, ValueType(t), 0)
		if err != nil {
			return nil, err
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}

	if v, ok := f.Lookup(AlignmentKey); ok {
		w := where{what: "kv", name: AlignmentKey}
		a, ok := v.AsUint64()
		if !ok || v.typ != TypeUint32 {
			return nil, d.fail(w, alignAt, "alignment is a %s, want uint32", v.describe())
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, d.fail(w, alignAt, "alignment %d is not a power of two", a)
		}
		f.Alignment = int(a)
	}

	infoAt, err := d.tensorInfos(f, int(nTensors))
	if err != nil {
		return nil, err
	}
	if err := d.tensorData(f, infoAt); err != nil {
		return nil, err
	}
	return f, nil
}

// value decodes a value of type t; typeAt is where its type tag is.
func (d *decoder) value(w where, typeAt int, t ValueType, depth int) (Value, error) {
	if !t.valid() {
		return Value{}, d.fail(w, typeAt, "unknown value type %d", uint32(t))
	}
	switch t {
	case TypeString:
		s, err := d.str(w, "string value")
		return Value{typ: TypeString, str: s}, err
	case TypeArray:
		return d.array(w, depth+1)
	}
	n := t.width()
	if err := d.need(w, n, t.String()+" value"); err != nil {
		return Value{}, err
	}
	v := scalarFromBytes(t, d.b[d.off:d.off+n])
	if t == TypeBool && v.bits > 1 {
		return Value{}, d.fail(w, d.off, "bool value is %d, want 0 or 1", v.bits)
	}
	d.off += n
	return v, nil
}

// array decodes an array body (element type, count, elements) at nesting
// level depth (1 for a top-level array).
func (d *decoder) array(w where, depth int) (Value, error) {
	at := d.off
	if depth > MaxArrayDepth {
		return Value{}, d.fail(w, at, "arrays nested deeper than %d levels", MaxArrayDepth)
	}
	et, err := d.u32(w, "array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, d.fail(w, at, "unknown array element type %d", et)
	}
	countAt := d.off
	n, err := d.u64(w, "array length")
	if err != nil {
		return Value{}, err
	}
	if least := uint64(elem.minSize()); n > uint64(d.left())/least {
		return Value{}, d.fail(w, countAt, "array of %d %s elements cannot fit in the %d bytes left", n, elem, d.left())
	}
	a := &array{elem: elem, n: int(n)}
	switch elem {
	case TypeString:
		if err := d.strings(w, a); err != nil {
			return Value{}, err
		}
	case TypeArray:
		a.vals = make([]Value, n)
		for i := range a.vals {
			if a.vals[i], err = d.array(w, depth+1); err != nil {
				return Value{}, err
			}
		}
	default:
		size := int(n) * elem.width() // bounded by the check above
		raw := d.b[d.off : d.off+size]
		if elem == TypeBool {
			for i, b := range raw {
				if b > 1 {
					return Value{}, d.fail(w, d.off+i, "bool element %d is %d, want 0 or 1", i, b)
				}
			}
		}
		a.raw = append([]byte(nil), raw...)
		d.off += size
	}
	return Value{typ: TypeArray, arr: a}, nil
}

// strings decodes a.n strings. A first pass validates the lengths and finds
// the end; then the whole run is copied into one string that every element
// slices, so a 49,152-token vocabulary costs two allocations, not 49,153.
func (d *decoder) strings(w where, a *array) error {
	start := d.off
	off := d.off
	for i := range a.n {
		if len(d.b)-off < 8 {
			return d.fail(w, off, "file ends inside the length of string element %d", i)
		}
		n := binary.LittleEndian.Uint64(d.b[off:])
		off += 8
		if n > uint64(len(d.b)-off) {
			return d.fail(w, off-8, "string element %d length %d runs past the end of the file (%d bytes left)", i, n, len(d.b)-off)
		}
		off += int(n)
	}
	blob := string(d.b[start:off])
	a.strs = make([]string, a.n)
	p := 0
	for i := range a.strs {
		n := int(binary.LittleEndian.Uint64(d.b[start+p:]))
		p += 8
		a.strs[i] = blob[p : p+n]
		p += n
	}
	d.off = off
	return nil
}

// tensorInfos decodes n tensor infos into f.Tensors and returns the byte
// offset of each, for the errors of the data checks that follow.
func (d *decoder) tensorInfos(f *File, n int) ([]int, error) {
	infoAt := make([]int, 0, min(n, maxHint))
	// One backing array for every tensor's dims; each tensor gets a
	// capacity-limited window so appending to one cannot clobber another.
	dimsBuf := make([]int, 0, min(n, maxHint)*MaxDims)
	for i := range n {
		w := where{what: "tensor", index: i}
		nameAt := d.off
		name, err := d.str(w, "name")
		if err != nil {
			return nil, err
		}
		if name == "" {
			return nil, d.fail(w, nameAt, "empty tensor name")
		}
		if !utf8.ValidString(name) {
			return nil, d.fail(w, nameAt, "tensor name %s is not valid UTF-8", quoteShort(name))
		}
		w.name = name
		if j, dup := f.tensorIndex[name]; dup {
			return nil, d.fail(w, nameAt, "duplicate tensor name (first is tensor #%d)", j)
		}
		ndAt := d.off
		nd, err := d.u32(w, "dimension count")
		if err != nil {
			return nil, err
		}
		if nd < 1 || nd > MaxDims {
			return nil, d.fail(w, ndAt, "%d dimensions, want 1 to %d", nd, MaxDims)
		}
		dimsAt := d.off
		var dims [MaxDims]uint64
		product := uint64(1)
		overflow := false
		for j := range nd {
			if dims[j], err = d.u64(w, "dimensions"); err != nil {
				return nil, err
			}
			if dims[j] == 0 {
				return nil, d.fail(w, d.off-8, "dimension %d is 0", j)
			}
			hi, lo := bits.Mul64(product, dims[j])
			product = lo
			overflow = overflow || hi != 0 || lo > math.MaxInt
		}
		if overflow {
			return nil, d.fail(w, dimsAt, "dimensions %v: element count overflows an int", dims[:nd])
		}
		typeAt := d.off
		tt, err := d.u32(w, "type")
		if err != nil {
			return nil, err
		}
		typ := quant.Type(tt)
		if err := typ.Support(); err != nil {
			return nil, d.fail(w, typeAt, "%v", err)
		}
		// int(dims[0]) is exact (dims[0] ≤ product ≤ MaxInt); RowBytes only
		// divides on its error path, so a huge ne0 cannot mislead it here.
		if _, err := typ.RowBytes(int(dims[0])); err != nil {
			return nil, d.fail(w, dimsAt, "%v", err)
		}
		offAt := d.off
		off, err := d.u64(w, "data offset")
		if err != nil {
			return nil, err
		}
		if off%uint64(f.Alignment) != 0 {
			return nil, d.fail(w, offAt, "data offset %d is not a multiple of the alignment %d", off, f.Alignment)
		}
		lo := len(dimsBuf)
		for _, x := range dims[:nd] {
			dimsBuf = append(dimsBuf, int(x)) // each ≤ product ≤ MaxInt
		}
		f.tensorIndex[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, Tensor{
			Name:   name,
			Type:   typ,
			Dims:   dimsBuf[lo:len(dimsBuf):len(dimsBuf)],
			Offset: off,
		})
		infoAt = append(infoAt, nameAt)
	}
	return infoAt, nil
}

// tensorData places the data section after the tensor infos, checks every
// tensor's bytes lie inside it without overlapping another's, and slices
// them.
func (d *decoder) tensorData(f *File, infoAt []int) error {
	headerEnd := d.off
	align := f.Alignment
	start := uint64(headerEnd) + uint64(align-1)
	start -= start % uint64(align)
	var dataSize uint64
	if start < uint64(len(d.b)) {
		dataSize = uint64(len(d.b)) - start
	}
	f.DataOffset = int(start)
	// A file without tensors may end right after its header, unpadded.
	if len(f.Tensors) > 0 && start > uint64(len(d.b)) {
		return d.fail(where{what: "header"}, headerEnd, "file ends in the padding before the data section at byte %d", start)
	}

	sizes := make([]uint64, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		w := where{what: "tensor", name: t.Name}
		ne0 := t.Dims[0]
		// ne0 is a whole number of blocks (checked with the info); bound the
		// row by the data section before RowBytes multiplies, so it cannot
		// overflow.
		blocks := uint64(ne0 / t.Type.BlockElems())
		if blocks > dataSize/uint64(t.Type.BlockBytes()) {
			return d.fail(w, infoAt[i], "a row of %d %s elements is larger than the %d-byte data section", ne0, t.Type, dataSize)
		}
		rowBytes, err := t.Type.RowBytes(ne0)
		if err != nil { // unreachable: checked with the info
			return d.fail(w, infoAt[i], "%v", err)
		}
		hi, size := bits.Mul64(uint64(rowBytes), uint64(t.Rows()))
		if hi != 0 || t.Offset > dataSize || size > dataSize-t.Offset {
			return d.fail(w, infoAt[i], "%s data of %d rows of %d bytes at data offset %d runs past the end of the file (data section is %d bytes from byte %d)",
				t.Type, t.Rows(), rowBytes, t.Offset, dataSize, start)
		}
		sizes[i] = size
		lo := int(start + t.Offset)
		t.Data = d.b[lo : lo+int(size) : lo+int(size)]
	}

	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		oa, ob := f.Tensors[a].Offset, f.Tensors[b].Offset
		switch {
		case oa < ob:
			return -1
		case oa > ob:
			return 1
		}
		return a - b
	})
	for k := 1; k < len(order); k++ {
		p, q := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if end := p.Offset + sizes[order[k-1]]; end > q.Offset {
			return d.fail(where{what: "tensor", name: q.Name}, infoAt[order[k]],
				"data at offsets [%d, %d) overlaps tensor %q at [%d, %d)",
				q.Offset, q.Offset+sizes[order[k]], p.Name, p.Offset, end)
		}
	}
	return nil
}

// Release tells the OS that b, bytes of the file's mapping (a tensor's
// Data), will not be read again soon: the whole pages within it leave the
// process's resident memory. They stay in the page cache, and a later
// read maps them back, so the data is unchanged. A loader that copies
// every tensor out of the mapping calls it after each copy, so that the
// copies and the file's pages are not resident together. It does nothing
// for a File from Parse (whose bytes are the caller's memory, not a
// file's) or for bytes outside the mapping.
func (f *File) Release(b []byte) {
	if len(f.mapping) == 0 || len(b) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(&f.mapping[0]))
	lo := uintptr(unsafe.Pointer(&b[0])) - base
	if lo >= uintptr(len(f.mapping)) || uintptr(len(b)) > uintptr(len(f.mapping))-lo {
		return
	}
	page := uintptr(os.Getpagesize())
	start, end := (lo+page-1)/page*page, (lo+uintptr(len(b)))/page*page
	if start < end {
		dropPages(f.mapping[start:end])
	}
}

// Close releases the mapping made by Open; every Tensor.Data becomes nil.
// It is a no-op for a File from Parse and on a second call. Close must not
// race with readers of the tensor data.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	for i := range f.Tensors {
		f.Tensors[i].Data = nil
	}
	err := f.unmap()
	f.unmap = nil
	return err
}

// Lookup returns the value stored under key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

func (f *File) get(key string) (Value, error) {
	v, ok := f.Lookup(key)
	if !ok {
		return Value{}, fmt.Errorf("gguf: key %q: %w", key, ErrKeyNotFound)
	}
	return v, nil
}

func typeError(key string, v Value, want string) error {
	return fmt.Errorf("gguf: key %q is a %s, want %s", key, v.describe(), want)
}

// String returns the string stored under key.
func (f *File) String(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.AsString()
	if !ok {
		return "", typeError(key, v, "string")
	}
	return s, nil
}

// Uint32 returns an integer of any type stored under key that fits in a
// uint32.
func (f *File) Uint32(key string) (uint32, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	if !v.typ.isInt() {
		return 0, typeError(key, v, "an integer")
	}
	x, ok := v.AsUint64()
	if !ok || x > math.MaxUint32 {
		return 0, fmt.Errorf("gguf: key %q: %s %s does not fit in a uint32", key, v.typ, v)
	}
	return uint32(x), nil
}

// IntRange returns the integer stored under key, of any integer type, if
// lo ≤ value ≤ hi. The comparison is made at the value's full width, so a
// uint32 0xFFFFFFFF or a uint64 2^32+2 is out of the range [0, n) of a
// vocabulary's token ids rather than quietly becoming -1 or 2 on the way to
// an int32. The error names the key, its type and value, and the range.
func (f *File) IntRange(key string, lo, hi int) (int, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	if !v.typ.isInt() {
		return 0, typeError(key, v, "an integer")
	}
	// A uint64 above MaxInt64 fails AsInt64 and is above any int hi.
	if x, ok := v.AsInt64(); !ok || x < int64(lo) || x > int64(hi) {
		return 0, fmt.Errorf("gguf: key %q: %s %s is out of the range [%d, %d]", key, v.typ, v, lo, hi)
	}
	return int(v.bits), nil // in range, so the bits are the value
}

// Int returns an integer of any type stored under key that fits in an int.
func (f *File) Int(key string) (int, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	if !v.typ.isInt() {
		return 0, typeError(key, v, "an integer")
	}
	x, ok := v.AsInt64()
	if !ok || x < math.MinInt || x > math.MaxInt {
		return 0, fmt.Errorf("gguf: key %q: %s %s does not fit in an int", key, v.typ, v)
	}
	return int(x), nil
}

// Float32 returns the float32 (or float64, converted) stored under key. A
// finite float64 beyond float32's range is an error, not an infinity.
func (f *File) Float32(key string) (float32, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.AsFloat64()
	if !ok {
		return 0, typeError(key, v, "a float")
	}
	if !fitsFloat32(x) {
		return 0, fmt.Errorf("gguf: key %q: float64 %g does not fit in a float32", key, x)
	}
	return float32(x), nil
}

// fitsFloat32 reports whether x converts to float32 without overflowing
// to an infinity (infinities and NaNs convert as themselves).
func fitsFloat32(x float64) bool {
	return math.IsInf(x, 0) || math.IsNaN(x) || math.Abs(x) <= math.MaxFloat32
}

// Bool returns the bool stored under key.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.AsBool()
	if !ok {
		return false, typeError(key, v, "bool")
	}
	return b, nil
}

// Strings returns the array of strings stored under key (a fresh slice).
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.AsStrings()
	if !ok {
		return nil, typeError(key, v, "array of string")
	}
	return s, nil
}

// Float32s returns the array of floats stored under key.
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.AsFloat32s()
	if !ok {
		return nil, typeError(key, v, "array of float32")
	}
	if v.arr.elem == TypeFloat64 {
		for i := range v.arr.n {
			if x := math.Float64frombits(binary.LittleEndian.Uint64(v.arr.raw[8*i:])); !fitsFloat32(x) {
				return nil, fmt.Errorf("gguf: key %q: element %d, float64 %g, does not fit in a float32", key, i, x)
			}
		}
	}
	return s, nil
}

// Int32s returns the array of integers stored under key; each must fit in
// an int32.
func (f *File) Int32s(key string) ([]int32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	if v.typ != TypeArray || !v.arr.elem.isInt() {
		return nil, typeError(key, v, "array of int32")
	}
	s, ok := v.AsInt32s()
	if !ok {
		return nil, fmt.Errorf("gguf: key %q: an element of the array of %s does not fit in an int32", key, v.arr.elem)
	}
	return s, nil
}
