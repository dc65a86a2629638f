package gguf

import (
	"encoding/binary"
	"os"
	"testing"
)

// modelPath is the default model, or $LMSTREAM_MODEL. Tests that need it
// skip when it is absent: it is git-ignored and fetched by `make model`.
func modelPath(tb testing.TB) string {
	tb.Helper()
	p := os.Getenv("LMSTREAM_MODEL")
	if p == "" {
		p = "../../models/SmolLM2-135M-Instruct.Q4_1.gguf"
	}
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("model not available (%v): run `make model` or set LMSTREAM_MODEL", err)
	}
	return p
}

// The raw builder below writes GGUF bytes field by field without any
// checks, so tests can make files the Writer would refuse to.

func le32(x uint32) []byte { return binary.LittleEndian.AppendUint32(nil, x) }
func le64(x uint64) []byte { return binary.LittleEndian.AppendUint64(nil, x) }
func rawStr(s string) []byte {
	return append(le64(uint64(len(s))), s...)
}
func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

type rawKV struct {
	key string
	typ uint32
	val []byte // encoded payload
	raw []byte // when set, the whole encoded pair, replacing the above
}

func (kv rawKV) bytes() []byte {
	if kv.raw != nil {
		return kv.raw
	}
	return cat(rawStr(kv.key), le32(kv.typ), kv.val)
}

type rawTensor struct {
	name string
	dims []uint64
	typ  uint32
	off  uint64
	raw  []byte // when set, the whole encoded info
}

func (t rawTensor) bytes() []byte {
	if t.raw != nil {
		return t.raw
	}
	b := cat(rawStr(t.name), le32(uint32(len(t.dims))))
	for _, d := range t.dims {
		b = append(b, le64(d)...)
	}
	return cat(b, le32(t.typ), le64(t.off))
}

type rawFile struct {
	magic     string
	version   uint32
	nTensors  *uint64 // overrides len(tensors) when set
	nKV       *uint64 // overrides len(kvs) when set
	kvs       []rawKV
	tensors   []rawTensor
	alignment int // padding of the header; data offsets are the tensors'
	dataLen   int // bytes in the data section
}

func (r rawFile) bytes() []byte {
	nt, nk := uint64(len(r.tensors)), uint64(len(r.kvs))
	if r.nTensors != nil {
		nt = *r.nTensors
	}
	if r.nKV != nil {
		nk = *r.nKV
	}
	b := cat([]byte(r.magic), le32(r.version), le64(nt), le64(nk))
	for _, kv := range r.kvs {
		b = append(b, kv.bytes()...)
	}
	for _, t := range r.tensors {
		b = append(b, t.bytes()...)
	}
	for r.alignment > 0 && len(b)%r.alignment != 0 {
		b = append(b, 0)
	}
	data := make([]byte, r.dataLen)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	return append(b, data...)
}

func u64p(x uint64) *uint64 { return &x }

// baseRaw is a small valid file: four metadata pairs and two tensors, the
// second ending exactly at the end of the file so that cutting any byte
// off must be noticed.
func baseRaw() rawFile {
	return rawFile{
		magic:   "GGUF",
		version: 3,
		kvs: []rawKV{
			{key: "general.architecture", typ: 8, val: rawStr("llama")},
			{key: "general.alignment", typ: 4, val: le32(32)},
			{key: "test.flag", typ: 7, val: []byte{1}},
			{key: "test.list", typ: 9, val: cat(le32(4), le64(3), le32(1), le32(2), le32(3))},
		},
		tensors: []rawTensor{
			{name: "tok.weight", dims: []uint64{8, 2}, typ: 0, off: 0}, // F32: 64 bytes
			{name: "blk.q", dims: []uint64{32, 2}, typ: 8, off: 64},    // Q8_0: 2*34 bytes
		},
		alignment: 32,
		dataLen:   64 + 68,
	}
}
