package spec

import (
	"math"
	"time"
)

// Payoff decides, from what speculation measurably did for one request,
// whether the request should go on speculating. Expected-value reasoning
// (path probabilities against a cost curve) decides how deep to draft; it
// cannot promise that speculation pays, because the drafter's
// probabilities may be overconfident and the machine's costs drift (other
// processes, a cache that grows). So the request's own outcomes decide:
// Payoff keeps the time per emitted token of its speculative iterations
// and of its plain ones, and when speculation has been slower it decodes
// plainly for a back-off period, then probes speculation again. A request
// whose drafts keep losing therefore spends about one iteration in
// BackoffMax speculating; one whose drafts win never stops.
//
// The zero value is ready: it speculates until it has evidence against.
type Payoff struct {
	// PlainPrior is the expected time per token of plain decoding before
	// any plain iteration of this request was measured (the runtime sets
	// it from its calibrated cost of a pass). 0: no prior, so speculation
	// is judged only once plain decoding has been measured.
	PlainPrior time.Duration
	// Always turns the gate off: the request speculates whenever it is
	// drafted for (the runtime config's "spec_adaptive": false).
	Always bool

	spec, plain Pace    // time per emitted token
	off         int     // plain iterations left in the current back-off
	backoff     int     // length of the next back-off
	probe       int     // speculative iterations since the last back-off
	decided     bool    // the last Decide's answer
	backing     bool    // the last Decide's plain answer was a back-off's
	caughtUp    bool    // a speculative iteration has run (the drafter saw the prompt)
	lastSpec    float64 // spec's tokens per iteration when the last back-off reset it

	// The priced balance (Priced): per priced iteration, the draft tokens
	// accepted less the draft steps' price, in plain tokens; decayed sums
	// of it and of the iterations, forgetting per emitted token.
	pending             float64 // the price of this iteration's drafting (0: not Priced)
	balance, pricedIter float64
}

// Back-off bounds, in iterations, and the margin speculation must beat.
const (
	BackoffMin = 8
	BackoffMax = 128
	// probeLen speculative iterations are measured before judging.
	probeLen = 3
	// plainFirst plain iterations start a request that has a prior, so
	// that speculation is judged against a measurement.
	plainFirst = 2
	// balanceDecay per emitted token: the priced balance forgets with a
	// horizon of about a hundred tokens, so the evidence of the last
	// probes still counts in the next (a back-off of 8–32 tokens keeps
	// 72–92% of it), while a request whose text changes (prose, then a
	// passage it copies) is judged on what it does now.
	balanceDecay = 0.99
	// balanceMin is the priced iterations (decayed) the balance needs
	// before it is judged: the first probe's first two iterations; one
	// more after a back-off.
	balanceMin = 1.5
)

// Pace is a time per emitted token over recent iterations: decayed sums
// of their durations and of their tokens, whose ratio is the pace. An
// average of per-iteration ratios would overweight the slow iterations: a
// speculating request alternating 9 tokens in 215 ms with a rejected draft
// (1 token in 100 ms) runs at 31.5 ms a token, but its ratios average 62.
// The zero value is ready, with DefaultPaceDecay.
type Pace struct {
	// Decay is the weight the past keeps per iteration, in (0, 1); 0
	// means DefaultPaceDecay.
	Decay              float64
	sec, tokens, iters float64
	n                  int
}

// DefaultPaceDecay per iteration: a horizon of about three iterations.
const DefaultPaceDecay = 0.7

// Add records one iteration: it took d and emitted tokens.
func (p *Pace) Add(d time.Duration, tokens int) {
	decay := p.Decay
	if decay <= 0 || decay >= 1 {
		decay = DefaultPaceDecay
	}
	p.sec = decay*p.sec + d.Seconds()
	p.tokens = decay*p.tokens + float64(tokens)
	p.iters = decay*p.iters + 1
	p.n++
}

// PerIteration is the tokens an iteration emitted, over the same decayed
// window (0 before any iteration).
func (p *Pace) PerIteration() float64 {
	if p.iters == 0 {
		return 0
	}
	return p.tokens / p.iters
}

// PerToken is the seconds per token (0 before any token).
func (p *Pace) PerToken() float64 {
	if p.tokens == 0 {
		return 0
	}
	return p.sec / p.tokens
}

// Iterations is how many iterations were added.
func (p *Pace) Iterations() int { return p.n }

