// Package ggufmeta is TEMPORARY SCAFFOLDING: a minimal reader of a GGUF
// file's key/value metadata, just enough to fill a tokenizer.Config for the
// tokenizer's tests and its cmd/tokenize parity tool while core/gguf is being
// written. It reads only the KV section (no tensors) and keeps scalars,
// strings and arrays of them. Replace every use with core/gguf once that
// package lands, then delete this directory.
package ggufmeta

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/lmstream/lmstream/core/tokenizer"
)

// GGUF value types.
const (
	tUint8, tInt8, tUint16, tInt16, tUint32, tInt32, tFloat32, tBool, tString, tArray, tUint64, tInt64, tFloat64 = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
)

// ReadKV returns the metadata of the GGUF file at path. Integers come back
// as int64 (uint64 as uint64), floats as float64 except float32 arrays,
// strings as []byte, arrays as []any except string arrays ([][]byte), int32
// arrays ([]int32) and float32 arrays ([]float32).
func ReadKV(path string) (map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &reader{r: bufio.NewReaderSize(f, 1<<16)}
	if magic := r.u32(); magic != 0x46554747 { // "GGUF"
		return nil, fmt.Errorf("ggufmeta: %s: not a GGUF file", path)
	}
	if v := r.u32(); v < 2 || v > 3 {
		return nil, fmt.Errorf("ggufmeta: %s: unsupported GGUF version %d", path, v)
	}
	r.u64() // tensor count
	n := r.u64()
	kv := make(map[string]any, n)
	for i := uint64(0); i < n && r.err == nil; i++ {
		key := string(r.str())
		kv[key] = r.value(r.u32())
	}
	if r.err != nil {
		return nil, fmt.Errorf("ggufmeta: %s: %w", path, r.err)
	}
	return kv, nil
}

// TokenizerConfig reads the tokenizer.* keys of the GGUF file at path.
func TokenizerConfig(path string) (tokenizer.Config, error) {
	kv, err := ReadKV(path)
	if err != nil {
		return tokenizer.Config{}, err
	}
	cfg := tokenizer.Config{BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	str := func(k string) string { b, _ := kv[k].([]byte); return string(b) }
	id := func(k string) int32 {
		switch v := kv[k].(type) {
		case int64:
			return int32(v)
		case uint64:
			return int32(v)
		}
		return -1
	}
	flag := func(k string, def bool) bool {
		if v, ok := kv[k].(bool); ok {
			return v
		}
		return def
	}
	cfg.Model = str("tokenizer.ggml.model")
	cfg.Pre = str("tokenizer.ggml.pre")
	cfg.Tokens, _ = kv["tokenizer.ggml.tokens"].([][]byte)
	cfg.Scores, _ = kv["tokenizer.ggml.scores"].([]float32)
	cfg.Types, _ = kv["tokenizer.ggml.token_type"].([]int32)
	if m, ok := kv["tokenizer.ggml.merges"].([][]byte); ok {
		cfg.Merges = make([]string, len(m))
		for i, b := range m {
			cfg.Merges[i] = string(b)
		}
	}
	cfg.BOS = id("tokenizer.ggml.bos_token_id")
	cfg.EOS = id("tokenizer.ggml.eos_token_id")
	cfg.UNK = id("tokenizer.ggml.unknown_token_id")
	cfg.PAD = id("tokenizer.ggml.padding_token_id")
	cfg.AddBOS = flag("tokenizer.ggml.add_bos_token", cfg.Model == "llama")
	cfg.AddEOS = flag("tokenizer.ggml.add_eos_token", false)
	cfg.AddSpacePrefix = flag("tokenizer.ggml.add_space_prefix", cfg.Model == "llama")
	return cfg, nil
}

type reader struct {
	r   *bufio.Reader
	err error
	buf [8]byte
}

func (r *reader) read(n int) []byte {
	if r.err != nil {
		return r.buf[:n]
	}
	_, r.err = io.ReadFull(r.r, r.buf[:n])
	return r.buf[:n]
}

func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.read(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.read(8)) }

func (r *reader) str() []byte {
	n := r.u64()
	if r.err != nil || n > 1<<30 {
		if r.err == nil {
			r.err = fmt.Errorf("string length %d too large", n)
		}
		return nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.r, b); err != nil {
		r.err = err
	}
	return b
}

func (r *reader) value(typ uint32) any {
	switch typ {
	case tUint8:
		return int64(r.read(1)[0])
	case tInt8:
		return int64(int8(r.read(1)[0]))
	case tUint16:
		return int64(binary.LittleEndian.Uint16(r.read(2)))
	case tInt16:
		return int64(int16(binary.LittleEndian.Uint16(r.read(2))))
	case tUint32:
		return int64(r.u32())
	case tInt32:
		return int64(int32(r.u32()))
	case tFloat32:
		return float64(math.Float32frombits(r.u32()))
	case tBool:
		return r.read(1)[0] != 0
	case tString:
		return r.str()
	case tUint64:
		return r.u64()
	case tInt64:
		return int64(r.u64())
	case tFloat64:
		return math.Float64frombits(r.u64())
	case tArray:
		et, n := r.u32(), r.u64()
		if r.err != nil || n > 1<<28 {
			if r.err == nil {
				r.err = fmt.Errorf("array length %d too large", n)
			}
			return nil
		}
		switch et {
		case tString:
			a := make([][]byte, n)
			for i := range a {
				a[i] = r.str()
			}
			return a
		case tInt32:
			a := make([]int32, n)
			for i := range a {
				a[i] = int32(r.u32())
			}
			return a
		case tFloat32:
			a := make([]float32, n)
			for i := range a {
				a[i] = math.Float32frombits(r.u32())
			}
			return a
		}
		a := make([]any, n)
		for i := range a {
			a[i] = r.value(et)
		}
		return a
	}
	if r.err == nil {
		r.err = fmt.Errorf("unknown GGUF value type %d", typ)
	}
	return nil
}
