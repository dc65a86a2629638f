//go:build amd64 && !noasm

package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"
)

// TestPacked8VNNIEqualsAVX2: the VPDPBUSD variants of the 8-row kernels
// give the AVX2 kernels' bits for every type, every na and blocks of every
// bit pattern (raw random blocks, so extreme quants and scales too): their
// integer sums are exact both ways and the float code after them is the
// same. With that, the 8-row layout's results do not depend on which of
// the two a CPU runs, nor on how many rows a VNNI call takes (Q4_K's take
// up to eight, AVX2's four). Skips where the CPU lacks AVX-512 VNNI.
func TestPacked8VNNIEqualsAVX2(t *testing.T) {
	if !hasVNNI512() || !hasAVX2() {
		t.Skip("the CPU lacks AVX-512 VNNI or AVX2")
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for _, wt := range []Type{Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q6_K} {
		var avx2, vnni kernelSet
		installPacked8(&avx2, p8Asm)
		installPacked8(&vnni, p8AsmVNNI)
		for _, nb := range []int{1, 3, 8} {
			cols := nb * wt.BlockElems()
			w := randBlocks(rng, wt, p8Rows*nb)
			wrb, _ := wt.RowBytes(cols)
			wp := make([]byte, nb*p8Record(wt))
			pack8Go(wt, w, wrb, p8Rows, cols, 0, wp)
			at := ActType(wt)
			xrb, _ := at.RowBytes(cols)
			xq := make([]byte, p8MaxActs*xrb)
			QuantizeActs(at, randFloats(rng, p8MaxActs*cols, 1), p8MaxActs, cols, xq)
			sc := make([]float32, p8MaxActs*nb*2)
			if p8Legacy(wt) {
				for j := 0; j < p8MaxActs; j++ {
					p8Scales(wt, xq[j*xrb:], nb, sc[j*nb*2:])
				}
			}
			// The reference: every row through the AVX2 kernel, four at
			// a time (its most); the VNNI kernel at every na it takes,
			// the wide ones (na > 4) included.
			a := make([]float32, p8MaxActs*p8Rows)
			for j0 := 0; j0 < p8MaxActs; j0 += avx2.p8Acts[wt] {
				na := min(avx2.p8Acts[wt], p8MaxActs-j0)
				avx2.p8[wt](wp, nb, 1, xq[j0*xrb:], xrb, sc[j0*nb*2:], a[j0*p8Rows:], p8Rows, na)
			}
			for na := 1; na <= vnni.p8Acts[wt]; na++ {
				v := make([]float32, na*p8Rows)
				vnni.p8[wt](wp, nb, 1, xq, xrb, sc, v, p8Rows, na)
				for i := range v {
					require.Equal(t, math.Float32bits(a[i]), math.Float32bits(v[i]),
						fmt.Sprintf("%s nb=%d na=%d lane %d: %g vs %g", wt, nb, na, i, a[i], v[i]))
				}
			}
		}
	}
}

// BenchmarkQ6KKernels: Q6_K's AVX-512 VNNI single-row dot (no longer
// used: it decodes a weight block once per token) against the AVX2
// multi-row kernel at R = 1…4, in ns per 32-weight block and activation
// row (BenchmarkPacked8 has the 8-row VNNI kernel).
//
//	go test ./core/quant -run X -bench Q6KKernels
func BenchmarkQ6KKernels(b *testing.B) {
	if !hasVNNI512() || !hasAVX2() {
		b.Skip("needs AVX-512 VNNI and AVX2")
	}
	rng := rand.New(rand.NewPCG(9, 9))
	const cols, rows = 4096, 64
	w, xq, _ := benchMatrix(rng, Q6_K, rows, cols, 4)
	wrb, _ := Q6_K.RowBytes(cols)
	xrb, _ := Q8_K.RowBytes(cols)
	row := kDot(210, dotQ6_KQ8_KVNNI)
	b.Run("row-vnni/R=1", func(b *testing.B) {
		t := minTime(b, func() {
			for r := 0; r < rows; r++ {
				row(w[r*wrb:(r+1)*wrb], xq[:xrb])
			}
		})
		b.ReportMetric(t*1e9/float64(rows*cols/32), "ns/row-block")
	})
	out := make([]float32, 4*rows)
	_, multi := avx2Dot("dotQ6_KAVX2", Q6_K)
	for na := 1; na <= 4; na++ {
		b.Run(fmt.Sprintf("avx2-multi/R=%d", na), func(b *testing.B) {
			t := minTime(b, func() { multi(w, rows, xq, xrb, nil, na, out, rows) })
			b.ReportMetric(t*1e9/float64(rows*cols/32*na), "ns/row-block")
		})
	}
}

// TestPacked16EqualsPacked8: a pair kernel gives, lane for lane, the bits
// of the 8-row VNNI kernel run on each of its two groups, for every na and
// blocks of every bit pattern, with the second group anywhere after the
// first (gb from one group's bytes up). So a matrix's rows do not depend
// on whether they went through a pair or an unpaired group, nor on the
// CPU having the pair kernels at all.
func TestPacked16EqualsPacked8(t *testing.T) {
	if !hasVNNI512() {
		t.Skip("the CPU lacks AVX-512 VNNI")
	}
	if !cpu.X86.HasAVX512GFNI {
		t.Skip("the CPU lacks GFNI")
	}
	var k kernelSet
	setupPacked8VNNI(&k)
	rng := rand.New(rand.NewPCG(43, 44))
	tested := 0
	for wt, pair := range k.p16 {
		if pair == nil {
			continue
		}
		wt := Type(wt)
		for _, nb := range []int{1, 3, 8} {
			cols := nb * wt.BlockElems()
			wrb, _ := wt.RowBytes(cols)
			w := randBlocks(rng, wt, 2*p8Rows*nb)
			gb := nb * p8Record(wt)
			for _, gap := range []int{0, 64, 3 * gb} {
				wp := make([]byte, 2*gb+gap)
				pack8Go(wt, w, wrb, 2*p8Rows, cols, 0, wp[:gb])
				pack8Go(wt, w, wrb, 2*p8Rows, cols, 1, wp[gb+gap:])
				at := ActType(wt)
				xrb, _ := at.RowBytes(cols)
				xq := make([]byte, p8MaxActs*xrb)
				QuantizeActs(at, randFloats(rng, p8MaxActs*cols, 1), p8MaxActs, cols, xq)
				var sc []float32 // the legacy types' activation scales
				if p8Legacy(wt) {
					sc = make([]float32, p8MaxActs*nb*2)
					for j := 0; j < p8MaxActs; j++ {
						p8Scales(wt, xq[j*xrb:], nb, sc[j*nb*2:])
					}
				}
				for na := 1; na <= k.p8Acts[wt]; na++ {
					want := make([]float32, na*2*p8Rows)
					k.p8[wt](wp[:gb], nb, 1, xq, xrb, sc, want, 2*p8Rows, na)
					k.p8[wt](wp[gb+gap:], nb, 1, xq, xrb, sc, want[p8Rows:], 2*p8Rows, na)
					got := make([]float32, na*2*p8Rows)
					pair(wp, gb+gap, nb, xq, xrb, sc, got, 2*p8Rows, na)
					for i := range got {
						require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]),
							fmt.Sprintf("%s nb=%d gap=%d na=%d lane %d: %g vs %g", wt, nb, gap, na, i, want[i], got[i]))
					}
				}
			}
		}
		tested++
	}
	require.Equal(t, 4, tested, "pair kernels tested (Q4_0, Q5_0, Q4_K, Q6_K)")
}

