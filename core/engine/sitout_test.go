package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/sample"
)

// TestSitOutEngine: under "adaserve" a stream far ahead of a loose TPOT
// SLO sits out the iterations of a stream short of its own (spec.SitOut),
// gets its tokens again once its slack runs low, and emits exactly what it
// emits alone; a best-effort stream never sits out, and under any other
// policy nobody does; nor does anybody while a request waiting for a slot
// could miss its first-token deadline. The curve is set to 10 ms a token so that the
// scheduler's prices, not this machine's speed, decide.
func TestSitOutEngine(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 5, 4)
	urgentPrompt, relaxedPrompt, effortPrompt := []int32{3, 9, 4, 3}, []int32{5, 6, 7, 8}, []int32{11, 12, 13}
	const n = 12
	alone := tinyBackend(t, path, "", "")
	want := [][]int32{
		generate(t, alone, urgentPrompt, sample.Params{}, draftNone, n),
		generate(t, alone, relaxedPrompt, sample.Params{}, draftNone, n),
		generate(t, alone, effortPrompt, sample.Params{}, draftNone, n),
	}

	for _, policy := range []string{"adaserve", "global_greedy", "sarathi"} {
		t.Run(policy, func(t *testing.T) {
			be := tinyBackend(t, path, "", fmt.Sprintf(`,"max_slots":3,"spec_policy":%q`, policy))
			be.setCurve(&costCurve{ns: []int{1, 2, 4, 8}, ts: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}})
			slots := []*loop.Slot{
				// 1 ms a token: always short of slack.
				{Request: &loop.Request{}, Prompt: urgentPrompt, Data: &item{drafter: draftNone, slo: time.Millisecond}},
				// An hour a token: ahead of it whenever it has a token out.
				{Request: &loop.Request{}, Prompt: relaxedPrompt, Data: &item{drafter: draftNone, slo: time.Hour}},
				// No SLO.
				{Request: &loop.Request{}, Prompt: effortPrompt, Data: &item{drafter: draftNone}},
			}
			for _, s := range slots {
				require.NoError(t, be.Open(s))
				defer be.Release(s)
			}
			got := make([][]int32, len(slots))
			res := make([]loop.StepResult, len(slots))
			step := func() (counts []int) {
				clear(res)
				be.Step(slots, res)
				for i := range slots {
					require.NoError(t, res[i].Err)
					got[i] = append(got[i], res[i].Tokens...)
					counts = append(counts, len(res[i].Tokens))
				}
				return counts
			}
			require.Equal(t, []int{1, 1, 1}, step(), "every prompt fits one chunk: three first tokens")
			sitting := policy == "adaserve"
			relaxed := slots[1].State.(*sequence)
			for range 3 {
				if sitting {
					require.Equal(t, []int{1, 0, 1}, step(), "the relaxed stream sits out; the best-effort one never does")
				} else {
					require.Equal(t, []int{1, 1, 1}, step(), "%s: nobody sits out", policy)
				}
			}
			require.Equal(t, sitting, be.WatchesQueue(), "only sitting out weighs the queue")
			if sitting {
				// A request waiting for a slot whose first token is due
				// before any slot frees, even with nobody sitting out:
				// nobody does. One due in an hour does not stop it.
				now := time.Now()
				be.WatchQueue([]loop.Queued{{Deadline: now.Add(time.Hour).UnixNano(), Prompt: 4}})
				require.Equal(t, []int{1, 0, 1}, step(), "a queue in no hurry")
				be.WatchQueue([]loop.Queued{{Deadline: now.Add(100 * time.Millisecond).UnixNano(), Prompt: 4}})
				require.Equal(t, []int{1, 1, 1}, step(), "a first token at risk")
				be.WatchQueue(nil)
				require.Equal(t, []int{1, 0, 1}, step(), "the queue drained")
			}
			if sitting {
				// 30 ms of slack left: under two 30 ms iterations, so it
				// runs, and its next token puts it an hour ahead again.
				relaxed.seq.Start = time.Now().Add(-time.Duration(relaxed.seq.AfterFirst()+1)*time.Hour + 30*time.Millisecond)
				require.Equal(t, []int{1, 1, 1}, step())
				require.Equal(t, []int{1, 0, 1}, step())
				relaxed.seq.Start = time.Now().Add(-time.Duration(relaxed.seq.AfterFirst()+1) * time.Hour)
			}
			for len(got[0]) < n || len(got[1]) < n || len(got[2]) < n {
				step()
				// Keep the relaxed stream short of slack from here on, so
				// that it runs to the end.
				relaxed.seq.Start = time.Now().Add(-time.Duration(relaxed.seq.AfterFirst()+1) * time.Hour)
			}
			for i := range slots {
				require.Equal(t, want[i], got[i][:n], "stream %d emits what it emits alone", i)
			}
		})
	}
}

