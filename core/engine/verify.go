package engine

import (
	"bytes"
	"fmt"
	"time"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/spec"
)

// Timings splits the time of the iterations that decoded something.
type Timings struct {
	Iterations int
	// Plan is drafting plus selection, Forward the target's pass (prefill
	// chunks and trees together), Verify the walk over each tree, the KV
	// commit and the penalty bookkeeping.
	Plan, Forward, Verify time.Duration
	// Decoding counts the decoding sequences of those iterations, one per
	// sequence and iteration, and SatOut those of them that sat the
	// iteration out (spec.SitOut): SatOut/Decoding is the share the
	// AdaServe simulator counts as Run.SatOut over its request-iterations.
	Decoding, SatOut int
	// Roots times the iterations that ran nothing but one token for each
	// of n decoding sequences (no prompt chunk, no drafted node), by n
	// (up to MaxRootBatch): a batch of sequences as the engine runs it,
	// each reading its own cache, beside the cost curve's chain of n
	// tokens in one sequence.
	Roots [MaxRootBatch + 1]RootPasses
	// Drafts counts the drafted trees against what the target emitted for
	// them (spec.DraftStats): the acceptance a simulator replays the
	// engine's requests with (sim.FitAcceptance).
	Drafts spec.DraftStats
	// Held counts the sequences whose draft model's catch-up the
	// scheduler held back (spec.HoldCatchUps), as the simulator's
	// Run.Held does.
	Held int
}

// MaxRootBatch is the largest batch Timings.Roots keeps apart.
const MaxRootBatch = 64

// RootPasses is how many root-only iterations of one batch size ran and
// how long their phases took in all (as Timings splits them).
type RootPasses struct {
	Count                 int
	Plan, Forward, Verify time.Duration
}

// Total is the iterations' whole time, from planning to verification.
func (r RootPasses) Total() time.Duration { return r.Plan + r.Forward + r.Verify }

// sub is r less earlier.
func (r RootPasses) sub(earlier RootPasses) RootPasses {
	return RootPasses{r.Count - earlier.Count, r.Plan - earlier.Plan, r.Forward - earlier.Forward, r.Verify - earlier.Verify}
}

// Add is r and more together.
func (r RootPasses) Add(more RootPasses) RootPasses {
	return RootPasses{r.Count + more.Count, r.Plan + more.Plan, r.Forward + more.Forward, r.Verify + more.Verify}
}

// Since is what ran after earlier, a reading of the same backend's
// Timings taken before t.
func (t Timings) Since(earlier Timings) Timings {
	t.Iterations -= earlier.Iterations
	t.Plan -= earlier.Plan
	t.Forward -= earlier.Forward
	t.Verify -= earlier.Verify
	t.Decoding -= earlier.Decoding
	t.SatOut -= earlier.SatOut
	for n := range t.Roots {
		t.Roots[n] = t.Roots[n].sub(earlier.Roots[n])
	}
	t.Drafts = t.Drafts.Sub(earlier.Drafts)
	t.Held -= earlier.Held
	return t
}

func (t *Timings) add(plan, fwd, ver time.Duration) {
	t.Iterations++
	t.Plan += plan
	t.Forward += fwd
	t.Verify += ver
}

