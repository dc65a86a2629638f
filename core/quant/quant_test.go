package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var weightTypes = append([]Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F32, F16, BF16}, lowBitTypes...)

// lowBitTypes are the weight types below 4.5 bits a weight.
var lowBitTypes = []Type{Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4, IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S}

// scaleFields lists the byte offsets of a block's f16 scale fields.
func scaleFields(t Type) []int {
	switch t {
	case Q4_0, Q5_0, Q8_0, Q8_1:
		return []int{0}
	case Q4_1, Q5_1, Q4_K, Q5_K:
		return []int{0, 2}
	case Q6_K:
		return []int{208}
	case Q2_K:
		return []int{80, 82}
	case Q3_K:
		return []int{108}
	case IQ4_NL, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S:
		return []int{0}
	}
	return nil
}

// randBlocks fills nb blocks of t with random bytes, then puts sane random
// f16 values in the scale fields (random bits could be Inf/NaN there).
func randBlocks(rng *rand.Rand, t Type, nb int) []byte {
	bb := t.BlockBytes()
	b := make([]byte, nb*bb)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	for i := 0; i < nb; i++ {
		for _, off := range scaleFields(t) {
			put16(b[i*bb+off:], F32ToF16(float32(rng.NormFloat64()*0.05)))
		}
		if t == MXFP4 { // an exponent of 2^-12..2^7 (and never the NaN one)
			b[i*bb] = byte(115 + rng.IntN(20))
		}
	}
	return b
}

func randFloats(rng *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

func readFloats(t *testing.T, path string) []float32 {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f := make([]float32, len(raw)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return f
}

func dequant(t testing.TB, ty Type, b []byte, n int) []float32 {
	y := make([]float32, n)
	require.NoError(t, Dequantize(ty, b, y))
	return y
}

func TestF16(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{
		{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {float32(math.Ldexp(1, -24)), 1},
		{float32(math.Ldexp(1, -25)), 0},          // tie → even (0)
		{float32(math.Ldexp(1.0001, -25)), 1},     // just above the tie
		{float32(math.Ldexp(3, -25)), 2},          // 1.5 ulp → even (2)
		{float32(math.Ldexp(1023.5, -24)), 0x400}, // carries into the smallest normal
		{1 + float32(math.Ldexp(1, -11)), 0x3c00}, // tie → even
		{1 + float32(math.Ldexp(3, -11)), 0x3c02}, // tie → even (up)
		{float32(math.Ldexp(1, -30)), 0},
	} {
		require.Equal(t, c.h, F32ToF16(c.f), "F32ToF16(%g)", c.f)
	}
	require.True(t, math.IsNaN(float64(F16ToF32(F32ToF16(float32(math.NaN()))))))
	// Every non-NaN f16 round-trips exactly.
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue
		}
		require.Equal(t, uint16(h), F32ToF16(F16ToF32(uint16(h))), "h=%#x", h)
	}
	// Random floats go to the nearest f16 (checked against both neighbours).
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		f := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-28)))
		h := F32ToF16(f)
		got := float64(F16ToF32(h))
		if math.IsInf(got, 0) {
			require.Greater(t, math.Abs(float64(f)), 65519.0)
			continue
		}
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7c00 == 0x7c00 || nb&0x7fff == 0x7fff {
				continue
			}
			if (nb^h)&0x8000 != 0 {
				continue
			}
			require.LessOrEqual(t, math.Abs(got-float64(f)), math.Abs(float64(F16ToF32(nb))-float64(f)), "f=%g", f)
		}
	}
	// BF16: round to nearest even, exact widening.
	require.Equal(t, uint16(0x3f80), F32ToBF16(1))
	require.Equal(t, uint16(0x3f80), F32ToBF16(math.Float32frombits(0x3f808000))) // tie → even
	require.Equal(t, uint16(0x3f82), F32ToBF16(math.Float32frombits(0x3f818000))) // tie → even (up)
	require.Equal(t, uint16(0x3f81), F32ToBF16(math.Float32frombits(0x3f808001)))
	require.Equal(t, float32(1), BF16ToF32(0x3f80))
	require.True(t, math.IsNaN(float64(BF16ToF32(F32ToBF16(float32(math.NaN()))))))
}

