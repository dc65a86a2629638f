package loop_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	_ "github.com/lmstream/lmstream/core/replay"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/streaming"
)

// byteVocab is 256 single-byte pieces plus an end token (256).
func byteRuntime(t *testing.T, maxSlots int, extra string) *loop.Runtime {
	t.Helper()
	pieces := make([]string, 257)
	for i := 0; i < 256; i++ {
		pieces[i] = hex.EncodeToString([]byte{byte(i)})
	}
	vocab, _ := json.Marshal(pieces)
	cfg := fmt.Sprintf(`{"backend":"replay","vocab":%s,"eos_id":256,"special_ids":[256],"max_slots":%d%s}`, vocab, maxSlots, extra)
	rt, err := loop.New([]byte(cfg))
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	return rt
}

// scriptFor spells text one byte per burst.
func scriptFor(text string) string {
	b, _ := json.Marshal(bytesOf(text))
	return string(b)
}

func bytesOf(text string) [][]int32 {
	out := make([][]int32, len(text))
	for i := 0; i < len(text); i++ {
		out[i] = []int32{int32(text[i])}
	}
	return out
}

// drain pops every chunk until the terminal one and returns them.
func drain(t *testing.T, ch *streaming.Channel) []streaming.Chunk {
	t.Helper()
	var got []streaming.Chunk
	for {
		c, err := ch.WaitPop(10 * time.Second)
		require.NoError(t, err, "after %d chunks", len(got))
		got = append(got, c)
		if c.Finished {
			return got
		}
	}
}

func textOf(chunks []streaming.Chunk) string {
	s := ""
	for _, c := range chunks {
		s += c.Text
	}
	return s
}

func submit(t *testing.T, rt *loop.Runtime, req string) *streaming.Channel {
	t.Helper()
	ch := streaming.NewChannel()
	t.Cleanup(ch.Release)
	require.NoError(t, rt.Submit([]byte(req), []*streaming.Channel{ch}))
	return ch
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(time.Millisecond)
	}
}

func TestStreamAndCompleteAgree(t *testing.T) {
	rt := byteRuntime(t, 4, "")
	req := `{"prompt":"x","stop":["lo w"],"script":` + scriptFor("hello world") + `}`
	chunks := drain(t, submit(t, rt, req))
	res, err := rt.Complete([]byte(req))
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, "hel", textOf(chunks))
	require.Equal(t, textOf(chunks), res[0].Text)
	require.Equal(t, streaming.StopWords, res[0].Reason)
	var ids []int32
	for _, c := range chunks {
		ids = append(ids, c.TokenIDs...)
	}
	require.Equal(t, ids, res[0].TokenIDs)
	require.Equal(t, 7, res[0].Usage.GeneratedTokens, "h e l l o _ w: the stop completes at w")
}

func TestShutdownEndsEveryStream(t *testing.T) {
	rt := byteRuntime(t, 16, "")
	var chans []*streaming.Channel
	for i := 0; i < 100; i++ {
		chans = append(chans, submit(t, rt, `{"prompt":"x","delay_ms":20,"script":`+scriptFor("a long answer that will not finish")+`}`))
	}
	waitFor(t, "streams to start", func() bool { return rt.Stats().ActiveSlots == 16 })
	rt.Close()
	for i, ch := range chans {
		got := drain(t, ch)
		last := got[len(got)-1]
		require.Equal(t, streaming.Error, last.Reason, "channel %d", i)
		require.Equal(t, int32(status.Shutdown), last.ErrCode)
		_, err := ch.TryPop()
		require.ErrorIs(t, err, streaming.ErrDone)
	}
	st := rt.Stats()
	require.Zero(t, st.ActiveSlots)
	require.Zero(t, st.Queued)
	require.ErrorContains(t, rt.Submit([]byte(`{"prompt":"x","script":[]}`), []*streaming.Channel{streaming.NewChannel()}), "shut down")
	rt.Close() // twice is harmless
}

