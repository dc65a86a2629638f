package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runPayoff feeds a Payoff n iterations: speculative ones emit specTokens in d,
// plain ones one token in plain, and returns how many speculated.
func runPayoff(p *Payoff, n int, d, plain time.Duration, specTokens int) int {
	spec, _ := runPriced(p, n, d, plain, specTokens, 0, 0) // no price: timing alone
	return spec
}

func TestPayoffKeepsWinningSpeculation(t *testing.T) {
	p := Payoff{PlainPrior: 60 * time.Millisecond}
	// 2 tokens in 90 ms = 45 ms a token against 60 plain: it speculates
	// from the moment plain decoding has been measured on.
	require.Equal(t, 500-plainFirst, runPayoff(&p, 500, 90*time.Millisecond, 60*time.Millisecond, 2))
}

func TestPayoffBacksOffLosingSpeculation(t *testing.T) {
	p := Payoff{PlainPrior: 60 * time.Millisecond}
	// 1.2 tokens a pass would be 75 ms a token; 1 token in 90 ms is 90.
	n := runPayoff(&p, 1000, 90*time.Millisecond, 60*time.Millisecond, 1)
	// probeLen iterations, then back-offs of 8, 16, ..., 128: each probe
	// after a plain stretch costs probeLen+1 speculative iterations.
	require.Less(t, n, 60, "speculated %d of 1000 losing iterations", n)
	require.Greater(t, n, 5, "a losing request still probes now and then")
	// The loss is bounded: the same 1000 tokens decoded plainly take 60 s.
	total := float64(n)*90 + float64(1000-n)*60
	require.Less(t, total/(1000*60), 1.03)
}

// TestPayoffJudgesADrafterThatProposesNowAndThen: a drafter that proposes
// only every other iteration (the others decode plainly, the request still
// speculating) is judged on its drafting iterations all the same. On the
// Qwen pair with two streams an n-gram index in new code alternated
// 20-node trees that yielded a token or two in 130 ms with empty ones, and
// ran at 0.76× plain because its request was never judged.
func TestPayoffJudgesADrafterThatProposesNowAndThen(t *testing.T) {
	p := Payoff{PlainPrior: 25 * time.Millisecond}
	spec := 0
	for i := range 1000 {
		switch {
		case !p.Decide():
			p.Observe(25*time.Millisecond, 1, false)
		case i%2 == 0:
			spec++
			p.Observe(130*time.Millisecond, 2, true)
		default:
			p.Observe(25*time.Millisecond, 1, false) // nothing proposed
		}
	}
	require.Less(t, spec, 50, "drafted %d times of 1000 iterations", spec)
}

// SpecTokens, which spec.Guard judges a drafting request by, outlives a
// back-off: the probe after it starts from what the request was emitting.
func TestPayoffSpecTokens(t *testing.T) {
	p := Payoff{PlainPrior: 60 * time.Millisecond}
	require.Zero(t, p.SpecTokens())
	for i := 0; p.off == 0; i++ { // until speculation, 1 token in 90 ms against 60 plain, loses
		require.Less(t, i, 20)
		if p.Decide() {
			p.Observe(90*time.Millisecond, 1, true)
		} else {
			p.Observe(60*time.Millisecond, 1, false)
		}
	}
	require.Zero(t, p.spec.PerIteration(), "the back-off resets the pace")
	require.InDelta(t, 1, p.SpecTokens(), 1e-9)
	for !p.Decide() {
		p.Observe(60*time.Millisecond, 1, false)
	}
	p.Observe(90*time.Millisecond, 3, true)
	require.InDelta(t, 3, p.SpecTokens(), 1e-9)
}

func TestPayoffJudgesThePaceNotTheAverageIteration(t *testing.T) {
	// A draft model's iterations alternate: a copied stretch (9 tokens in
	// 215 ms) and a rejected draft (1 token in 100 ms). That is 31.5 ms a
	// token against 40 plain, so it pays, though the per-iteration ratios
	// (23.9 and 100 ms) average 62.
	p := Payoff{PlainPrior: 40 * time.Millisecond}
	spec := 0
	for i := range 400 {
		if !p.Decide() {
			p.Observe(40*time.Millisecond, 1, false)
			continue
		}
		spec++
		if i%2 == 0 {
			p.Observe(215*time.Millisecond, 9, true)
		} else {
			p.Observe(100*time.Millisecond, 1, true)
		}
	}
	require.Equal(t, 400-plainFirst, spec)
}

func TestPayoffNeedsAReference(t *testing.T) {
	// No prior and no plain iteration yet: nothing to judge against.
	var p Payoff
	require.Equal(t, 50, runPayoff(&p, 50, 90*time.Millisecond, 0, 1))
}

