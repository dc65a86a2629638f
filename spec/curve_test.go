package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCurveAt(t *testing.T) {
	ms := time.Millisecond
	// A curve of 10 ms a token from 8 tokens on, whose last point (the
	// shortest segment, 151 to 160) came in fast.
	ns := []int{1, 8, 40, 80, 121, 151, 160}
	ts := []time.Duration{20 * ms, 80 * ms, 400 * ms, 800 * ms, 1210 * ms, 1510 * ms, 1555 * ms}
	require.Equal(t, 20*ms, CurveAt(ns, ts, 0), "n < 1 counts as 1")
	require.Equal(t, 400*ms, CurveAt(ns, ts, 40), "a measured size")
	require.Equal(t, 600*ms, CurveAt(ns, ts, 60), "interpolated")
	// Past 160: the slope from T(80) to T(160), (1555-800)/80 ms a token,
	// not the last segment's 5 ms.
	require.Equal(t, 1555*ms+(755*ms)*240/80, CurveAt(ns, ts, 400))
	// The upper half's start is interpolated when no size is measured there.
	require.Equal(t, 1555*ms+(1555*ms-CurveAt(ns, ts, 80))*40/80, CurveAt(ns, ts, 200))
	// Two points: the half falls on the first.
	require.Equal(t, 30*ms, CurveAt([]int{1, 2}, []time.Duration{10 * ms, 20 * ms}, 3))
	// One point: proportional.
	require.Equal(t, 30*ms, CurveAt([]int{1}, []time.Duration{10 * ms}, 3))
	require.Equal(t, time.Duration(0), CurveAt(nil, nil, 5))
}
