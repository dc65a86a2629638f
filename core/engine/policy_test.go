package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/streaming"
)

// TestPolicyConfig: every "spec_policy" value takes the simulator's
// definition of its system (speculation, prefill mode, admission order),
// and an unknown one is refused with every value listed.
func TestPolicyConfig(t *testing.T) {
	for _, c := range []struct {
		name     string
		spec     spec.Policy
		prefill  serving.Prefill
		fcfs     bool
		simulate string
	}{
		{"adaserve", spec.AdaServe, serving.Chunked, false, "adaserve"},
		{"Equal-Greedy", spec.EqualGreedy, serving.Chunked, false, "equal-greedy"},
		{"global_greedy", spec.GlobalGreedy, serving.Chunked, false, "global-greedy"},
		{"specinfer", spec.SpecInfer, serving.Chunked, false, "specinfer"},
		{"incremental", spec.Incremental, serving.Chunked, false, "incremental"},
		{"sarathi", spec.Incremental, serving.Chunked, true, "sarathi"},
		{"FCFS", spec.Incremental, serving.Chunked, true, "sarathi"},
		{"vllm", spec.Incremental, serving.Preempt, true, "vllm"},
	} {
		cfg, err := loop.ParseConfig([]byte(`{"spec_policy":"` + c.name + `"}`))
		require.NoError(t, err)
		sc, err := takeSpecConfig(cfg)
		require.NoError(t, err, c.name)
		require.Equal(t, c.spec, sc.sched.Policy, c.name)
		require.Equal(t, c.prefill, sc.prefill, c.name)
		require.Equal(t, c.fcfs, sc.fcfsAdmit, c.name)
		p, err := serving.ByName(c.simulate)
		require.NoError(t, err)
		require.Equal(t, [5]any{p.Spec, p.Prefill, p.FCFSAdmit, p.SLOChunk, p.SLOBatch}, [5]any{sc.sched.Policy, sc.prefill, sc.fcfsAdmit, sc.sloChunk, sc.sloBatch}, "%s agrees with the simulator's %s", c.name, c.simulate)
		require.Equal(t, c.spec == spec.AdaServe, sc.sloChunk, "%s: only AdaServe sizes its prefill chunks by SLO", c.name)
		require.Equal(t, c.spec == spec.AdaServe, sc.sloBatch, "%s: only AdaServe lets streams sit out by SLO", c.name)
	}
	cfg, err := loop.ParseConfig([]byte(`{"spec_policy":"fastest"}`))
	require.NoError(t, err)
	_, err = takeSpecConfig(cfg)
	require.Equal(t, status.InvalidRequest, status.CodeOf(err))
	require.ErrorContains(t, err, `unknown policy "fastest" (want "adaserve", "incremental", "specinfer", "equal_greedy", "global_greedy", "sarathi", "fcfs" or "vllm")`)
}

// TestVLLMPrefillPreemptsDecode: under "vllm" a prompt that arrives while
// another stream decodes is prefilled, chunk by chunk, before that stream
// decodes again; under "incremental" and "sarathi" its chunks travel with
// the running stream's tokens. Either way both streams emit exactly what
// each decodes alone (greedy: plain decoding's tokens).
func TestVLLMPrefillPreemptsDecode(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 5, 4)
	a := []int32{3, 9, 4, 3}                         // one chunk
	bp := []int32{5, 6, 7, 8, 9, 10, 11, 12, 13, 14} // three chunks of 4
	const n = 10
	plain := tinyBackend(t, path, "", `,"prefill_chunk":4`)
	wantA := generate(t, plain, a, sample.Params{}, draftNone, n)
	wantB := generate(t, plain, bp, sample.Params{}, draftNone, n)

	for _, policy := range []string{"vllm", "incremental", "sarathi"} {
		t.Run(policy, func(t *testing.T) {
			be := tinyBackend(t, path, "", fmt.Sprintf(`,"prefill_chunk":4,"spec_policy":%q`, policy))
			// Both ask for speculation: these policies never speculate.
			sa := &loop.Slot{Request: &loop.Request{}, Prompt: a, Data: &item{drafter: draftNGram}}
			sb := &loop.Slot{Request: &loop.Request{}, Prompt: bp, Data: &item{drafter: draftNGram}}
			require.NoError(t, be.Open(sa))
			defer be.Release(sa)
			var gotA, gotB []int32
			res := make([]loop.StepResult, 2)
			step := func(slots ...*loop.Slot) {
				clear(res)
				be.Step(slots, res[:len(slots)])
				for i, s := range slots {
					require.NoError(t, res[i].Err)
					require.Zero(t, res[i].VerifyPasses, "no speculation under %s", policy)
					if s == sa {
						gotA = append(gotA, res[i].Tokens...)
					} else {
						gotB = append(gotB, res[i].Tokens...)
					}
				}
			}
			step(sa) // a's prompt fits one chunk: its first token
			step(sa)
			require.Len(t, gotA, 2)
			require.NoError(t, be.Open(sb))
			defer be.Release(sb)
			// b's prompt takes three iterations; the third emits its first token.
			var aTokens []int
			for range 3 {
				before := len(gotA)
				step(sa, sb)
				aTokens = append(aTokens, len(gotA)-before)
			}
			require.Len(t, gotB, 1, "b's prompt is in after three chunks")
			if policy == "vllm" {
				require.Equal(t, []int{0, 0, 0}, aTokens, "a decodes nothing while b's prompt prefills")
			} else {
				require.Equal(t, []int{1, 1, 1}, aTokens, "a decodes beside b's prompt chunks")
			}
			for len(gotA) < n || len(gotB) < n {
				step(sa, sb)
			}
			require.Equal(t, wantA, gotA[:n], "a under %s", policy)
			require.Equal(t, wantB, gotB[:n], "b under %s", policy)
		})
	}
}