func TestPayoffRecoversWhenSpeculationStartsPaying(t *testing.T) {
	p := Payoff{PlainPrior: 60 * time.Millisecond}
	runPayoff(&p, 200, 90*time.Millisecond, 60*time.Millisecond, 1)
	require.Greater(t, p.backoff, BackoffMin)
	// Now drafts are accepted: after at most one back-off it speculates
	// for good.
	n := runPayoff(&p, 400, 90*time.Millisecond, 60*time.Millisecond, 3)
	require.Greater(t, n, 400-BackoffMax-2*probeLen)
	require.True(t, p.Speculating())
	require.Equal(t, BackoffMin, p.backoff)
}

// TestFloors prices each slot of a pass on the curve's slope over the four
// tokens before it: flat to 8 tokens, then 3 ms a token, with a token worth
// 20 ms, the slots up to 8 are free, the 9th pays 3 ms over 4 tokens and
// from the 12th on a node must be 15% likely; the roots' slots are 0 and
// nothing exceeds 1.
func TestFloors(t *testing.T) {
	at := func(n int) time.Duration {
		return 20*time.Millisecond + time.Duration(max(0, n-8))*3*time.Millisecond
	}
	f := Floors(at, 1, 20*time.Millisecond, 16, nil)
	require.Len(t, f, 17)
	for b := 0; b <= 8; b++ {
		require.Zero(t, f[b], "slot %d", b)
	}
	require.InDelta(t, 0.0375, f[9], 1e-12)
	for b := 12; b <= 16; b++ {
		require.InDelta(t, 0.15, f[b], 1e-12, "slot %d", b)
	}
	// Two sequences: the slots of their roots are 0 whatever the curve.
	f = Floors(func(n int) time.Duration { return time.Duration(n) * time.Second }, 2, time.Millisecond, 4, f)
	require.Equal(t, []float64{0, 0, 0, 1, 1}, f)
	require.Empty(t, Floors(at, 1, 0, 16, f), "no worth, no floors")
}

func TestStopProb(t *testing.T) {
	require.InDelta(t, 0.75, StopProb(30*time.Millisecond, 15*time.Millisecond, 60*time.Millisecond), 1e-12)
	require.Zero(t, StopProb(time.Millisecond, time.Millisecond, 0))
}

func TestPayoffJudgesAgainstTheFasterReference(t *testing.T) {
	// Plain iterations measured slow (100 ms) but the prior says 60: drafts
	// giving 75 ms a token lose to what plain decoding can do.
	p := Payoff{PlainPrior: 60 * time.Millisecond}
	n := runPayoff(&p, 1000, 150*time.Millisecond, 100*time.Millisecond, 2)
	require.Less(t, n, 60, "speculated %d of 1000 losing iterations", n)
}

func TestPayoffJudgesAgainstMeasuredPlainDecoding(t *testing.T) {
	// The prior says plain tokens take 100 ms, but they take 60: drafts
	// yielding 75 ms a token beat the prior and lose to the measurement.
	p := Payoff{PlainPrior: 100 * time.Millisecond}
	n := runPayoff(&p, 1000, 150*time.Millisecond, 60*time.Millisecond, 2)
	require.Less(t, n, 60, "speculated %d of 1000 losing iterations", n)
}

func TestPayoffAlways(t *testing.T) {
	p := Payoff{PlainPrior: 60 * time.Millisecond, Always: true}
	require.Equal(t, 300, runPayoff(&p, 300, 200*time.Millisecond, 60*time.Millisecond, 1))
}