// setupSpec builds the scheduler, the drafters and the budget.
func (b *Backend) setupSpec(sc specConfig, path string, threads int, calibrating func(float64)) error {
	b.spec = sc
	b.sched.Config = sc.sched
	b.sched.Drafter = &b.drafts
	b.drafts.kind = map[*spec.Seq]drafterKind{}
	b.drafts.target = map[*spec.Seq]model.Cache{}
	b.drafts.ngramDeeper = !sc.depthGiven
	cfg := b.model.Config()
	if sc.draftModelPath != "" {
		dm, err := b.loadDraftModel(sc.draftModelPath, path, threads)
		if err != nil {
			return err
		}
		b.drafts.model = &modelDrafter{dm: dm, always: !sc.adaptive}
		b.drafts.model.beam.Model = dm
	}
	layers := sc.earlyExit
	if layers == 0 {
		layers = max(1, cfg.Layers/3)
	}
	if layers > cfg.Layers {
		return status.Errorf(status.InvalidRequest, `config field "early_exit_layers" is %d but the model has %d layers`, layers, cfg.Layers)
	}
	// The early exit runs the target's first layers: only runners that can
	// stop there offer it (requests asking for it elsewhere are refused).
	if pr, ok := b.model.(model.PrefixRunner); ok {
		ctx := b.context
		early := &draftNet{m: b.model, layers: layers, catchUp: b.prefillChunk, owner: map[*spec.Seq]*draftState{},
			newCache: func() (model.Cache, error) { return pr.NewPrefixCache(ctx, layers) }}
		if _, onCPU := b.model.(model.CPU); onCPU {
			// The target's caches and the early exit's are kv.Caches of
			// one model: the draft's catch-ups copy (draftNet.borrow).
			early.borrow = func(s *spec.Seq, dst model.Cache, n int) bool {
				from, ok := b.drafts.target[s].(*kv.Cache)
				to, ok2 := dst.(*kv.Cache)
				return ok && ok2 && to.AppendFrom(from, n) == nil
			}
		}
		b.drafts.early = &modelDrafter{dm: early, always: !sc.adaptive}
		b.drafts.early.beam.Model = early
	}
	if sc.sched.Policy != spec.Incremental {
		// The forward pass's cost over 1 … 48 tokens prices speculation
		// (see plan). Its knee is the budget until the first plan: on a
		// CPU it comes early (two cores: compute-bound from about 3
		// tokens), so the budget is at least DefaultMinBudget there.
		n := curveTokens(b.device)
		// Batches no larger than the slots can run: at most their caches'
		// worth of transient caches beside them.
		roots := min(rootTokens(b.device), len(b.caches))
		b.setCurve(measureCost(fmt.Sprintf("%s/%s/%d", b.device, path, threads), b.model, n, roots, calibrating))
		if b.curve != nil && !sc.budgetGiven {
			b.sched.Config.Budget = max(DefaultMinBudget, spec.Calibrate(b.curve.at, n))
		}
	}
	return nil
}

// setCurve makes c (nil: none) the curve the backend prices with: its
// passes (spec.PassCost, batches at rootsPrice) are what AdaServe's SLO
// guard (spec.Guard) prices a plain iteration with, as do the batching
// rules (sitOut, prefillBudget, promptFloor).
func (b *Backend) setCurve(c *costCurve) {
	b.curve, b.cost, b.sched.PlainCost = c, spec.PassCost{}, nil
	if c != nil {
		b.cost = spec.PassCost{Chain: c.at, Roots: b.rootsPrice, Context: curveContext, Entry: c.entry, Prompt: c.prompt}
		b.sched.PlainCost = b.cost.Plain
	}
}

// rootsPrice prices a pass over n decoding sequences' roots for the
// batching rules: the start-up measurement (costCurve.rootsAt), raised to
// what the engine's own plain passes have been taking (plainPass) at n,
// or at the largest size below n seen, plus what the measurement adds
// from there.
//
// Why: the start-up passes run back to back and price a batch below what
// the engine's iterations pay for it. On a two-core Xeon the engine's
// forward passes over 8 sequences took 10.2 ms where the measurement
// priced 8.6 for SmolLM2, and 82 ms against 69 for the Qwen2.5-Coder
// 1.5B, whose batch measured no dearer than its chain. SitOut then let an
// urgent request wait for a pass it could not afford.
func (b *Backend) rootsPrice(n int) time.Duration {
	at := b.curve.rootsAt
	t := at(n)
	for m := min(n, len(b.plainPass)-1); m >= 1; m-- {
		if p := b.plainPass[m]; p > 0 {
			t = max(t, p+at(n)-at(m))
			break
		}
	}
	return t
}

// livePace is how the engine's recent plain passes over n decoding
// sequences (plainPass) compare with the start-up curve's price of them:
// 1 until one was measured.
//
// Why: a draft step is priced from its own passes, measured as it runs,
// against a plain token priced from the curve, measured once at start-up
// on a cache of curveContext tokens. On a VM whose pace drifts by 20% in
// minutes the two disagree: SmolLM2-135M drafting for itself (a step as
// dear as the target's pass, which can never pay) measured its step under
// the start-up price of a plain token, drafted deep spines and ran its
// chat set at 0.84–0.94x plain.
func (b *Backend) livePace(n int) float64 {
	if n >= len(b.plainPass) || b.plainPass[n] <= 0 || b.curve == nil {
		return 1
	}
	if at := b.curve.at(n); at > 0 {
		return float64(b.plainPass[n]) / float64(at)
	}
	return 1
}

