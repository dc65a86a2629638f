package spec

import (
	"fmt"
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

// Curve is a forward pass's cost T(N) for N tokens in one batch, given at
// ascending sizes and interpolated linearly between them; past the largest
// size N it goes on along the slope of its upper half (T(N) − T(N/2))/(N/2)
// (CurveAt).
type Curve struct {
	Name string
	N    []int
	T    []time.Duration
	// RootN and RootT, when set, are a pass over one token each of n
	// sequences at ascending sizes, each behind Context committed
	// tokens, and Entry what each committed token of a sequence beyond
	// Context adds (PassCost): a batch of sequences as the engine
	// runs it, each reading its own KV cache. Without them every pass is
	// priced on the chain (N, T), as the derived curves are.
	RootN   []int
	RootT   []time.Duration
	Context int
	Entry   time.Duration
	// Prompt, when positive, is what each prompt token of a chunk adds to
	// a pass (PassCost.Prompt); otherwise the chain's slope.
	Prompt time.Duration
}

// Validate checks that the curve has points, ascending sizes from 1 up and
// positive costs that never decrease, and so has its roots' curve where
// it has one, with a context and an entry price that are not negative.
func (c Curve) Validate() error {
	if err := validPoints(c.Name, "", c.N, c.T); err != nil {
		return err
	}
	if len(c.RootN) > 0 || len(c.RootT) > 0 {
		if err := validPoints(c.Name, "roots ", c.RootN, c.RootT); err != nil {
			return err
		}
	}
	if c.Context < 0 || c.Entry < 0 || c.Prompt < 0 {
		return fmt.Errorf("curve %q: context %d, entry price %v and prompt token price %v must not be negative", c.Name, c.Context, c.Entry, c.Prompt)
	}
	return nil
}

func validPoints(name, what string, ns []int, ts []time.Duration) error {
	if len(ns) == 0 || len(ns) != len(ts) {
		return fmt.Errorf("curve %q: %s%d sizes, %d costs", name, what, len(ns), len(ts))
	}
	for i := range ns {
		switch {
		case ns[i] < 1 || ts[i] <= 0:
			return fmt.Errorf("curve %q: %spoint %d (N=%d, T=%v) not positive", name, what, i, ns[i], ts[i])
		case i > 0 && ns[i] <= ns[i-1]:
			return fmt.Errorf("curve %q: %ssizes not ascending at %d", name, what, i)
		case i > 0 && ts[i] < ts[i-1]:
			return fmt.Errorf("curve %q: %scost falls at N=%d", name, what, ns[i])
		}
	}
	return nil
}

// At is T(n) (n < 1 counts as 1).
func (c Curve) At(n int) time.Duration { return CurveAt(c.N, c.T, n) }

// Cost prices passes as the engine does: PassCost on the chain and,
// where measured, the roots' curve and the entry price.
func (c Curve) Cost() PassCost {
	pc := PassCost{Chain: c.At, Context: c.Context, Entry: c.Entry, Prompt: c.Prompt}
	if len(c.RootN) > 0 {
		pc.Roots = func(n int) time.Duration { return CurveAt(c.RootN, c.RootT, n) }
	}
	return pc
}
