package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Benchmarks. GB/s figures are weight bytes per second (b.SetBytes), so
// they compare directly with BenchmarkReadBandwidth, a plain sum over a
// buffer measured in the same run; the MatMul benchmarks report their ratio
// to it as "xRead" (DRAM-sized buffer for the model-sized benchmark, an
// L2-sized one for the single matrices, which stay cache-resident across
// iterations just as they do not in a real forward pass).

var readGBs = map[string]float64{} // filled by BenchmarkReadBandwidth

var sink uint64

func BenchmarkReadBandwidth(b *testing.B) {
	for _, c := range []struct {
		name  string
		bytes int
	}{{"L2_512KB", 512 << 10}, {"DRAM_256MB", 256 << 20}} {
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", c.name, th), func(b *testing.B) {
				buf, free := readBuffer(c.bytes)
				defer free()
				p := NewPool(th)
				defer p.Close()
				b.SetBytes(int64(c.bytes))
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					p.Run(len(buf)/128, (len(buf)/128+th-1)/th, func(lo, hi int) { sink += ReadSum(buf[lo*128 : hi*128]) })
				}
				gbs := float64(c.bytes) * float64(b.N) / time.Since(start).Seconds() / 1e9
				readGBs[fmt.Sprintf("%s/%d", c.name, th)] = gbs
			})
		}
	}
}

type benchShape struct {
	name       string
	wt         Type
	rows, cols int
}

// The default model's (SmolLM2-135M) matmul shapes: out rows × in cols.
var modelShapes = []benchShape{
	{"q_o_576x576_Q4_1", Q4_1, 576, 576},
	{"k_v_192x576_Q4_1", Q4_1, 192, 576},
	{"gate_up_1536x576_Q4_1", Q4_1, 1536, 576},
	{"down_576x1536_Q4_1", Q4_1, 576, 1536},
	{"head_49152x576_Q8_0", Q8_0, 49152, 576},
}

func benchMatrix(rng *rand.Rand, wt Type, rows, cols, n int) (w, xq []byte, out []float32) {
	wrb, _ := wt.RowBytes(cols)
	w = make([]byte, rows*wrb)
	for i := 0; i < rows; i += 64 { // quantizing is slow: repeat one 64-row slab
		r := min(64, rows-i)
		if i == 0 {
			if err := Quantize(wt, randFloats(rng, r*cols, 0.05), w[:r*wrb]); err != nil {
				panic(err)
			}
		} else {
			copy(w[i*wrb:(i+r)*wrb], w[:r*wrb])
		}
	}
	at := ActType(wt)
	xrb, _ := at.RowBytes(cols)
	xq = make([]byte, n*xrb)
	QuantizeActs(at, randFloats(rng, n*cols, 1), n, cols, xq)
	return w, xq, make([]float32, n*rows)
}

// BenchmarkMatMulN1: each model shape at N=1 (a decode step), 1 and 2
// threads. The matrix stays cache-resident between iterations.
func BenchmarkMatMulN1(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, s := range modelShapes {
		w, xq, out := benchMatrix(rng, s.wt, s.rows, s.cols, 1)
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", s.name, th), func(b *testing.B) {
				p := NewPool(th)
				defer p.Close()
				b.SetBytes(int64(len(w)))
				start := time.Now()
				for i := 0; i < b.N; i++ {
					MatMul(s.wt, w, s.rows, s.cols, xq, 1, out, p)
				}
				gbs := float64(len(w)) * float64(b.N) / time.Since(start).Seconds() / 1e9
				if r := readGBs[fmt.Sprintf("L2_512KB/%d", th)]; r > 0 && len(w) < 4<<20 {
					b.ReportMetric(gbs/r, "xRead")
				}
			})
		}
	}
}

