package model

import "math"

// ropeSpec is one kind of layer's rotation, every scaling folded in: pair i
// of a head turns by pos·freq[i], and cos and sin are multiplied by mscale.
// Linear scaling, YaRN's per-dimension mix of interpolated and extrapolated
// angles, and per-dimension frequency factors (Llama 3's rope_freqs,
// LongRoPE's) all keep the angle linear in the position, so one frequency
// per pair describes them.
type ropeSpec struct {
	freq   []float64
	mscale float32
}

// newRopeSpec computes a layer kind's frequencies for head dimension d
// from the base, the scaling and the optional per-pair factors (len d/2),
// as GGML's rope_ext does.
func newRopeSpec(base float32, d int, r RopeScaling, factors []float32) ropeSpec {
	scale := r.FreqScale
	if scale == 0 {
		scale = 1
	}
	var low, high float32
	if r.ExtFactor != 0 {
		low, high = yarnCorrDims(d, r.OrigCtx, base, r.BetaFast, r.BetaSlow)
	}
	freq := make([]float64, d/2)
	for i := range freq {
		theta := math.Pow(float64(base), -2*float64(i)/float64(d))
		if factors != nil {
			theta /= float64(factors[i])
		}
		f := float64(scale) * theta
		if r.ExtFactor != 0 {
			mix := float64(yarnRamp(low, high, i) * r.ExtFactor)
			f = f*(1-mix) + theta*mix
		}
		freq[i] = f
	}
	mscale := r.AttnFactor
	if mscale == 0 {
		mscale = 1
	}
	if r.ExtFactor != 0 {
		mscale *= 1 + 0.1*float32(math.Log(float64(1/scale)))
	}
	return ropeSpec{freq: freq, mscale: mscale}
}

// yarnCorrDims is YaRN's range of correction dimensions: the pairs whose
// wavelength spans between betaFast and betaSlow rotations over the
// original context keep a mix of both angles.
func yarnCorrDims(d, origCtx int, base, betaFast, betaSlow float32) (low, high float32) {
	dim := func(rot float32) float32 {
		return float32(d) * float32(math.Log(float64(float32(origCtx)/(rot*2*math.Pi)))) / (2 * float32(math.Log(float64(base))))
	}
	low = max(0, float32(math.Floor(float64(dim(betaFast)))))
	high = min(float32(d-1), float32(math.Ceil(float64(dim(betaSlow)))))
	return low, high
}

// yarnRamp is 1 for pairs below low (extrapolated), 0 above high
// (interpolated), linear between.
func yarnRamp(low, high float32, i int) float32 {
	y := (float32(i) - low) / max(0.001, high-low)
	return 1 - min(1, max(0, y))
}

// tables fills the per-token cos/sin of each pair for positions pos,
// growing cos and sin to len(pos)·len(freq).
func (r *ropeSpec) tables(cos, sin []float32, pos []int) ([]float32, []float32) {
	half := len(r.freq)
	cos, sin = grow(cos, len(pos)*half), grow(sin, len(pos)*half)
	for i, p := range pos {
		for j, f := range r.freq {
			sn, cs := math.Sincos(float64(p) * f)
			cos[i*half+j], sin[i*half+j] = float32(cs)*r.mscale, float32(sn)*r.mscale
		}
	}
	return cos, sin
}
