// Package shapes carries a model's shape, not its bytes, to a machine that
// can hold only a small bundle (the GPU machine: 64 MiB a call). A
// skeleton is a GGUF file with the model's metadata and, under TensorsKey,
// its tensor list (names, types and dimensions) but no tensor data:
// kilobytes for a model of gigabytes. Fill writes, from a skeleton, a
// model with the same metadata and tensors in exactly those types and
// shapes, filled with random values: what a speed comparison against
// another runtime needs (every byte of it is read, so it times as the
// real file does), not what answers questions.
//
// The tokenizer is the bulk of a small skeleton (Qwen2.5's 151,936 tokens
// and their merges are megabytes), and models of one family share it, so
// Skeleton can leave it out and Fill take it from another file.
package shapes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/quant"
)

// TensorsKey holds a skeleton's tensor list: one string a tensor, its
// name, GGML type id and dimensions (ne0 first), separated by spaces.
const TensorsKey = "lmstream.skeleton.tensors"

// maxTensors and maxBytes bound what Fill accepts from a skeleton, which
// may come from anywhere: it writes every tensor's bytes (maxBytes in
// all), and holds one buffer per distinct type and shape, with its random
// values as float32 while it quantizes them (maxHeld in all, checked
// before each is allocated: a 70B model's largest tensor is about 2 GB).
const (
	maxTensors = 1 << 16
	maxBytes   = 1 << 40
	maxHeld    = 8 << 30
)

// Skeleton writes f's metadata and tensor list to path; with vocab false
// it leaves out the tokenizer.* keys.
func Skeleton(f *gguf.File, path string, vocab bool) error {
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if kv.Key == TensorsKey || (!vocab && strings.HasPrefix(kv.Key, "tokenizer.")) {
			continue
		}
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	list := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		if strings.ContainsAny(t.Name, " \t\n") {
			return fmt.Errorf("shapes: tensor %q: a name with white space", t.Name)
		}
		s := make([]string, 0, 2+len(t.Dims))
		s = append(s, t.Name, strconv.Itoa(int(t.Type)))
		for _, d := range t.Dims {
			s = append(s, strconv.Itoa(d))
		}
		list[i] = strings.Join(s, " ")
	}
	if err := w.AddKV(TensorsKey, list); err != nil {
		return err
	}
	return w.WriteFile(path)
}

// tensor is one entry of a skeleton's list.
type tensor struct {
	name string
	typ  quant.Type
	dims []int
}