func TestPanicEndsOnlyItsOwnRequest(t *testing.T) {
	rt := byteRuntime(t, 8, "")
	good1 := submit(t, rt, `{"prompt":"x","delay_ms":5,"script":`+scriptFor("first")+`}`)
	bad := submit(t, rt, `{"prompt":"x","delay_ms":5,"panic_at":2,"script":`+scriptFor("boom!")+`}`)
	good2 := submit(t, rt, `{"prompt":"x","delay_ms":5,"script":`+scriptFor("second")+`}`)

	badChunks := drain(t, bad)
	last := badChunks[len(badChunks)-1]
	require.Equal(t, streaming.Error, last.Reason)
	require.Equal(t, int32(status.Internal), last.ErrCode)
	require.Contains(t, last.ErrMessage, "scripted panic")
	require.Equal(t, "bo", textOf(badChunks))

	// The others were in the same batch when the panic fired and lost nothing.
	for ch, want := range map[*streaming.Channel]string{good1: "first", good2: "second"} {
		got := drain(t, ch)
		require.Equal(t, want, textOf(got))
		require.Equal(t, streaming.EndId, got[len(got)-1].Reason)
	}
	// And the runtime keeps serving.
	require.Equal(t, "again", textOf(drain(t, submit(t, rt, `{"prompt":"x","script":`+scriptFor("again")+`}`))))
}

func TestPausePolicyStopsDecodingUntilDrained(t *testing.T) {
	rt := byteRuntime(t, 2, "")
	ch := streaming.NewChannel()
	defer ch.Release()
	require.NoError(t, ch.SetQueue(3, streaming.Pause))
	text := "abcdefghijklmnopqrstuvwxyz"
	require.NoError(t, rt.Submit([]byte(`{"prompt":"x","script":`+scriptFor(text)+`}`), []*streaming.Channel{ch}))

	waitFor(t, "the queue to fill", func() bool { return ch.Pending() == 3 })
	time.Sleep(50 * time.Millisecond)
	require.Equal(t, 3, ch.Pending(), "a paused request must not produce more")
	require.EqualValues(t, 3, rt.Stats().TokensGenerated, "the engine must stop decoding, not coalesce")
	require.EqualValues(t, 1, rt.Stats().ActiveSlots, "a paused request keeps its slot")

	got := drain(t, ch)
	require.Equal(t, text, textOf(got))
	require.Equal(t, len(text)+1, len(got), "pause never merges chunks")
}

func TestCoalescePolicyBoundsTheQueue(t *testing.T) {
	rt := byteRuntime(t, 2, "")
	ch := streaming.NewChannel()
	defer ch.Release()
	require.NoError(t, ch.SetQueue(4, streaming.Coalesce))
	text := "coalescing keeps every byte of this text, just in fewer chunks"
	require.NoError(t, rt.Submit([]byte(`{"prompt":"x","script":`+scriptFor(text)+`}`), []*streaming.Channel{ch}))
	waitFor(t, "the stream to finish", func() bool { f, _ := ch.Finished(); return f })
	require.LessOrEqual(t, ch.Pending(), 4)
	got := drain(t, ch)
	require.Equal(t, text, textOf(got))
}

func TestReleasedConsumerFreesTheSlot(t *testing.T) {
	rt := byteRuntime(t, 1, "")
	ch := streaming.NewChannel()
	require.NoError(t, rt.Submit([]byte(`{"prompt":"x","delay_ms":5,"script":`+scriptFor("a consumer that goes away")+`}`), []*streaming.Channel{ch}))
	_, err := ch.WaitPop(5 * time.Second)
	require.NoError(t, err)
	ch.Release()
	waitFor(t, "the slot to be freed", func() bool { return rt.Stats().ActiveSlots == 0 })
	// The only slot serves the next request.
	require.Equal(t, "next", textOf(drain(t, submit(t, rt, `{"prompt":"x","script":`+scriptFor("next")+`}`))))
}

func TestCancelRacingNaturalFinish(t *testing.T) {
	rt := byteRuntime(t, 32, "")
	rng := rand.New(rand.NewSource(1))
	const n = 2000
	var wg sync.WaitGroup
	reasons := make(map[streaming.FinishReason]int)
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		ch := submit(t, rt, `{"prompt":"x","script":`+scriptFor("abc")+`}`)
		spin := rng.Intn(2000)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < spin; j++ {
				_ = j * j
			}
			ch.Cancel()
			ch.Cancel() // idempotent
		}()
		go func() {
			defer wg.Done()
			got := drain(t, ch)
			last := got[len(got)-1]
			mu.Lock()
			reasons[last.Reason]++
			mu.Unlock()
			if last.Reason == streaming.EndId {
				require.Equal(t, "abc", textOf(got))
			} else {
				require.Equal(t, streaming.Cancelled, last.Reason)
			}
			_, err := ch.TryPop()
			require.ErrorIs(t, err, streaming.ErrDone)
		}()
	}
	wg.Wait()
	t.Logf("reasons: %v", reasons)
	require.Equal(t, n, reasons[streaming.EndId]+reasons[streaming.Cancelled])
	waitFor(t, "all slots free", func() bool { return rt.Stats().ActiveSlots == 0 })
}