// TestAMXEqualsPacked16: the AMX kernel gives, lane for lane, the bits of
// the VNNI pair kernel, for every na up to a tile's 16 rows, runs of one
// to three pairs with gaps between groups, random blocks and the extremes
// of the int16 bound it relies on (every quant 0 or 15 against
// activations of ±127).
func TestAMXEqualsPacked16(t *testing.T) {
	if !hasAMX() {
		t.Skip("the CPU or OS offers no AMX tiles")
	}
	var k kernelSet
	setupPacked8VNNI(&k)
	setupAMX(&k)
	rng := rand.New(rand.NewPCG(45, 46))
	for _, wt := range []Type{Q4_K, Q6_K} {
		require.NotNil(t, k.amx[wt], wt)
		for _, nb := range []int{1, 3, 8} {
			cols := nb * wt.BlockElems()
			wrb, _ := wt.RowBytes(cols)
			xrb, _ := Q8_K.RowBytes(cols)
			gb := nb * p8Record(wt)
			for _, extreme := range []bool{false, true} {
				for _, pairs := range []int{1, 3} {
					for _, gap := range []int{0, 64} {
						rows := 2 * p8Rows * pairs
						w := randBlocks(rng, wt, rows*nb)
						acts := randFloats(rng, amxMaxActs*cols, 1)
						if extreme {
							amxExtremes(wt, w, rows*nb)
							for i := range acts {
								acts[i] = float32(1 - 2*(i/16%2)) // sub-blocks of +1 and −1: ±127
							}
						}
						stride := gb + gap
						wp := make([]byte, 2*pairs*stride)
						for g := 0; g < 2*pairs; g++ {
							pack8Go(wt, w, wrb, rows, cols, g, wp[g*stride:g*stride+gb])
						}
						xq := make([]byte, amxMaxActs*xrb)
						QuantizeActs(Q8_K, acts, amxMaxActs, cols, xq)
						for na := 1; na <= amxMaxActs; na++ {
							xa := amxActs(wt, xq, na, nb, xrb, 1, nil)
							want := make([]float32, na*rows)
							for p := 0; p < pairs; p++ {
								for j0 := 0; j0 < na; j0 += k.p8Acts[wt] {
									n := min(k.p8Acts[wt], na-j0)
									k.p16[wt](wp[2*p*stride:], stride, nb, xq[j0*xrb:], xrb, nil, want[j0*rows+16*p:], rows, n)
								}
							}
							got := make([]float32, na*rows)
							k.amx[wt](wp, stride, nb, xq, xa, xrb, got, rows, na, pairs)
							for i := range got {
								require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]),
									fmt.Sprintf("%v nb=%d extreme=%v pairs=%d gap=%d na=%d out %d: %g vs %g", wt, nb, extreme, pairs, gap, na, i, want[i], got[i]))
							}
						}
					}
				}
			}
		}
	}
}

