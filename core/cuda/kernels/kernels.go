// Package kernels holds the CUDA C source of the device forward pass
// (kernels.cu), embedded so that the library compiles it at run time with
// NVRTC for the exact GPU it finds.
package kernels

import _ "embed"

// Source is kernels.cu.
//
//go:embed kernels.cu
var Source []byte

// Name is the program name NVRTC reports in its diagnostics.
const Name = "lmstream_kernels.cu"

// Entry points, as declared extern "C" in Source.
var Entry = []string{"embed", "rmsnorm_quant", "quant", "matvec", "rope_store", "attention", "kv_commit", "argmax"}

// Limits the kernels are written for.
const (
	MatVecTokens = 8   // MV_TOKENS: tokens one matvec block keeps in registers
	MatVecWarps  = 4   // MV_WARPS: rows (a warp each) per matvec block
	MaxHeadDim   = 128 // ATT_MAX_HD
	CommitMoves  = 64  // COMMIT_MOVES: entry moves per kv_commit launch
	TokBytes     = 48  // sizeof(Tok)
	PassBytes    = 8   // sizeof(Pass)
)
