package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// quantCases returns rows (multiples of 32 floats) that stress the
// activation quantizers: random data at many scales, exact .5 ties of x·id,
// ±0, subnormal and zero scales, values near the f16 limits and the
// non-finite values the SIMD code hands back to the generic code.
func quantCases(rng *rand.Rand) [][]float32 {
	var rows [][]float32
	block := func(f func(j int) float32) []float32 {
		b := make([]float32, 32)
		for j := range b {
			b[j] = f(j)
		}
		return b
	}
	// Random rows, many magnitudes.
	for _, sc := range []float64{1e-30, 1e-9, 3e-8, 1e-6, 1e-3, 0.02, 1, 7, 300, 1e5, 4e6, 1e7} {
		for range 20 {
			rows = append(rows, randFloats(rng, 32*(1+rng.IntN(18)), sc))
		}
	}
	// Ties: amax = 127·2^e gives d = 2^e exactly, so x = (k+½)·2^e lands on
	// k+½ after scaling; both signs, with ±0 and near-ties mixed in.
	for e := -20; e <= 10; e++ {
		p := float32(math.Ldexp(1, e))
		for range 4 {
			rows = append(rows, block(func(j int) float32 {
				switch {
				case j == 0:
					return 127 * p
				case j == 1:
					return float32(math.Copysign(0, -1))
				case j == 2:
					return 0
				case j%5 == 0:
					return math.Nextafter32((float32(rng.IntN(254)-127)+0.5)*p, float32(math.Inf(1-2*(j%2))))
				}
				return (float32(rng.IntN(254)-127) + 0.5) * p
			}))
		}
	}
	// d = 1: every float32 in a sweep rounds on its own.
	for v := float32(-127); v <= 127; {
		b := block(func(int) float32 { return 0 })
		b[31] = 127
		for j := 0; j < 31 && v <= 127; j++ {
			b[j] = v
			v = math.Nextafter32(v, 200)
			if rng.IntN(64) == 0 {
				v += float32(rng.Float64() * 0.5)
			}
		}
		rows = append(rows, b)
		if len(rows) > 60000 {
			break
		}
	}
	// Tiny blocks: d subnormal in f16, or 0; denormal inputs.
	for _, a := range []float32{0, 1e-45, 1e-40, 1e-38, 3.1e-6, 3.2e-6, 1e-7, 6e-6, 2.5e-3} {
		rows = append(rows, block(func(j int) float32 { return a * float32(rng.NormFloat64()) }))
		rows = append(rows, block(func(j int) float32 { return a * float32(j%3-1) }))
	}
	// Around the hand-back threshold (2^22) and f16 overflow of d or s.
	for _, a := range []float32{4194303, 4194304, 4194305, 8.3e6, 1e9, 65504 * 127, 65504 * 127 * 1.01} {
		rows = append(rows, block(func(j int) float32 { return a * float32(rng.Float64()*2-1) }))
		rows = append(rows, block(func(j int) float32 { return a }))
	}
	// Non-finite values, alone or in the middle of a row.
	for _, bad := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		r := randFloats(rng, 32*5, 1)
		r[32*2+7] = bad
		rows = append(rows, r)
		rows = append(rows, block(func(int) float32 { return bad }))
	}
	return rows
}

func TestQuantizeQ8MatchesGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	rows := quantCases(rng)
	for _, c := range []struct {
		ty      Type
		simd    func([]float32, []byte)
		generic func([]float32, []byte)
	}{
		{Q8_0, QuantizeQ8_0, quantizeQ8_0Generic},
		{Q8_1, QuantizeQ8_1, quantizeQ8_1Generic},
		{Q8_K, QuantizeQ8_K, quantizeQ8_KGeneric},
	} {
		for i, x := range rows {
			if c.ty == Q8_K { // whole 256-element blocks: the row repeated
				for len(x)%QK != 0 {
					x = append(x[:len(x):len(x)], x[:min(len(x), QK-len(x)%QK)]...)
				}
			}
			rb, _ := c.ty.RowBytes(len(x))
			got, want := make([]byte, rb), make([]byte, rb)
			for j := range got {
				got[j], want[j] = 0xa5, 0x5a // no byte may be left unwritten
			}
			c.simd(x, got)
			c.generic(x, want)
			if !bytes.Equal(got, want) {
				for b := 0; b < rb; b++ {
					if got[b] != want[b] {
						blk := b / c.ty.BlockBytes()
						t.Fatalf("%s row %d (kernels %s): byte %d: got %#x want %#x; block %v",
							c.ty, i, Kernels(), b, got[b], want[b], x[32*blk:32*blk+32])
					}
				}
			}
		}
	}
	// QuantizeActs gives the same bytes as the per-row quantizer.
	x := randFloats(rng, 7*576, 1)
	for _, ty := range []Type{Q8_0, Q8_1} {
		rb, _ := ty.RowBytes(576)
		got, want := make([]byte, 7*rb), make([]byte, 7*rb)
		QuantizeActs(ty, x, 7, 576, got)
		for i := 0; i < 7; i++ {
			if ty == Q8_0 {
				quantizeQ8_0Generic(x[i*576:(i+1)*576], want[i*rb:])
			} else {
				quantizeQ8_1Generic(x[i*576:(i+1)*576], want[i*rb:])
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("QuantizeActs %s differs from the generic quantizer", ty)
		}
	}
}
