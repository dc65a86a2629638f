package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
)

// Machine is the simulated hardware and engine configuration.
type Machine struct {
	Curve     Curve
	DraftStep time.Duration // one batched draft layer
	Accept    Acceptance
	Slots     int // concurrent requests (KV slots)
	Budget    int // verification budget B
	// PrefillBudget is the prompt tokens an iteration may prefill
	// (serving.Chunked; 0: 128).
	PrefillBudget int
	MaxDepth      int // D_max (0: spec's default)
	MaxWidth      int // W_max (0: spec's default)
	// DraftCurve, when set, prices a draft step over n sequences (a
	// token each) at DraftCurve.At(n), as a draft model's batched step
	// costs on the engine; otherwise a step costs DraftStep.
	DraftCurve *Curve
	// Gate applies the engine's cost gate for a draft model (core/engine's
	// modelDrafter with "spec_adaptive"): where a draft step at the
	// iteration's batch size cannot pay even for a certain node
	// (spec.StopProb ≥ 1) nothing is drafted, and otherwise drafting
	// stops below nodes under the stop probability. Drafting then costs
	// the layers actually drafted.
	Gate bool
	// DraftWindow, with a DraftCurve, is how many of a request's latest
	// tokens the draft model's cache starts from: the first iteration
	// that drafts for a request first feeds the draft model that much of
	// its context (at most), one pass over every such request's tokens
	// priced on DraftCurve, as core/engine's draft model catches up. 0: no
	// catch-up is priced.
	DraftWindow int
}

// draftStep is the price of one draft step over n sequences.
func (m Machine) draftStep(n int) time.Duration {
	if m.DraftCurve != nil {
		return m.DraftCurve.At(n)
	}
	return m.DraftStep
}

// gate is Machine.Gate around the simulator's drafter: it prices the step
// as the engine does (spec.Prices at the iteration's n decoding sequences,
// spec.StopProb) and counts the layers it drafted.
type gate struct {
	inner  spec.Drafter
	m      *Machine
	n      int // decoding sequences this iteration
	layers int
}

func (g *gate) Draft(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	g.layers = 0
	_, worth, marginal := spec.Prices(g.m.Curve.At, g.n)
	stop := spec.StopProb(g.m.draftStep(len(seqs)), marginal, worth)
	if stop >= 1 {
		return nil // the trees stay their roots, as the engine leaves them
	}
	shape.StopProb = stop
	if err := g.inner.Draft(seqs, shape, trees); err != nil {
		return err
	}
	for _, t := range trees {
		g.layers = max(g.layers, t.Depth())
	}
	return nil
}

// catchingUp is the simulator's drafter as a draft model's, which feeds a
// request's context (Machine.DraftWindow of it at most) before its first
// draft (spec.CatchUpDrafter): the scheduler then holds back the catch-ups
// the batch cannot wait for, as the engine's does. lags holds, for the
// iteration's requests, what the draft model still has to read.
type catchingUp struct {
	spec.Drafter
	m    *Machine
	lags map[*spec.Seq]int
}

func (c *catchingUp) Lag(s *spec.Seq) int { return c.lags[s] }

func (c *catchingUp) LagPrice(n int) (time.Duration, bool) { return c.m.DraftCurve.At(n), true }

// minProb is the floor under a node's path probability that the engine
// prices from its cost curve with n decoding requests (spec.Prices and
// spec.MinProb, as core/engine's plan does). On the GPU-like curve it is
// small (0.16 with 8 requests).
func (m Machine) minProb(n int) float64 {
	_, worth, marginal := spec.Prices(m.Curve.At, n)
	return spec.MinProb(worth, marginal)
}

// floors are the per-position floors (spec.Floors) the engine prices
// from its curve with n decoding requests, for passes up to the budget.
func (m Machine) floors(n int, dst []float64) []float64 {
	_, worth, _ := spec.Prices(m.Curve.At, n)
	return spec.Floors(m.Curve.At, n, worth, m.Budget, dst)
}

