package quant

import (
	"fmt"
	"math"
)

// MXFP4 (the OCP microscaling format as GGML stores it): 32-element blocks
// of 4-bit E2M1 values under one shared power-of-two scale.
//
//	MXFP4 17 B: e u8 | qs[16]
//	    x = 2^(e−127) · fp4[q], element j (0..15) in the low nibble of qs[j],
//	    element j+16 in its high nibble. Dotted against Q8_0.
//
// The E2M1 values are 0, ±0.5, ±1, ±1.5, ±2, ±3, ±4, ±6; mxfp4Levels holds
// them doubled (integers), so the scale is taken as 2^(e−128).
//
// The exponent e is E8M0: 0..254 are 2^(e−127); 255 is NaN in the OCP
// specification. GGML does not check it and computes a finite 2^127 there,
// so the same file would read differently under two readers. This package
// refuses such blocks instead: Validate (which the model loader calls on
// every tensor) and Dequantize report them, and the kernels never see one
// from a loaded model.

// mxfp4Levels is twice the E2M1 value of each 4-bit code.
var mxfp4Levels = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// mxfp4NaN is the E8M0 exponent that encodes NaN.
const mxfp4NaN = 0xff

// mxfp4Half is 2^(e−128), half the block scale (exact: 2^−128 and 2^−127
// are float32 subnormals).
func mxfp4Half(e byte) float32 {
	return float32(math.Ldexp(1, int(e)-128))
}

func dequantMXFP4(b []byte, y []float32) {
	d := mxfp4Half(b[0])
	for j := 0; j < 16; j++ {
		y[j] = float32(mxfp4Levels[b[1+j]&0xf]) * d
		y[j+16] = float32(mxfp4Levels[b[1+j]>>4]) * d
	}
}

// DotMXFP4Q8_0Generic: Σ_b 2^(e−128)·d_x·Σ_j mxfp4Levels[q_j]·x_j.
func DotMXFP4Q8_0Generic(w, x []byte) float32 {
	nb := len(w) / 17
	var sum float32
	for i := 0; i < nb; i++ {
		b, a := w[17*i:17*i+17], x[34*i:34*i+34]
		s := 0
		for j := 0; j < 16; j++ {
			s += int(mxfp4Levels[b[1+j]&0xf]) * int(int8(a[2+j]))
			s += int(mxfp4Levels[b[1+j]>>4]) * int(int8(a[18+j]))
		}
		sum += mxfp4Half(b[0]) * f16at(a) * float32(s)
	}
	return sum
}

var mxfp4LevelsF = func() (f [16]float32) {
	for i, v := range mxfp4Levels {
		f[i] = float32(v)
	}
	return f
}()

// quantizeMXFP4 takes the smallest exponent under which the block's largest
// magnitude fits ±6 (±12 doubled) and rounds every value to the nearest
// E2M1 level.
func quantizeMXFP4(x []float32, b []byte) {
	amax, _ := absMax(x)
	e := 0
	if amax > 0 {
		_, exp := math.Frexp(float64(amax) / 12) // amax/12 = f·2^exp, f ∈ [0.5, 1)
		e = min(max(exp+128, 0), 254)
		if float64(amax) > 12*math.Ldexp(1, e-128) && e < 254 {
			e++
		}
	}
	b[0] = byte(e)
	id := 1 / mxfp4Half(byte(e))
	for j := 0; j < 16; j++ {
		lo := nearestLevel(mxfp4LevelsF[:], x[j]*id)
		hi := nearestLevel(mxfp4LevelsF[:], x[j+16]*id)
		b[1+j] = byte(lo | hi<<4)
	}
}

// Validate reports the first block of data (whole blocks of type t) that
// holds an encoding the format defines as invalid. Only MXFP4 has one today:
// a NaN exponent (see above).
func Validate(t Type, data []byte) error {
	if t != MXFP4 {
		return nil
	}
	for i := 0; i+17 <= len(data); i += 17 {
		if data[i] == mxfp4NaN {
			return fmt.Errorf("MXFP4 block %d has the NaN scale exponent 0xFF", i/17)
		}
	}
	return nil
}

// DotMXFP4Q8_0 is the dot of an MXFP4 weight row with a Q8_0 activation row.
func DotMXFP4Q8_0(w, x []byte) float32 { return active.Load().mxfp4(w, x) }
