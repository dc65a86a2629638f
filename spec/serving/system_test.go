package serving

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
)

// Every "spec_policy" value names a System of the table, in either
// spelling and any case; an unknown one lists every value.
func TestByConfigName(t *testing.T) {
	for in, want := range map[string]string{"adaserve": "adaserve", "Equal-Greedy": "equal-greedy", "global_greedy": "global-greedy",
		"specinfer": "specinfer", "incremental": "incremental", "sarathi": "sarathi", "FCFS": "sarathi", "vllm": "vllm"} {
		p, err := ByConfigName(in)
		require.NoError(t, err, in)
		require.Equal(t, want, p.Name)
	}
	vllm, err := ByConfigName("vllm")
	require.NoError(t, err)
	require.Equal(t, [3]any{spec.Incremental, Preempt, true}, [3]any{vllm.Spec, vllm.Prefill, vllm.FCFSAdmit})
	_, err = ByConfigName("fastest")
	require.Equal(t, status.InvalidRequest, status.CodeOf(err))
	require.ErrorContains(t, err, `unknown policy "fastest" (want "adaserve", "incremental", "specinfer", "equal_greedy", "global_greedy", "sarathi", "fcfs" or "vllm")`)
	_, err = ByName("nope")
	require.Error(t, err)
}

// A tight TTFT SLO overtakes a relaxed request queued before it, unless
// admission is first come, first served; equal keys keep arrival order.
func TestAdmissionOrder(t *testing.T) {
	type q struct {
		at  int64
		slo float64
	}
	queue := []q{{0, 0}, {int64(time.Millisecond), 50}, {int64(2 * time.Millisecond), 50}}
	key := func(fcfs bool) func(q) int64 {
		return func(x q) int64 { return AdmissionDeadline(x.at, x.slo, fcfs) }
	}
	require.Equal(t, 1, NextToAdmit(queue, key(false)))
	require.Equal(t, 0, NextToAdmit(queue, key(true)))
	require.Equal(t, int64(BestEffortTTFT), TTFTDeadline(0, 0))
}