// Baseline is the paper's baseline latency: incremental decoding at batch
// 8 (input 32, output 128: contexts within the curve's measured one, so
// the roots' pass alone).
func (m Machine) Baseline() time.Duration { return m.Curve.Cost().Pass(8, 0, 0, 0) }

// Result is one request's outcome.
type Result struct {
	Request
	Admitted, First, Last time.Duration
	Generated             int
}

// TTFT is the time from arrival to the first token.
func (r Result) TTFT() time.Duration { return r.First - r.Arrival }

// TPOT is the SLO metric's: (last − first)/(generated − 1), 0 for one token.
func (r Result) TPOT() time.Duration {
	if r.Generated <= 1 {
		return 0
	}
	return (r.Last - r.First) / time.Duration(r.Generated-1)
}

// Attained says whether the request met its TPOT SLO.
func (r Result) Attained() bool { return r.TPOT() <= r.TPOTSLO }

// Run is a finished simulation.
type Run struct {
	Results    []Result
	Iterations int
	Verified   int // tree nodes verified (roots included)
	Emitted    int // decode tokens emitted by verification
	Decodes    int // request-iterations that decoded
	// Planned counts the iterations that planned trees for decoding
	// requests, and Bound those of them whose selection the budget bound
	// (spec.Selector.Bound): the only ones in which the policies that
	// select by probability can differ.
	Planned, Bound int
	// SatOut counts the request-iterations that sat out (spec.SitOut).
	SatOut int
	// CatchUps counts the iterations that fed the draft model a new
	// request's context (Machine.DraftWindow), and Held the times the
	// scheduler held such a catch-up back (spec.HoldCatchUps).
	CatchUps, Held int
	End            time.Duration
	// Drafts counts the drafted trees against what the target took
	// (spec.Scheduler.Stats): FitAcceptance of it gives back the machine's
	// acceptance model, up to the draws.
	Drafts spec.DraftStats
}

type live struct {
	req      Request
	res      *Result
	prefill  int // prompt tokens done
	seq      spec.Seq
	deadline int64
	fed      bool // the draft model has caught up with it (Machine.DraftWindow)
}

