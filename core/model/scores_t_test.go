package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// emuScoreT is a score as scoresT's kernel computes it: one float32 fused
// multiply-add per dimension from zero, d = 0 first, then the scale.
func emuScoreT(q, kt []float32, ks, j int, scale float32) float32 {
	var acc float32
	for d := range q {
		acc = fma32(q[d], kt[d*ks+j], acc)
	}
	return acc * scale
}

// scoresT gives every score the bits of emuScoreT, for every number of
// queries (groups of 6, 3 and 1, overlapping ones), key counts and head
// dimensions (odd ones too: the kernel has no width limit), with strided
// rows in and out and nothing written past the rows' nk scores.
func TestScoresT(t *testing.T) {
	if !canAVX2 {
		t.Skip("no AVX2 kernel on this machine")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, hd := range []int{64, 128, 16, 40, 1} {
		for _, nk := range []int{16, 32, 48, 64} {
			for nq := 1; nq <= 16; nq++ {
				qs, ks, os := hd+3, nk+16, nk+5
				q := make([]float32, nq*qs)
				kt := make([]float32, hd*ks)
				for i := range q {
					q[i] = float32(r.NormFloat64())
				}
				for i := range kt {
					kt[i] = float32(r.NormFloat64())
				}
				out := make([]float32, nq*os)
				for i := range out {
					out[i] = float32(math.NaN())
				}
				scoresT(q, nq, qs, kt, ks, nk, hd, 0.125, out, os)
				for i := range nq {
					for j := range os {
						got := out[i*os+j]
						if j >= nk {
							require.True(t, math.IsNaN(float64(got)), "hd %d nk %d nq %d: column %d written", hd, nk, nq, j)
							continue
						}
						want := emuScoreT(q[i*qs:i*qs+hd], kt, ks, j, 0.125)
						require.Equal(t, math.Float32bits(want), math.Float32bits(got), "hd %d nk %d nq %d query %d key %d", hd, nk, nq, i, j)
					}
				}
				// The Go loop agrees to rounding.
				ref := make([]float32, nq*os)
				scoresTGo(q, nq, qs, kt, ks, nk, hd, 0.125, ref, os)
				for i := range nq {
					for j := range nk {
						require.InDelta(t, ref[i*os+j], out[i*os+j], 1e-4*float64(hd))
					}
				}
				// Float16 keys read in place: the bits of the same keys
				// widened first.
				kh := make([]uint16, len(kt))
				for i, x := range kt {
					kh[i] = quant.F32ToF16(x)
					kt[i] = quant.F16ToF32(kh[i])
				}
				want, got := make([]float32, nq*os), make([]float32, nq*os)
				scoresT(q, nq, qs, kt, ks, nk, hd, 0.125, want, os)
				scoresTF16(q, nq, qs, kh, ks, nk, hd, 0.125, got, os)
				require.Equal(t, want, got, "hd %d nk %d nq %d: float16 keys", hd, nk, nq)
			}
		}
	}
}

// BenchmarkScoresT is one tile's scores (256 keys, head dimension 64) for
// 12 queries (a chain item of SmolLM2) and 3 (a decode step), float32 keys
// widened beforehand and float16 keys read in place, at row strides of a
// page (256), and a page and 8 or 16.
func BenchmarkScoresT(b *testing.B) {
	if !canAVX2 {
		b.Skip("no AVX2 kernel on this machine")
	}
	const hd, nk = 64, 256
	for _, nq := range []int{12, 3} {
		q, out := make([]float32, nq*hd), make([]float32, nq*nk)
		for _, ks := range []int{256, 264, 272} {
			kt, kh := make([]float32, hd*ks), make([]uint16, hd*ks)
			for i := range kt {
				kt[i], kh[i] = 0.5, quant.F32ToF16(0.5)
			}
			b.Run(fmt.Sprintf("nq=%d/f32/ks=%d", nq, ks), func(b *testing.B) {
				for range b.N {
					scoresT(q, nq, hd, kt, ks, nk, hd, 0.125, out, nk)
				}
			})
			b.Run(fmt.Sprintf("nq=%d/f16/ks=%d", nq, ks), func(b *testing.B) {
				for range b.N {
					scoresTF16(q, nq, hd, kh, ks, nk, hd, 0.125, out, nk)
				}
			})
		}
	}
}
