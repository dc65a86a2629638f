package cpu

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/spec"
)

// curveOf measures a modelled cost function at the calibration sizes, as
// measureCost measures a model.
func curveOf(cost func(n int) time.Duration) *costCurve {
	c := &costCurve{}
	for _, n := range spec.CalibrationSizes(curveTokens("cpu")) {
		c.ns, c.ts = append(c.ns, n), append(c.ts, cost(n))
	}
	return c
}

func TestCostCurve(t *testing.T) {
	ms := time.Millisecond
	// A CPU: 60 ms for one token, 15 ms more for each further one.
	cpu := curveOf(func(n int) time.Duration { return 60*ms + 15*ms*time.Duration(n-1) })
	for _, n := range []int{1, 2, 9, 11, 40, 48, 100} {
		require.Equal(t, 60*ms+15*ms*time.Duration(n-1), cpu.at(n), "n=%d", n) // interpolated, extrapolated
	}
	// One stream: a token is worth 60 ms, a verified one costs 15: every
	// size pays, the budget does not bind (the MinProb cut does, at 0.25).
	require.Equal(t, MaxSpecBudget, cpu.budget(1, cpu.at(1)))
	// Eight streams: a token is worth T(8)/8 = 20.6 ms, still above 15.
	require.Equal(t, MaxSpecBudget, cpu.budget(8, cpu.at(8)/8))
	// A GPU-like curve, flat to 32 tokens, then 1 ms a token: with
	// tokens worth 0.5 ms the budget is the knee.
	gpu := curveOf(func(n int) time.Duration {
		return 5*ms + time.Duration(max(0, n-32))*ms
	})
	require.InDelta(t, 32, gpu.budget(10, 500*time.Microsecond), 2) // the grid has 27 and 33
	require.Equal(t, MaxSpecBudget, gpu.budget(1, 5*ms), "one stream's token is worth more than any pass's next token")
	// No curve: the at-least budget.
	var none *costCurve
	require.Zero(t, none.at(4))
	require.Equal(t, DefaultMinBudget, none.budget(1, ms))
}

// TestMeasureCurveReachesWhatIsAsked: a curve cached for a short maxN is
// not handed to a caller asking for a longer one (the AdaServe harness
// measures to 160 tokens in a process whose runtimes measured to 48).
func TestMeasureCurveReachesWhatIsAsked(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 3, 1)
	for _, maxN := range []int{4, 9, 6} {
		ns, ts, err := MeasureCurve(path, 1, maxN)
		require.NoError(t, err)
		require.Len(t, ts, len(ns))
		require.GreaterOrEqual(t, ns[len(ns)-1], maxN, "asked for %d tokens", maxN)
	}
}
