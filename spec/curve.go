package spec

import (
	"sort"
	"time"
)

// CurveAt is a pass's cost over n tokens (n < 1 counts as 1) from a cost
// curve measured at ascending sizes ns (costs ts): interpolated linearly
// between them, and past the largest size N extended along the slope of
// the curve's upper half, (T(N) − T(N/2)) / (N − N/2).
//
// Why not the last segment's slope: a two-core VM's measured sizes lie a
// few tokens apart at the top (151 and 160), and one noisy point there
// gave the Qwen2.5-Coder 1.5B's curve a last slope of 5.2 ms a token
// against 8–10 below it. vLLM-style scheduling prefills whole prompts of
// hundreds of tokens in one pass, priced past the curve's end, so that
// noise priced its passes 40% under the rest of the curve.
func CurveAt(ns []int, ts []time.Duration, n int) time.Duration {
	if len(ns) == 0 {
		return 0
	}
	n = max(n, 1)
	last := len(ns) - 1
	if len(ns) == 1 {
		return ts[0] * time.Duration(n) / time.Duration(ns[0])
	}
	if n > ns[last] {
		top, mid := ns[last], ns[last]/2
		if mid < ns[0] || mid == top {
			mid = ns[last-1]
		}
		tm := interpolate(ns, ts, mid)
		return ts[last] + (ts[last]-tm)*time.Duration(n-top)/time.Duration(top-mid)
	}
	return interpolate(ns, ts, n)
}

// interpolate is the curve at n within [ns[0], ns[last]] (below ns[0],
// along the first segment).
func interpolate(ns []int, ts []time.Duration, n int) time.Duration {
	i := sort.SearchInts(ns, n)
	if i < len(ns) && ns[i] == n {
		return ts[i]
	}
	i = max(i, 1)
	n0, n1, t0, t1 := ns[i-1], ns[i], ts[i-1], ts[i]
	return t0 + (t1-t0)*time.Duration(n-n0)/time.Duration(n1-n0)
}
