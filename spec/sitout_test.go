package spec

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sitOutNow and sitOutSeq build sequences for SitOut's tests: o tokens
// past the first, since the first token, with a TPOT SLO.
var sitOutNow = time.Unix(100, 0)

func sitOutSeq(slo time.Duration, o int, since time.Duration) *Seq {
	return &Seq{Tokens: make([]int32, 5+1+o), Prompt: 5, SLO: slo, Start: sitOutNow.Add(-since)}
}

// marked lists the positions SitOut marked.
func marked(out []bool) []int {
	var m []int
	for i, b := range out {
		if b {
			m = append(m, i)
		}
	}
	return m
}

// TestSitOut on a curve of 1 ms a token, so with four decoding t = 4 ms
// and a sequence can afford to sit out with 8 ms of slack and an SLO of
// at least 8 ms.
func TestSitOut(t *testing.T) {
	ms := time.Millisecond
	at := func(n int) time.Duration { return time.Duration(n) * ms }

	// slack = SLO·(o+1) − since.
	relaxed := sitOutSeq(100*ms, 0, 0)        // 100 ms
	moderate := sitOutSeq(30*ms, 1, 10*ms)    // 50 ms
	banked := sitOutSeq(5*ms, 9, 20*ms)       // 30 ms of slack, but an SLO under two iterations
	short := func(slack time.Duration) *Seq { // an urgent one with that much slack
		return sitOutSeq(5*ms, 3, 20*ms-slack)
	}

	// Nobody short of slack: everybody runs.
	out, k := SitOut(ChainCost(at), []*Seq{relaxed, moderate, banked, sitOutSeq(5*ms, 3, 10*ms)}, 0, sitOutNow, 0, nil, nil)
	require.Zero(t, k)
	require.Equal(t, []bool{false, false, false, false}, out)

	// 7.5 ms of slack wants an iteration of 3.5 ms: one root fewer does
	// it, and the one with the most slack sits out.
	out, k = SitOut(ChainCost(at), []*Seq{short(7500 * time.Microsecond), moderate, banked, relaxed}, 0, sitOutNow, 0, nil, out)
	require.Equal(t, 1, k)
	require.Equal(t, []int{3}, marked(out))

	// 5.5 ms wants 1.5 ms: both that can sit out do, and the one whose
	// SLO is under two iterations runs although its slack would cover it.
	out, k = SitOut(ChainCost(at), []*Seq{short(5500 * time.Microsecond), moderate, banked, relaxed}, 0, sitOutNow, 0, nil, out)
	require.Equal(t, 2, k)
	require.Equal(t, []int{1, 3}, marked(out))

	// One already behind gains from every root that leaves.
	out, _ = SitOut(ChainCost(at), []*Seq{short(-3 * ms), moderate, relaxed, sitOutSeq(0, 5, 0)}, 0, sitOutNow, 0, nil, out)
	require.Equal(t, []int{1, 2}, marked(out), "the best-effort one never sits out")

	// What iterations have been taking prices the iteration when it is
	// more than the curve's: at 26 ms a sequence needs 52 ms of slack to
	// sit out, so the moderate one (50 ms) runs, and everyone is short
	// of two iterations but the relaxed one.
	out, _ = SitOut(ChainCost(at), []*Seq{short(7500 * time.Microsecond), moderate, relaxed}, 0, sitOutNow, 26*ms, nil, out)
	require.Equal(t, []int{2}, marked(out))

	// So does the least prompt chunk the iteration carries: with 22
	// tokens of it, t = 25 ms.
	out, _ = SitOut(ChainCost(at), []*Seq{short(7500 * time.Microsecond), moderate, relaxed}, 22, sitOutNow, 0, nil, out)
	require.Equal(t, []int{2}, marked(out))

	// One first token not out yet, or one sequence alone: nothing to do.
	fresh := &Seq{Tokens: make([]int32, 6), Prompt: 5, SLO: 100 * ms}
	out, k = SitOut(ChainCost(at), []*Seq{short(0), fresh}, 0, sitOutNow, 0, nil, out)
	require.Zero(t, k)
	require.Len(t, out, 2)
	_, k = SitOut(ChainCost(at), []*Seq{relaxed}, 0, sitOutNow, 0, nil, out)
	require.Zero(t, k)
}