// amxExtremes sets the n blocks of w to the integer sums' extremes: the
// quants of every other block all at their least, the others all at their
// most, and for Q6_K the sub-block scales alternating −128 and 127.
func amxExtremes(wt Type, w []byte, n int) {
	bb := wt.BlockBytes()
	for i := 0; i < n; i++ {
		q := byte(0x00)
		if i%2 == 1 {
			q = 0xff
		}
		blk := w[i*bb : (i+1)*bb]
		switch wt {
		case Q4_K:
			for b := 16; b < 144; b++ {
				blk[b] = q
			}
		case Q6_K: // ql[128], qh[64], scales[16], d
			for b := 0; b < 192; b++ {
				blk[b] = q
			}
			for s := 0; s < 16; s++ {
				blk[192+s] = byte(0x80 - s%2) // −128, 127, …
			}
		}
	}
}

// BenchmarkPairLegacy: the Qwen2.5-Coder-0.5B's Q5_0 shapes (a draft
// model's layers), packed, through the pair kernels and through the
// 8-row kernels alone, at N = 1…8 on 1 and 2 threads. The matrices stay
// in cache between iterations, so this is the kernels' compute; the
// model's decode step (lmsbench -forward-only) is the figure that counts.
//
//	go test ./core/quant -run X -bench PairLegacy
func BenchmarkPairLegacy(b *testing.B) {
	k := active.Load()
	if k.p16[Q5_0] == nil {
		b.Skip("no Q5_0 pair kernels on this CPU")
	}
	eight := *k
	eight.p16[Q5_0] = nil
	rng := rand.New(rand.NewPCG(7, 7))
	for _, s := range []benchShape{{"gate_4864x896_Q5_0", Q5_0, 4864, 896}, {"q_896x896_Q5_0", Q5_0, 896, 896}} {
		w, xq, out := benchMatrix(rng, s.wt, s.rows, s.cols, 8)
		pk := Prepack(s.wt, w, s.rows, s.cols)
		for _, th := range []int{1, 2} {
			for _, n := range []int{1, 2, 4, 8} {
				for _, kern := range []struct {
					name string
					set  *kernelSet
				}{{"pair", k}, {"8row", &eight}} {
					b.Run(fmt.Sprintf("%s/threads=%d/N=%d/%s", s.name, th, n, kern.name), func(b *testing.B) {
						p := NewPool(th)
						defer p.Close()
						t := minTime(b, func() { matmulPacked8(kern.set, s.wt, pk.data, s.rows, s.cols, xq, n, out, p) })
						b.ReportMetric(t*1e6, "µs")
						b.ReportMetric(t*1e9*float64(th)/float64(s.rows*s.cols/32*n), "ns/row-block")
					})
				}
			}
		}
	}
}