// BenchmarkDecodeMatMuls runs the matmuls of one decode token of the default
// model over distinct weights (30 layers × q,k,v,o,gate,up,down + the head:
// ~96 MB, more than the cache), i.e. the DRAM-bound part of decode. tok/s is
// the ceiling these kernels put on decode speed.
func BenchmarkDecodeMatMuls(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	type mm struct {
		s     benchShape
		w, xq []byte
		out   []float32
	}
	layer := []benchShape{modelShapes[0], modelShapes[1], modelShapes[1], modelShapes[0], modelShapes[2], modelShapes[2], modelShapes[3]}
	var mms []mm
	var total int
	w0 := map[string][]byte{}
	for l := 0; l < 30; l++ {
		for _, s := range layer {
			if w0[s.name] == nil {
				w, _, _ := benchMatrix(rng, s.wt, s.rows, s.cols, 1)
				w0[s.name] = w
			}
			w := append([]byte(nil), w0[s.name]...) // distinct memory per layer
			_, xq, out := benchMatrix(rng, s.wt, 1, s.cols, 1)
			mms = append(mms, mm{s, w, xq, make([]float32, s.rows)})
			_ = out
			total += len(w)
		}
	}
	hw, hx, hout := benchMatrix(rng, Q8_0, 49152, 576, 1)
	mms = append(mms, mm{modelShapes[4], hw, hx, hout})
	total += len(hw)
	for _, th := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			p := NewPool(th)
			defer p.Close()
			b.SetBytes(int64(total))
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for _, m := range mms {
					MatMul(m.s.wt, m.w, m.s.rows, m.s.cols, m.xq, 1, m.out, p)
				}
			}
			sec := time.Since(start).Seconds()
			b.ReportMetric(float64(b.N)/sec, "tok/s")
			if r := readGBs[fmt.Sprintf("DRAM_256MB/%d", th)]; r > 0 {
				b.ReportMetric(float64(total)*float64(b.N)/sec/1e9/r, "xRead")
			}
		})
	}
}

// BenchmarkMatMulBatch: the 1536×576 Q4_1 (gate/up) shape for N tokens;
// "xN1" is T(N)/T(1) (the goal for N=16 is ≤ 2).
func BenchmarkMatMulBatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	w, xq, out := benchMatrix(rng, Q4_1, 1536, 576, 64)
	for _, th := range []int{1, 2} {
		var t1 float64
		for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
			b.Run(fmt.Sprintf("threads=%d/N=%d", th, n), func(b *testing.B) {
				p := NewPool(th)
				defer p.Close()
				b.SetBytes(int64(len(w)))
				start := time.Now()
				for i := 0; i < b.N; i++ {
					MatMul(Q4_1, w, 1536, 576, xq, n, out, p)
				}
				t := time.Since(start).Seconds() / float64(b.N)
				if n == 1 {
					t1 = t
				}
				if t1 > 0 {
					b.ReportMetric(t/t1, "xN1")
				}
			})
		}
	}
}

// BenchmarkPoolDispatch: the cost of one Run with trivial work.
func BenchmarkPoolDispatch(b *testing.B) {
	for _, th := range []int{2} {
		b.Run(fmt.Sprintf("threads=%d", th), func(b *testing.B) {
			p := NewPool(th)
			defer p.Close()
			var x [2]int
			for i := 0; i < b.N; i++ {
				p.Run(2, 1, func(lo, hi int) { x[lo]++ })
			}
		})
	}
}

// BenchmarkDot: one 4096-element row (cache-resident) per kernel, SIMD and
// generic; GB/s of weight bytes.
func BenchmarkDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(4, 4))
	defer UseSIMD(true)
	const cols = 4096
	for _, wt := range []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K} {
		w, xq, _ := benchMatrix(rng, wt, 1, cols, 1)
		for _, simd := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/simd=%v", wt, simd), func(b *testing.B) {
				UseSIMD(simd)
				dot := dotOf(wt)
				b.SetBytes(int64(len(w)))
				var s float32
				for i := 0; i < b.N; i++ {
					s += dot(w, xq)
				}
				sink += uint64(s)
			})
		}
	}
}

// minTime runs f in rounds of iters calls (rounds×iters ≈ b.N) and returns
// the fastest per-call time of a round: the machine is shared and noisy,
// and the minimum is the figure that repeats.
func minTime(b *testing.B, f func()) float64 {
	rounds := 7
	iters := max(1, b.N/rounds)
	best := 0.0
	for r := 0; r < rounds; r++ {
		start := time.Now()
		for i := 0; i < iters; i++ {
			f()
		}
		t := time.Since(start).Seconds() / float64(iters)
		if r == 0 || t < best {
			best = t
		}
	}
	return best
}

