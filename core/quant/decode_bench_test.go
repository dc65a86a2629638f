package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

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
	for _, s := range []benchShape{
		{"Q4_K_8960x1536", Q4_K, 8960, 1536},
		{"Q6_K_1536x8960", Q6_K, 1536, 8960},
		{"Q5_0_4864x896", Q5_0, 4864, 896},
		{"Q8_0_8960x1536", Q8_0, 8960, 1536},
		{"Q4_1_8960x1536", Q4_1, 8960, 1536},
		{"Q4_0_8960x1536", Q4_0, 8960, 1536},
	} {
		w, xq, out := benchMatrix(rng, s.wt, s.rows, s.cols, 1)
		copies := max(1, (256<<20)/len(w))
		size := PackedSize(s.wt, s.rows, s.cols)
		arena := NewArena(copies * max(size, len(w)+63))
		pks := make([]*Packed, copies)
		for i := range pks {
			wc := w
			if size == 0 { // not packed on this CPU: distinct copies of the stored rows
				wc = arena.alloc(len(w))
				if wc == nil {
					wc = make([]byte, len(w))
				}
				copy(wc, w)
			}
			pks[i] = PrepackIn(arena, s.wt, wc, s.rows, s.cols)
		}
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