// TestDequantizeGolden checks Dequantize against values computed by an
// independent implementation (the gguf Python package; see
// testdata/gen_golden.py), on random blocks with edge cases and on the first
// blocks of two tensors of the default model.
func TestDequantizeGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		ty   Type
	}{
		{"q4_0", Q4_0}, {"q4_1", Q4_1}, {"q5_0", Q5_0}, {"q5_1", Q5_1}, {"q8_0", Q8_0},
		{"q4_k", Q4_K}, {"q5_k", Q5_K}, {"q6_k", Q6_K}, {"f16", F16}, {"bf16", BF16},
		{"model_q4_1", Q4_1}, {"model_q8_0", Q8_0},
		{"q2_k", Q2_K}, {"q3_k", Q3_K}, {"iq4_nl", IQ4_NL}, {"iq4_xs", IQ4_XS}, {"mxfp4", MXFP4},
		{"iq3_s", IQ3_S}, {"iq3_xxs", IQ3_XXS}, {"iq2_xxs", IQ2_XXS}, {"iq2_xs", IQ2_XS}, {"iq2_s", IQ2_S},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", c.name+".bin"))
			require.NoError(t, err)
			want := readFloats(t, filepath.Join("testdata", c.name+".f32"))
			require.Equal(t, len(raw)/c.ty.BlockBytes()*c.ty.BlockElems(), len(want))
			got := dequant(t, c.ty, raw, len(want))
			be := c.ty.BlockElems()
			for b := 0; b < len(want)/be; b++ {
				var mag float64
				for _, v := range want[b*be : (b+1)*be] {
					mag = math.Max(mag, math.Abs(float64(v)))
				}
				for i := b * be; i < (b+1)*be; i++ {
					if math.IsInf(float64(want[i]), 0) {
						require.Equal(t, want[i], got[i], "elem %d", i)
						continue
					}
					require.InDelta(t, want[i], got[i], 4e-7*mag, "elem %d", i)
				}
			}
		})
	}
}

func TestDequantizeErrors(t *testing.T) {
	require.Error(t, Dequantize(Q4_1, make([]byte, 20), make([]float32, 31)))
	require.Error(t, Dequantize(Q4_1, make([]byte, 19), make([]float32, 32)))
	require.Error(t, Dequantize(Type(99), nil, nil))
	require.NoError(t, Dequantize(Q4_K, make([]byte, 144), make([]float32, 256)))
}

// TestQuantizeRoundTrip bounds quantize→dequantize error per type. Legacy
// types: per element, half a quantization step of the block (a full step on
// the clamped side of Q4_0/Q5_0, whose range is −8..7 / −16..15 times d).
// K-quants, whose 6-bit sub-block scales add their own rounding: RMS error
// relative to the RMS of the data.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ty := range append(weightTypes, Q8_1, Q8_K) {
		t.Run(ty.String(), func(t *testing.T) {
			n := 8 * QK
			x := randFloats(rng, n, 1)
			x[5] = 0
			for i := 256; i < 288; i++ { // a constant block
				x[i] = 0.75
			}
			for i := 512; i < 768; i++ { // a tiny-magnitude super-block
				x[i] *= 1e-3
			}
			rb, _ := ty.RowBytes(n)
			q := make([]byte, rb)
			require.NoError(t, Quantize(ty, x, q))
			y := dequant(t, ty, q, n)
			be := max(ty.BlockElems(), 32)
			var se, sx float64
			for b := 0; b < n/be; b++ {
				blk := x[b*be : (b+1)*be]
				amax, _ := absMax(blk)
				mn, mx := minMax(blk)
				var bound float64
				switch ty {
				case Q8_0, Q8_1, Q8_K:
					bound = float64(amax) / 127 * 0.502
				case Q4_0:
					bound = float64(amax) / 8 * 1.002
				case Q5_0:
					bound = float64(amax) / 16 * 1.002
				case Q4_1:
					bound = float64(mx-mn)/30*1.002 + math.Abs(float64(mn))*1e-3
				case Q5_1:
					bound = float64(mx-mn)/62*1.002 + math.Abs(float64(mn))*1e-3
				case F16:
					bound = float64(amax) * math.Ldexp(1, -11)
				case BF16:
					bound = float64(amax) * math.Ldexp(1, -8)
				case F32:
					bound = 0
				default:
					bound = math.Inf(1)
				}
				for i := b * be; i < (b+1)*be; i++ {
					e := math.Abs(float64(y[i] - x[i]))
					require.LessOrEqual(t, e, bound+1e-12, "elem %d x=%g y=%g", i, x[i], y[i])
					se += e * e
					sx += float64(x[i]) * float64(x[i])
				}
			}
			rel := math.Sqrt(se / sx)
			limit := map[Type]float64{Q4_K: 0.12, Q5_K: 0.06, Q6_K: 0.03,
				Q2_K: 0.4, Q3_K: 0.2, IQ4_NL: 0.1, IQ4_XS: 0.1, MXFP4: 0.14,
				IQ2_XXS: 0.4, IQ2_XS: 0.35, IQ2_S: 0.3,
				IQ3_S: 0.16, IQ3_XXS: 0.22}[ty]
			if limit > 0 {
				require.Less(t, rel, limit)
			}
			t.Logf("%s relative RMS error %.4f", ty, rel)
		})
	}
}

