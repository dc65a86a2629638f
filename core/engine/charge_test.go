package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// linearCurve is a pass cost of t0 plus per a token.
func linearCurve(t0, per time.Duration) func(int) time.Duration {
	return func(n int) time.Duration { return t0 + time.Duration(n)*per }
}

// TestChargeBillsTheOtherStreams replays the pass that motivated the
// charge (Qwen pair, two streams): one request drafted 16 nodes and
// emitted 9 tokens, the other decoded plainly, and the iteration took 128
// ms (64 of them drafting, 64 the forward pass) where a plain pass took
// 25. Judged by its own duration the speculating request ran at 14 ms a
// token; charged for the other stream's wait, at 25.7, slower than plain:
// the pass gave 10 tokens in 128 ms where plain passes give 2 in 25.
func TestChargeBillsTheOtherStreams(t *testing.T) {
	at := linearCurve(20125*time.Microsecond, 2437500) // T(2) 25 ms, T(18) 64 ms
	c := newCharge(at, 18, 16, 2, 0, 64*time.Millisecond, 64*time.Millisecond)
	require.Equal(t, 25*time.Millisecond, c.base)
	require.Equal(t, c.base, c.charge(0, 128*time.Millisecond), "the plain request pays a plain pass")
	spec := c.charge(16, 128*time.Millisecond)
	require.Equal(t, 25*time.Millisecond+2*103*time.Millisecond, spec)
	require.Greater(t, spec/9, c.base, "per token, the speculating request lost")
}

// TestChargeMatchesThroughput: a speculating request's charged pace beats
// plain decoding's exactly when the pass emitted more tokens per second
// than plain passes would have.
func TestChargeMatchesThroughput(t *testing.T) {
	at := linearCurve(20*time.Millisecond, 2*time.Millisecond)
	for _, n := range []int{2, 3, 4} {
		for nodes := 1; nodes <= 12; nodes++ {
			for _, plan := range []time.Duration{0, 5 * time.Millisecond, 40 * time.Millisecond} {
				for k := 1; k <= nodes+1; k++ {
					tokens := n + nodes
					fwd := at(tokens)
					require.Equal(t, at(n), newCharge(at, tokens, nodes, n, 0, plan, fwd).base)
					c := newCharge(at, tokens, nodes, n, 0, plan, fwd)
					// Payoff keeps speculating while its pace is no
					// slower than plain decoding's, a pass per token.
					judged := c.charge(nodes, 0) <= time.Duration(k)*c.base
					// The pass gave n−1+k tokens in plan+fwd; plain
					// passes give n in base.
					better := time.Duration(n-1+k)*c.base >= time.Duration(n)*(plan+fwd)
					require.Equal(t, better, judged, "n=%d nodes=%d plan=%v k=%d", n, nodes, plan, k)
				}
			}
		}
	}
}

// TestChargeUnpriced: a pass without draft nodes, or whose curve is
// unknown, leaves each request its own duration; a curve noisier than the
// pass (the smaller pass measured dearer) never bills less than nothing.
func TestChargeUnpriced(t *testing.T) {
	took := 30 * time.Millisecond
	require.Equal(t, took, newCharge(linearCurve(0, time.Millisecond), 4, 0, 2, 0, 0, took).charge(0, took))
	require.Equal(t, took, newCharge(func(int) time.Duration { return 0 }, 4, 2, 2, 0, 0, took).charge(2, took))
	inverted := func(n int) time.Duration { return time.Duration(10-n) * time.Millisecond }
	c := newCharge(inverted, 4, 2, 2, 0, time.Millisecond, 20*time.Millisecond)
	require.Equal(t, 20*time.Millisecond, c.base)
	require.Equal(t, 20*time.Millisecond+2*time.Millisecond, c.charge(2, took))
}

// TestChargeTakesMeasuredPlainPasses: where recent plain passes over the
// same sequences were measured, they are the base, not the curve's shape:
// a curve measured while memory was slow (flat: T(2) = T(6)) would make a
// pass whose forward took 30 ms against today's plain 18 look free.
func TestChargeTakesMeasuredPlainPasses(t *testing.T) {
	flat := linearCurve(27*time.Millisecond, 0)
	require.Equal(t, 30*time.Millisecond, newCharge(flat, 6, 4, 2, 0, 0, 30*time.Millisecond).base)
	c := newCharge(flat, 6, 4, 2, 18*time.Millisecond, 0, 30*time.Millisecond)
	require.Equal(t, 18*time.Millisecond, c.base)
	require.Equal(t, 18*time.Millisecond+2*12*time.Millisecond, c.charge(4, 0))
	// A measured plain pass dearer than this pass is noise: at most fwd.
	require.Equal(t, 30*time.Millisecond, newCharge(flat, 6, 4, 2, 40*time.Millisecond, 0, 30*time.Millisecond).base)
}