// Simulate runs the requests (in arrival order) through the policy on the
// machine. seed drives the acceptance draws.
func Simulate(m Machine, p serving.System, reqs []Request, seed uint64) (*Run, error) {
	if err := m.Curve.Validate(); err != nil {
		return nil, err
	}
	if err := m.Accept.Validate(); err != nil {
		return nil, err
	}
	if m.Slots < 1 || m.Budget < 1 {
		return nil, fmt.Errorf("sim: slots and budget must be positive (got %d, %d)", m.Slots, m.Budget)
	}
	if !slices.IsSortedFunc(reqs, func(a, b Request) int { return int(a.Arrival - b.Arrival) }) {
		return nil, fmt.Errorf("sim: requests must be in arrival order")
	}
	pb := m.PrefillBudget
	if pb <= 0 {
		pb = 128
	}
	rng := rand.New(rand.NewPCG(seed, 0xacce))
	// Whether a request has drafts, drawn apart from what the target
	// accepts so that a drafter that always drafts sees the same draws.
	draws := rand.New(rand.NewPCG(seed, 0xd7af))
	sch := &spec.Scheduler{Config: spec.Config{
		Policy: p.Spec, Budget: m.Budget, Branch: p.Branch, Order: p.Order, MaxDepth: m.MaxDepth, MaxWidth: m.MaxWidth,
	}}
	cost := m.Curve.Cost()
	sch.PlainCost = cost.Plain
	var floors []float64 // sch.Config.Floor's storage
	var gated *gate
	if p.Spec != spec.Incremental {
		sch.Drafter = &spec.BeamDrafter{Model: model{a: m.Accept, draws: rand.New(rand.NewPCG(seed, 0xc047))}}
		if m.Gate {
			gated = &gate{inner: sch.Drafter, m: &m}
			sch.Drafter = gated
		}
	}
	var catching *catchingUp
	if sch.Drafter != nil && m.DraftWindow > 0 && m.DraftCurve != nil {
		catching = &catchingUp{Drafter: sch.Drafter, m: &m, lags: map[*spec.Seq]int{}}
		sch.Drafter = catching
	}
	epoch := time.Unix(0, 0)
	run := &Run{Results: make([]Result, len(reqs))}
	var waiting, active []*live
	next, done := 0, 0
	now := time.Duration(0)
	var seqs, idle []*spec.Seq
	var emitted []int32 // a verification's tokens, for sch.Stats
	var dec, running []*live
	var sat []bool
	var queue spec.Queue
	var prompts []spec.Prompt
	for done < len(reqs) {
		for next < len(reqs) && reqs[next].Arrival <= now {
			r := reqs[next]
			run.Results[next] = Result{Request: r}
			l := &live{req: r, res: &run.Results[next]}
			l.deadline = serving.AdmissionDeadline(int64(r.Arrival), float64(r.TTFTSLO)/float64(time.Millisecond), p.FCFSAdmit)
			waiting = append(waiting, l)
			next++
		}
		if len(active) == 0 && len(waiting) == 0 {
			now = reqs[next].Arrival
			continue
		}
		for len(waiting) > 0 && len(active) < m.Slots {
			i := serving.NextToAdmit(waiting, func(l *live) int64 { return l.deadline })
			l := waiting[i]
			waiting = slices.Delete(waiting, i, i+1)
			l.res.Admitted = now
			active = append(active, l)
		}

		// Decoding requests, less those that sit this iteration out
		// (idle).
		running, idle = running[:0], idle[:0]
		for _, l := range active {
			if l.prefill == l.req.Prompt {
				running = append(running, l)
			}
		}
		// The least prompt chunk beside the decoding requests: what the
		// prompts need for their TTFT deadlines (spec.PromptFloor) under
		// AdaServe's SLO-sized chunks, else a sixteenth.
		whole := 0
		if p.Prefill == serving.Chunked {
			prompts = prompts[:0]
			for _, l := range active {
				if l.prefill < l.req.Prompt {
					whole = pb
					var d time.Time
					if l.req.TTFTSLO > 0 {
						d = epoch.Add(l.req.Arrival + l.req.TTFTSLO)
					}
					prompts = append(prompts, spec.Prompt{Left: l.req.Prompt - l.prefill, Deadline: d})
				}
			}
		}
		floor := spec.ChunkFloor(whole)
		if p.SLOChunk && whole > 0 {
			floor = spec.PromptFloor(whole, prompts, max(cost.Pass(len(running), beyondOf(cost, running), 0, 1), sch.Timing.Estimate()), epoch.Add(now))
		}
		if p.SLOBatch && len(running) > 1 {
			seqs = seqs[:0]
			for _, l := range running {
				seqs = append(seqs, &l.seq)
			}
			// The queue as the engine's runtime shows it (Queue.AtRisk):
			// what is waiting, and how long each slot may be held (here
			// to the request's output length, which max_tokens bounds
			// in the engine).
			queue.Waiting, queue.Holds, queue.Chunk = queue.Waiting[:0], queue.Holds[:0], pb
			for _, l := range waiting {
				queue.Waiting = append(queue.Waiting, spec.Waiting{Deadline: epoch.Add(time.Duration(l.deadline)), Prompt: l.req.Prompt})
			}
			for _, l := range active {
				queue.Holds = append(queue.Holds, (l.req.Prompt-l.prefill+pb-1)/pb+l.req.Output-l.res.Generated)
			}
			var k int
			if sat, k = spec.SitOut(cost, seqs, floor, epoch.Add(now), sch.Timing.Estimate(), &queue, sat); k > 0 {
				run.SatOut += k
				kept := running[:0]
				for i, l := range running {
					if sat[i] {
						idle = append(idle, &l.seq)
					} else {
						kept = append(kept, l)
					}
				}
				running = kept
			}
		}

		// Prompts: whole ones (serving.Preempt) or chunks by deadline (serving.Chunked).
		tokens, prefilling := 0, false
		chunk := map[*live]int{}
		var pre []*live
		for _, l := range active {
			if l.prefill < l.req.Prompt {
				pre = append(pre, l)
			}
		}
		if len(pre) > 0 {
			if p.Prefill == serving.Preempt {
				for _, l := range pre {
					chunk[l] = l.req.Prompt - l.prefill
					tokens += chunk[l]
				}
				prefilling = true
			} else {
				slices.SortStableFunc(pre, func(a, b *live) int { return cmpInt64(a.deadline, b.deadline) })
				left := pb
				if p.SLOChunk {
					var dec []*spec.Seq
					for _, l := range running {
						dec = append(dec, &l.seq)
					}
					left = spec.PrefillChunkBeside(cost, dec, idle, sch.Timing.Estimate(), epoch.Add(now), pb, floor)
				}
				for _, l := range pre {
					if left == 0 {
						break
					}
					c := min(left, l.req.Prompt-l.prefill)
					chunk[l], left, tokens = c, left-c, tokens+c
				}
			}
		}

		// Decoding requests: the real scheduler plans their trees.
		dec, seqs = dec[:0], seqs[:0]
		if !prefilling {
			dec = append(dec, running...)
			dec = batch(p, cost, dec, tokens, sch.Timing.Estimate(), epoch.Add(now))
			for _, l := range dec {
				left := l.req.Output - l.res.Generated
				nothing := left > 1 && !m.Accept.drafts(draws)
				l.seq.NoSpec = left <= 1 || nothing
				if nothing && p.Spec != spec.Incremental {
					// The synthetic drafter had nothing for it: the
					// engine would have asked, and counted an empty tree.
					sch.Stats.Asked++
				}
				l.seq.MaxDepth = max(1, left-1)
				seqs = append(seqs, &l.seq)
			}
		}
		prompt := tokens // the prompt chunks' tokens; the trees' follow
		var trees []*spec.Tree
		dur := time.Duration(0)
		if len(seqs) > 0 {
			if p.Spec != spec.Incremental {
				sch.Config.MinProb = m.minProb(len(seqs))
				floors = m.floors(len(seqs), floors)
				sch.Config.Floor = floors
			}
			var err error
			if gated != nil {
				gated.n = len(seqs)
			}
			if catching != nil {
				clear(catching.lags)
				for _, l := range dec {
					if !l.fed {
						catching.lags[&l.seq] = min(len(l.seq.Tokens), m.DraftWindow)
					}
				}
			}
			if trees, err = sch.Plan(seqs, epoch.Add(now)); err != nil {
				return nil, err
			}
			run.Planned++
			if sch.Bound() {
				run.Bound++
			}
			depth := 0
			for _, t := range trees {
				tokens += t.Len()
				run.Verified += t.Len()
				depth = max(depth, t.Depth())
			}
			if catching != nil {
				// A request's first draft feeds the draft model its
				// context first.
				catchUp := 0
				for i, l := range dec {
					if !l.fed && sch.DraftedFor(i) {
						l.fed = true
						catchUp += catching.Lag(&l.seq)
					}
				}
				if catchUp > 0 {
					dur += m.DraftCurve.At(catchUp)
					run.CatchUps++
				}
			}
			switch {
			case sch.Drafted() == 0: // nothing drafted (spec.Guard, or no request speculates)
			case gated != nil:
				dur += m.draftStep(len(seqs)) * time.Duration(gated.layers)
			case sch.Drafter != nil:
				// Drafting runs the candidate shape's layers whatever
				// the selection kept.
				dur += m.draftStep(len(seqs)) * time.Duration(sch.Config.Shape(len(seqs)).Depth+len(sch.Config.Shape(len(seqs)).Branch))
			}
		}
		// The pass: the decoding requests' roots, their rows beyond the
		// curve's context, and the tree nodes and prompt chunks beside
		// them.
		dur += cost.Pass(len(seqs), cost.BeyondAll(seqs), tokens-prompt-len(seqs), prompt)
		now += dur
		run.Iterations++
		if len(seqs) > 0 {
			sch.Observe(dur)
		}

		for l, c := range chunk {
			l.prefill += c
			if l.prefill == l.req.Prompt {
				l.res.First, l.res.Last, l.res.Generated = now, now, 1
				// The prompt and the first token, as the engine's
				// sequence holds them (a pass reads the prompt's rows).
				l.seq.Tokens = make([]int32, l.req.Prompt+1, l.req.Prompt+l.req.Output+1)
				l.seq.Prompt = l.req.Prompt
				l.seq.Start = epoch.Add(now)
				// The scheduler's A(r) reads the SLO from the Seq, as
				// the engine's does (without it every request is best
				// effort and AdaServe's SLO phase never runs).
				l.seq.SLO = l.req.TPOTSLO
			}
		}
		for i, l := range dec {
			k := min(m.Accept.verify(trees[i], rng, &emitted), l.req.Output-l.res.Generated)
			sch.ObserveEmitted(i, emitted)
			run.Emitted += k
			run.Decodes++
			for range k {
				l.seq.Tokens = append(l.seq.Tokens, 0)
			}
			l.res.Generated += k
			l.res.Last = now
		}
		kept := active[:0]
		for _, l := range active {
			if l.res.Generated >= l.req.Output {
				done++
				continue
			}
			kept = append(kept, l)
		}
		clear(active[len(kept):])
		active = kept
	}
	run.End = now
	run.Drafts, run.Held = sch.Stats, sch.Held
	return run, nil
}

