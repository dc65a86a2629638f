package spec

import (
	"sort"
	"time"
)

// Timing keeps t_spec, the estimated duration of one speculation iteration
// (draft + select + verify), as an exponential moving average of measured
// iterations. The zero value is ready (Alpha 0.2, no estimate until the
// first observation).
type Timing struct {
	// Alpha is the weight of a new observation (default 0.2).
	Alpha float64
	est   float64
	n     int
}

// Observe records one iteration's measured duration.
func (t *Timing) Observe(d time.Duration) {
	a := t.Alpha
	if a <= 0 || a > 1 {
		a = 0.2
	}
	if t.n == 0 {
		t.est = float64(d)
	} else {
		t.est += a * (float64(d) - t.est)
	}
	t.n++
}

// Estimate is the current t_spec (0 before any observation).
func (t *Timing) Estimate() time.Duration { return time.Duration(t.est) }

// Observations is how many iterations were observed.
func (t *Timing) Observations() int { return t.n }

// CalibrationSizes are the token counts Calibrate measures, in order, each
// three times (maxN ≥ 2): a caller can tell from them how far it has got.
func CalibrationSizes(maxN int) []int {
	var ns []int
	for n := 1; n < maxN; n = max(n+1, n*5/4) {
		ns = append(ns, n)
	}
	return append(ns, maxN)
}

// Calibrate finds the verification budget B as the knee of the forward
// pass's cost T(N) for N tokens in one batch. A forward pass streams every
// weight once whatever N is, so while N is small T(N) stays near T(1)
// (memory-bound); past some N the arithmetic dominates and T grows linearly
// (compute-bound). The knee of this roofline is where the flat line T(1)
// meets the line fitted through the upper part of the curve: up to it,
// extra tokens are nearly free; beyond it, each costs its full compute.
//
// cost(n) runs (or models) a forward pass over n tokens; it is measured at
// a geometric grid of N up to maxN, three times each, keeping the minimum.
// The result is in [1, maxN].
func Calibrate(cost func(n int) time.Duration, maxN int) int {
	if maxN < 2 {
		return 1
	}
	ns := CalibrationSizes(maxN)
	ts := make([]float64, len(ns))
	for i, n := range ns {
		best := time.Duration(1<<63 - 1)
		for range 3 {
			best = min(best, cost(n))
		}
		ts[i] = float64(best)
	}
	t1 := ts[0]
	// Least-squares line through the points with N ≥ maxN/2 (at least two).
	lo := sort.SearchInts(ns, maxN/2)
	lo = min(lo, len(ns)-2)
	var sx, sy, sxx, sxy, m float64
	for i := lo; i < len(ns); i++ {
		x, y := float64(ns[i]), ts[i]
		sx, sy, sxx, sxy, m = sx+x, sy+y, sxx+x*x, sxy+x*y, m+1
	}
	den := m*sxx - sx*sx
	if den == 0 {
		return maxN
	}
	slope := (m*sxy - sx*sy) / den
	icept := (sy - slope*sx) / m
	if slope <= 0 || icept >= t1 {
		// Still flat (or the fit crosses T(1) nowhere in range): the whole
		// range is memory-bound.
		return maxN
	}
	knee := int((t1 - icept) / slope)
	return max(1, min(maxN, knee))
}