// TestPrefillChunk: the prompt tokens an iteration may take beside the
// decoding sequences, on a linear curve of 10 ms plus 1 ms a token.
func TestPrefillChunk(t *testing.T) {
	at := func(n int) time.Duration { return 10*time.Millisecond + time.Duration(n)*time.Millisecond }
	now := time.Unix(100, 0)
	seq := func(slo time.Duration, generated int, since time.Duration) *Seq {
		s := &Seq{Tokens: make([]int32, 5+generated), Prompt: 5, SLO: slo, Start: now.Add(-since)}
		return s
	}
	// Nothing decoding, or nothing with an SLO: the whole chunk.
	require.Equal(t, 128, PrefillChunk(ChainCost(at), nil, now, 128))
	require.Equal(t, 128, PrefillChunk(ChainCost(at), []*Seq{seq(0, 3, time.Second)}, now, 128))
	// On pace with 40 ms of room: 11 tokens past its first after 400 ms at
	// a 40 ms SLO may take an iteration of 40·12 − 400 = 80 ms: with two
	// decoding, 10 + 2 + c ≤ 80, so c = 68.
	a, b := seq(40*time.Millisecond, 12, 400*time.Millisecond), seq(0, 2, 0)
	require.Equal(t, 68, PrefillChunk(ChainCost(at), []*Seq{a, b}, now, 128))
	// The tightest sequence that can still make it sets the chunk; one too
	// far behind to (its time under the bare decode step) is left out.
	tight := seq(40*time.Millisecond, 12, 440*time.Millisecond) // 40 ms: c = 40 − 13 = 27
	lost := seq(10*time.Millisecond, 12, time.Second)           // 120 − 1000 ms
	require.Equal(t, 27, PrefillChunk(ChainCost(at), []*Seq{a, tight, lost}, now, 128))
	// Never below a sixteenth of the whole: prompts keep moving.
	squeezed := seq(40*time.Millisecond, 12, 466*time.Millisecond) // 14 ms: only the decode fits
	require.Equal(t, 8, PrefillChunk(ChainCost(at), []*Seq{squeezed}, now, 128))
	// Below a floor lowered for the prompts' TTFT deadlines
	// (PromptFloor), what fits rides (14 − 11 ms: 3 tokens), or the floor
	// itself where nothing does.
	require.Equal(t, 3, PrefillChunkBeside(ChainCost(at), []*Seq{squeezed}, nil, 0, now, 128, 2))
	// A whole chunk under 16 still leaves one token where none fits.
	tightest := seq(40*time.Millisecond, 12, 469*time.Millisecond) // 11 ms: the bare decode step
	require.Equal(t, 1, PrefillChunk(ChainCost(at), []*Seq{tightest}, now, 4))
	require.Equal(t, 2, PrefillChunkBeside(ChainCost(at), []*Seq{tightest}, nil, 0, now, 128, 2))
	// A huge whole (4096 slots × the largest prefill_chunk) is bisected,
	// not scanned: on a curve of 10 ms plus 1 ns a token, 40 ms of room
	// with three decoding leaves 30,000,000 − 3 tokens.
	calls := 0
	cheap := func(n int) time.Duration { calls++; return 10*time.Millisecond + time.Duration(n) }
	require.Equal(t, 29_999_997, PrefillChunk(ChainCost(cheap), []*Seq{a, tight, lost}, now, 4096<<16))
	require.Less(t, calls, 64)
}

// TestPayoffIgnoresStandbyTrees: a tree verified during a back-off (a
// StandbyDrafter's) neither ends the back-off nor counts toward the next
// probe, however fast it was.
func TestPayoffIgnoresStandbyTrees(t *testing.T) {
	p := Payoff{PlainPrior: 60 * time.Millisecond}
	require.Zero(t, runPayoff(&p, plainFirst, 0, 60*time.Millisecond, 1))
	// Losing: 1 token in 90 ms. probeLen probes (the first is the
	// drafter's catch-up and is not judged), then a back-off.
	require.Equal(t, probeLen, runPayoff(&p, probeLen, 90*time.Millisecond, 60*time.Millisecond, 1))
	require.Equal(t, BackoffMin, p.off)
	for i := range BackoffMin {
		require.False(t, p.Decide(), "iteration %d of the back-off", i)
		require.True(t, p.BackingOff())
		p.Observe(10*time.Millisecond, 5, true) // a standby tree: 2 ms a token
	}
	require.Zero(t, p.probe)
	require.Zero(t, p.spec.Iterations(), "standby trees added nothing to the speculative pace")
	// The next probe is judged on its own: losing again, it backs off for
	// twice as long.
	require.Equal(t, probeLen, runPayoff(&p, probeLen, 90*time.Millisecond, 60*time.Millisecond, 1))
	require.Equal(t, 2*BackoffMin, p.off)
	require.True(t, p.Decide() == false && p.BackingOff())
}

