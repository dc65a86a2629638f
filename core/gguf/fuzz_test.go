package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lmstream/lmstream/core/quant"
)

// fuzzSeeds are the inputs FuzzParse starts from besides the committed
// corpus: the valid base file, a Writer-made file with nested arrays, and a
// few malformed ones.
func fuzzSeeds() [][]byte {
	seeds := [][]byte{baseRaw().bytes()}
	w := NewWriter()
	_ = w.AddKV("general.architecture", "llama")
	_ = w.AddKV("tokenizer.ggml.tokens", []string{"<s>", "\xff", ""})
	_ = w.AddKV("n", [][]int16{{1, -1}, {}})
	_ = w.AddKV("f", []float64{1.5})
	_ = w.AddTensor("a", quant.Q4_K, []int{256, 1}, make([]byte, 144))
	_ = w.AddTensor("b", quant.F16, []int{2, 2, 1, 1}, make([]byte, 8))
	var buf bytes.Buffer
	_, _ = w.WriteTo(&buf)
	seeds = append(seeds, buf.Bytes())
	for _, c := range malformedCorpus() {
		switch c.name {
		case "huge tensor count", "nesting one too deep", "overlapping tensors", "bad bool", "partial block", "huge string in array":
			seeds = append(seeds, c.file())
		}
	}
	return seeds
}

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzParse when
// GGUF_WRITE_SEEDS=1; otherwise it checks the committed corpus is there.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	if os.Getenv("GGUF_WRITE_SEEDS") != "1" {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) == 0 {
			t.Fatalf("no committed seed corpus in %s (%v): run with GGUF_WRITE_SEEDS=1", dir, err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range fuzzSeeds() {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// FuzzParse checks that Parse never panics, that its errors are
// FormatErrors inside the input, and that what it accepts is consistent:
// tensor data lies in the input with the size its type and dims give, and
// the file survives a trip through the Writer unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("%T is not a *FormatError: %v", err, err)
			}
			if fe.Offset < 0 || fe.Offset > len(data) {
				t.Fatalf("error offset %d outside the %d-byte input: %v", fe.Offset, len(data), err)
			}
			return
		}
		w := NewWriter()
		w.Version = file.Version
		for _, kv := range file.KV {
			_ = kv.Value.String()
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatalf("Writer refuses a parsed pair: %v", err)
			}
		}
		for i := range file.Tensors {
			tt := &file.Tensors[i]
			if len(tt.Data) != tt.RowBytes()*tt.Rows() || tt.Elems()%tt.Type.BlockElems() != 0 {
				t.Fatalf("tensor %s has %d bytes", tt, len(tt.Data))
			}
			if err := w.AddTensor(tt.Name, tt.Type, tt.Dims, tt.Data); err != nil {
				t.Fatalf("Writer refuses a parsed tensor: %v", err)
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if len(again.KV) != len(file.KV) || len(again.Tensors) != len(file.Tensors) || again.Alignment != file.Alignment {
			t.Fatal("rewritten file differs in shape")
		}
		for i, kv := range file.KV {
			if again.KV[i].Key != kv.Key || !again.KV[i].Value.Equal(kv.Value) {
				t.Fatalf("pair %q changed in the rewrite", kv.Key)
			}
		}
		for i := range file.Tensors {
			a, b := &file.Tensors[i], &again.Tensors[i]
			if a.Name != b.Name || a.Type != b.Type || !bytes.Equal(a.Data, b.Data) || fmt.Sprint(a.Dims) != fmt.Sprint(b.Dims) {
				t.Fatalf("tensor %q changed in the rewrite", a.Name)
			}
		}
	})
}
