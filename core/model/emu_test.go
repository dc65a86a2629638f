package model

import (
	"math"
	"testing"
)

// A Go model of the assembly kernels' arithmetic (the AVX-512 kernels
// define it; the AVX2 ones must match them bit for bit): 16-lane FMA
// chains, the fixed reduction tree (lanes i+8, i+4, i+2, i+1), and e^t as
// 2^m·p(r). The kernels are checked against it exactly, so a machine
// without AVX-512 still checks that its kernels give the AVX-512 results.

// fma32 is a·b+c rounded once to float32 (as VFMADD…PS): a·b is exact in
// float64 and the float64 sum s is off the exact sum by e (TwoSum); s
// rounds to the right float32 unless it lies exactly halfway between two
// float32s and e ≠ 0, when the exact sum lies on e's side.
func fma32(a, b, c float32) float32 {
	p, cc := float64(a)*float64(b), float64(c)
	s := p + cc
	bb := s - p
	e := (p - (s - bb)) + (cc - bb)
	r := float32(s)
	if e == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return r
	}
	var o float32 // r's neighbour on the other side of s
	if float64(r) < s {
		o = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		o = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if (float64(r)+float64(o))/2 != s {
		return r
	}
	if e > 0 {
		return max(r, o)
	}
	return min(r, o)
}

// tree16 is the kernels' horizontal sum of 16 lanes.
func tree16(a *[16]float32) float32 {
	var s8 [8]float32
	for i := range s8 {
		s8[i] = a[i] + a[i+8]
	}
	var s4 [4]float32
	for i := range s4 {
		s4[i] = s8[i] + s8[i+4]
	}
	return (s4[0] + s4[2]) + (s4[1] + s4[3])
}

// emuExp is e^t as attnExp and swiglu compute it, t already clamped.
func emuExp(t float32) float32 {
	m := float32(math.RoundToEven(float64(t * 1.44269504)))
	r := fma32(-m, 0.693145751953125, t)
	r = fma32(-m, 1.4286068e-06, r)
	p := float32(1.0 / 720)
	for _, c := range []float32{1.0 / 120, 1.0 / 24, 1.0 / 6, 1.0 / 2, 1, 1} {
		p = fma32(p, r, c)
	}
	return p * math.Float32frombits(uint32(int32(m)+127)<<23)
}

// emuSoftmax is attnExp: x[j] = e^(max(x[j]-mx, -87)) and their sum, the
// lanes j mod 16 summed in order, then tree16.
func emuSoftmax(x []float32, mx float32) float32 {
	var acc [16]float32
	for j, v := range x {
		x[j] = emuExp(max(v-mx, -87))
		acc[j%16] += x[j]
	}
	return tree16(&acc)
}

// emuSwiglu is swiglu's kernel for one element.
func emuSwiglu(g, u float32) float32 {
	e := emuExp(min(max(-g, -87), 87))
	return g * u / (1 + e)
}

// emuRMSNorm is the kernels' RMSNorm of one row: squares in two 16-lane
// accumulators over alternating 16-element chunks.
func emuRMSNorm(dst, x, w []float32, eps float32) {
	var a, b [16]float32
	for c := 0; c < len(x); c += 16 {
		acc := &a
		if (c/16)%2 == 1 {
			acc = &b
		}
		for l := range acc {
			acc[l] = fma32(x[c+l], x[c+l], acc[l])
		}
	}
	for l := range a {
		a[l] += b[l]
	}
	ss := tree16(&a)
	r := float32(1) / float32(math.Sqrt(float64(ss/float32(len(x))+eps)))
	for i, v := range x {
		dst[i] = v * r * w[i]
	}
}

// emuWsumG is one head of attnWsumG: one FMA chain per element, keys in
// order, from out.
func emuWsumG(p, v []float32, n, hd int, out []float32) {
	for j := 0; j < n; j++ {
		for d := 0; d < hd; d++ {
			out[d] = fma32(p[j], v[j*hd+d], out[d])
		}
	}
}

// sameBits reports whether a and b hold the same float32 bit patterns.
func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestFMA32 checks the emulated fused multiply-add where rounding a·b
// first, or rounding the float64 sum again, would be wrong.
func TestFMA32(t *testing.T) {
	ulp := math.Ldexp(1, -23)
	// (1+2^-23)² - (1+2^-22) = 2^-46: lost unless a·b is kept exact.
	a := float32(1 + ulp)
	if got := fma32(a, a, -float32(1+2*ulp)); got != float32(math.Ldexp(1, -46)) {
		t.Fatalf("fma32 lost the product's low bits: %g", got)
	}
	// 2^-24(1+2^-23)·(1-2^-23) + (1+2^-23) = 1 + 3·2^-24 - 2^-70: the
	// float64 sum is the float32 midpoint 1 + 3·2^-24, which rounds to
	// even (1 + 2^-22); the exact sum lies below it: 1 + 2^-23.
	got := fma32(float32(math.Ldexp(1+ulp, -24)), float32(1-ulp), float32(1+ulp))
	if want := float32(1 + ulp); got != want {
		t.Fatalf("fma32 double rounding: got %.10g want %.10g", got, want)
	}
}