// batch picks the decoding requests of this iteration: all of them, or
// under §6.3's dynamic batch size the largest batch whose pass keeps
// within the tightest TPOT SLO among them, chosen by arrival (FCFS) or by
// how far behind their SLO they are (serving.STTA). cost prices the passes.
func batch(p serving.System, cost spec.PassCost, dec []*live, prefill int, tspec time.Duration, now time.Time) []*live {
	if p.Batching == serving.All || len(dec) == 0 {
		return dec
	}
	tight := dec[0].req.TPOTSLO
	for _, l := range dec {
		tight = min(tight, l.req.TPOTSLO)
	}
	n := len(dec)
	for n > 1 && cost.Pass(n, beyondOf(cost, dec[:n]), 0, prefill) > tight {
		n--
	}
	if n == len(dec) {
		return dec
	}
	if p.Batching == serving.STTA {
		behind := func(l *live) float64 {
			return spec.Target(now.Sub(l.seq.Start), tspec, l.req.TPOTSLO, l.seq.AfterFirst())
		}
		slices.SortStableFunc(dec, func(a, b *live) int {
			x, y := behind(a), behind(b)
			switch {
			case x > y:
				return -1
			case x < y:
				return 1
			}
			return 0
		})
	} else {
		slices.SortStableFunc(dec, func(a, b *live) int { return int(a.req.Arrival - b.req.Arrival) })
	}
	return dec[:n]
}

// beyondOf is cost.BeyondAll of the requests' sequences.
func beyondOf(cost spec.PassCost, ls []*live) int {
	n := 0
	for _, l := range ls {
		n += cost.Beyond(&l.seq)
	}
	return n
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func slicesSortByArrival(r []Result) {
	slices.SortStableFunc(r, func(a, b Result) int { return int(a.Arrival - b.Arrival) })
}