// TestFCFSAdmission: with one slot busy, a request queued after another
// but with a much tighter "ttft_slo_ms" is admitted first under "adaserve"
// (earliest TTFT deadline), and second under "sarathi", "fcfs" and "vllm"
// (first come, first served), through the runtime's real admission.
func TestFCFSAdmission(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 5, 4)
	for _, c := range []struct {
		policy      string
		urgentFirst bool
	}{{"adaserve", true}, {"sarathi", false}, {"fcfs", false}, {"vllm", false}} {
		t.Run(c.policy, func(t *testing.T) {
			rt, err := loop.New([]byte(`{"model_path":"` + path + `","max_slots":1,"threads":1,"context_length":64,"spec_budget":4,"spec_policy":"` + c.policy + `"}`))
			require.NoError(t, err)
			defer rt.Close()
			// Each stream pauses once its one-chunk queue is full, holding
			// the only slot: whichever is admitted first keeps the other
			// queued until the test releases it.
			submit := func(req string) *streaming.Channel {
				ch := streaming.NewChannel()
				require.NoError(t, ch.SetQueue(1, streaming.Pause))
				require.NoError(t, rt.Submit([]byte(req), []*streaming.Channel{ch}))
				return ch
			}
			busy := submit(`{"prompt":"t3 t9 t4","max_tokens":20}`)
			defer busy.Release()
			waitUntil(t, "the busy request's first token", func() bool { return busy.Pending() > 0 })
			// The same prompt for both (its first token is not the end
			// token, which would free the slot at once).
			relaxed := submit(`{"prompt":"t7 t8","max_tokens":20}`)
			defer relaxed.Release()
			urgent := submit(`{"prompt":"t7 t8","max_tokens":20,"ttft_slo_ms":1}`)
			defer urgent.Release()
			waitUntil(t, "both queued", func() bool { return rt.Stats().Queued == 2 })
			busy.Cancel()
			waitUntil(t, "one admitted", func() bool { return relaxed.Pending() > 0 || urgent.Pending() > 0 })
			first, second := relaxed, urgent
			if c.urgentFirst {
				first, second = urgent, relaxed
			}
			require.Positive(t, first.Pending())
			require.Zero(t, second.Pending(), "the other waits for the slot")
			require.EqualValues(t, 1, rt.Stats().Queued)
		})
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// Since subtracts every count and time of an earlier reading, the batch
// timings too: what a run did beside its warm-up.
func TestTimingsSince(t *testing.T) {
	var warm, end Timings
	warm.add(1, 2, 3)
	warm.Decoding, warm.SatOut = 1, 0
	warm.Roots[1] = RootPasses{Count: 1, Plan: 1, Forward: 4, Verify: 1}
	end = warm
	end.add(10, 20, 30)
	end.Decoding, end.SatOut = 5, 2
	end.Roots[1] = RootPasses{Count: 3, Plan: 5, Forward: 40, Verify: 5}
	end.Roots[4] = RootPasses{Count: 2, Plan: 2, Forward: 36, Verify: 2}
	got := end.Since(warm)
	want := Timings{Iterations: 1, Plan: 10, Forward: 20, Verify: 30, Decoding: 4, SatOut: 2}
	want.Roots[1] = RootPasses{Count: 2, Plan: 4, Forward: 36, Verify: 4}
	want.Roots[4] = RootPasses{Count: 2, Plan: 2, Forward: 36, Verify: 2}
	if got != want {
		t.Fatalf("Since: %+v, want %+v", got, want)
	}
}