// dotRef is the float64 dot of the dequantized rows and Σ|w·x| (the scale
// for tolerances).
func dotRef(t testing.TB, wt Type, w []byte, at Type, x []byte, cols int) (ref, mag float64) {
	wf := dequant(t, wt, w, cols)
	xf := dequant(t, at, x, cols)
	for i := range wf {
		p := float64(wf[i]) * float64(xf[i])
		ref += p
		mag += math.Abs(p)
	}
	return ref, mag + q81Slack(wt, w, x, cols)
}

// q81Slack: Q8_1 stores s = d·Σq rounded to f16, and the Q4_1/Q5_1 dots use
// it for the m term, so they may differ from the dot of the dequantized rows
// by up to |m·s|·2^-11 per block (scaled by the 2e-5 tolerance factor below,
// hence the large constant).
func q81Slack(wt Type, w, x []byte, cols int) float64 {
	if wt != Q4_1 && wt != Q5_1 {
		return 0
	}
	var sl float64
	wb := wt.BlockBytes()
	for b := 0; b < cols/32; b++ {
		sl += math.Abs(float64(f16at(w[b*wb+2:]) * f16at(x[b*36+2:])))
	}
	return sl * math.Ldexp(1, -10) / 2e-5
}

func dotOf(wt Type) func(w, x []byte) float32 {
	switch wt {
	case Q4_0:
		return DotQ4_0Q8_0
	case Q4_1:
		return DotQ4_1Q8_1
	case Q5_0:
		return DotQ5_0Q8_0
	case Q5_1:
		return DotQ5_1Q8_1
	case Q8_0:
		return DotQ8_0Q8_0
	case Q4_K:
		return DotQ4_KQ8_K
	case Q5_K:
		return DotQ5_KQ8_K
	case Q6_K:
		return DotQ6_KQ8_K
	case Q2_K:
		return DotQ2_KQ8_K
	case Q3_K:
		return DotQ3_KQ8_K
	case IQ4_NL:
		return DotIQ4_NLQ8_0
	case IQ4_XS:
		return DotIQ4_XSQ8_K
	case MXFP4:
		return DotMXFP4Q8_0
	case IQ3_S:
		return DotIQ3_SQ8_K
	case IQ3_XXS:
		return DotIQ3_XXSQ8_K
	case IQ2_XXS:
		return DotIQ2_XXSQ8_K
	case IQ2_XS:
		return DotIQ2_XSQ8_K
	case IQ2_S:
		return DotIQ2_SQ8_K
	}
	return nil
}