func scaleDuration(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f)
}

// curveTokens is how far the forward pass's cost is measured on a device
// (at spec.CalibrationSizes, twice each); beyond, it is extrapolated. A
// CPU is compute-bound long before 48 tokens; a GPU's pass stays nearly
// flat far longer, and trees that large are what pays there.
func curveTokens(device string) int {
	if device == "cpu" {
		return 48
	}
	return 128
}

// rootTokens is the largest batch of sequences whose pass is measured
// beside the curve (measureRoots), if the slots reach it; beyond, it is
// extrapolated. On a CPU a
// batch costs about linearly in its sequences and 8 is the engine's
// usual slot count; a GPU's batch stays flat far longer.
func rootTokens(device string) int {
	if device == "cpu" {
		return 8
	}
	return 64
}

// DefaultMinBudget is the least verification budget B when it is
// calibrated rather than configured (see BenchmarkSpeculation).
const DefaultMinBudget = 12

// Budget is the verification budget B in use (configured or calibrated).
func (b *Backend) Budget() int { return b.sched.Config.Budget }

// loadDraftModel opens the draft model and checks that it shares the
// target's vocabulary, piece for piece. The target's own file is shared,
// not loaded twice.
func (b *Backend) loadDraftModel(path, targetPath string, threads int) (*draftNet, error) {
	m, tok := b.model, b.tok
	if path != targetPath {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, status.Errorf(status.Model, "draft model %s: %v", path, err)
		}
		var dm model.Runner
		if tok, err = tokenizer.FromGGUF(f); err == nil {
			dm, err = b.open(f, threads)
		}
		if err != nil {
			f.Close()
			return nil, status.Errorf(status.Model, "draft model %s: %v", path, err)
		}
		m = dm
		if err := sameVocabulary(b.tok, tok, m.Config().Vocab); err != nil {
			m.Close()
			f.Close()
			return nil, status.Errorf(status.Model, "draft model %s cannot draft for %s: %v", path, targetPath, err)
		}
		b.draftFile = f
	}
	ctx := b.context
	d := &draftNet{m: m, catchUp: b.prefillChunk, window: min(b.spec.draftWindow, ctx), owner: map[*spec.Seq]*draftState{},
		newCache: func() (model.Cache, error) { return m.NewCache(ctx) }}
	if _, ok := m.(model.HeadRunner); ok && b.spec.draftVocab > 0 && b.spec.draftVocab < m.Config().Vocab {
		d.headRows = max(16, b.spec.draftVocab/16*16)
	}
	return d, nil
}

// sameVocabulary checks that a draft model's tokens are the target's.
func sameVocabulary(target, draft *tokenizer.Tokenizer, draftOutputs int) error {
	if draft.Size() != target.Size() || draftOutputs != target.Size() {
		return fmt.Errorf("its vocabulary has %d tokens (%d outputs), the target's %d", draft.Size(), draftOutputs, target.Size())
	}
	for id := int32(0); int(id) < target.Size(); id++ {
		if !bytes.Equal(target.Piece(id), draft.Piece(id)) {
			return fmt.Errorf("token %d is %q in the draft model but %q in the target", id, draft.Piece(id), target.Piece(id))
		}
	}
	return nil
}

