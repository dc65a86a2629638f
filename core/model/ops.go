package model

import (
	"math"

	"github.com/lmstream/lmstream/core/quant"
)

// widen converts the float16 cache entries src to float32 in dst (exact).
func widen(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	i := 0
	if haveSIMD && len(src) >= 16 {
		i = len(src) &^ 15
		simdWiden(&dst[0], &src[0], i)
	}
	for ; i < len(src); i++ {
		dst[i] = quant.F16ToF32(src[i])
	}
}

// narrow rounds src to float16 (to nearest even) into dst, as a K or V
// entry is stored. The assembly and Go conversions agree bit for bit.
func narrow(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	i := 0
	if haveSIMD && len(src) >= 16 {
		i = len(src) &^ 15
		simdNarrow(&dst[0], &src[0], i)
	}
	for ; i < len(src); i++ {
		dst[i] = quant.F32ToF16(src[i])
	}
}

// rmsNormRows writes dst[i] = src[i] / rms(src[i]) ⊙ w for n rows of d.
// With the assembly kernels (d a multiple of 16) a row is simdRMSNorm; otherwise the
// sum of squares runs in 8 interleaved partial sums (lanes j mod 8,
// combined pairwise), so it is not one long dependency chain. Either way
// each row's arithmetic is fixed by d alone.
func rmsNormRows(dst, src, w []float32, n, d int, eps float32) {
	if haveSIMD && d%16 == 0 && d > 0 {
		src, dst, w = src[:n*d], dst[:n*d], w[:d]
		for i := 0; i < n; i++ {
			simdRMSNorm(&dst[i*d], &src[i*d], &w[0], d, eps)
		}
		return
	}
	for i := 0; i < n; i++ {
		x, y := src[i*d:(i+1)*d], dst[i*d:(i+1)*d]
		y = y[:len(x)]
		var s [8]float32
		j := 0
		for ; j+8 <= len(x); j += 8 {
			v := x[j : j+8 : j+8]
			s[0] += v[0] * v[0]
			s[1] += v[1] * v[1]
			s[2] += v[2] * v[2]
			s[3] += v[3] * v[3]
			s[4] += v[4] * v[4]
			s[5] += v[5] * v[5]
			s[6] += v[6] * v[6]
			s[7] += v[7] * v[7]
		}
		for ; j < len(x); j++ {
			s[j&7] += x[j] * x[j]
		}
		ss := ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
		r := float32(1 / math.Sqrt(float64(ss/float32(d)+eps)))
		w := w[:len(x)]
		for j, v := range x {
			y[j] = v * r * w[j]
		}
	}
}

// addBiasRows adds bias to each of n rows (no-op for a nil bias).
func addBiasRows(x, bias []float32, n int) {
	if bias == nil {
		return
	}
	d := len(bias)
	for i := 0; i < n; i++ {
		row := x[i*d : (i+1)*d]
		for j, b := range bias {
			row[j] += b
		}
	}
}

// addRows adds the first n elements of y into x (the residual connection).
func addRows(x, y []float32, n int) {
	x, y = x[:n], y[:n]
	if haveSIMD && n >= 16 {
		m := n &^ 15
		simdAdd(&x[0], &y[0], m)
		x, y = x[m:], y[m:]
	}
	for i, v := range y {
		x[i] += v
	}
}

// swiglu writes gate[i] = silu(gate[i]) * up[i], silu(g) = g·σ(g).
func swiglu(gate, up []float32, n int) {
	gate, up = gate[:n], up[:n]
	if haveSIMD && n >= 16 {
		m := n &^ 15
		simdSwiglu(&gate[0], &up[0], m)
		gate, up = gate[m:], up[m:]
	}
	for i, g := range gate {
		gate[i] = g / (1 + expf(-g)) * up[i]
	}
}

// swigluOAI is gpt-oss's activation: gate[i] = σ(1.702·g)·g · (u + 1)
// with g = min(gate[i], 7) and u = up[i] clamped to [-7, 7], as GGML's
// swiglu_oai computes it.
func swigluOAI(gate, up []float32, n int) {
	const alpha, limit = 1.702, 7
	gate, up = gate[:n], up[:n]
	for i, g := range gate {
		x := min(g, limit)
		y := max(min(up[i], limit), -limit)
		gate[i] = x / (1 + expf(-alpha*x)) * (y + 1)
	}
}

// geglu writes gate[i] = gelu(gate[i]) * up[i] with GELU's tanh form,
// gelu(g) = g/2·(1 + tanh(√(2/π)·(g + 0.044715·g³))), as Gemma's FFN (and
// llama.cpp's GELU) computes it. tanh(u) = 1 - 2/(e^(2u)+1), so that a
// large |u| saturates to ±1 instead of dividing infinities.
func geglu(gate, up []float32, n int) {
	gate, up = gate[:n], up[:n]
	const c = 0.7978845608028654 // √(2/π)
	for i, g := range gate {
		u := c * g * (1 + 0.044715*g*g)
		t := 1 - 2/(expf(2*u)+1)
		gate[i] = 0.5 * g * (1 + t) * up[i]
	}
}

// softcap maps each logit z to c·tanh(z/c) (Gemma's final soft-capping).
func softcap(x []float32, c float32) {
	for i, z := range x {
		x[i] = c * float32(math.Tanh(float64(z/c)))
	}
}

// ropeFrequencies returns θ_i = base^(-2i/d) for the d/2 rotation pairs.
func ropeFrequencies(base float32, d int) []float64 {
	f := make([]float64, d/2)
	for i := range f {
		f[i] = math.Pow(float64(base), -2*float64(i)/float64(d))
	}
	return f
}

// rope rotates one head vector by its position's angles (cos, sin per pair).
// The normal (GGML) mode rotates adjacent pairs (x[2i], x[2i+1]): Llama
// GGUF converters permute the Q/K rows so that this equals the original
// rotate-half. NEOX mode (Qwen2) rotates (x[i], x[i+d/2]).
func rope(x, cos, sin []float32, neox bool) {
	half := len(cos)
	if neox {
		a, b := x[:half], x[half:2*half]
		sin = sin[:half]
		for i, c := range cos {
			x0, x1 := a[i], b[i]
			a[i] = x0*c - x1*sin[i]
			b[i] = x0*sin[i] + x1*c
		}
		return
	}
	x = x[:2*half]
	sin = sin[:half]
	for i, c := range cos {
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i] = x0*c - x1*sin[i]
		x[2*i+1] = x0*sin[i] + x1*c
	}
}

// expf is e^x in float32 arithmetic to about 2 ulp over the range the
// forward pass needs (softmax arguments ≤ 0, SiLU arguments of either sign);
// it underflows to 0 below -87 and saturates to +Inf above 88.
// e^x = 2^n · e^r with n = round(x/ln2), |r| ≤ ln2/2, and e^r from a
// degree-6 Taylor polynomial (error < 2e-8 relative on that interval).
func expf(x float32) float32 {
	if x < -87 {
		return 0
	}
	if x > 88 {
		return float32(math.Inf(1))
	}
	const (
		log2e = 1.4426950408889634
		ln2hi = 0.693145751953125
		ln2lo = 1.428606765330187e-06
	)
	n := float32(math.Floor(float64(x*log2e + 0.5)))
	r := x - n*ln2hi - n*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// dot is the inner product of two equal-length vectors.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