// TestDots: every dot (SIMD and generic) against the float64 dot of the
// dequantized rows, and SIMD against generic, on random raw weight blocks
// (all bit patterns) and edge cases, for block counts that exercise every
// loop tail. Tolerance: 2e-5 relative to Σ|w·x| — the kernels sum exact
// integer block dots and differ only in float32 rounding order.
func TestDots(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	defer UseSIMD(true)
	for _, wt := range append([]Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K}, lowBitTypes...) {
		at := ActType(wt)
		be := wt.BlockElems()
		for _, nb := range []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 18, 31, 48} {
			for variant := 0; variant < 6; variant++ {
				cols := nb * be
				w := randBlocks(rng, wt, nb)
				xf := randFloats(rng, cols, 1)
				bb := wt.BlockBytes()
				switch variant {
				case 1: // all nibbles/bytes 0x00 (q = −8 for Q4_0)
					for i := 0; i < nb; i++ {
						blk := w[i*bb : (i+1)*bb]
						for j := range blk {
							if !isScaleByte(wt, j) {
								blk[j] = 0
							}
						}
					}
				case 2: // all 0xFF (q = +7 for Q4_0, −1 for Q8_0) and large scales
					for i := 0; i < nb; i++ {
						blk := w[i*bb : (i+1)*bb]
						for j := range blk {
							if !isScaleByte(wt, j) {
								blk[j] = 0xff
							}
						}
						for _, off := range scaleFields(wt) {
							put16(blk[off:], F32ToF16(60000))
						}
					}
				case 3: // d = 0 in every other block
					for i := 0; i < nb; i += 2 {
						for _, off := range scaleFields(wt) {
							put16(w[i*bb+off:], 0)
						}
					}
				case 4: // activations at ±127 and 0
					for i := range xf {
						xf[i] = float32([]int{-1, 1, 0}[rng.IntN(3)])
					}
				case 5: // realistic quantized weights, large activations
					wq := make([]byte, len(w))
					require.NoError(t, Quantize(wt, randFloats(rng, cols, 0.02), wq))
					w = wq
					for i := range xf {
						xf[i] *= 100
					}
				}
				x := make([]byte, nb*at.BlockBytes())
				QuantizeActs(at, xf, 1, cols, x)
				ref, mag := dotRef(t, wt, w, at, x, cols)
				UseSIMD(false)
				g := dotOf(wt)(w, x)
				UseSIMD(true)
				s := dotOf(wt)(w, x)
				tol := 2e-5*mag + 1e-30
				msg := fmt.Sprintf("%s nb=%d variant=%d (%s)", wt, nb, variant, Kernels())
				require.InDelta(t, ref, g, tol, "generic "+msg)
				require.InDelta(t, ref, s, tol, "simd "+msg)
				require.InDelta(t, g, s, tol, "simd vs generic "+msg)
			}
		}
	}
}

func isScaleByte(t Type, j int) bool {
	if t == MXFP4 && j == 0 {
		return true
	}
	for _, off := range scaleFields(t) {
		if j == off || j == off+1 {
			return true
		}
	}
	return false
}

func TestFloatDots(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	defer UseSIMD(true)
	for _, n := range []int{1, 3, 15, 16, 17, 31, 64, 100, 576, 1000} {
		w := randFloats(rng, n, 1)
		x := randFloats(rng, n, 1)
		h := make([]byte, 2*n)
		bf := make([]byte, 2*n)
		require.NoError(t, Quantize(F16, w, h))
		require.NoError(t, Quantize(BF16, w, bf))
		wh := dequant(t, F16, h, n)
		wb := dequant(t, BF16, bf, n)
		var r32, r16, rb, mag float64
		for i := range x {
			r32 += float64(w[i]) * float64(x[i])
			r16 += float64(wh[i]) * float64(x[i])
			rb += float64(wb[i]) * float64(x[i])
			mag += math.Abs(float64(w[i]) * float64(x[i]))
		}
		tol := 1e-5*mag + 1e-30
		for _, simd := range []bool{false, true} {
			UseSIMD(simd)
			require.InDelta(t, r32, DotF32(w, x), tol, "f32 n=%d simd=%v", n, simd)
			require.InDelta(t, r16, DotF16F32(h, x), tol, "f16 n=%d simd=%v", n, simd)
			require.InDelta(t, rb, DotBF16F32(bf, x), tol, "bf16 n=%d simd=%v", n, simd)
		}
	}
}