// TestPromptFloor: the least prompt chunk is ChunkFloor, lowered to what
// the prompts need for their TTFT deadlines at 10 ms an iteration.
func TestPromptFloor(t *testing.T) {
	ms := time.Millisecond
	now := time.Unix(100, 0)
	in := func(d time.Duration) time.Time { return now.Add(d) }
	iter := 10 * ms
	require.Equal(t, 8, PromptFloor(128, nil, iter, now), "nothing to prefill: the sixteenth")
	// 100 tokens in 1 s: 100 iterations, a token each.
	require.Equal(t, 1, PromptFloor(128, []Prompt{{100, in(time.Second)}}, iter, now))
	// 100 tokens in 305 ms: 30 whole iterations, 4 tokens each.
	require.Equal(t, 4, PromptFloor(128, []Prompt{{100, in(305 * ms)}}, iter, now))
	// Two prompts add up, and never past the sixteenth.
	require.Equal(t, 5, PromptFloor(128, []Prompt{{100, in(time.Second)}, {100, in(305 * ms)}}, iter, now))
	require.Equal(t, 8, PromptFloor(128, []Prompt{{100, in(100 * ms)}}, iter, now))
	// A prompt due within this iteration, past due, or with no TTFT SLO
	// keeps the sixteenth.
	require.Equal(t, 8, PromptFloor(128, []Prompt{{100, in(time.Second)}, {3, in(5 * ms)}}, iter, now))
	require.Equal(t, 8, PromptFloor(128, []Prompt{{3, in(-ms)}}, iter, now))
	require.Equal(t, 8, PromptFloor(128, []Prompt{{3, time.Time{}}}, iter, now))
	// Without a pace to go by, the sixteenth; a small whole caps it.
	require.Equal(t, 8, PromptFloor(128, []Prompt{{100, in(time.Second)}}, 0, now))
	require.Equal(t, 1, PromptFloor(4, []Prompt{{100, in(100 * ms)}}, iter, now))
}

// runPriced feeds a Payoff n iterations: speculative ones emit specTokens
// in d, each drafted by steps steps priced at stop of a plain token (none
// priced with 0), plain ones one token in plain. It returns how many
// speculated, and the length of each run of them (a probe).
func runPriced(p *Payoff, n int, d, plain time.Duration, specTokens, steps int, stop float64) (spec int, probes []int) {
	run := 0
	for range n {
		if p.Decide() {
			spec++
			run++
			p.Priced(steps, stop)
			p.Observe(d, specTokens, true)
			continue
		}
		if run > 0 {
			probes = append(probes, run)
			run = 0
		}
		p.Observe(plain, 1, false)
	}
	return spec, probes
}

// A drafter whose accepted tokens do not pay for its priced steps backs
// off on its balance: after the first probe's two iterations, and after a
// single iteration in the later probes, the evidence of the earlier ones
// still counting (once back-offs reach BackoffMax, two). Timing alone spends probeLen iterations a probe (and
// the first probe's catch-up besides).
func TestPayoffBacksOffOnItsPricedBalance(t *testing.T) {
	// The early exit on chat prompts: a step 0.5 of a plain token, two
	// steps a tree, nothing accepted; 1 token in 6 ms against 3.5 plain.
	p := Payoff{PlainPrior: 3500 * time.Microsecond}
	n, probes := runPriced(&p, 1000, 6*time.Millisecond, 3500*time.Microsecond, 1, 2, 0.5)
	require.Equal(t, 2, probes[0], "the first probe")
	for i, k := range probes[1:] {
		// After back-offs of BackoffMax tokens, much of the evidence has
		// been forgotten: one or two iterations.
		if i < 5 {
			require.Equal(t, 1, k, "probe %d of %v", i+1, probes)
		}
		require.LessOrEqual(t, k, 2, "probe %d of %v", i+1, probes)
	}
	timed := Payoff{PlainPrior: 3500 * time.Microsecond}
	m := runPayoff(&timed, 1000, 6*time.Millisecond, 3500*time.Microsecond, 1)
	require.Less(t, 2*n, m, "priced %d, timed %d speculative iterations", n, m)

	// Accepting a token every other iteration does not pay for 2 steps at
	// 0.6 either, though the time of such an iteration (a fast step) says
	// nothing against it: the balance backs it off.
	p = Payoff{PlainPrior: 3500 * time.Microsecond}
	spec := 0
	for i := range 1000 {
		if !p.Decide() {
			p.Observe(3500*time.Microsecond, 1, false)
			continue
		}
		spec++
		p.Priced(2, 0.6)
		p.Observe(3*time.Millisecond, 1+i%2, true)
	}
	require.Less(t, spec, 40)
}

// A drafter whose accepted tokens pay for its steps is never backed off by
// its balance, even through iterations that accept nothing.
func TestPayoffKeepsAPayingPricedDrafter(t *testing.T) {
	p := Payoff{PlainPrior: 40 * time.Millisecond}
	spec := 0
	for i := range 500 {
		if !p.Decide() {
			p.Observe(40*time.Millisecond, 1, false)
			continue
		}
		spec++
		p.Priced(5, 0.35) // 1.75 plain tokens of steps
		tokens := []int{1, 4, 6, 3}[i%4]
		p.Observe(time.Duration(tokens)*25*time.Millisecond, tokens, true)
	}
	require.Equal(t, 500-plainFirst, spec)
	// Without a price, or with a step the stop rule never priced, the
	// balance has nothing to say.
	p = Payoff{PlainPrior: 40 * time.Millisecond}
	p.Priced(0, 0.5)
	p.Priced(3, 0)
	require.Zero(t, p.pending)
}
