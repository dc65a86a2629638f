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
// over a read loop's rate (readPass: the same threads, pool and huge
// pages) timed in the same iterations, alternated with the stream, best
// of the iterations for each: the share of the memory bandwidth the
// kernel reaches. A read loop timed once at the start was no reference on
// a shared KVM host, whose bandwidth moved 13–25 GB/s from one second to
// the next.
//
//	go test ./core/quant -run '^$' -bench 'DecodeStream$' -benchtime 10x
func BenchmarkDecodeStream(b *testing.B) {
	rng := rand.New(rand.NewPCG(12, 12))
	buf, free := readBuffer(256 << 20)
	defer free()
	for _, s := range decodeStreamShapes {
		w, xq, out := benchMatrix(rng, s.wt, s.rows, s.cols, 1)
		pks, arena := streamCopies(s, w)
		copies := len(pks)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", s.name, th), func(b *testing.B) {
				p := NewPool(th)
				defer p.Close()
				bytes := float64(len(w) * copies)
				bestRead, best := 0.0, 0.0
				for i := 0; i < b.N; i++ {
					bestRead = max(bestRead, readPass(p, buf))
					start := time.Now()
					for _, pk := range pks {
						MatMulPacked(pk, xq, 1, out, p)
					}
					best = max(best, bytes/time.Since(start).Seconds()/1e9)
				}
				b.ReportMetric(bestRead, "read-GB/s")
				b.ReportMetric(best, "GB/s")
				b.ReportMetric(best/bestRead, "xRead")
			})
		}
		arena.Free()
	}
}

// readBuffer is a read loop's n bytes, on huge pages as the packed weights
// are (4 KiB pages read DRAM 20-40% slower on the 2-core EPYC).
func readBuffer(n int) ([]byte, func()) {
	read := NewArena(n)
	buf := read.Bytes(n)
	if buf == nil {
		buf = make([]byte, n)
	}
	for i := range buf {
		buf[i] = byte(i)
	}
	return buf, read.Free
}