// Decide says whether the request speculates this iteration.
func (p *Payoff) Decide() bool {
	if p.Always {
		p.decided = true
		return true
	}
	p.backing = false
	if p.PlainPrior > 0 && p.plain.n < plainFirst {
		// Measure plain decoding first, under today's load and context:
		// a prior measured at start-up can be off either way.
		p.decided = false
		return false
	}
	if p.off > 0 {
		p.off--
		p.decided = false
		p.backing = true
		return false
	}
	p.decided = true
	return true
}

// BackingOff reports whether the last Decide chose plain decoding because
// speculation had been losing (a back-off), not to measure plain decoding
// first. A StandbyDrafter may still draft for such a request.
func (p *Payoff) BackingOff() bool { return !p.decided && p.backing }

// Priced tells the gate what the drafting of the request's tree cost this
// iteration: steps draft steps, each priced at stop of a plain token (the
// drafter's StopProb: the step and the verified token it adds, over a
// plain token's time). A drafter whose steps cost real time calls it after
// drafting; Observe then also judges the request on its priced balance.
//
// Why: timing alone judges a probe after probeLen iterations, and each
// probe of a drafter that does not pay costs that many losing iterations.
// On SmolLM2-135M's chat prompts the early exit (a step 0.5 of a plain
// token, 5–8% of its probe iterations accepting anything) spent 12
// iterations of every 128-token answer probing, 6% of its time. Counting
// tokens against priced steps is free of the VM's timing noise, and its
// evidence carries across probes: a request whose balance stays negative
// backs off again after a single probe iteration.
func (p *Payoff) Priced(steps int, stop float64) {
	if steps > 0 && stop > 0 {
		p.pending = float64(steps) * stop
	}
}

// Observe records one iteration of the request: its duration and the
// tokens it emitted, and whether drafts were verified (a speculating
// request whose drafter proposed nothing decoded plainly).
func (p *Payoff) Observe(d time.Duration, tokens int, speculated bool) {
	if tokens <= 0 || d <= 0 {
		return
	}
	cost := p.pending
	p.pending = 0
	forget := math.Pow(balanceDecay, float64(tokens))
	p.balance *= forget
	p.pricedIter *= forget
	if cost > 0 && p.decided {
		// Drafted and paid for, whether or not any node was verified.
		p.balance += float64(tokens-1) - cost
		p.pricedIter++
		if p.pricedIter >= balanceMin && p.balance < 0 {
			p.backOff()
			return
		}
	}
	if !speculated {
		p.plain.Add(d, tokens)
		if !p.decided {
			// A back-off's plain stretch: the next probe starts afresh.
			// An iteration whose drafter proposed nothing, though the
			// request speculates, does not: a drafter that proposes every
			// other iteration (an n-gram index in new code, whose misses
			// alternate with 20-node trees) would otherwise never reach
			// probeLen and never be judged.
			p.probe = 0
		}
		return
	}
	if !p.decided {
		// A standby tree verified during a back-off (StandbyDrafter): it
		// was drafted only where it beat plain decoding on its own, and
		// says nothing of the speculation the back-off judged.
		return
	}
	p.probe++
	if !p.caughtUp {
		// The request's first speculative iteration also ran the draft
		// model over the whole prompt, a cost speculation pays once per
		// request whatever it gains later. Later catch-ups (the tokens of
		// a plain stretch) count: they are what backing off costs.
		p.caughtUp = true
		return
	}
	p.spec.Add(d, tokens)
	if p.probe < probeLen {
		return
	}
	// The reference is the faster of the measured plain decoding and the
	// prior: the first plain iterations after a prefill can be slow (on
	// the Qwen pair 99 ms a token against 59 later), which would make any
	// speculation look like a win.
	ref := p.plain.PerToken()
	if prior := p.PlainPrior.Seconds(); prior > 0 && (p.plain.Iterations() == 0 || prior < ref) {
		ref = prior
	}
	if ref <= 0 {
		return
	}
	if p.backoff == 0 {
		p.backoff = BackoffMin
	}
	if p.spec.PerToken() > ref {
		p.backOff()
	} else {
		p.backoff = BackoffMin
	}
}

// backOff starts a back-off: decode plainly for a while, longer each time
// in a row.
func (p *Payoff) backOff() {
	if p.backoff == 0 {
		p.backoff = BackoffMin
	}
	p.off = p.backoff
	p.backoff = min(2*p.backoff, BackoffMax)
	p.probe = 0
	if t := p.spec.PerIteration(); t > 0 {
		p.lastSpec = t
	}
	p.spec = Pace{}
}