func TestBatchRequestOneChannelPerPrompt(t *testing.T) {
	rt := byteRuntime(t, 4, "")
	a, b := streaming.NewChannel(), streaming.NewChannel()
	defer a.Release()
	defer b.Release()
	scripts, _ := json.Marshal([][][]int32{bytesOf("one"), bytesOf("two")})
	req := `{"prompts":["p","q"],"scripts":` + string(scripts) + `}`
	err := rt.Submit([]byte(req), []*streaming.Channel{a})
	require.Equal(t, status.InvalidArgument, status.CodeOf(err), "one channel for two prompts")
	require.NoError(t, rt.Submit([]byte(req), []*streaming.Channel{a, b}), "the failed submission must not keep a attached")
	ga, gb := drain(t, a), drain(t, b)
	require.Equal(t, "one", textOf(ga))
	require.Equal(t, "two", textOf(gb))
	require.EqualValues(t, 1, gb[0].BatchIndex)
	err = rt.Submit([]byte(req), []*streaming.Channel{a, b})
	require.Equal(t, status.State, status.CodeOf(err), "a channel is attached once")
}

func TestQueueCapacity(t *testing.T) {
	rt := byteRuntime(t, 1, `,"max_queue":2`)
	submit(t, rt, `{"prompt":"x","delay_ms":50,"script":`+scriptFor("busy")+`}`)
	waitFor(t, "the slot to be taken", func() bool { return rt.Stats().ActiveSlots == 1 })
	submit(t, rt, `{"prompt":"x","script":[]}`)
	submit(t, rt, `{"prompt":"x","script":[]}`)
	err := rt.Submit([]byte(`{"prompt":"x","script":[]}`), []*streaming.Channel{streaming.NewChannel()})
	require.Equal(t, status.Capacity, status.CodeOf(err), "%v", err)
}

func TestCancelledWhileQueued(t *testing.T) {
	rt := byteRuntime(t, 1, "")
	busy := submit(t, rt, `{"prompt":"x","delay_ms":30,"script":`+scriptFor("slow")+`}`)
	waiting := submit(t, rt, `{"prompt":"x","script":`+scriptFor("never")+`}`)
	waiting.Cancel()
	got := drain(t, waiting)
	require.Len(t, got, 1)
	require.Equal(t, streaming.Cancelled, got[0].Reason)
	require.Empty(t, got[0].TokenIDs)
	busy.Cancel()
	drain(t, busy)
}

func TestConfigErrors(t *testing.T) {
	for cfg, want := range map[string]status.Code{
		`{"backend":"nope"}`: status.InvalidRequest,
		`{"backend":"replay","vocab":["00"],"eos_id":0,"x":1}`: status.InvalidRequest,
		`{"backend":"replay","vocab":["zz"],"eos_id":0}`:       status.InvalidRequest,
		`{"backend":"replay","vocab":["00"],"eos_id":5}`:       status.InvalidRequest,
		`{"backend":"replay","vocab":[]}`:                      status.InvalidRequest,
		`{"max_slots":"8"}`:                                    status.InvalidRequest,
		`{"max_slots":0}`:                                      status.InvalidRequest,
		`[1,2]`:                                                status.BadJSON,
		`{"backend":`:                                          status.BadJSON,
		``:                                                     status.BadJSON,
		`{} {}`:                                                status.BadJSON,
	} {
		_, err := loop.New([]byte(cfg))
		require.Error(t, err, cfg)
		require.Equal(t, want, status.CodeOf(err), "%s: %v", cfg, err)
	}
}

