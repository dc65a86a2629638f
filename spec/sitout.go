package spec

import (
	"slices"
	"time"
)

// SitOut picks the decoding sequences that sit an iteration out so that
// the others get their tokens sooner: AdaServe's SLO customization
// applied to the roots. It marks them in out (resized to len(dec)) and
// returns how many it marked. cost prices the passes; typical is what
// iterations have been taking (Timing.Estimate: prompt chunks and
// trees included), 0 when unknown.
//
// The paper's setting is a GPU whose pass costs about the same at 1 and at
// 32 tokens, where every request decodes every iteration and the SLO
// phase shares out the budget beyond the roots. Where each token of a
// pass costs time (a CPU: SmolLM2's T(8) is 1.8 T(1) on two cores), a
// request far ahead of a loose SLO (a chatbot's 8× the baseline) buys
// nothing with its root while the urgent requests beside it wait for it;
// where the budget binds (a GPU under load) its root takes budget the
// urgent requests' trees need.
//
// A sequence o tokens past its first and l since it has until
// slack = SLO·(o+1) − l for its next token to stay on pace (as
// PrefillChunk reasons). With t the price of this iteration (the larger
// of typical and the pass over dec's roots and floor more tokens, floor
// being the least prompt chunk it carries: ChunkFloor), a sequence can afford to sit out when its
// slack covers two iterations (this one and the next, which it runs) and
// so does its SLO: it needs a token every other iteration at most. A
// sequence whose slack is under two iterations cannot, and wants this
// one to leave it a whole iteration of slack. When some sequence cannot
// afford it, those that can sit out, the most slack first, until the pass
// of those left gives every one that cannot its slack less t, or none is
// left to sit out (a sequence already behind gains from every token that
// leaves the pass).
//
// Why the SLO must cover two iterations too: a tight request's slack is
// what speculation banked for it, its insurance against the next prompt
// chunk; spending it to speed up a request as tight helped neither (in
// the simulator on the H200's curve at half load, urgent attainment fell
// from 96% to 80% when those sat out too). And why a sequence that sits
// out stays safe: its slack shrinks each time it does, so it runs before
// it could fall behind, provided the next iteration fits it as well,
// which PrefillChunkBeside sees to. Best-effort sequences (no SLO) and those
// with no first token yet never sit out; without a sequence short of
// slack nothing sits out, so light load decodes as before.
//
// A sequence that sits out holds its slot longer, and a request waiting
// for a slot waits that much longer for its first token: in the
// simulator on the H200's curve at full load, sitting out regardless
// raised TPOT attainment from 84% to 97% but took the share of requests
// meeting their TTFT SLO too from 84% to 64%, every category's wait in
// the queue growing about fourteenfold. So with queue given (nil: none
// known) nothing sits out while a waiting request's first token is at
// risk (Queue.AtRisk): 92% then meet their TPOT SLO and 92% both.
func SitOut(cost PassCost, dec []*Seq, floor int, now time.Time, typical time.Duration, queue *Queue, out []bool) ([]bool, int) {
	out = slices.Grow(out[:0], len(dec))[:len(dec)]
	clear(out)
	n := len(dec)
	if n < 2 {
		return out, 0
	}
	beyond := cost.BeyondAll(dec)
	full := cost.Pass(n, beyond, 0, floor)
	t := max(full, typical)
	if queue != nil && queue.AtRisk(t, now) {
		return out, 0
	}
	slack := func(s *Seq) (time.Duration, bool) {
		if s.SLO <= 0 || s.Start.IsZero() {
			return 0, false
		}
		return s.Slack(now), true
	}
	var need time.Duration
	short := false
	type candidate struct {
		i     int
		slack time.Duration
	}
	count := 0
	for _, s := range dec {
		v, ok := slack(s)
		switch {
		case !ok:
		case v < 2*t:
			if !short || v-t < need {
				need, short = v-t, true
			}
		case s.SLO >= 2*t:
			count++
		}
	}
	if !short || count == 0 {
		return out, 0
	}
	cand := make([]candidate, 0, count)
	for i, s := range dec {
		if v, ok := slack(s); ok && v >= 2*t && s.SLO >= 2*t {
			cand = append(cand, candidate{i, v})
		}
	}
	// Most slack first; ties by position, so the choice is deterministic.
	slices.SortFunc(cand, func(a, b candidate) int {
		switch {
		case a.slack > b.slack:
			return -1
		case a.slack < b.slack:
			return 1
		}
		return a.i - b.i
	})
	k := 0
	for _, c := range cand {
		// The iteration with k roots fewer, their rows unread.
		if t-full+cost.Pass(n-k, beyond, 0, floor) <= need {
			break
		}
		out[c.i] = true
		beyond -= cost.Beyond(dec[c.i])
		k++
	}
	return out, k
}

// Queue is what SitOut knows of the requests waiting for a slot.
type Queue struct {
	// Waiting are the requests waiting for a slot, in any order (AtRisk
	// sorts them by deadline).
	Waiting []Waiting
	// Holds has one entry per held slot: how many iterations at most its
	// sequence keeps it if it runs every iteration from now on and emits
	// one token each (its prompt chunks left plus its tokens left to
	// max_tokens). Speculation and an early end only free it sooner.
	// AtRisk sorts it.
	Holds []int
	// Chunk is how many prompt tokens an iteration prefills of a request
	// once it has a slot.
	Chunk int
}

// Waiting is one request waiting for a slot: the deadline it is admitted
// by (its TTFT deadline) and its prompt's length.
type Waiting struct {
	Deadline time.Time
	Prompt   int
}

// AtRisk reports whether a waiting request could miss its first-token
// deadline even if no sequence sat out from now on, with iterations of t
// each. Admission goes by deadline, so the j-th waiting by deadline takes
// the j-th slot to free: it is due its first token after the iterations
// that slot is held for plus its own prompt's chunks. Requests already
// past their deadline keep their place in that order but are not counted
// at risk: nothing saves them, and guarding for them would only cost the
// decoding requests. Beyond the first len(Holds) waiting, a request needs
// a slot freed twice, which this does not foresee.
func (q *Queue) AtRisk(t time.Duration, now time.Time) bool {
	if len(q.Waiting) == 0 || len(q.Holds) == 0 {
		return false
	}
	slices.SortFunc(q.Waiting, func(a, b Waiting) int { return a.Deadline.Compare(b.Deadline) })
	slices.Sort(q.Holds)
	chunk := max(1, q.Chunk)
	for j, w := range q.Waiting {
		if j >= len(q.Holds) {
			break
		}
		if !w.Deadline.After(now) {
			continue
		}
		iters := q.Holds[j] + (w.Prompt+chunk-1)/chunk
		if now.Add(time.Duration(iters) * t).After(w.Deadline) {
			return true
		}
	}
	return false
}
