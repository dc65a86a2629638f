package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// decodeStreamShapes: a Qwen2.5-Coder-1.5B-sized matrix of each type the
// packed kernels serve (the 0.5B's for Q5_0 and IQ4_NL, whose rows are
// 896 wide), and SmolLM2-135M's gate for the float types.
var decodeStreamShapes = []benchShape{
	{"Q4_K_8960x1536", Q4_K, 8960, 1536},
	{"Q6_K_1536x8960", Q6_K, 1536, 8960},
	{"Q5_0_4864x896", Q5_0, 4864, 896},
	{"Q8_0_8960x1536", Q8_0, 8960, 1536},
	{"Q4_1_8960x1536", Q4_1, 8960, 1536},
	{"Q4_0_8960x1536", Q4_0, 8960, 1536},
	{"IQ4_NL_4864x896", IQ4_NL, 4864, 896},
	{"IQ4_XS_8960x1536", IQ4_XS, 8960, 1536},
	{"F16_1536x576", F16, 1536, 576},
	{"BF16_1536x576", BF16, 1536, 576},
}

// BenchmarkDecodeStream: one decode step's matmul (N = 1) over distinct
// copies of a Qwen2.5-Coder-1.5B-sized matrix of each type, about 256 MB
// in all, packed on huge pages as the engine packs a model, so that every
// call streams its weights from DRAM as a decode step does (one matrix
// alone would stay in L3). GB/s is weight bytes a second; xRead is that
// over BenchmarkReadBandwidth's DRAM figure for the same thread count, in
// the same invocation: the share of the memory bandwidth the kernel
// reaches. Run the two together:
//
//	go test ./core/quant -run X -bench 'ReadBandwidth/DRAM|DecodeStream' -benchtime 10x
func BenchmarkDecodeStream(b *testing.B) {
	rng := rand.New(rand.NewPCG(12, 12))
	for _, s := range decodeStreamShapes {
		w, xq, out := benchMatrix(rng, s.wt, s.rows, s.cols, 1)
		pks, arena := streamCopies(s, w)
		copies := len(pks)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", s.name, th), func(b *testing.B) {
				p := NewPool(th)
				defer p.Close()
				b.SetBytes(int64(len(w) * copies))
				start := time.Now()
				for i := 0; i < b.N; i++ {
					for _, pk := range pks {
						MatMulPacked(pk, xq, 1, out, p)
					}
				}
				gbs := float64(len(w)*copies) * float64(b.N) / time.Since(start).Seconds() / 1e9
				b.ReportMetric(gbs, "GB/s")
				if r := readGBs[fmt.Sprintf("DRAM_256MB/%d", th)]; r > 0 {
					b.ReportMetric(gbs/r, "xRead")
				}
			})
		}
		arena.Free()
	}
}

// streamCopies packs distinct copies of w, about 256 MB in all, into one
// arena (huge pages, as the engine packs a model). Where this CPU keeps
// s's stored layout the copies are of the stored rows, so that the
// stream still comes from DRAM.
func streamCopies(s benchShape, w []byte) ([]*Packed, *Arena) {
	copies := max(1, (256<<20)/len(w))
	size := PackedSize(s.wt, s.rows, s.cols)
	arena := NewArena(copies * max(size, len(w)+63))
	pks := make([]*Packed, copies)
	for i := range pks {
		wc := w
		if size == 0 {
			if wc = arena.alloc(len(w)); wc == nil {
				wc = make([]byte, len(w))
			}
			copy(wc, w)
		}
		pks[i] = PrepackIn(arena, s.wt, wc, s.rows, s.cols)
	}
	return pks, arena
}