// SpecTokens is what the request's recent speculative iterations emitted
// each: since the last back-off, or before it while none has been
// measured since (0 before any).
func (p *Payoff) SpecTokens() float64 {
	if t := p.spec.PerIteration(); t > 0 {
		return t
	}
	return p.lastSpec
}

// Speculating reports whether the last Decide chose speculation.
func (p *Payoff) Speculating() bool { return p.decided }

// StopProb is the path probability below which one more draft step does
// not pay for itself: the step costs the drafter's step plus what one more
// token adds to the verify pass (marginal), and gains at most the node's
// path probability times the time plain decoding takes per token. A
// drafter stops extending a path whose probability is under it
// (Shape.StopProb).
func StopProb(step, marginal, plainToken time.Duration) float64 {
	if plainToken <= 0 {
		return 0
	}
	return float64(step+marginal) / float64(plainToken)
}

// Prices reads a forward pass's cost curve (at(N): the time of a pass over
// N tokens) at a load of n decoding sequences: a plain pass yields n
// tokens in pass = T(n), so a token is worth T(n)/n of pass time, and each
// extra verified token costs marginal, the curve's slope past n. The
// engine prices its speculation with them, and the simulator the same way.
//
// The slope is taken over the next n tokens, and at least the next
// marginalSpan: a tree adds several nodes, and the slope of one token is
// the difference of two measured passes a few percent apart, which on a
// CPU moved by 2.5x from one measurement of the curve to the next.
func Prices(at func(int) time.Duration, n int) (pass, worth, marginal time.Duration) {
	n = max(n, 1)
	pass = at(n)
	m := n + max(n, marginalSpan)
	return pass, pass / time.Duration(n), (at(m) - pass) / time.Duration(m-n)
}

// marginalSpan is the fewest extra tokens Prices takes a curve's slope
// over.
const marginalSpan = 4

// MinProb is the path probability below which a node does not pay for its
// verification (Config.MinProb): its probability times a token's worth
// must exceed its marginal cost. 0 where the curve is flat or unknown;
// at most 0.99, so a near-certain node is always taken.
func MinProb(worth, marginal time.Duration) float64 {
	if worth <= 0 {
		return 0
	}
	return min(0.99, max(0, float64(marginal)/float64(worth)))
}

// Floors fills dst with Config.Floor for n decoding sequences whose
// tokens are each worth worth of pass time, for passes of up to upTo
// tokens: the node that makes the pass b tokens pays when its path
// probability times a token's worth covers what that token adds to the
// pass, priced as the curve's slope over the marginalSpan tokens before it
// (so that one noisy size of the curve does not price a token alone).
// Entries up to n (the roots) are 0; none is above 1, which no node
// exceeds.
func Floors(at func(int) time.Duration, n int, worth time.Duration, upTo int, dst []float64) []float64 {
	dst = dst[:0]
	if worth <= 0 {
		return dst
	}
	for b := 0; b <= upTo; b++ {
		f := 0.0
		if b > n {
			from := max(n, b-marginalSpan)
			f = min(1, max(0, float64(at(b)-at(from))/float64(b-from)/float64(worth)))
		}
		dst = append(dst, f)
	}
	return dst
}

// PrefillChunk is how many prompt tokens an iteration may prefill beside
// the decoding sequences dec so that it keeps them on their TPOT SLO, at
// most whole and at least max(1, whole/16) (prompts keep moving). A sequence o tokens
// past its first and l since it is within its SLO after this iteration's
// token if the iteration takes at most SLO·(o+1) − l; the chunk is the
// largest whose pass (dec's roots and the chunk, priced by at) fits the
// smallest such time among the sequences that can still make it. Without
// such a sequence (none decoding, none with an SLO, every one already too
// far behind) it is whole.
//
// Why: a chunk of a fixed size rides on every decode step while a prompt
// is prefilled. Where a pass costs about linearly in its tokens (a CPU),
// a 128-token chunk makes each of those steps several times slower, and
// every decoding request misses its TPOT. In the simulator on the
// measured Qwen2.5-Coder-1.5B CPU curve, AdaServe with fixed chunks
// trailed vLLM-style prefill-first scheduling by 2.5–6 points of
// attainment; with this rule it leads at every load (spec/sim).
func PrefillChunk(cost PassCost, dec []*Seq, now time.Time, whole int) int {
	return PrefillChunkBeside(cost, dec, nil, 0, now, whole, ChunkFloor(whole))
}

