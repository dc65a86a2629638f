// Package kernels holds the CUDA C source of the device forward pass
// (kernels.cu), embedded so that the library compiles it at run time with
// NVRTC for the exact GPU it finds.
package kernels

import (
	_ "embed" // Source
	"fmt"
)

// Source is kernels.cu.
//
//go:embed kernels.cu
var Source []byte

// Name is the program name NVRTC reports in its diagnostics.
const Name = "lmstream_kernels.cu"

// Entry points, as declared extern "C" in Source.
var Entry = []string{"embed", "rmsnorm_quant", "quant", "matvec_q4_1", "matvec_q8_0", "matvec_q5_0",
	"matvec_q4_k", "matvec_q6_k", "mma_q4_1", "mma_q8_0", "mma_q5_0", "mma_q4_k", "mma_q6_k",
	"mma1_q4_1", "mma1_q8_0", "mma1_q5_0", "mma1_q4_k", "mma1_q6_k",
	"rope_store", "kv_commit"}

func init() {
	for _, names := range []map[uint32]string{MatVec, MatMul, MatMul1} {
		for _, name := range names {
			Entry = append(Entry, Argmax(name))
		}
	}
	for _, hd := range AttentionHeadDims {
		for r := 1; r <= AttentionMaxGroup; r++ {
			Entry = append(Entry, Attention(hd, r))
		}
	}
}

// AttentionHeadDims are the head dimensions the attention kernels are
// instantiated for; a head dimension (a multiple of 32) runs on the first
// at least as large.
var AttentionHeadDims = []int{64, MaxHeadDim}

// Attention names the attention kernel for head dimensions up to hd (one
// of AttentionHeadDims) whose blocks take r query heads of one kv head (1
// to AttentionMaxGroup).
func Attention(hd, r int) string { return fmt.Sprintf("attention_d%d_r%d", hd, r) }

// AttentionSharedBytes is the dynamic shared memory of the attention
// instance for head dimensions up to hd: each warp's chunk of value rows.
func AttentionSharedBytes(hd int) int { return AttentionWarps * 32 * hd * 2 }

// NormSharedBytes is rmsnorm_quant's dynamic shared memory for rows of dim
// floats: the row, staged.
func NormSharedBytes(dim int) int { return 4 * dim }

// MatVec names the mat-vec entry point of each weight type that has one,
// by GGML type number (core/quant's Type): one kernel per type, so each
// takes only the registers its own loop needs.
var MatVec = map[uint32]string{
	3:  "matvec_q4_1", // Q4_1
	6:  "matvec_q5_0", // Q5_0
	8:  "matvec_q8_0", // Q8_0
	12: "matvec_q4_k", // Q4_K
	14: "matvec_q6_k", // Q6_K
}

// MatMul names the tensor-core kernel of each weight type: the same
// product, arguments and epilogue as its MatVec kernel, for passes of more
// than MatVecMax tokens; MatMulTokens tokens a block. MatMul1 is its
// variant of one 8-token tile a block, for passes up to MatMul1Max.
var MatMul = map[uint32]string{
	3:  "mma_q4_1",
	6:  "mma_q5_0",
	8:  "mma_q8_0",
	12: "mma_q4_k",
	14: "mma_q6_k",
}
var MatMul1 = map[uint32]string{
	3:  "mma1_q4_1",
	6:  "mma1_q5_0",
	8:  "mma1_q8_0",
	12: "mma1_q4_k",
	14: "mma1_q6_k",
}

// Argmax names the variant of product kernel name (of MatVec, MatMul or
// MatMul1) for the output head of a greedy pass: it writes no logits and
// raises each row's argmax key instead (kernels.cu, argmax_key).
func Argmax(name string) string { return name + "_argmax" }

// Limits the kernels are written for.
const (
	MatVecTokens = 8 // MV_TOKENS: tokens one matvec block keeps in registers
	// MatVecMax is the most tokens a pass runs the mat-vecs for; past it
	// the tensor cores (mma1_<type>) are faster. On an H200 (30-layer
	// SmolLM2, ctx 256, argmax; TestGPUBench) passes of 2, 4 and 8 tokens
	// took 0.97, 1.32 and 2.08 ms on the mat-vecs, 1.14, 1.15 and 1.19 on
	// the tensor cores. Graphs run a pass as its power-of-two bucket (3
	// tokens as 4), so only those sizes choose.
	MatVecMax    = 2
	MatVecWarps  = 4   // MV_WARPS: rows (a warp each) per matvec block
	MatMulTokens = 32  // 8·NT of mma_<type>: tokens one block covers
	MatMul1Max   = 64  // the most tokens mma1_<type> (8 a block) is used for
	MatMulRows   = 16  // rows one mma block covers
	MatMulWarps  = 4   // MM_KSPLIT: warps an mma block splits the row's blocks between
	MaxHeadDim   = 128 // ATT_MAX_HD
	// AttentionWarps is the warps an attention block splits the keys
	// between, a chunk of 32 each in turn: 8, so that a one-token pass at
	// ctx 256 has one chunk a warp (its 9 blocks are latency-bound; at 4
	// warps an H200 took 14 µs a layer there).
	AttentionWarps = 8
	// AttentionMaxGroup is the most query heads of one kv head an
	// attention block takes (its instances' R).
	AttentionMaxGroup = 8
	// AttentionGroupFrom is the fewest tokens of a pass for which an
	// attention block takes several query heads of its kv head, sharing
	// their key and value loads; smaller passes take one head a block,
	// for the blocks. On an H200 (30-layer SmolLM2, ctx 256) grouping
	// costs 3% at 2-4 tokens, ties at 8 and gains 3% at 12, 23% at 64.
	AttentionGroupFrom = 12
	CommitMoves        = 64 // COMMIT_MOVES: entry moves per kv_commit launch
	TokBytes           = 48 // sizeof(Tok)
	PassBytes          = 8  // sizeof(Pass)
)
