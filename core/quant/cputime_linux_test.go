package quant

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"unsafe"
)

// threadCPU is the calling thread's CPU time in seconds
// (CLOCK_THREAD_CPUTIME_ID).
func threadCPU() float64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec) + float64(ts.Nsec)*1e-9
}

// cpuMin is minTime in the thread's CPU time, the goroutine locked to its
// thread: on a machine shared with other work, wall time counts the time
// the scheduler gives to others, CPU time only the kernel's own.
func cpuMin(b *testing.B, f func()) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const rounds = 15
	iters := max(1, b.N/rounds)
	best := 0.0
	for r := 0; r < rounds; r++ {
		start := threadCPU()
		for i := 0; i < iters; i++ {
			f()
		}
		if t := (threadCPU() - start) / float64(iters); r == 0 || t < best {
			best = t
		}
	}
	return best
}

// BenchmarkKernelsCPU: the 8-row kernels (one group of 4096 columns, in
// L1) and the row kernels of the types without one, at R = 1…4
// activation rows, in ns of thread CPU time per 32-weight block and
// activation row: the figure that still compares two builds on a busy
// machine (alternate their runs and keep each one's minimum).
//
//	go test ./core/quant -run X -bench KernelsCPU -benchtime 3000x
func BenchmarkKernelsCPU(b *testing.B) {
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
		for na := 1; na <= min(4, k.p8Acts[wt]); na++ {
			b.Run(fmt.Sprintf("8-row/%s/R=%d", wt, na), func(b *testing.B) {
				t := cpuMin(b, func() { kern(wp, nb, 1, xq, xrb, sc, out, p8Rows, na) })
				b.ReportMetric(t*1e9/float64(p8Rows*cols/32*na), "cpu-ns/row-block")
			})
		}
	}
	for _, wt := range []Type{Q5_1, Q5_K, Q6_K, IQ4_NL, IQ4_XS} {
		md := k.multi[wt]
		if md == nil {
			continue
		}
		w, xq, _ := benchMatrix(rng, wt, 1, cols, 4)
		xrb, _ := ActType(wt).RowBytes(cols)
		nb := cols / 32
		sc := make([]float32, 4*nb*max(1, actScaleWords(wt)))
		if actScaleWords(wt) > 0 {
			actScales(wt, xq, 4, nb, sc)
		}
		for na := 1; na <= 4; na++ {
			b.Run(fmt.Sprintf("row/%s/R=%d", wt, na), func(b *testing.B) {
				var o [4]float32
				t := cpuMin(b, func() { md(w, 1, xq, xrb, sc[:na*nb*max(1, actScaleWords(wt))], na, o[:], 1) })
				b.ReportMetric(t*1e9/float64(cols/32*na), "cpu-ns/row-block")
			})
		}
	}
}

// BenchmarkFloatCPU is BenchmarkFloatMatMul's SIMD half in thread CPU
// time, on the calling thread: SmolLM2-135M's gate (1536×576) and down
// (576×1536) matrices, up to a pp512 prefill's N = 512, whose activations
// (1.2 and 3.1 MB as float32) are past L2.
//
//	go test ./core/quant -run X -bench FloatCPU -benchtime 30x
func BenchmarkFloatCPU(b *testing.B) {
	rng := rand.New(rand.NewPCG(12, 12))
	for _, wt := range []Type{F16, BF16} {
		for _, s := range [][2]int{{1536, 576}, {576, 1536}} {
			rows, cols := s[0], s[1]
			w, xq, out := benchMatrix(rng, wt, rows, cols, 512)
			for _, n := range []int{1, 16, 64, 512} {
				b.Run(fmt.Sprintf("%s/%dx%d/N=%d", wt, rows, cols, n), func(b *testing.B) {
					t := cpuMin(b, func() { MatMul(wt, w, rows, cols, xq, n, out, nil) })
					b.ReportMetric(t*1e6, "cpu-µs")
					b.ReportMetric(t*1e9/float64(rows*cols*n), "cpu-ns/weight-row")
				})
			}
		}
	}
}

// BenchmarkDecodeStreamCPU is BenchmarkDecodeStream on one thread in
// thread CPU time, beside a read loop over a 256 MB buffer timed the same
// way in the same benchmark: on a busy machine the stream's share of the
// read loop's rate (xRead) is the figure that still compares builds.
// Memory stalls count as CPU time, so a kernel that waits on memory shows
// as slow; others' use of the memory bus still moves both figures.
//
//	go test ./core/quant -run X -bench DecodeStreamCPU -benchtime 45x
func BenchmarkDecodeStreamCPU(b *testing.B) {
	buf := make([]byte, 256<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	read := 0.0
	rng := rand.New(rand.NewPCG(12, 12))
	for _, s := range decodeStreamShapes {
		w, xq, out := benchMatrix(rng, s.wt, s.rows, s.cols, 1)
		pks, arena := streamCopies(s, w)
		copies := len(pks)
		b.Run(s.name, func(b *testing.B) {
			if read == 0 {
				read = float64(len(buf)) / cpuMin(b, func() { sink += ReadSum(buf) }) / 1e9
			}
			t := cpuMin(b, func() {
				for _, pk := range pks {
					MatMulPacked(pk, xq, 1, out, nil)
				}
			})
			gbs := float64(len(w)*copies) / t / 1e9
			b.ReportMetric(gbs, "cpu-GB/s")
			b.ReportMetric(gbs/read, "xRead")
		})
		arena.Free()
	}
}