// Tensors reads a skeleton's tensor list.
func Tensors(skel *gguf.File) ([]tensor, error) {
	list, err := skel.Strings(TensorsKey)
	if err != nil {
		return nil, fmt.Errorf("shapes: not a skeleton: %w", err)
	}
	if len(list) > maxTensors {
		return nil, fmt.Errorf("shapes: %d tensors, at most %d", len(list), maxTensors)
	}
	out := make([]tensor, len(list))
	total := 0
	for i, s := range list {
		fs := strings.Fields(s)
		if len(fs) < 3 || len(fs) > 2+gguf.MaxDims {
			return nil, fmt.Errorf("shapes: tensor entry %d: %q: want a name, a type and 1 to %d dimensions", i, s, gguf.MaxDims)
		}
		id, err := strconv.ParseUint(fs[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("shapes: tensor %q: type %q: %v", fs[0], fs[1], err)
		}
		t := tensor{name: fs[0], typ: quant.Type(id)}
		if err := t.typ.Support(); err != nil {
			return nil, fmt.Errorf("shapes: tensor %q: %w", t.name, err)
		}
		elems := 1
		for _, f := range fs[2:] {
			d, err := strconv.Atoi(f)
			if err != nil || d < 1 || d > maxBytes {
				return nil, fmt.Errorf("shapes: tensor %q: dimension %q", t.name, f)
			}
			t.dims = append(t.dims, d)
			elems *= d
			if elems > maxBytes {
				return nil, fmt.Errorf("shapes: tensor %q: %v is too large", t.name, t.dims)
			}
		}
		rb, err := t.typ.RowBytes(t.dims[0])
		if err != nil {
			return nil, fmt.Errorf("shapes: tensor %q: %w", t.name, err)
		}
		if total += rb * (elems / t.dims[0]); total > maxBytes {
			return nil, fmt.Errorf("shapes: the tensors take more than %d bytes", maxBytes)
		}
		out[i] = t
	}
	return out, nil
}

// Fill writes the model skel describes to path, its tensor data random:
// norm weights near 1, biases and matrices normal with a standard
// deviation of 1/√(row length), quantized to each tensor's type. vocab,
// when not nil, gives the tokenizer.* keys (which then must not be in
// skel). Tensors of one type and shape share their values (each written
// in full), so that filling a model takes memory for one layer's worth.
func Fill(skel, vocab *gguf.File, seed uint64, path string) error {
	ts, err := Tensors(skel)
	if err != nil {
		return err
	}
	w := gguf.NewWriter()
	for _, kv := range skel.KV {
		if kv.Key == TensorsKey {
			continue
		}
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	if vocab != nil {
		for _, kv := range vocab.KV {
			if strings.HasPrefix(kv.Key, "tokenizer.") {
				if err := w.AddKV(kv.Key, kv.Value); err != nil {
					return fmt.Errorf("shapes: the vocabulary: %w", err)
				}
			}
		}
	}
	r := randFor(seed)
	made, held := map[string][]byte{}, 0
	for _, t := range ts {
		kind := "matrix"
		switch {
		case len(t.dims) == 1 && strings.HasSuffix(t.name, "norm.weight"):
			kind = "norm"
		case strings.HasSuffix(t.name, ".bias") || len(t.dims) == 1:
			kind = "vector"
		}
		key := fmt.Sprint(kind, t.typ, t.dims)
		data, ok := made[key]
		if !ok {
			if held += heldBytes(t); held > maxHeld {
				return fmt.Errorf("shapes: tensor %q: filling the tensors takes more than %d bytes at once", t.name, maxHeld)
			}
			if data, err = random(r, kind, t); err != nil {
				return err
			}
			made[key] = data
		}
		if err := w.AddTensor(t.name, t.typ, t.dims, data); err != nil {
			return err
		}
	}
	return w.WriteFile(path)
}

// randFor is Fill's source of random values for a seed.
func randFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5ba9e5)) }

// slabRows is how many distinct rows a matrix gets; its other rows repeat
// them (quantizing a 1.5B model's worth of rows would take minutes).
const slabRows = 64

// heldBytes is what random allocates for t: its data and its first
// slabRows rows as float32 (Tensors has checked the type and sizes).
func heldBytes(t tensor) int {
	cols, rows := t.dims[0], 1
	for _, d := range t.dims[1:] {
		rows *= d
	}
	rb, _ := t.typ.RowBytes(cols)
	return rows*rb + min(rows, slabRows)*cols*4
}

// random is t's data: slabRows rows of random values quantized to t's
// type, repeated to t's size.
func random(r *rand.Rand, kind string, t tensor) ([]byte, error) {
	cols, rows := t.dims[0], 1
	for _, d := range t.dims[1:] {
		rows *= d
	}
	rb, err := t.typ.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	n := min(rows, slabRows)
	x := make([]float32, n*cols)
	sd := 1 / math.Sqrt(float64(cols))
	for i := range x {
		switch kind {
		case "norm":
			x[i] = float32(1 + 0.1*r.NormFloat64())
		case "vector":
			x[i] = float32(0.1 * r.NormFloat64())
		default:
			x[i] = float32(sd * r.NormFloat64())
		}
	}
	slab := make([]byte, n*rb)
	if err := quant.Quantize(t.typ, x, slab); err != nil {
		return nil, fmt.Errorf("shapes: tensor %q: %w", t.name, err)
	}
	data := make([]byte, rows*rb)
	for off := 0; off < len(data); off += len(slab) {
		copy(data[off:], slab)
	}
	return data, nil
}