// readPass reads buf once on p's threads, each a contiguous share (as a
// matmul's home ranges are), and returns GB/s.
func readPass(p *Pool, buf []byte) float64 {
	th := p.Threads()
	start := time.Now()
	p.Run(len(buf)/4096, (len(buf)/4096+th-1)/th, func(lo, hi int) { sink += ReadSum(buf[lo*4096 : hi*4096]) })
	return float64(len(buf)) / time.Since(start).Seconds() / 1e9
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

// smolLayer is one SmolLM2-135M layer's matmuls in a decode step's order
// (q, k, v, o, gate, up, down): small matrices, 69–553 KB each, where a
// pool job's fixed costs (hand-out, each thread's cold start at its
// range, the wait for the last chunk) weigh against its bytes.
var smolLayer = []benchShape{
	{"q", Q4_1, 576, 576}, {"k", Q4_1, 192, 576}, {"v", Q4_1, 192, 576},
	{"o", Q4_1, 576, 576}, {"gate", Q4_1, 1536, 576}, {"up", Q4_1, 1536, 576},
	{"down", Q4_1, 576, 1536},
}

// BenchmarkDecodeLayers runs smolLayer's matmuls (N = 1) over distinct
// copies of the layer, about 256 MB in all on huge pages, as a decode
// step runs a model's layers, on 1 and 2 threads, beside a read loop over
// a 256 MB huge-page buffer timed in the same benchmark and alternated
// with it (best of the rounds for each): xRead is the layers' bytes a
// second over the read loop's, the figure lmsbench's "weight bytes read
// in decode / bandwidth" is for a whole model less its other work.
// xRead-jobs is the read loop run in the layers' pool jobs (each job's
// bytes in the chunks its matmul takes) over the long read loop: what
// short jobs cost a stream that does nothing else, the ceiling of xRead
// for this job structure.
//
//	go test ./core/quant -run '^$' -bench DecodeLayers -benchtime 5x
func BenchmarkDecodeLayers(b *testing.B) {
	rng := rand.New(rand.NewPCG(14, 14))
	var layerBytes int
	var ws, xqs [][]byte
	for _, s := range smolLayer {
		w, xq, _ := benchMatrix(rng, s.wt, s.rows, s.cols, 1)
		ws, xqs = append(ws, w), append(xqs, xq)
		layerBytes += len(w)
	}
	copies := max(1, (256<<20)/layerBytes)
	size := 0
	for i, s := range smolLayer {
		size += max(PackedSize(s.wt, s.rows, s.cols), len(ws[i])+63)
	}
	arena := NewArena(copies * size)
	defer arena.Free()
	pks := make([][]*Packed, copies)
	for c := range pks {
		for i, s := range smolLayer {
			pks[c] = append(pks[c], PrepackIn(arena, s.wt, ws[i], s.rows, s.cols))
		}
	}
	out := make([]float32, 1536)
	buf, free := readBuffer(256 << 20)
	defer free()
	outs := [][]float32{make([]float32, 1536), make([]float32, 1536), make([]float32, 1536)}
	for _, c := range []struct {
		name    string
		threads int
		set     bool
	}{{"threads=1", 1, false}, {"threads=2", 2, false}, {"threads=2/sets", 2, true}} {
		th := c.threads
		b.Run(c.name, func(b *testing.B) {
			p := NewPool(th)
			defer p.Close()
			var jobs [][][]byte // each pool job's matrices, as run below
			for _, layer := range pks {
				if c.set {
					jobs = append(jobs, packedBytes(layer[0:3]), packedBytes(layer[3:4]), packedBytes(layer[4:6]), packedBytes(layer[6:7]))
					continue
				}
				for _, pk := range layer {
					jobs = append(jobs, packedBytes([]*Packed{pk}))
				}
			}
			bestRead, bestLayers, bestJobs := 0.0, 0.0, 0.0
			for i := 0; i < b.N; i++ {
				bestRead = max(bestRead, readPass(p, buf))
				start := time.Now()
				for _, j := range jobs {
					readJob(p, j)
				}
				bestJobs = max(bestJobs, float64(layerBytes*copies)/time.Since(start).Seconds()/1e9)
				start = time.Now()
				for _, layer := range pks {
					if c.set { // q, k, v and gate, up as one job each, as the model runs them
						MatMulPackedSet(layer[0:3], xqs[0], 1, outs, p)
						MatMulPacked(layer[3], xqs[3], 1, out, p)
						MatMulPackedSet(layer[4:6], xqs[4], 1, outs[:2], p)
						MatMulPacked(layer[6], xqs[6], 1, out, p)
						continue
					}
					for k, pk := range layer {
						MatMulPacked(pk, xqs[k], 1, out, p)
					}
				}
				bestLayers = max(bestLayers, float64(layerBytes*copies)/time.Since(start).Seconds()/1e9)
			}
			b.ReportMetric(bestRead, "read-GB/s")
			b.ReportMetric(bestLayers, "GB/s")
			b.ReportMetric(bestLayers/bestRead, "xRead")
			b.ReportMetric(bestJobs/bestRead, "xRead-jobs")
			b.ReportMetric(float64(layerBytes)/bestLayers/1e3/float64(len(smolLayer)), "µs/matmul")
		})
	}
}

// packedBytes is the weights each of ps streams in a decode step.
func packedBytes(ps []*Packed) [][]byte {
	var parts [][]byte
	for _, p := range ps {
		parts = append(parts, p.data)
	}
	return parts
}

// readJob reads parts, in order, as one pool job split as a p8Job splits
// its matrices' bytes (about 16 chunks a thread, each thread a contiguous
// home range), 4 KiB a unit.
func readJob(p *Pool, parts [][]byte) {
	total := 0
	for _, q := range parts {
		total += len(q)
	}
	units, th := (total+4095)/4096, p.Threads()
	p.Run(units, max(1, (units+16*th-1)/(16*th)), func(lo, hi int) {
		a, e, off := lo*4096, min(hi*4096, total), 0
		for _, q := range parts {
			if s, t := max(a-off, 0), min(e-off, len(q)); s < t {
				sink += ReadSum(q[s:t])
			}
			off += len(q)
		}
	})
}