// specItem reads a request's speculation fields.
func (b *Backend) specItem(req *loop.Request, p sample.Params) (*item, error) {
	it := &item{params: p, drafter: b.spec.drafter, slo: time.Duration(req.TPOTSLOMs * float64(time.Millisecond))}
	var name string
	named, err := req.Extra.Take("drafter", &name)
	if err != nil {
		return nil, err
	}
	if named {
		if it.drafter, err = parseDrafter("request", name); err != nil {
			return nil, req.Extra.Errorf("drafter", `must be "ngram", "draft_model", "early_exit" or "none", got %q`, name)
		}
	}
	var on bool
	given, err := req.Extra.Take("speculate", &on)
	if err != nil {
		return nil, err
	}
	switch {
	case given && !on:
		it.drafter = draftNone
	case given && on && it.drafter == draftNone && !named:
		it.drafter = draftNGram
	case !given && !named && p.Temperature > 0:
		// The default drafter is measured to pay for greedy requests;
		// sampling ones speculate when they ask to.
		it.drafter = draftNone
	}
	if it.drafter == draftModel && b.drafts.model == nil {
		return nil, status.Errorf(status.InvalidRequest, `request field "drafter": "draft_model" needs a draft model: set "draft_model_path" in the runtime config`)
	}
	if it.drafter == draftEarlyExit && b.drafts.early == nil {
		return nil, status.Errorf(status.InvalidRequest, `request field "drafter": "early_exit" is not available on the %s backend`, b.device)
	}
	return it, nil
}

// limit caps a decoding sequence's tree to what its cache and max_tokens
// leave: d accepted nodes emit d+1 tokens and leave the cache d+1 entries
// longer, with the bonus token still to feed.
func (b *Backend) limit(s *loop.Slot, q *sequence) {
	room := q.cache.Cap() - q.cache.Len()
	d := room - 2
	if mt := s.Request.MaxTokens; mt > 0 {
		d = min(d, mt-q.seq.Generated()-1)
	}
	q.seq.MaxNodes, q.seq.MaxDepth = room, 0
	if d <= 0 {
		q.seq.MaxNodes = 1
	} else {
		q.seq.MaxDepth = d
	}
}

// plan drafts and selects the trees of this iteration's decoding
// sequences; root-only trees when nothing speculates.
func (b *Backend) plan(now time.Time) []*spec.Tree {
	if len(b.seqs) == 0 {
		return nil
	}
	speculating := false
	for _, s := range b.seqs {
		speculating = speculating || !s.NoSpec
	}
	if speculating && b.spec.sched.Policy != spec.Incremental {
		// The cost model's prices at this load (spec.Prices), from the
		// forward pass's curve measured at start-up.
		n := len(b.seqs)
		plain, worth, marginal := spec.Prices(b.curve.at, n)
		if !b.spec.budgetGiven && b.curve != nil {
			// No node can pay once the next token of the pass costs more
			// than a token is worth: the budget is the largest pass
			// before that (on a GPU, the knee of the flat curve; on a CPU
			// usually more than the trees hold, the cut below binding
			// first). Within it the SLO phase has room to serve requests
			// that are behind.
			b.sched.Config.Budget = b.curve.budget(n, worth)
		}
		switch m := b.spec.sched.MinProb; {
		case !b.spec.minProbGiven && b.curve != nil && plain > 0:
			// A node pays for its verification when its path probability
			// times a token's worth exceeds its marginal cost.
			b.sched.Config.MinProb = spec.MinProb(worth, marginal)
		case m > 0:
			// With n sequences a node must be about n times as likely to
			// pay off: the cut's complement shrinks as 1/n.
			b.sched.Config.MinProb = 1 - (1-m)/float64(n)
		}
		b.sched.Config.Floor = nil
		if !b.spec.minProbGiven && b.curve != nil && len(b.curve.ns) > 0 && worth > 0 {
			// Past the first few extra tokens a CPU's pass grows dearer
			// per token: each position is priced on its own slope.
			// Past the curve's last size its slope is extrapolated, one
			// price: the last entry serves every larger pass.
			upTo := min(b.sched.Config.Budget, b.curve.ns[len(b.curve.ns)-1]+8)
			b.floors = spec.Floors(b.curve.at, n, worth, upTo, b.floors)
			b.sched.Config.Floor = b.floors
		}
		// What the prices are compared with is measured now (a draft
		// step, a request's iterations): the prices follow the engine's
		// own recent plain passes (livePace).
		live := b.livePace(n)
		for _, s := range b.seqs {
			s.Payoff.PlainPrior = scaleDuration(plain, live)
		}
		if b.curve != nil {
			b.drafts.at = b.curve.at
		}
		b.drafts.streams = n
		for _, d := range []*modelDrafter{b.drafts.model, b.drafts.early} {
			if d != nil {
				d.plain, d.marginal = scaleDuration(worth, live), scaleDuration(marginal, live)
				if b.curve != nil {
					d.at = b.curve.at
				}
			}
		}
		if trees, err := b.sched.Plan(b.seqs, now); err == nil {
			return trees
		}
		b.drafts.errs++
	}
	for len(b.root) < len(b.seqs) {
		b.root = append(b.root, spec.Tree{})
	}
	b.rootP = b.rootP[:0]
	for i, s := range b.seqs {
		b.root[i].Reset(s.Tokens[len(s.Tokens)-1])
		b.rootP = append(b.rootP, &b.root[i])
	}
	return b.rootP
}