// TestQueueAtRisk: the j-th waiting request by deadline takes the j-th
// slot to free, then prefills its prompt; at 1 ms an iteration.
func TestQueueAtRisk(t *testing.T) {
	ms := time.Millisecond
	in := func(d time.Duration) time.Time { return sitOutNow.Add(d) }
	q := Queue{Chunk: 16}
	require.False(t, q.AtRisk(ms, sitOutNow), "nothing waiting")

	// Slots free after 10 and 50 iterations. The earliest deadline (30
	// ms, 20 tokens: two chunks) takes the first: due at 12 ms.
	q.Holds = []int{50, 10}
	q.Waiting = []Waiting{{in(100 * ms), 8}, {in(30 * ms), 20}}
	require.False(t, q.AtRisk(ms, sitOutNow))
	// The second, due at 50 + 1 = 51 ms, has until 50 ms.
	q.Waiting = []Waiting{{in(50 * ms), 8}, {in(30 * ms), 20}}
	require.True(t, q.AtRisk(ms, sitOutNow))
	// At 2 ms an iteration the first is due at 24 ms: still fine alone.
	q.Waiting = []Waiting{{in(30 * ms), 20}}
	require.False(t, q.AtRisk(2*ms, sitOutNow))
	require.True(t, q.AtRisk(3*ms, sitOutNow))

	// One already past its deadline is not at risk, nothing saves it,
	// but it still takes the first slot: the next waits for the second.
	q.Waiting = []Waiting{{in(-ms), 1}, {in(40 * ms), 1}}
	require.True(t, q.AtRisk(ms, sitOutNow), "the second slot frees at 50 ms")
	q.Holds = []int{10, 20}
	require.False(t, q.AtRisk(ms, sitOutNow), "the second slot frees at 20 ms")

	// More waiting than slots: those beyond need a slot freed twice,
	// which AtRisk does not foresee.
	q.Holds = []int{10}
	q.Waiting = []Waiting{{in(100 * ms), 1}, {in(200 * ms), 1}, {in(5 * ms), 1}}
	require.True(t, q.AtRisk(ms, sitOutNow), "the 5 ms one goes first and misses")
	q.Waiting = []Waiting{{in(100 * ms), 1}, {in(2 * ms), 1}, {in(-ms), 1}}
	require.False(t, q.AtRisk(ms, sitOutNow), "the one past its deadline takes the only slot")

	// SitOut lets nobody sit out while the queue is at risk; the same
	// batch with a queue that is not sits the relaxed one out.
	at := func(n int) time.Duration { return time.Duration(n) * ms }
	dec := []*Seq{sitOutSeq(5*ms, 3, 17*ms), sitOutSeq(100*ms, 0, 0)} // 3 ms of slack, and 100
	q = Queue{Chunk: 16, Holds: []int{100, 100}, Waiting: []Waiting{{in(time.Second), 16}}}
	_, k := SitOut(ChainCost(at), dec, 0, sitOutNow, 0, &q, nil)
	require.Equal(t, 1, k)
	q.Waiting[0].Deadline = in(90 * ms)
	_, k = SitOut(ChainCost(at), dec, 0, sitOutNow, 0, &q, nil)
	require.Zero(t, k, "the queue's first token comes before any sitting out")
	_, k = SitOut(ChainCost(at), dec, 0, sitOutNow, 0, &Queue{}, nil)
	require.Equal(t, 1, k, "an empty queue is no risk")
}