// BenchmarkMatMulScaling: every model shape for N = 1..64 tokens, 1 and 2
// threads, through MatMul (weights as stored) and MatMulPacked (weights
// prepacked at load). Metrics: µs (minimum over 7 rounds), xN1 = T(N)/T(1)
// of the same API and thread count (the goal is ≤ 2 at N = 16), and
// GOPS = 2·rows·cols·N / T (one multiply-add = 2 ops).
//
//	go test ./core/quant -run X -bench MatMulScaling -benchtime 70x
func BenchmarkMatMulScaling(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, s := range modelShapes {
		w, xq, out := benchMatrix(rng, s.wt, s.rows, s.cols, 64)
		pk := Prepack(s.wt, w, s.rows, s.cols)
		for _, api := range []string{"MatMul", "Packed"} {
			for _, th := range []int{1, 2} {
				var t1 float64
				for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
					b.Run(fmt.Sprintf("%s/%s/threads=%d/N=%d", s.name, api, th, n), func(b *testing.B) {
						p := NewPool(th)
						defer p.Close()
						t := minTime(b, func() {
							if api == "Packed" {
								MatMulPacked(pk, xq, n, out, p)
							} else {
								MatMul(s.wt, w, s.rows, s.cols, xq, n, out, p)
							}
						})
						if n == 1 {
							t1 = t
						}
						b.ReportMetric(t*1e6, "µs")
						if t1 > 0 {
							b.ReportMetric(t/t1, "xN1")
						}
						b.ReportMetric(2*float64(s.rows*s.cols*n)/t/1e9, "GOPS")
					})
				}
			}
		}
	}
}

// BenchmarkForwardMatMuls: the matmuls of one forward pass of the default
// model over N new tokens (30 layers × q,k,v,o,gate,up,down over distinct
// weights, ~96 MB with the head, so N = 1 is DRAM-bound as in decode, plus
// the head for all N rows), through MatMul and through MatMulPacked.
// xN1 = T(N)/T(1) of the same API and thread count: the forward-pass
// ratio, matmuls only (llama.cpp's whole forward: ≈ 2.5 at N = 16).
//
//	go test ./core/quant -run X -bench ForwardMatMuls -benchtime 14x
func BenchmarkForwardMatMuls(b *testing.B) {
	rng := rand.New(rand.NewPCG(6, 6))
	type mm struct {
		s  benchShape
		w  []byte
		pk *Packed
		xq []byte
	}
	layer := []benchShape{modelShapes[0], modelShapes[1], modelShapes[1], modelShapes[0], modelShapes[2], modelShapes[2], modelShapes[3]}
	var mms []mm
	w0 := map[string][]byte{}
	for l := 0; l < 30; l++ {
		for _, s := range layer {
			if w0[s.name] == nil {
				w, _, _ := benchMatrix(rng, s.wt, s.rows, s.cols, 1)
				w0[s.name] = w
			}
			w := append([]byte(nil), w0[s.name]...)
			mms = append(mms, mm{s: s, w: w})
		}
	}
	hw, _, _ := benchMatrix(rng, Q8_0, 49152, 576, 1)
	mms = append(mms, mm{s: modelShapes[4], w: hw})
	xs := map[int][]byte{}
	for _, c := range []int{576, 1536} {
		_, xq81, _ := benchMatrix(rng, Q4_1, 1, c, 64)
		_, xq80, _ := benchMatrix(rng, Q8_0, 1, c, 64)
		xs[c], xs[-c] = xq81, xq80
	}
	size := 0
	for _, m := range mms {
		size += PackedSize(m.s.wt, m.s.rows, m.s.cols)
	}
	arena := NewArena(size) // as core/model packs a model: one region on huge pages
	for i := range mms {
		mms[i].pk = PrepackIn(arena, mms[i].s.wt, mms[i].w, mms[i].s.rows, mms[i].s.cols)
		if mms[i].s.wt == Q8_0 {
			mms[i].xq = xs[-mms[i].s.cols]
		} else {
			mms[i].xq = xs[mms[i].s.cols]
		}
	}
	out := make([]float32, 64*49152)
	for _, api := range []string{"MatMul", "Packed"} {
		for _, th := range []int{1, 2} {
			var t1 float64
			for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
				b.Run(fmt.Sprintf("%s/threads=%d/N=%d", api, th, n), func(b *testing.B) {
					p := NewPool(th)
					defer p.Close()
					var ops float64
					for _, m := range mms {
						ops += 2 * float64(m.s.rows*m.s.cols*n)
					}
					t := minTime(b, func() {
						for _, m := range mms {
							if api == "Packed" {
								MatMulPacked(m.pk, m.xq, n, out, p)
							} else {
								MatMul(m.s.wt, m.w, m.s.rows, m.s.cols, m.xq, n, out, p)
							}
						}
					})
					if n == 1 {
						t1 = t
					}
					b.ReportMetric(t*1e3, "ms")
					if t1 > 0 {
						b.ReportMetric(t/t1, "xN1")
					}
					b.ReportMetric(ops/t/1e9, "GOPS")
					b.ReportMetric(float64(n)/t, "tok/s")
				})
			}
		}
	}
}