// ChunkFloor is the least prompt chunk PrefillChunk gives an iteration
// whose prefilling sequences would take whole tokens: a sixteenth, at
// least one (none when none is prefilling).
func ChunkFloor(whole int) int { return min(whole, max(1, whole/16)) }

// Prompt is a prompt being prefilled: the tokens it has left, and the
// deadline for its first token (zero: no TTFT SLO).
type Prompt struct {
	Left     int
	Deadline time.Time
}

// PromptFloor is the least prompt chunk an iteration of about t carries
// beside decoding sequences short of slack (PrefillChunkBeside's floor,
// SitOut's): ChunkFloor(whole), lowered to what the prompts need to have
// their first tokens by their deadlines at that pace, one each
// iteration at least while any is left. A prompt without a TTFT SLO, or
// whose deadline is this iteration or past, keeps ChunkFloor.
//
// Why: on a CPU each prompt token of a pass costs about what a decoded
// one does, and ChunkFloor (8 tokens of a 128-token chunk) rode on every
// iteration a prompt was in, whatever the urgent requests' slack: on the
// Qwen2.5-Coder 1.5B's measured curve, T(8) 71 ms against T(15) 144 ms
// with an urgent SLO of 71 ms. Prompts whose TTFT SLO leaves them time
// can wait for the iterations the urgent ones need; as their deadlines
// near, their share grows back. In the simulator on that curve this took
// AdaServe's TPOT attainment at load 0.75 from 63% to 72% and on
// SmolLM2's from 67% to 84%, with first tokens as often on time; on the
// H200's curve, where a prompt token costs next to nothing, it moved
// attainment by a point or two.
func PromptFloor(whole int, prompts []Prompt, t time.Duration, now time.Time) int {
	floor := ChunkFloor(whole)
	if t <= 0 {
		return floor
	}
	need := 0
	for _, p := range prompts {
		if p.Left <= 0 {
			continue
		}
		iters := 0
		if !p.Deadline.IsZero() {
			iters = int(p.Deadline.Sub(now) / t)
		}
		if iters < 1 {
			return floor
		}
		need += (p.Left + iters - 1) / iters
		if need >= floor {
			return floor
		}
	}
	if need == 0 { // nothing left to prefill
		return floor
	}
	return need
}

// PrefillChunkBeside is PrefillChunk for an iteration that the sequences
// idle sit out (SitOut, given the same typical), with the floor lo
// (ChunkFloor or PromptFloor of whole). Each of the idle ones must still
// be on its pace after the next iteration, which it runs: the chunk's
// pass must leave it that iteration's price (SitOut's t) of its slack.
func PrefillChunkBeside(cost PassCost, dec, idle []*Seq, typical time.Duration, now time.Time, whole, lo int) int {
	if len(dec) == 0 && len(idle) == 0 {
		return whole
	}
	lo = min(lo, whole)
	beyond := cost.BeyondAll(dec)
	var next time.Duration // the next iteration's price, which idle sequences must keep
	if len(idle) > 0 {
		next = max(cost.Pass(len(dec)+len(idle), beyond+cost.BeyondAll(idle), 0, lo), typical)
	}
	budget, limited := time.Duration(0), false
	step := cost.Pass(len(dec), beyond, 0, 0)
	bound := func(s *Seq, less time.Duration) {
		if s.SLO <= 0 || s.Generated() == 0 {
			return
		}
		b := s.Slack(now) - less
		if b >= step && (!limited || b < budget) {
			budget, limited = b, true
		}
	}
	for _, s := range dec {
		bound(s, 0)
	}
	for _, s := range idle {
		bound(s, next)
	}
	fits := func(c int) bool { return cost.Pass(len(dec), beyond, 0, c) <= budget }
	if !limited || fits(whole) {
		return whole
	}
	if !fits(lo) {
		return lo
	}
	// Bisect between a chunk that fits (lo) and one that does not (hi):
	// whole can be slots × prefill_chunk, millions of tokens, so a linear
	// scan could stall the engine. A measured curve that is not monotone
	// still yields a chunk that fits with the next one not fitting.
	hi := whole
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