// TestPrefillChunkBeside: a sequence that sits out must still make its
// pace after the next iteration, so the chunk leaves it that much.
func TestPrefillChunkBeside(t *testing.T) {
	ms := time.Millisecond
	at := func(n int) time.Duration { return 10*ms + time.Duration(n)*ms }
	running := sitOutSeq(1*ms, 3, time.Second) // too far behind to bound the chunk
	idle := sitOutSeq(100*ms, 0, 0)            // 100 ms of slack
	require.Equal(t, 128, PrefillChunkBeside(ChainCost(at), []*Seq{running}, nil, 0, sitOutNow, 128, 8))
	// The next iteration is priced at the larger of the pass over both
	// with the least chunk (10 + 2 + 8 = 20 ms) and typical.
	// 100 − 20 = 80 ms for this one: 10 + 1 + c ≤ 80, c = 69.
	require.Equal(t, 69, PrefillChunkBeside(ChainCost(at), []*Seq{running}, []*Seq{idle}, 0, sitOutNow, 128, 8))
	// 100 − 30 = 70 ms: c = 59.
	require.Equal(t, 59, PrefillChunkBeside(ChainCost(at), []*Seq{running}, []*Seq{idle}, 30*ms, sitOutNow, 128, 8))
	// As a running sequence it would have had all 100 ms.
	require.Equal(t, 88, PrefillChunk(ChainCost(at), []*Seq{running, idle}, sitOutNow, 128))
}

// TestSitOutInvariants checks SitOut's contract on random batches and
// curves: only requests that can afford it sit out, only when another
// is short of slack, the most slack first, and no more of them than
// needed.
func TestSitOutInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	ms := time.Millisecond
	sat := 0
	for trial := range 3000 {
		// A convex curve: base plus a per-token slope that grows.
		base, slope := time.Duration(1+r.IntN(20))*ms, time.Duration(r.IntN(4000))*time.Microsecond
		at := func(n int) time.Duration { return base + time.Duration(n)*slope + time.Duration(n*n)*slope/64 }
		n := 1 + r.IntN(24)
		dec := make([]*Seq, n)
		for i := range dec {
			switch r.IntN(6) {
			case 0: // best effort
				dec[i] = sitOutSeq(0, r.IntN(50), time.Duration(r.IntN(500))*ms)
			case 1: // no first token yet
				dec[i] = &Seq{Tokens: make([]int32, 6), Prompt: 5, SLO: time.Duration(1+r.IntN(200)) * ms}
			default:
				o := r.IntN(60)
				slo := time.Duration(1+r.IntN(200)) * ms
				dec[i] = sitOutSeq(slo, o, time.Duration(r.Int64N(int64(slo)*int64(o+2)+1)))
			}
		}
		floor := r.IntN(3) * r.IntN(16)
		typical := time.Duration(r.IntN(3)) * at(n) / 2
		out, k := SitOut(ChainCost(at), dec, floor, sitOutNow, typical, nil, nil)
		require.Len(t, out, n)
		require.Equal(t, len(marked(out)), k, "trial %d", trial)
		sat += k

		tt := max(at(n+floor), typical)
		slackOf := func(s *Seq) (time.Duration, bool) {
			if s.SLO <= 0 || s.Start.IsZero() {
				return 0, false
			}
			return s.SLO*time.Duration(s.AfterFirst()+1) - sitOutNow.Sub(s.Start), true
		}
		var need time.Duration
		short := false
		for _, s := range dec {
			if v, ok := slackOf(s); ok && v < 2*tt && (!short || v-tt < need) {
				need, short = v-tt, true
			}
		}
		affords := func(s *Seq) bool {
			v, ok := slackOf(s)
			return ok && v >= 2*tt && s.SLO >= 2*tt
		}
		least := time.Duration(1 << 62) // the least slack that sat out
		for i, s := range dec {
			if out[i] {
				require.True(t, affords(s), "trial %d: %d sat out without the slack or SLO for it", trial, i)
				v, _ := slackOf(s)
				least = min(least, v)
			}
		}
		if k == 0 {
			continue
		}
		require.True(t, short, "trial %d: sat out with nobody short", trial)
		for i, s := range dec {
			if v, _ := slackOf(s); !out[i] && affords(s) {
				require.LessOrEqual(t, v, least, "trial %d: %d with more slack ran", trial, i)
			}
		}
		// No more than needed: one fewer would not have been enough.
		require.Greater(t, tt-at(n+floor)+at(n-(k-1)+floor), need, "trial %d: more sat out than needed", trial)
	}
	require.Positive(t, sat, "the trials exercised sitting out")
}