// BenchmarkMultiDot: the multi-row kernels (where the CPU has them) over
// one L1-resident weight row of 4096 columns against R = 1…4 activation
// rows; ns/row-block is the cost of one block against one activation row.
//
//	go test ./core/quant -run X -bench MultiDot
func BenchmarkMultiDot(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 9))
	k := active.Load()
	const cols = 4096
	for _, wt := range []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K} {
		md := k.multi[wt]
		if md == nil {
			continue
		}
		w, xq, _ := benchMatrix(rng, wt, 1, cols, 4)
		at := ActType(wt)
		xrb, _ := at.RowBytes(cols)
		nb := cols / 32
		sc := make([]float32, 4*nb*max(1, actScaleWords(wt)))
		if actScaleWords(wt) > 0 {
			actScales(wt, xq, 4, nb, sc)
		}
		for na := 1; na <= 4; na++ {
			b.Run(fmt.Sprintf("%s/R=%d", wt, na), func(b *testing.B) {
				var o [4]float32
				t := minTime(b, func() { md(w, 1, xq, xrb, sc[:na*nb*max(1, actScaleWords(wt))], na, o[:], 1) })
				b.ReportMetric(t*1e9/float64(cols/32*na), "ns/row-block")
			})
		}
	}
}

// BenchmarkPacked8: the 8-row packed kernels (packed8.go, AVX2) over one
// 8-row group of 4096 columns against R = 1…4 activation rows, in the same
// unit as BenchmarkMultiDot (one 32-weight block against one activation
// row), for a side-by-side comparison with the row-at-a-time kernels.
//
//	go test ./core/quant -run X -bench 'MultiDot|Packed8'
func BenchmarkPacked8(b *testing.B) {
	rng := rand.New(rand.NewPCG(10, 10))
	k := active.Load()
	const cols = 4096
	for _, wt := range []Type{Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K, IQ4_NL, IQ4_XS} {
		kern := k.packed8(wt)
		if kern == nil {
			continue
		}
		w, xq, _ := benchMatrix(rng, wt, p8Rows, cols, p8MaxActs)
		wrb, _ := wt.RowBytes(cols)
		xrb, _ := ActType(wt).RowBytes(cols)
		nb := cols / wt.BlockElems()
		wp := make([]byte, nb*p8Record(wt))
		pack8Go(wt, w, wrb, p8Rows, cols, 0, wp)
		var sc []float32
		if p8Legacy(wt) {
			sc = make([]float32, p8MaxActs*nb*2)
			for j := 0; j < p8MaxActs; j++ {
				p8Scales(wt, xq[j*xrb:], nb, sc[j*nb*2:])
			}
		}
		out := make([]float32, p8MaxActs*p8Rows)
		for na := 1; na <= k.p8Acts[wt]; na++ {
			b.Run(fmt.Sprintf("%s/R=%d", wt, na), func(b *testing.B) {
				t := minTime(b, func() { kern(wp, nb, 1, xq, xrb, sc, out, p8Rows, na) })
				b.ReportMetric(t*1e9/float64(p8Rows*cols/32*na), "ns/row-block")
			})
		}
	}
}

// BenchmarkPackedQwen: the Qwen2.5-Coder-1.5B Q4_K_M matmul shapes, packed,
// at N = 1…16 on 1 and 2 threads. Each matrix (7–11 MB) stays in L3
// between iterations, so N = 1 is not DRAM-bound here; N = 8 is the
// kernels' compute for a verify pass. ns/row-block: thread-ns per
// 32-weight block and activation row.
//
//	go test ./core/quant -run X -bench PackedQwen -benchtime 200x
func BenchmarkPackedQwen(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, s := range []benchShape{{"gate_8960x1536_Q4_K", Q4_K, 8960, 1536}, {"down_1536x8960_Q4_K", Q4_K, 1536, 8960}, {"down_1536x8960_Q6_K", Q6_K, 1536, 8960}} {
		w, xq, out := benchMatrix(rng, s.wt, s.rows, s.cols, 16)
		pk := Prepack(s.wt, w, s.rows, s.cols)
		for _, th := range []int{1, 2} {
			for _, n := range []int{1, 2, 4, 8, 12, 16} {
				b.Run(fmt.Sprintf("%s/threads=%d/N=%d", s.name, th, n), func(b *testing.B) {
					p := NewPool(th)
					defer p.Close()
					t := minTime(b, func() { MatMulPacked(pk, xq, n, out, p) })
					b.ReportMetric(t*1e6, "µs")
					b.ReportMetric(t*1e9*float64(th)/float64(s.rows*s.cols/32*n), "ns/row-block")
				})
			}
		}
	}
}