func TestRequestErrorsNameTheField(t *testing.T) {
	rt := byteRuntime(t, 1, "")
	for req, want := range map[string]string{
		`{"prompt":"x","script":[],"max_tokens":"3"}`:     `"max_tokens" must be an integer`,
		`{"prompt":"x","script":[],"top_p":0}`:            `"top_p" must be in (0, 1]`,
		`{"prompt":"x","script":[],"stop":[1]}`:           `"stop[0]" must be a string, got number 1`,
		`{"prompt":"x","script":[],"temprature":1}`:       `unknown field "temprature"`,
		`{"prompt":"x","prompts":["y"],"script":[]}`:      `only one of`,
		`{"prompt":"x","script":[[1]],"scripts":[[[1]]]}`: `not both`,
		`{"prompt":"x","script":"abc"}`:                   `"script" must be an array of arrays of integers`,
		`{"messages":[{"content":"hi"}],"script":[]}`:     `has no "role"`,
	} {
		err := rt.Submit([]byte(req), []*streaming.Channel{streaming.NewChannel()})
		require.Error(t, err, req)
		require.Contains(t, err.Error(), want, req)
	}
}

// A free slot goes to the waiting request with the earliest first-token
// deadline: an urgent request (tight ttft_slo_ms) queued after a relaxed
// one and one without an SLO gets its first token before them, and the
// relaxed one before the best-effort one.
func TestAdmissionByTTFTDeadline(t *testing.T) {
	rt := byteRuntime(t, 1, "")
	busy := submit(t, rt, `{"prompt":"x","delay_ms":20,"script":`+scriptFor("busy")+`}`)
	waitFor(t, "the slot to be taken", func() bool { return rt.Stats().ActiveSlots == 1 })
	none := submit(t, rt, `{"prompt":"x","script":`+scriptFor("n")+`}`)
	relaxed := submit(t, rt, `{"prompt":"x","ttft_slo_ms":5000,"script":`+scriptFor("r")+`}`)
	urgent := submit(t, rt, `{"prompt":"x","ttft_slo_ms":50,"script":`+scriptFor("u")+`}`)
	drain(t, busy)
	ttft := func(ch *streaming.Channel) float64 {
		got := drain(t, ch)
		return got[len(got)-1].Usage.TTFTMs
	}
	u, r, n := ttft(urgent), ttft(relaxed), ttft(none)
	// Submitted last, first admitted: its wait is the shortest although
	// it queued the least time before the slot freed.
	require.Less(t, u, r, "urgent after relaxed")
	require.Less(t, r, n, "relaxed after best effort")
}

func TestTTFTDeadlineOrder(t *testing.T) {
	ms := int64(time.Millisecond)
	type item struct {
		at  int64
		slo float64
	}
	dl := func(x item) int64 { return serving.TTFTDeadline(x.at, x.slo) }
	q := []item{{0, 0}, {1 * ms, 500}, {2 * ms, 100}, {3 * ms, 100}}
	require.Equal(t, 2, serving.NextToAdmit(q, dl), "tightest deadline first, the earlier of equal SLOs")
	q = []item{{0, 0}, {int64(serving.BestEffortTTFT), 1}}
	require.Equal(t, 0, serving.NextToAdmit(q, dl), "a best-effort request that waited serving.BestEffortTTFT goes first")
	q = []item{{5, 0}, {5, 0}}
	require.Equal(t, 0, serving.NextToAdmit(q, dl), "ties keep arrival order")
	// First come, first served: the tightest SLO waits its turn.
	fcfs := func(x item) int64 { return serving.AdmissionDeadline(x.at, x.slo, true) }
	q = []item{{1 * ms, 0}, {2 * ms, 1}, {3 * ms, 100}}
	require.Equal(t, 0, serving.NextToAdmit(q, fcfs), "the earliest submitted first, whatever the SLOs")
	require.Equal(t, 1, serving.NextToAdmit(q, func(x item) int64 { return serving.AdmissionDeadline(x.at, x.slo, false) }))
}

// TestStatsNeverLoseALiveRequest: from the moment Submit returns, a
// request is queued or active in Stats, including while the engine admits
// it (a load-balancing pool read 1 after two submissions).
func TestStatsNeverLoseALiveRequest(t *testing.T) {
	rt := byteRuntime(t, 4, "")
	var chans []*streaming.Channel
	for i := 1; i <= 8; i++ {
		chans = append(chans, submit(t, rt, `{"prompt":"x","delay_ms":50,"script":`+scriptFor("a long answer that will not finish soon")+`}`))
		for range 2000 {
			st := rt.Stats()
			require.GreaterOrEqual(t, st.ActiveSlots+st.Queued, int64(i), "after %d submissions", i)
		}
	}
	for _, ch := range chans {
		ch.Release()
	}
}