// TestMatMul compares MatMul (SIMD and generic, several thread counts and
// batch sizes) with a float64 reference built from Dequantize.
func TestMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	defer UseSIMD(true)
	pools := map[int]*Pool{1: nil, 2: NewPool(2), 3: NewPool(3)}
	defer pools[2].Close()
	defer pools[3].Close()
	for _, wt := range weightTypes {
		for _, shape := range [][2]int{{37, 512}, {200, 256}} {
			rows, cols := shape[0], shape[1]
			if wt.BlockElems() == 32 && rows == 200 {
				cols = 96
			}
			at := ActType(wt)
			wrb, _ := wt.RowBytes(cols)
			xrb, _ := at.RowBytes(cols)
			w := make([]byte, rows*wrb)
			require.NoError(t, Quantize(wt, randFloats(rng, rows*cols, 0.05), w))
			wf := dequant(t, wt, w, rows*cols)
			nmax := 64
			xq := make([]byte, nmax*xrb)
			QuantizeActs(at, randFloats(rng, nmax*cols, 1), nmax, cols, xq)
			xf := dequant(t, at, xq, nmax*cols)
			ref := make([]float64, nmax*rows)
			mag := make([]float64, nmax*rows)
			for i := 0; i < nmax; i++ {
				for r := 0; r < rows; r++ {
					for c := 0; c < cols; c++ {
						p := float64(wf[r*cols+c]) * float64(xf[i*cols+c])
						ref[i*rows+r] += p
						mag[i*rows+r] += math.Abs(p)
					}
					mag[i*rows+r] += q81Slack(wt, w[r*wrb:(r+1)*wrb], xq[i*xrb:(i+1)*xrb], cols)
				}
			}
			ns, ths := []int{1, 2, 3, 7, 16, 33, 64}, []int{1, 2, 3}
			if raceEnabled { // the race detector makes the generic path ~30× slower
				ns, ths = []int{1, 5, 16}, []int{1, 2}
			}
			for _, n := range ns {
				for _, th := range ths {
					for _, simd := range []bool{true, false} {
						UseSIMD(simd)
						out := make([]float32, n*rows+1)
						out[n*rows] = 42 // sentinel
						MatMul(wt, w, rows, cols, xq, n, out, pools[th])
						require.Equal(t, float32(42), out[n*rows])
						for k := 0; k < n*rows; k++ {
							require.InDelta(t, ref[k], out[k], 2e-5*mag[k]+1e-30,
								"%s %dx%d N=%d threads=%d simd=%v: out[%d][%d]", wt, rows, cols, n, th, simd, k/rows, k%rows)
						}
					}
				}
			}
		}
	}
}

// TestPoolSteals: a thread stuck in a chunk of its home range holds up
// nothing else: the other thread runs its own range and then takes the
// stuck thread's remaining chunks from the back.
func TestPoolSteals(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	const n = 64
	var done atomic.Int32
	others := int32(0)
	p.Run(n, 1, func(lo, hi int) {
		if lo == 0 { // the first chunk of the caller's range
			for deadline := time.Now().Add(10 * time.Second); done.Load() < n-1 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			others = done.Load()
			return
		}
		done.Add(1)
	})
	require.Equal(t, int32(n-1), others, "chunks run while one was stuck")
}

func TestPool(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	for _, th := range []int{2, 3, 1, 2} {
		p.SetThreads(th)
		require.Equal(t, th, p.Threads())
		for iter := 0; iter < 200; iter++ {
			n := 1 + iter*7%301
			hits := make([]int32, n)
			p.Run(n, 1+iter%13, func(lo, hi int) {
				for i := lo; i < hi; i++ {
					hits[i]++
				}
			})
			for i, h := range hits {
				require.Equal(t, int32(1), h, "n=%d i=%d", n, i)
			}
		}
	}
}