// BenchmarkLowBit: the low-bit types. MultiDot: one L1-resident weight row
// of 4096 columns against R = 1…4 activation rows through the kernel set's
// multi-row kernel (as BenchmarkMultiDot, whose Q4_0 and Q4_K rows are the
// ones to compare with); MatMul: a 1536×1536 matrix (L2/L3-resident) at
// N = 1, 4 and 16 on 1 thread, through the row kernels (packed=false) and,
// for the types with an 8-row layout on this CPU (IQ4_NL and IQ4_XS on
// AVX2), prepacked. ns/row-block: one 32-weight block against one
// activation row (a 256-weight super-block is 8 blocks).
//
//	go test ./core/quant -run X -bench 'LowBit|MultiDot'
func BenchmarkLowBit(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 11))
	k := active.Load()
	const cols = 4096
	for _, wt := range lowBitTypes {
		md := k.multi[wt]
		if md == nil {
			continue
		}
		w, xq, _ := benchMatrix(rng, wt, 1, cols, 4)
		xrb, _ := ActType(wt).RowBytes(cols)
		nb := cols / wt.BlockElems()
		sk := actScaleWords(wt)
		sc := make([]float32, 4*nb*max(1, sk))
		if sk > 0 {
			actScales(wt, xq, 4, nb, sc)
		}
		for na := 1; na <= 4; na++ {
			b.Run(fmt.Sprintf("MultiDot/%s/R=%d", wt, na), func(b *testing.B) {
				var o [4]float32
				t := minTime(b, func() { md(w, 1, xq, xrb, sc[:na*nb*max(1, sk)], na, o[:], 1) })
				b.ReportMetric(t*1e9/float64(cols/32*na), "ns/row-block")
			})
		}
	}
	const rows, mcols = 1536, 1536
	for _, wt := range append([]Type{Q4_K}, lowBitTypes...) {
		w, xq, out := benchMatrix(rng, wt, rows, mcols, 16)
		pk := Prepack(wt, w, rows, mcols)
		for _, packed := range []bool{false, true} {
			if packed && pk.PackedBytes() == 0 {
				continue // no packed layout: MatMulPacked is MatMul
			}
			for _, n := range []int{1, 4, 16} {
				b.Run(fmt.Sprintf("MatMul/%s/packed=%v/N=%d", wt, packed, n), func(b *testing.B) {
					t := minTime(b, func() {
						if packed {
							MatMulPacked(pk, xq, n, out, nil)
						} else {
							MatMul(wt, w, rows, mcols, xq, n, out, nil)
						}
					})
					b.ReportMetric(t*1e6, "µs")
					b.ReportMetric(t*1e9/float64(rows*mcols/32*n), "ns/row-block")
				})
			}
		}
	}
}

// BenchmarkFloatMatMul: F16 and BF16 weights (SmolLM2-135M's 1536×576
// gate) at N = 1, 16 and 64 on 1 thread, through the active kernels and
// through the pure-Go ones (what an AVX2 CPU ran before the float kernels:
// one dot per weight row and token, each widening every weight again).
//
//	go test ./core/quant -run X -bench FloatMatMul
func BenchmarkFloatMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(12, 12))
	const rows, cols = 1536, 576
	for _, wt := range []Type{F16, BF16} {
		w, xq, out := benchMatrix(rng, wt, rows, cols, 64)
		for _, simd := range []bool{true, false} {
			for _, n := range []int{1, 16, 64} {
				if !simd && n == 64 {
					continue // minutes
				}
				b.Run(fmt.Sprintf("%s/simd=%v/N=%d", wt, simd, n), func(b *testing.B) {
					defer UseSIMD(UseSIMD(simd))
					t := minTime(b, func() { MatMul(wt, w, rows, cols, xq, n, out, nil) })
					b.ReportMetric(t*1e6, "µs")
					b.ReportMetric(t*1e9/float64(rows*cols*n), "ns/weight-row")
				})
			}
		}
	}
}
