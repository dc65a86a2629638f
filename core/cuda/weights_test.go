package cuda

import (
	"encoding/binary"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// The repacked layouts and the mat-vec math, checked on the CPU: a Go twin
// of each kernel, decoding the repacked words with the kernel's own bit
// operations, must reproduce core/quant's dequantization and dot products.
// The GPU tests then hold the kernels to the twin.

// matVecTypes are the weight types with a mat-vec kernel, in test order.
var matVecTypes = []quant.Type{quant.Q4_1, quant.Q8_0, quant.Q5_0, quant.Q4_K, quant.Q6_K}

// randWeights makes rows×cols weights of type typ: quant.Quantize of
// normal floats (realistic blocks), or, raw, random bytes with every f16
// scale field overwritten by a finite random value (every 6-bit scale and
// min, int8 scale, nibble and high bit pattern occurs).
func randWeights(rng *rand.Rand, typ quant.Type, rows, cols int, raw bool) []byte {
	rb, err := typ.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	w := make([]byte, rows*rb)
	if !raw {
		if err := quant.Quantize(typ, randFloats(rng, rows*cols, 0.05), w); err != nil {
			panic(err)
		}
		return w
	}
	rng.Read(w)
	half := func(b []byte) {
		v := float32(math.Exp(rng.Float64()*4-9)) * float32(1-2*rng.Intn(2)) // ±[1.2e-4, 6.7e-3]
		binary.LittleEndian.PutUint16(b, quant.F32ToF16(v))
	}
	bb := typ.BlockBytes()
	for b := 0; b < len(w)/bb; b++ {
		blk := w[b*bb : (b+1)*bb]
		switch typ {
		case quant.Q4_1, quant.Q4_K: // d, m / d, dmin
			half(blk)
			half(blk[2:])
		case quant.Q8_0, quant.Q5_0:
			half(blk)
		case quant.Q6_K:
			half(blk[208:])
		}
	}
	return w
}

// gridActs are n rows of cols activations that Q8_0, Q8_1 and Q8_K
// quantize to the same integers and scale: multiples of one f16-exact d,
// with ±127·d in every block of 32. So the GPU (Q8_1 blocks of 32 for
// every type) and the CPU (Q8_K for the K-quants) dot the same values.
func gridActs(rng *rand.Rand, n, cols int) []float32 {
	d := quant.F16ToF32(quant.F32ToF16(0.0123))
	x := make([]float32, n*cols)
	for i := range x {
		x[i] = float32(rng.Intn(255)-127) * d
	}
	for b := 0; b < n*cols/32; b++ {
		x[32*b+rng.Intn(32)] = float32(127*(1-2*rng.Intn(2))) * d
	}
	return x
}

// acts are a token's activations as the device holds them: int8s and,
// per block of 32, (d, s) halves (splitQ81 of quant.QuantizeQ8_1).
type acts struct {
	q  []byte
	ds []byte
}

func deviceActs(x []float32) acts {
	b := make([]byte, len(x)/32*36)
	quant.QuantizeQ8_1(x, b)
	q, ds := splitQ81(b)
	return acts{q, ds}
}

func (a acts) x(i int) int32 { return int32(int8(a.q[i])) }
func (a acts) word(block, w int) uint32 {
	return binary.LittleEndian.Uint32(a.q[block*32+4*w:])
}
func (a acts) d(block int) float64 {
	return float64(quant.F16ToF32(binary.LittleEndian.Uint16(a.ds[4*block:])))
}
func (a acts) s(block int) float64 {
	return float64(quant.F16ToF32(binary.LittleEndian.Uint16(a.ds[4*block+2:])))
}

// The kernel's integer helpers.

func dp4a(a, b uint32, c int32) int32 {
	for i := 0; i < 4; i++ {
		c += int32(int8(a>>(8*i))) * int32(int8(b>>(8*i)))
	}
	return c
}

func subBytes(v, k uint32) uint32 { return ((v | 0x80808080) - k*0x01010101) ^ 0x80808080 }

func bits4ToBytes(h uint32) uint32 {
	return (h<<4)&0x10 | (h<<11)&0x1000 | (h<<18)&0x100000 | (h<<25)&0x10000000
}

func u32at(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }
func f16(b []byte) float64         { return float64(quant.F16ToF32(binary.LittleEndian.Uint16(b))) }

// twinRow is what the mat-vec kernel of typ computes for row r against
// one token, lane word by lane word, in float64: the same integer sums
// (so the exact value the kernel's float32 arithmetic approximates), and
// mag, the sum of the magnitudes of the terms it adds (the scale of its
// rounding error).
func twinRow(typ quant.Type, wq, ws []byte, r, cols int, x acts) (v, mag float64) {
	nb, nsb := cols/32, cols/256
	add := func(t float64) { v += t; mag += math.Abs(t) }
	switch typ {
	case quant.Q4_1:
		wq, ws = wq[r*nb*16:], ws[r*nb*4:]
		for i := 0; i < nb*4; i++ {
			b, part := i>>2, i&3
			w := u32at(wq, i)
			lo, hi := w&0x0F0F0F0F, (w>>4)&0x0F0F0F0F
			s := dp4a(lo, x.word(b, part), dp4a(hi, x.word(b, part+4), 0))
			add(f16(ws[4*b:]) * x.d(b) * float64(s))
			if part == 0 {
				add(f16(ws[4*b+2:]) * x.s(b))
			}
		}
	case quant.Q8_0:
		wq, ws = wq[r*nb*32:], ws[r*nb*2:]
		for i := 0; i < nb*8; i++ {
			b, part := i>>3, i&7
			add(f16(ws[2*b:]) * x.d(b) * float64(dp4a(u32at(wq, i), x.word(b, part), 0)))
		}
	case quant.Q5_0:
		wq, ws = wq[r*nb*20:], ws[r*nb*2:]
		for i := 0; i < nb*4; i++ {
			b, part := i>>2, i&3
			w, qh := u32at(wq, b*5+part), u32at(wq, b*5+4)>>(4*part)
			lo := subBytes(w&0x0F0F0F0F|bits4ToBytes(qh), 16)
			hi := subBytes((w>>4)&0x0F0F0F0F|bits4ToBytes(qh>>16), 16)
			s := dp4a(lo, x.word(b, part), dp4a(hi, x.word(b, part+4), 0))
			add(f16(ws[2*b:]) * x.d(b) * float64(s))
		}
	case quant.Q4_K:
		wq, ws = wq[r*nsb*128:], ws[r*nsb*20:]
		for sb := 0; sb < nsb; sb++ {
			s := ws[sb*20:]
			d, dmin := f16(s), f16(s[2:])
			for lane := 0; lane < 32; lane++ {
				g, p := lane>>3, lane&7
				w := u32at(wq, sb*32+lane)
				lo, hi := w&0x0F0F0F0F, (w>>4)&0x0F0F0F0F
				b0 := sb*8 + 2*g
				x0, x1 := x.word(b0, p), x.word(b0+1, p)
				add(x.d(b0) * d * float64(s[4+2*g]) * float64(dp4a(lo, x0, 0)))
				add(-x.d(b0) * dmin * float64(s[12+2*g]) * float64(dp4a(0x01010101, x0, 0)))
				add(x.d(b0+1) * d * float64(s[5+2*g]) * float64(dp4a(hi, x1, 0)))
				add(-x.d(b0+1) * dmin * float64(s[13+2*g]) * float64(dp4a(0x01010101, x1, 0)))
			}
		}
	case quant.Q6_K:
		wq, ws = wq[r*nsb*192:], ws[r*nsb*20:]
		for sb := 0; sb < nsb; sb++ {
			s := ws[sb*20:]
			d := f16(s)
			for lane := 0; lane < 32; lane++ {
				h, hs, p := lane>>4, (lane>>3)&1, lane&7
				sub := 8*h + 2*hs + p>>2
				ql, qh := u32at(wq, sb*48+lane), u32at(wq, sb*48+32+8*h+p)>>(2*hs)
				lo := subBytes(ql&0x0F0F0F0F|(qh<<4)&0x30303030, 32)
				hi := subBytes((ql>>4)&0x0F0F0F0F|qh&0x30303030, 32)
				b0 := sb*8 + 4*h + hs
				add(x.d(b0) * d * float64(int8(s[4+sub])) * float64(dp4a(lo, x.word(b0, p), 0)))
				add(x.d(b0+2) * d * float64(int8(s[8+sub])) * float64(dp4a(hi, x.word(b0+2, p), 0)))
			}
		}
	default:
		panic("twinRow: " + typ.String())
	}
	return v, mag
}

// twinDequant is the embed kernel's dequant: element e of row r.
func twinDequant(typ quant.Type, qs, sc []byte, r, cols, e int) float32 {
	h := func(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }
	nb, b, j := cols/32, e>>5, e&31
	blk := r*nb + b
	nib := func(q []byte) int {
		if j < 16 {
			return int(q[j] & 15)
		}
		return int(q[j-16] >> 4)
	}
	switch typ {
	case quant.Q8_0:
		return h(sc[2*blk:]) * float32(int8(qs[blk*32+j]))
	case quant.Q4_1:
		return h(sc[4*blk:])*float32(nib(qs[blk*16:])) + h(sc[4*blk+2:])
	case quant.Q5_0:
		q := qs[blk*20:]
		n5 := nib(q) | int(u32at(q[16:], 0)>>j&1)<<4
		return h(sc[2*blk:]) * float32(n5-16)
	case quant.Q4_K:
		sb := r*(cols/256) + e>>8
		k := e & 255
		g, l, hi := k>>6, k&31, (k>>5)&1
		s := sc[sb*20:]
		q := int(qs[sb*128+32*g+l] >> (4 * hi) & 15)
		d := h(s) * float32(s[4+2*g+hi])
		m := h(s[2:]) * float32(s[12+2*g+hi])
		return d*float32(q) - m
	case quant.Q6_K:
		sb := r*(cols/256) + e>>8
		k := e & 255
		hh, quarter, l := k>>7, (k>>5)&3, k&31
		ql := qs[sb*192+64*hh+32*(quarter&1)+l]
		lo := int(ql & 15)
		if quarter >= 2 {
			lo = int(ql >> 4)
		}
		q := lo | int(qs[sb*192+128+32*hh+l]>>(2*quarter)&3)<<4
		s := sc[sb*20:]
		return h(s) * float32(int8(s[4+k>>4])) * float32(q-32)
	}
	panic("twinDequant: " + typ.String())
}

// TestRepackDequantizes: the embed kernel's reading of each repacked
// layout gives quant.Dequantize's values, bit for bit.
func TestRepackDequantizes(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	rows, cols := 5, 768
	for _, typ := range matVecTypes {
		for _, raw := range []bool{false, true} {
			w := randWeights(rng, typ, rows, cols, raw)
			want := make([]float32, rows*cols)
			require.NoError(t, quant.Dequantize(typ, w, want))
			qs, sc, err := repack(typ, w, rows, cols)
			require.NoError(t, err)
			for r := 0; r < rows; r++ {
				for e := 0; e < cols; e++ {
					got := twinDequant(typ, qs, sc, r, cols, e)
					require.Equal(t, math.Float32bits(want[r*cols+e]), math.Float32bits(got),
						"%s raw=%v row %d element %d: %g, want %g", typ, raw, r, e, got, want[r*cols+e])
				}
			}
		}
	}
}

// TestRepackTwinMatchesQuant: the twin of each mat-vec kernel over the
// repacked weights equals (1) the float64 dot of quant.Dequantize's
// weights with the device's dequantized activations, and (2), on grid
// activations (the same integers in every activation type), quant.MatMul
// with the pure-Go kernels: the CPU's own dot products. Both to float
// rounding, 1e-5 of the terms' magnitudes; a layout error is of the order
// of the result itself.
func TestRepackTwinMatchesQuant(t *testing.T) {
	defer quant.UseSIMD(quant.UseSIMD(false))
	rng := rand.New(rand.NewSource(12))
	rows, cols, n := 9, 768, 3
	for _, typ := range matVecTypes {
		for _, raw := range []bool{false, true} {
			w := randWeights(rng, typ, rows, cols, raw)
			wf := make([]float32, rows*cols)
			require.NoError(t, quant.Dequantize(typ, w, wf))
			qs, sc, err := repack(typ, w, rows, cols)
			require.NoError(t, err)
			for _, grid := range []bool{false, true} {
				x := randFloats(rng, n*cols, 1)
				if grid {
					x = gridActs(rng, n, cols)
				}
				at := quant.ActType(typ)
				rb, _ := at.RowBytes(cols)
				xq := make([]byte, n*rb)
				quant.QuantizeActs(at, x, n, cols, xq)
				cpu := make([]float32, n*rows)
				quant.MatMul(typ, w, rows, cols, xq, n, cpu, nil)
				for tk := 0; tk < n; tk++ {
					a := deviceActs(x[tk*cols : (tk+1)*cols])
					for r := 0; r < rows; r++ {
						v, mag := twinRow(typ, qs, sc, r, cols, a)
						deq := 0.0
						for b := 0; b < cols/32; b++ {
							m := 0.0 // Q4_1's m: the kernel adds m·s, s the f16 d·Σq
							if typ == quant.Q4_1 {
								m = f16(w[(r*cols/32+b)*20+2:])
								deq += m * a.s(b)
							}
							for e := 32 * b; e < 32*b+32; e++ {
								deq += (float64(wf[r*cols+e]) - m) * float64(a.x(e)) * a.d(b)
							}
						}
						require.InDelta(t, deq, v, 1e-5*mag+1e-30, "%s raw=%v grid=%v token %d row %d: twin vs dequantized", typ, raw, grid, tk, r)
						if grid {
							require.InDelta(t, float64(cpu[tk*rows+r]), v, 1e-5*mag+1e-30, "%s raw=%v token %d row %d: twin vs quant.MatMul", typ, raw, tk, r)
						}
					}
				}
			}
		}
	}
}

// TestRepackRejects: types without a kernel and rows that are not whole
// blocks are refused with the reason.
func TestRepackRejects(t *testing.T) {
	_, _, err := repack(quant.Q5_K, make([]byte, 176), 1, 256)
	require.ErrorContains(t, err, "no CUDA kernel")
	// The i-quants the CPU runs are refused by name, not misread.
	for _, typ := range []quant.Type{quant.IQ4_NL, quant.IQ4_XS, quant.IQ3_S, quant.IQ3_XXS, quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S} {
		_, _, err = repack(typ, make([]byte, 8*typ.BlockBytes()), 1, 256)
		require.ErrorContains(t, err, "type "+typ.String()+" has no CUDA kernel", "%s", typ)
	}
	_, _, err = repack(quant.Q4_K, make([]byte, 1000), 1, 288)
	require.ErrorContains(t, err, "whole blocks")
	_, _, err = repack(quant.Q6_K, make([]byte, 209), 1, 256)
	require.ErrorContains(t, err, "bytes for")
	for _, typ := range matVecTypes {
		require.True(t, matVecType(typ), "%s", typ)
	}
	require.False(t, matVecType(quant.F32))
}