// verify walks a decoding sequence's tree against the target's logits (one
// row per node) and leaves the accepted path and tokens in q.res. The
// sampler's penalty window follows the walk: a node's distribution is
// computed after accepting the tokens of its path, exactly as plain
// decoding would have, and the bonus token is accepted last. A
// constrained sequence's rows are masked by the grammar state of each
// node's path (pruneTrees left only nodes the grammar allows), so every
// emitted token is what plain constrained decoding would emit. It
// reports false when the grammar leaves no token to emit.
func (b *Backend) verify(q *sequence, rows []float32) bool {
	vocab := b.model.Config().Vocab
	ok := true
	row := func(node int) []float32 {
		raw := rows[node*vocab : (node+1)*vocab]
		r := raw
		if q.con != nil {
			var live bool
			if r, live = q.con.logits(q.con.nodes[node], r); !live {
				ok = false
			}
		}
		if q.logprobs {
			// Called where the node's token is about to be chosen, with
			// the penalty window of the path to it.
			q.measure(node, r, raw)
		}
		return r
	}
	if q.tree.Len() == 1 {
		// Plain decoding: the sampler's own fast path and random stream
		// (a constrained one masks only when its draw is refused).
		var tok int32
		switch {
		case q.logprobs:
			// The logprobs need the (masked) row whole.
			tok = q.sampler.Sample(row(0))
		case q.con == nil:
			tok = q.sampler.Sample(rows[:vocab])
		default:
			tok, ok = q.con.sample(q.con.nodes[0], rows[:vocab], q.sampler)
		}
		q.sampler.Accept(tok)
		q.res.Path = append(q.res.Path[:0], 0)
		q.res.Tokens = append(q.res.Tokens[:0], tok)
		return ok
	}
	target := func(node int) spec.Dist {
		if node > 0 {
			q.sampler.Accept(q.tree.Nodes[node].Token)
		}
		d := q.sampler.Distribution(row(node))
		b.dist.IDs = d.IDs
		b.dist.P = b.dist.P[:0]
		for _, p := range d.Probs {
			b.dist.P = append(b.dist.P, float32(p))
		}
		return b.dist
	}
	if q.greedy {
		spec.VerifyGreedy(q.tree, target, &q.res)
	} else {
		spec.VerifySample(q.tree, target, q.sampler, &q.res)
	}
	q.sampler.Accept(q.res.Bonus())
	return ok
}

// verifyArgmax is verify for a greedy sequence from each tree node's
// argmax alone (ids, one per node): the target distribution of a node is
// the point mass on its argmax, as Sampler.Distribution gives for a
// sampler whose RawArgmax holds.
func (b *Backend) verifyArgmax(q *sequence, ids []int32) {
	if q.tree.Len() == 1 {
		q.sampler.Accept(ids[0])
		q.res.Path = append(q.res.Path[:0], 0)
		q.res.Tokens = append(q.res.Tokens[:0], ids[0])
		return
	}
	target := func(node int) spec.Dist {
		if node > 0 {
			q.sampler.Accept(q.tree.Nodes[node].Token)
		}
		b.argID[0], b.argP[0] = ids[node], 1
		return spec.Dist{IDs: b.argID[:], P: b.argP[:]}
	}
	spec.VerifyGreedy(q.tree, target, &q.res)
	q.sampler.Accept(q.res.Bonus())
}