// TestPromptFloorEngine: under "adaserve", beside a decoding stream that
// has room for a one-token prompt chunk only, a prompt whose TTFT SLO is
// an hour away prefills a token an iteration (spec.PromptFloor); one
// without a TTFT SLO keeps the sixteenth of its prefill_chunk (3 of 48);
// under "global_greedy" the whole chunk rides.
func TestPromptFloorEngine(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 5, 4)
	long := make([]int32, 40)
	for i := range long {
		long[i] = int32(3 + i%50)
	}
	for _, c := range []struct {
		policy string
		ttft   bool
		want   int
	}{{"adaserve", true, 1}, {"adaserve", false, 3}, {"global_greedy", true, 40}} {
		t.Run(fmt.Sprintf("%s ttft=%v", c.policy, c.ttft), func(t *testing.T) {
			be := tinyBackend(t, path, "", fmt.Sprintf(`,"max_slots":2,"prefill_chunk":48,"spec_policy":%q,"prefix_cache":false`, c.policy))
			be.setCurve(&costCurve{ns: []int{1, 2, 4, 8}, ts: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}})
			decoding := &loop.Slot{Request: &loop.Request{}, Prompt: []int32{3, 9, 4, 3}, Data: &item{drafter: draftNone, slo: 100 * time.Millisecond}}
			require.NoError(t, be.Open(decoding))
			defer be.Release(decoding)
			res := make([]loop.StepResult, 2)
			be.Step([]*loop.Slot{decoding}, res[:1])
			require.Len(t, res[0].Tokens, 1)

			req := &loop.Request{}
			if c.ttft {
				// A slot built outside a runtime counts as submitted at
				// the epoch: an SLO from then to an hour from now.
				req.TTFTSLOMs = float64(time.Now().Add(time.Hour).UnixNano()) / 1e6
			}
			prompt := &loop.Slot{Request: req, Prompt: long, Data: &item{drafter: draftNone}}
			require.NoError(t, be.Open(prompt))
			defer be.Release(prompt)
			q, p := decoding.State.(*sequence), prompt.State.(*sequence)
			for range 3 {
				// 25 ms left before the decoding stream falls behind: a
				// pass of 10 ms a token fits it and one prompt token.
				q.seq.Start = time.Now().Add(-time.Duration(q.seq.AfterFirst()+1)*q.seq.SLO + 25*time.Millisecond)
				before := p.prefill
				clear(res)
				be.Step([]*loop.Slot{decoding, prompt}, res)
				require.NoError(t, res[0].Err)
				require.NoError(t, res[1].Err)
				require.Equal(t, c.want, p.prefill-before)
				if p.prefill == len(long) {
					break
				}
			}
		})
	}
}

// TestAllotPrefill: an iteration's prompt tokens go to the prompt whose
// first token is due soonest, up to prefill_chunk each; without a TTFT
// SLO a prompt's due time is serving.BestEffortTTFT after submission.
func TestAllotPrefill(t *testing.T) {
	path := tinyFile(t, t.TempDir(), 64, 5, 4)
	be := tinyBackend(t, path, "", `,"max_slots":3,"prefill_chunk":8,"spec_policy":"adaserve"`)
	// Prompts with nothing in common (see below for shared ones).
	first := int32(3)
	slot := func(ttftMs float64) *loop.Slot {
		prompt := make([]int32, 20)
		for i := range prompt {
			prompt[i] = first + int32(i)
		}
		first += 20
		s := &loop.Slot{Request: &loop.Request{TTFTSLOMs: ttftMs}, Prompt: prompt, Data: &item{drafter: draftNone}}
		require.NoError(t, be.Open(s))
		t.Cleanup(func() { be.Release(s) })
		return s
	}
	// Submitted at the epoch (built outside a runtime): due after 20 s,
	// 10 s (best effort) and 5 s.
	relaxed, effort, urgent := slot(20000), slot(0), slot(5000)
	slots := []*loop.Slot{relaxed, effort, urgent}
	chunks := func() []int {
		var c []int
		for _, s := range slots {
			c = append(c, s.State.(*sequence).chunk)
		}
		return c
	}
	be.allotPrefill(slots, 5)
	require.Equal(t, []int{0, 0, 5}, chunks())
	be.allotPrefill(slots, 13)
	require.Equal(t, []int{0, 5, 8}, chunks())
	be.allotPrefill(slots, 100)
	require.Equal(t, []int{8, 8, 8}, chunks())

	// The same prompt three times: the most urgent prefills it, the others
	// wait to take its entries (prefixComing) rather than compute them too.
	for _, s := range slots {
		be.Release(s)
	}
	first = 3
	relaxed, effort, urgent = slot(20000), slot(0), slot(5000)
	effort.Prompt, urgent.Prompt = relaxed.Prompt, relaxed.Prompt
	slots = []*loop.Slot{relaxed, effort, urgent}
	be.allotPrefill(slots, 100)
	require.Equal(t, []int{0, 0, 8}, chunks())
}
