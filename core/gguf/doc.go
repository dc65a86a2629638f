// Package gguf reads and writes GGUF files, the container llama.cpp and
// GGML use for model weights.
//
// # The format
//
// Everything is little-endian. A file is
//
//	magic     "GGUF"
//	version   uint32 (2 or 3; version 1 used 32-bit counts and is rejected)
//	n_tensors uint64
//	n_kv      uint64
//	n_kv metadata pairs:    key string, value type uint32, value
//	n_tensors tensor infos: name string, n_dims uint32 (1..4),
//	                        dims [n_dims]uint64 (ne0 first),
//	                        type uint32 (a GGML type, see quant.Type),
//	                        offset uint64 (relative to the data section)
//	padding to the next multiple of the alignment
//	data section
//
// A string is a uint64 byte length followed by the bytes (no terminator). A
// value is a scalar (u/int8..64, float32/64, bool as one byte 0 or 1), a
// string, or an array: element type uint32, count uint64, then the elements
// without per-element tags; an array's elements may themselves be arrays.
// The alignment is the uint32 value of "general.alignment", 32 when absent;
// every tensor offset is a multiple of it.
//
// # Validation
//
// A model file is input like any other and may be truncated, corrupted or
// hostile, so the reader never trusts a number before checking it against
// the bytes that are actually there: every count, length and size is
// bounded by what the rest of the file could possibly hold before anything
// is allocated or read. A header claiming 2^60 tensors or a 2^40-byte string
// therefore fails at once with bounded memory, and the memory a successful
// parse uses is at most a small constant times the metadata's size. A
// malformed file yields a *FormatError naming what is wrong, where (metadata
// key, tensor name) and at which byte; Parse never panics and never reads
// out of bounds, which FuzzParse checks.
//
// Metadata is copied out of the file, so a File's keys and values stay valid
// after Close; tensor data is not: Tensor.Data points into the mapping made
// by Open and must not be used after Close.
package gguf