// passCharge splits what an iteration cost among its decoding sequences
// for their speculation judges (spec.Payoff). The pass is shared: when one
// request speculates, every request of the pass waits for its draft work
// and its draft nodes' share of the forward pass. Judged by its own
// iteration time alone, a request on the Qwen pair with two streams
// drafted 17 nodes, emitted 9 tokens in 128 ms and counted 14 ms a token
// against plain decoding's 24, while the other request, backed off, took
// the same 128 ms for its one token: 10 tokens where plain decoding gives
// 2 in 25 ms, a loss both judges missed (0.90–0.95× plain). So a
// speculating request is charged the pass without any draft nodes, as
// plain decoding would have run it, plus n times its share (by draft
// nodes) of what speculation added, n the decoding sequences that waited
// for it; a request that did not speculate is charged the plain pass. With
// one stream the charge is the iteration's duration, as before.
type passCharge struct {
	base, extra time.Duration // the pass without draft nodes; what speculation added, times n
	nodes       int           // draft nodes in the pass
}

// plainPassDecay is the weight the recent plain passes of a size keep per
// new one: a horizon of about five passes.
const plainPassDecay = 0.8

// speculationCharge prices this iteration's speculation (newCharge) from
// its slots' trees, and keeps the plain passes' durations: zero where
// nothing speculated, with one decoding sequence (its duration is its
// own), or without a curve.
func (b *Backend) speculationCharge(slots []*loop.Slot, tokens int, t0, t1, t2 time.Time) passCharge {
	nodes, n := 0, 0
	for i, s := range slots {
		q := s.State.(*sequence)
		if q.decoding && b.rows[i] >= 0 && q.tree != nil {
			nodes += q.tree.Len() - 1
			n++
		}
	}
	fwd := t2.Sub(t1)
	if nodes == 0 && n > 0 && tokens == n {
		for len(b.plainPass) <= n {
			b.plainPass = append(b.plainPass, 0)
		}
		recent := fwd
		if p := b.plainPass[n]; p > 0 {
			recent = time.Duration(plainPassDecay*float64(p) + (1-plainPassDecay)*float64(fwd))
		}
		b.plainPass[n] = recent
	}
	if nodes == 0 || n < 2 || b.curve == nil {
		return passCharge{}
	}
	var plain time.Duration
	if n < len(b.plainPass) && tokens == n+nodes {
		plain = b.plainPass[n]
	}
	return newCharge(b.curve.at, tokens, nodes, n, plain, t1.Sub(t0), fwd)
}

// newCharge prices a pass over tokens tokens, nodes of them draft nodes of
// n decoding sequences, that drafted for plan and ran its forward pass in
// fwd. The base is the pass without the draft nodes: plain, the measured
// duration of recent plain passes over the same sequences, where known
// (the machine's costs drift: on a 2-core VM whose memory bandwidth
// other guests share, the 1.5B's pass over 2 tokens moved between 17 and
// 27 ms while its pass over 8 stayed at 29, so a curve measured in one
// state prices the draft nodes of the other wrongly), else the forward
// pass scaled by the cost curve at; the rest of plan+fwd is what
// speculation added.
func newCharge(at func(int) time.Duration, tokens, nodes, n int, plain, plan, fwd time.Duration) passCharge {
	full := at(tokens)
	if full <= 0 || nodes <= 0 || nodes >= tokens {
		return passCharge{}
	}
	base := plain
	if base <= 0 {
		base = time.Duration(float64(fwd) * float64(at(tokens-nodes)) / float64(full))
	}
	base = min(base, fwd)
	return passCharge{base: base, extra: time.Duration(n) * (plan + fwd - base), nodes: nodes}
}

// of is what q's iteration is charged, took the time since the iteration
// began (the verification of the sequences before q included).
func (c passCharge) of(q *sequence, took time.Duration) time.Duration {
	return c.charge(q.tree.Len()-1, took)
}

// charge is what a sequence that put nodes draft nodes in the pass pays:
// took where the pass was not priced.
func (c passCharge) charge(nodes int, took time.Duration) time.Duration {
	if c.nodes == 0 {
		return took
	}
	return c.base + c.extra*time.Duration(nodes)/time.Duration(c.nodes)
}
