package engine

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
)

// drafterKind names how a request's candidate trees are drafted.
type drafterKind int

const (
	draftNone drafterKind = iota
	draftNGram
	draftModel
	draftEarlyExit
)

var drafterNames = map[string]drafterKind{
	"none": draftNone, "ngram": draftNGram, "draft_model": draftModel, "early_exit": draftEarlyExit,
}

func (k drafterKind) String() string {
	for n, v := range drafterNames {
		if v == k {
			return n
		}
	}
	return "unknown"
}

func parseDrafter(where, name string) (drafterKind, error) {
	k, ok := drafterNames[name]
	if !ok {
		return 0, status.Errorf(status.InvalidRequest, `%s field "drafter": unknown drafter %q (want "ngram", "draft_model", "early_exit" or "none")`, where, name)
	}
	return k, nil
}

// specConfig is the speculation part of the runtime config.
type specConfig struct {
	drafter        drafterKind // the default for requests that name none
	draftModelPath string
	earlyExit      int  // layers of the early-exit self-draft (0: a third of the model's)
	draftVocab     int  // token ids the draft model proposes from (0: all; see DefaultDraftVocab)
	draftWindow    int  // a new draft cache's window (0: the whole context; see DefaultDraftWindow)
	adaptive       bool // requests speculate only while it pays (spec.Payoff)
	sched          spec.Config
	// prefill is how an iteration treats prompts: chunked beside the
	// decoding streams, or (serving.Preempt, "vllm") first, decoding waiting
	// until no prompt is left to prefill.
	prefill serving.Prefill
	// fcfsAdmit admits requests first come, first served, whatever their
	// TTFT SLOs (serving.AdmissionDeadline).
	fcfsAdmit bool
	// sloChunk sizes each iteration's prompt tokens to keep the decoding
	// streams on their TPOT SLOs (spec.PrefillChunk) instead of giving
	// every prefilling sequence a whole prefill_chunk.
	sloChunk bool
	// sloBatch lets decoding streams far ahead of their TPOT SLOs sit out
	// an iteration that would leave another short of its own
	// (spec.SitOut).
	sloBatch     bool
	budgetGiven  bool
	minProbGiven bool
	depthGiven   bool // "spec_max_depth" bounds every drafter (see ngramShape)
}

// DefaultDraftVocab is how many of the lowest token ids a draft model
// proposes from when the config's "draft_vocab" does not say: only those
// rows of its output head are computed. Byte-pair vocabularies number
// their tokens in merge order, so the low ids are the common ones: on the
// Qwen2.5 vocabulary (151,936 ids) the first 65,536 cover 98% of the
// tokens of this repository's Go, Python and Markdown, and computing only
// them cuts the head, a third of the 0.5B model's bytes per token, by 57%.
// A token above it is never drafted, only verified as the bonus.
const DefaultDraftVocab = 65536

// DefaultDraftWindow is how many of a sequence's latest tokens (besides
// its first DraftSink) a draft model's new cache starts from, when the
// config's "draft_window" does not say (see draftNet.window). On the
// Qwen2.5-Coder 1.5B/0.5B pair (2 threads, one stream, BenchmarkSpeculation)
// whole-file rewrites (prompts of 300–500 tokens) went from 1.64x plain
// decoding to 1.82x with 128 and 1.87x with 64, while 64 cost the edit
// set's prompts (100–200 tokens) their snippet: 1.43x to 1.33x; 128 left
// it and the code set unchanged, and 256 gained nothing.
const DefaultDraftWindow = 128

// DefaultDrafter is the drafter of requests that do not name one, when the
// runtime config does not set "drafter" either. See the package doc for why.
const DefaultDrafter = "ngram"

// MaxSpecBudget bounds "spec_budget": tokens of one verify pass, each
// needing a logits row of the vocabulary's size.
const MaxSpecBudget = 1024

// takeSpecConfig reads the speculation fields of the runtime config.
func takeSpecConfig(cfg *loop.Config) (specConfig, error) {
	var sc specConfig
	drafter, policy, order := DefaultDrafter, "adaserve", "descending"
	budget, depth, width := 0, spec.DefaultMaxDepth, spec.DefaultMaxWidth
	minProb := 0.25
	sc.draftVocab = DefaultDraftVocab
	sc.draftWindow = DefaultDraftWindow
	sc.adaptive = true
	for _, f := range []struct {
		key string
		dst any
	}{
		{"drafter", &drafter}, {"draft_model_path", &sc.draftModelPath}, {"early_exit_layers", &sc.earlyExit},
		{"spec_budget", &budget}, {"spec_max_depth", &depth}, {"spec_max_width", &width},
		{"spec_policy", &policy}, {"spec_order", &order}, {"spec_min_prob", &minProb},
		{"draft_vocab", &sc.draftVocab}, {"draft_window", &sc.draftWindow}, {"spec_adaptive", &sc.adaptive},
	} {
		given, err := cfg.Extra.Take(f.key, f.dst)
		if err != nil {
			return sc, err
		}
		switch f.key {
		case "spec_min_prob":
			sc.minProbGiven = given
		case "spec_max_depth":
			sc.depthGiven = given
		}
	}
	var err error
	if sc.drafter, err = parseDrafter("config", drafter); err != nil {
		return sc, err
	}
	p, err := serving.ByConfigName(policy)
	if err != nil {
		return sc, err
	}
	sc.sched.Policy, sc.prefill, sc.fcfsAdmit, sc.sloChunk, sc.sloBatch = p.Spec, p.Prefill, p.FCFSAdmit, p.SLOChunk, p.SLOBatch
	switch strings.ToLower(order) {
	case "descending", "desc":
		sc.sched.Order = spec.Descending
	case "ascending", "asc":
		sc.sched.Order = spec.Ascending
	default:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_order": want "descending" or "ascending", got %q`, order)
	}
	switch {
	case budget < 0 || budget > MaxSpecBudget:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_budget" must be in [1, %d] (or 0: calibrate), got %d`, MaxSpecBudget, budget)
	case depth < 1 || depth > 64:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_max_depth" must be in [1, 64], got %d`, depth)
	case width < 1 || width > 64:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_max_width" must be in [1, 64], got %d`, width)
	case sc.draftVocab < 0:
		return sc, status.Errorf(status.InvalidRequest, `config field "draft_vocab" must be 0 (every token) or positive, got %d`, sc.draftVocab)
	case sc.draftWindow < 0:
		return sc, status.Errorf(status.InvalidRequest, `config field "draft_window" must be 0 (the whole context) or positive, got %d`, sc.draftWindow)
	case sc.earlyExit < 0:
		return sc, status.Errorf(status.InvalidRequest, `config field "early_exit_layers" must be positive, got %d`, sc.earlyExit)
	}
	if !(minProb >= 0 && minProb <= 1) { // NaN fails both
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_min_prob" must be in [0, 1], got %g`, minProb)
	}
	sc.sched.MinProb = minProb
	sc.sched.Budget, sc.budgetGiven = budget, budget > 0
	sc.sched.MaxDepth, sc.sched.MaxWidth = depth, width
	return sc, nil
}

// costCurve is the measured duration of one forward pass over n new tokens
// with logits for every one of them, as a verification pass needs, at the
// sizes spec.CalibrationSizes lists (1 to 8, then geometrically): what the
// cost model prices plain decoding and one more verified token with, and
// where the knee of the roofline is (spec.Calibrate).
//
// Beside it, the passes over a batch of sequences, one token each (rootNs,
// rootTs), each sequence behind curveContext committed tokens of its own,
// and what each committed token beyond that adds to a pass (entry): a
// batch reads every sequence's keys and values from memory, where the
// chain reads one sequence's (spec.PassCost, which prices with all three).
type costCurve struct {
	ns     []int
	ts     []time.Duration
	rootNs []int
	rootTs []time.Duration
	entry  time.Duration
	prompt time.Duration // a prompt token's price in a chunk (0: not measured)
}

// rootsAt is the measured pass over n sequences' roots (the chain's T(n)
// where no batch was measured).
func (c *costCurve) rootsAt(n int) time.Duration {
	if len(c.rootNs) == 0 {
		return c.at(n)
	}
	return spec.CurveAt(c.rootNs, c.rootTs, n)
}

// at is the cost of a pass over n tokens, interpolated linearly between
// the measured sizes and extrapolated past the last (spec.CurveAt, as the
// simulator prices it).
func (c *costCurve) at(n int) time.Duration {
	if c == nil {
		return 0
	}
	return spec.CurveAt(c.ns, c.ts, n)
}

// budget is the verification budget for n sequences whose tokens are each
// worth `worth` of pass time: the largest pass (at least n, at most
// MaxSpecBudget) whose every token up to it costs at most that.
func (c *costCurve) budget(n int, worth time.Duration) int {
	if c == nil || len(c.ns) < 2 {
		return max(n, DefaultMinBudget)
	}
	last := c.ns[len(c.ns)-1]
	for b := n; b <= last; b++ {
		if c.at(b+1)-c.at(b) > worth {
			return b
		}
	}
	return MaxSpecBudget // the extrapolated slope stays under it
}

// curves caches the measured curve per device, model file and thread
// count, so that a process creating many runtimes (the tests) measures
// once. A cached curve serves any maxN it reaches; a longer one is
// measured anew and replaces it.
var curves sync.Map // string -> *costCurve

// reaches reports whether the curve was measured up to at least n tokens
// and, beside it, batches of up to at least roots sequences.
func (c *costCurve) reaches(n, roots int) bool {
	return len(c.ns) > 0 && c.ns[len(c.ns)-1] >= n && (roots <= 1 || len(c.rootNs) > 0 && c.rootNs[len(c.rootNs)-1] >= roots)
}

// rounds is how many times measureCost runs a pass over n tokens.
func rounds(n int) int {
	if n <= 8 {
		return 4
	}
	return 2
}

// curveContext is how many committed tokens the cost curve's passes run
// behind: a pass's attention reads its sequence's whole cache, and
// requests decode behind their prompt and output. Measured on an empty
// cache, SmolLM2's pass over 8 tokens cost 5.4 ms while the engine's
// decode steps at 8 busy slots took 11 ms (BenchmarkDecodeStreams: 10.8
// ms at 256 cached tokens each), so the AdaServe simulator driven by that
// curve put SmolLM2's capacity at twice what the engine served and its
// attainment 10–21 points above the engine's. 128 tokens cost a prefill of
// that many at start-up (on two cores, about 0.1 s for SmolLM2 and 0.75 s
// for the Qwen2.5-Coder 1.5B at their measured pp512 rates).
const curveContext = 128

// measureCost measures the forward pass's cost curve up to maxN tokens on
// a throwaway cache holding curveContext committed tokens (fewer when the
// model's context is shorter), the best of a few runs at each size
// (rounds) after a warm-up pass: about a second for the default model on
// two idle cores, often the longest part of creating a runtime. Then a
// prompt token's price in a chunk, and with maxRoots above 1 batches of
// up to that many sequences (measureRoots). progress (may be nil) hears
// the share of the measuring done, by tokens run. nil when a pass fails.
func measureCost(key string, m model.Runner, maxN, maxRoots int, progress func(float64)) *costCurve {
	if c, ok := curves.Load(key); ok && c.(*costCurve).reaches(maxN, maxRoots) {
		return c.(*costCurve)
	}
	ctx := max(0, min(curveContext, m.Config().ContextTrain-maxN-1))
	c, err := m.NewCache(ctx + maxN + 1)
	if err != nil {
		return nil
	}
	defer c.Truncate(0)
	vocab := m.Config().Vocab
	var bt model.Batch
	var logits []float32
	var ids []int32
	if _, ok := m.(model.ArgmaxRunner); ok {
		ids = make([]int32, maxN)
	} else {
		logits = make([]float32, maxN*vocab)
	}
	sizes := spec.CalibrationSizes(maxN)
	total, done := ctx+maxN, 0
	for _, n := range sizes {
		total += rounds(n) * n
	}
	total += rounds(maxN) * (maxN + maxN/4) // the prompt token's price
	if maxRoots > 1 {
		total += rootsWork(maxRoots)
	}
	failed := false
	ran := func(n int) {
		done += n
		if progress != nil {
			progress(min(1, float64(done)/float64(total)))
		}
	}
	// pass runs n tokens as a chain at positions from, the logits of the
	// last one only or of all.
	pass := func(from, n int, all bool) error {
		defer ran(n)
		bt.Tokens, bt.Cache, bt.Pos, bt.Parent, bt.Logits = bt.Tokens[:0], bt.Cache[:0], bt.Pos[:0], bt.Parent[:0], bt.Logits[:0]
		for i := range n {
			bt.Tokens = append(bt.Tokens, int32((100+7*(from+i))%vocab))
			bt.Cache = append(bt.Cache, c)
			bt.Pos = append(bt.Pos, from+i)
			bt.Parent = append(bt.Parent, i-1)
			bt.Logits = append(bt.Logits, all || i == n-1)
		}
		rows := n
		if !all {
			rows = 1
		}
		if ar, ok := m.(model.ArgmaxRunner); ok {
			// As greedy decoding runs it there: the rows stay on the device.
			return ar.ForwardArgmax(&bt, ids[:rows])
		}
		return m.Forward(&bt, logits[:rows*vocab])
	}
	// The context, in chunks no longer than the passes measured (whose
	// scratch the runner sized), committed.
	for from := 0; from < ctx; from += maxN {
		n := min(maxN, ctx-from)
		if pass(from, n, false) != nil {
			return nil
		}
		keep := make([]int, n)
		for i := range keep {
			keep[i] = i
		}
		if c.Commit(keep) != nil {
			return nil
		}
	}
	cost := func(n int) time.Duration {
		c.Truncate(ctx)
		t := time.Now()
		if pass(ctx, n, true) != nil {
			failed = true
		}
		return time.Since(t)
	}
	cost(maxN) // warm the scratch buffers
	// The sizes are measured in rounds, each round over all of them, and
	// each size keeps its best: a burst of load from elsewhere then
	// slows one pass of several sizes, not every pass of one size. The
	// small sizes get a round more. Their differences are what prices a
	// verified token (spec.Prices at one sequence reads T(2) - T(1)), and
	// with two back-to-back runs a size, that price moved by 2.5x from
	// one runtime to the next on this machine.
	best := make([]time.Duration, len(sizes))
	for r := range rounds(1) {
		for i, n := range sizes {
			if r >= rounds(n) {
				continue
			}
			if t := cost(n); r == 0 || t < best[i] {
				best[i] = t
			}
		}
	}
	curve := &costCurve{}
	for i, n := range sizes {
		t := best[i]
		// A pass over more tokens never costs less: smooth the noise.
		if k := len(curve.ts); k > 0 {
			t = max(t, curve.ts[k-1])
		}
		curve.ns, curve.ts = append(curve.ns, n), append(curve.ts, t)
	}
	// A prompt token's price: prefill passes from an empty cache with the
	// last token's logits, as a chunk runs, at maxN and a quarter of it.
	if lo := maxN / 4; lo >= 2 {
		sizes := [2]int{lo, maxN}
		var best [2]time.Duration
		for r := range rounds(maxN) {
			for i, n := range sizes {
				c.Truncate(0)
				t := time.Now()
				if pass(0, n, false) != nil {
					failed = true
				}
				if d := time.Since(t); r == 0 || d < best[i] {
					best[i] = d
				}
			}
		}
		curve.prompt = max(0, (best[1]-best[0])/time.Duration(maxN-lo))
	}
	if failed {
		return nil
	}
	// The batches only where the model's context holds twice the
	// curve's (their longer passes read that many rows).
	if maxRoots > 1 && ctx == curveContext && m.Config().ContextTrain > 2*curveContext+1 {
		if !measureRoots(m, curve, maxRoots, maxN, ran) {
			return nil
		}
	}
	curves.Store(key, curve)
	return curve
}

// measureRoots measures into c the passes over one token each of n
// sequences, n at spec.CalibrationSizes(maxRoots), each sequence behind
// curveContext committed tokens in a cache of its own, the best of a few
// runs (rounds) interleaved as measureCost's; and the same batch of
// maxRoots at twice the context, whose extra cost over the rows added is
// the entry price (at least 0). The caches hold rows written to memory
// (kv.Cache.Fill, or a prefill where the runner's cache cannot fill):
// what sets a batch apart from a chain is reading them; a prefill runs
// passes of at most maxN tokens, the largest the curve ran. ran hears the
// tokens of each pass (rootsWork in all). false when a pass fails.
func measureRoots(m model.Runner, c *costCurve, maxRoots, maxN int, ran func(tokens int)) bool {
	short, long := make([]model.Cache, maxRoots), make([]model.Cache, maxRoots)
	defer func() {
		for _, q := range append(short, long...) {
			if q != nil {
				q.Truncate(0)
			}
		}
	}()
	for i := range maxRoots {
		var err error
		if short[i], err = filledCache(m, curveContext, i, maxN); err != nil {
			return false
		}
		if long[i], err = filledCache(m, 2*curveContext, maxRoots+i, maxN); err != nil {
			return false
		}
	}
	vocab := m.Config().Vocab
	var bt model.Batch
	var logits []float32
	var ids []int32
	ar, argmax := m.(model.ArgmaxRunner)
	if argmax {
		ids = make([]int32, maxRoots)
	} else {
		logits = make([]float32, maxRoots*vocab)
	}
	failed := false
	cost := func(caches []model.Cache, n int) time.Duration {
		bt.Tokens, bt.Cache, bt.Pos, bt.Parent, bt.Logits = bt.Tokens[:0], bt.Cache[:0], bt.Pos[:0], bt.Parent[:0], bt.Logits[:0]
		for i, q := range caches[:n] {
			bt.Tokens = append(bt.Tokens, int32((100+7*i)%vocab))
			bt.Cache = append(bt.Cache, q)
			bt.Pos = append(bt.Pos, q.Len())
			bt.Parent = append(bt.Parent, -1)
			bt.Logits = append(bt.Logits, true)
		}
		t := time.Now()
		var err error
		if argmax {
			err = ar.ForwardArgmax(&bt, ids[:n])
		} else {
			err = m.Forward(&bt, logits[:n*vocab])
		}
		d := time.Since(t)
		ran(n)
		for _, q := range caches[:n] {
			if q.Truncate(q.Len()) != nil { // drop the pass's scratch
				failed = true
			}
		}
		if err != nil {
			failed = true
		}
		return d
	}
	sizes := spec.CalibrationSizes(maxRoots)
	cost(short, maxRoots) // warm the scratch buffers
	best := make([]time.Duration, len(sizes))
	var bestLong time.Duration
	for r := range rounds(1) {
		for i, n := range sizes {
			if r >= rounds(n) {
				continue
			}
			if t := cost(short, n); r == 0 || t < best[i] {
				best[i] = t
			}
		}
		if t := cost(long, maxRoots); r == 0 || t < bestLong {
			bestLong = t
		}
	}
	if failed {
		return false
	}
	for i, n := range sizes {
		// Never cheaper for more sequences, nor than a chain of as many
		// tokens (which reads one cache where the batch reads n): one
		// sequence's pass is the chain's T(1), measured twice.
		t := max(best[i], c.at(n))
		if k := len(c.rootTs); k > 0 {
			t = max(t, c.rootTs[k-1])
		}
		c.rootNs, c.rootTs = append(c.rootNs, n), append(c.rootTs, t)
	}
	c.entry = max(0, (bestLong-c.rootTs[len(c.rootTs)-1])/time.Duration(maxRoots*curveContext))
	return true
}

// rootsWork is the tokens measureRoots runs: its passes' roots (the
// filling not counted).
func rootsWork(maxRoots int) int {
	n := 2 * maxRoots // the warm-up and the first long pass
	for _, k := range spec.CalibrationSizes(maxRoots) {
		n += rounds(k) * k
	}
	return n + (rounds(1)-1)*maxRoots
}

// filledCache is a cache of m holding n committed tokens whose rows are
// in memory, room for one token more: filled (kv.Cache.Fill) where the
// runner's cache can, else prefilled with tokens seeded by seed in passes
// of at most chunk tokens (prefillCache).
func filledCache(m model.Runner, n, seed, chunk int) (model.Cache, error) {
	c, err := m.NewCache(n + 1)
	if err != nil {
		return nil, err
	}
	if f, ok := c.(interface{ Fill(int) error }); ok {
		return c, f.Fill(n)
	}
	return c, prefillCache(m, c, n, seed, chunk)
}

// prefillCache commits n tokens seeded by seed to the empty cache c of m,
// in passes of at most chunk tokens (no more than the passes the runner
// has sized its scratch for).
func prefillCache(m model.Runner, c model.Cache, n, seed, chunk int) error {
	vocab := m.Config().Vocab
	var bt model.Batch
	var logits []float32
	chunk = max(1, chunk)
	for from := 0; from < n; from += chunk {
		k := min(chunk, n-from)
		bt.Tokens, bt.Cache, bt.Pos, bt.Parent, bt.Logits = bt.Tokens[:0], bt.Cache[:0], bt.Pos[:0], bt.Parent[:0], bt.Logits[:0]
		for i := range k {
			bt.Tokens = append(bt.Tokens, int32((100+13*seed+7*(from+i))%vocab))
			bt.Cache = append(bt.Cache, c)
			bt.Pos = append(bt.Pos, from+i)
			bt.Parent = append(bt.Parent, i-1)
			bt.Logits = append(bt.Logits, i == k-1)
		}
		var err error
		if ar, ok := m.(model.ArgmaxRunner); ok {
			var id [1]int32
			err = ar.ForwardArgmax(&bt, id[:])
		} else {
			if logits == nil {
				logits = make([]float32, vocab)
			}
			err = m.Forward(&bt, logits)
		}
		if err != nil {
			return err
		}
		keep := make([]int, k)
		for i := range keep {
			keep[i] = i
		}
		if err := c.Commit(keep); err != nil {
			return err
		}
	}
	return nil
}

// drafters dispatches each sequence to the drafter its request chose. The
// scheduler sees one Drafter; the kinds live beside the sequences.
type drafters struct {
	kind map[*spec.Seq]drafterKind
	// target is each sequence's KV cache in the target, which the early
	// exit's caches borrow from (draftNet.borrow).
	target map[*spec.Seq]model.Cache
	ngram  spec.NGramDrafter
	model  *modelDrafter // nil without a draft model
	early  *modelDrafter // nil until an early-exit request comes
	seqs   [4][]*spec.Seq
	trees  [4][]*spec.Tree
	errs   int // drafter failures (each cost one iteration's speculation)
	// accept calibrates each kind's path probabilities against what
	// verification accepted (the backend reports every verified tree);
	// calib holds a kind's factors for its drafter's stop rule.
	accept [4]spec.Acceptance
	calib  [4][spec.CalibDepths]float64
	// used is the drafter whose tree each sequence verifies this
	// iteration: a model-drafted request's tree may come from the n-gram
	// index instead (see Draft).
	used map[*spec.Seq]drafterKind
	// probeS and probeT are ngramFirst's scratch: the model drafters'
	// sequences and trees.
	probeS []*spec.Seq
	probeT []*spec.Tree
	// modelPace is, per model-drafted sequence, the measured time per
	// emitted token of its iterations that the model drafted (the draft
	// steps, catching its cache up, and the verify pass), which the
	// n-gram index's tree must beat to stand in.
	modelPace map[*spec.Seq]*spec.Pace
	// at is the target's forward cost curve (nil without one): it prices
	// an n-gram tree's verify pass.
	at func(int) time.Duration
	// streams is how many sequences decode in the iteration (set with
	// at): a standby tree's nodes cost all of them a longer pass.
	streams int
	// ngramDeeper lets the n-gram index draft deeper than the scheduler's
	// shape (ngramShape): the config gave no "spec_max_depth".
	ngramDeeper bool
}

// ngramMaxDepth is the n-gram index's D_max where the config leaves
// "spec_max_depth" to the defaults (spec.DefaultMaxDepth, the draft
// model's): its nodes cost microseconds to draft where a model's layer
// costs a pass, and a stretch being copied is often longer than 8 tokens.
// Whole-file rewrites on the Qwen2.5-Coder 1.5B (one stream, two runs
// each) went from 2.18–2.19x plain decoding to 2.34–2.38x with 12, and
// 2.24x with 16; the edit and code sets, and SmolLM2's grounded and chat
// sets, stayed within their noise. The draft model lost at 12 (code 1.46x
// to 1.41x), so it keeps 8.
const ngramMaxDepth = 12

// ngramShape is the shape the n-gram index drafts with for the requests
// that chose it: the scheduler's, its depth scaled by ngramMaxDepth/spec.DefaultMaxDepth where allowed
// (the share of the budget per request bounds both alike).
func (d *drafters) ngramShape(shape spec.Shape) spec.Shape {
	if d.ngramDeeper && shape.Branch == nil {
		shape.Depth = shape.Depth * ngramMaxDepth / spec.DefaultMaxDepth
	}
	return shape
}

// modelPaceDecay per iteration: a horizon of about ten iterations, longer
// than the speculation gate's (spec.Payoff), since a model-drafted
// iteration's tokens swing from one to a whole spine.
const modelPaceDecay = 0.9

// observe records one verified iteration of a speculating sequence: how
// long it took and the tokens it emitted.
func (d *drafters) observe(s *spec.Seq, requested drafterKind, took time.Duration, tokens int) {
	if tokens <= 0 || requested == draftNGram || d.usedBy(s, requested) != requested {
		return
	}
	if d.modelPace == nil {
		d.modelPace = map[*spec.Seq]*spec.Pace{}
	}
	p := d.modelPace[s]
	if p == nil {
		// The first model-drafted iteration fed the draft model the
		// whole prompt: a cost paid once, not the pace.
		d.modelPace[s] = &spec.Pace{Decay: modelPaceDecay}
		return
	}
	p.Add(took, tokens)
}

// forget drops a finished sequence's state.
func (d *drafters) forget(s *spec.Seq) {
	delete(d.kind, s)
	delete(d.target, s)
	delete(d.modelPace, s)
}

// ngramStandsIn says whether the n-gram index's tree t, drafted for a
// sequence that asked for a model drafter, is expected to emit tokens
// faster than the model drafter has been: its verify pass (the curve
// over the iteration's other roots and t's nodes) over one plus the
// expected accepted nodes (the sum of their calibrated path
// probabilities), against the sequence's measured model pace. Before the
// model's pace is known the tree must expect a whole accepted token.
//
// A bare tree (plain decoding) never stands in. Letting it stand in where
// the model's pace was slower than plain decoding (with the model drafting
// again every 16 such iterations) took whole-file rewrites on the Qwen
// pair from 1.79x to 1.85x plain, but the code and edit sets from 1.46x to
// 1.38x and 1.33x: a few slow iterations benched a model that paid.
func (d *drafters) ngramStandsIn(s *spec.Seq, t *spec.Tree, others int) bool {
	if t.Len() < 2 {
		return false
	}
	e := expectedNodes(t)
	p := d.modelPace[s]
	if p == nil || p.Iterations() == 0 || d.at == nil {
		return e >= 1
	}
	return d.at(others+t.Len()).Seconds()/(1+e) < p.PerToken()
}

// ngramFirst lets the n-gram index draft, in one call, for every request
// of a model drafter, and takes out of the model drafters' lists those
// whose n-gram tree stands in (ngramStandsIn; the others' trees are reset
// for their model). The index drafts in microseconds, and where an answer
// copies its prompt (a file rewritten with a small change) its tree often
// beats the model's, whose every step is a pass. n is the number of
// sequences in the iteration.
func (d *drafters) ngramFirst(shape spec.Shape, n int) {
	modelKinds := [...]drafterKind{draftModel, draftEarlyExit}
	d.probeS, d.probeT = d.probeS[:0], d.probeT[:0]
	for _, k := range modelKinds {
		if k == draftModel && d.model != nil || k == draftEarlyExit && d.early != nil {
			d.probeS = append(d.probeS, d.seqs[k]...)
			d.probeT = append(d.probeT, d.trees[k]...)
		}
	}
	if len(d.probeS) == 0 {
		return
	}
	// The scheduler's shape, not ngramShape's: deeper stand-ins left the
	// draft model further to catch up (rewrites 1.79x to 1.74x plain).
	if !d.probeNGram(shape) {
		return
	}
	for _, k := range modelKinds {
		ss, ts := d.seqs[k][:0], d.trees[k][:0]
		for i, s := range d.seqs[k] {
			t := d.trees[k][i]
			if d.ngramStandsIn(s, t, n-1) {
				d.used[s] = draftNGram
				continue
			}
			t.Reset(s.Tokens[len(s.Tokens)-1])
			ss, ts = append(ss, s), append(ts, t)
		}
		d.seqs[k], d.trees[k] = ss, ts
	}
}

// probeNGram lets the n-gram index draft the trees of probeS (probeT) in
// the given shape, its path probabilities calibrated by what verification
// accepted of its trees. Where the index fails it leaves the trees bare
// and returns false.
func (d *drafters) probeNGram(shape spec.Shape) bool {
	d.accept[draftNGram].Factors(d.calib[draftNGram][:])
	shape.Calib = d.calib[draftNGram][:]
	if d.ngram.Draft(d.probeS, shape, d.probeT) != nil {
		for i, t := range d.probeT {
			t.Reset(d.probeS[i].Tokens[len(d.probeS[i].Tokens)-1])
		}
		return false
	}
	for _, t := range d.probeT {
		d.accept[draftNGram].Scale(t)
	}
	return true
}

// expectedNodes is the sum of the path probabilities of t's drafted nodes:
// how many of them verification is expected to accept.
func expectedNodes(t *spec.Tree) float64 {
	e := 0.0
	for _, n := range t.Nodes[1:] {
		e += n.Prob
	}
	return e
}

// Standby implements spec.StandbyDrafter: for the model-drafted requests
// whose speculation is backed off (spec.Payoff), the n-gram index drafts
// in microseconds, and a tree is kept where it beats plain decoding on
// its own (ngramBeatsPlain). On the Qwen2.5-Coder pair, whole-file
// rewrites lost to plain decoding wherever the model drafted new lines
// (26 ms a token against 25: its steps, and its cache catching up on
// what the index had drafted), so their requests backed off, 35% of
// their iterations, and decoded the copied lines in those stretches one
// token a pass. Requests that chose the n-gram index itself get nothing
// here: what backed them off was the index.
func (d *drafters) Standby(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	d.probeS, d.probeT = d.probeS[:0], d.probeT[:0]
	for i, s := range seqs {
		delete(d.used, s)
		trees[i].Reset(s.Tokens[len(s.Tokens)-1])
		if k := d.kind[s]; k == draftModel || k == draftEarlyExit {
			d.probeS = append(d.probeS, s)
			d.probeT = append(d.probeT, trees[i])
		}
	}
	if len(d.probeS) == 0 {
		return nil
	}
	if !d.probeNGram(shape) {
		d.errs++
		return nil
	}
	if d.used == nil {
		d.used = map[*spec.Seq]drafterKind{}
	}
	for i, t := range d.probeT {
		s := d.probeS[i]
		if !d.ngramBeatsPlain(t, max(len(seqs), d.streams)) {
			t.Reset(s.Tokens[len(s.Tokens)-1])
			continue
		}
		d.used[s] = draftNGram
	}
	return nil
}

// ngramBeatsPlain says whether verifying the n-gram tree t is expected to
// emit its request's tokens faster than plain decoding, with n sequences
// in the pass: the request is charged the plain pass plus n times what
// its nodes add to it (the other streams wait for them too; see
// passCharge), over one plus the expected accepted nodes (the sum of their
// calibrated path probabilities). Without a cost curve a tree must expect
// a whole accepted token.
func (d *drafters) ngramBeatsPlain(t *spec.Tree, n int) bool {
	if t.Len() < 2 {
		return false
	}
	e := expectedNodes(t)
	if d.at == nil {
		return e >= 1
	}
	plain := d.at(n).Seconds()
	charged := plain + float64(n)*(d.at(n-1+t.Len()).Seconds()-plain)
	return charged/(1+e) < plain
}

// usedBy is the drafter that drafted the sequence's tree this iteration
// (its request's, unless the n-gram index stood in).
func (d *drafters) usedBy(s *spec.Seq, requested drafterKind) drafterKind {
	if k, ok := d.used[s]; ok {
		return k
	}
	return requested
}

func (d *drafters) Draft(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	for k := range d.seqs {
		d.seqs[k], d.trees[k] = d.seqs[k][:0], d.trees[k][:0]
	}
	if d.used == nil {
		d.used = map[*spec.Seq]drafterKind{}
	}
	clear(d.used)
	for i, s := range seqs {
		k := d.kind[s]
		trees[i].Reset(s.Tokens[len(s.Tokens)-1])
		d.seqs[k] = append(d.seqs[k], s)
		d.trees[k] = append(d.trees[k], trees[i])
	}
	d.ngramFirst(shape, len(seqs))
	for k, ss := range d.seqs {
		if len(ss) == 0 {
			continue
		}
		var dr spec.Drafter
		switch {
		case drafterKind(k) == draftNGram:
			dr = &d.ngram
		case drafterKind(k) == draftModel && d.model != nil:
			dr = d.model
		case drafterKind(k) == draftEarlyExit && d.early != nil:
			dr = d.early
		default:
			continue
		}
		// The stop rule judges nodes by the probabilities verification
		// has borne out: the Qwen2.5-Coder 0.5B draft model's were 2–19%
		// under what was accepted, so its spines stopped early.
		ks := shape
		if drafterKind(k) == draftNGram {
			ks = d.ngramShape(shape)
		}
		d.accept[k].Factors(d.calib[k][:])
		ks.Calib = d.calib[k][:]
		if err := dr.Draft(ss, ks, d.trees[k]); err != nil {
			// A drafter that fails costs its requests their speculation
			// this iteration, not their streams: verify the roots alone.
			for i, t := range d.trees[k] {
				t.Reset(ss[i].Tokens[len(ss[i].Tokens)-1])
			}
			d.errs++
			continue
		}
		for _, t := range d.trees[k] {
			d.accept[k].Scale(t)
		}
	}
	return nil
}

// Lag implements spec.CatchUpDrafter: what the draft model of the
// sequence's drafter (a separate model or the target's first layers)
// would feed its cache before drafting for it; the n-gram index feeds
// nothing.
func (d *drafters) Lag(s *spec.Seq) int {
	if m := d.modelOf(d.kind[s]); m != nil {
		return m.dm.lag(s)
	}
	return 0
}

// LagPrice implements spec.CatchUpDrafter: a pass of the draft model over
// n tokens (measured, else the prior: modelDrafter.passPrice). A draft
// model's, where there is one, else the early exit's.
func (d *drafters) LagPrice(n int) (time.Duration, bool) {
	if m := d.modelOf(draftModel); m != nil {
		return m.passPrice(n)
	}
	if m := d.modelOf(draftEarlyExit); m != nil {
		return m.passPrice(n)
	}
	return 0, false
}

// modelOf is the model drafter of kind k, nil for the n-gram index or a
// model not loaded.
func (d *drafters) modelOf(k drafterKind) *modelDrafter {
	switch k {
	case draftModel:
		return d.model
	case draftEarlyExit:
		return d.early
	}
	return nil
}

// modelDrafter drafts with a model — a separate GGUF sharing the target's
// vocabulary, or the target's own first layers — by beam search
// (spec.BeamDrafter over draftNet).
//
// Unless the shape is a fixed tree, it drafts a spine (spec.Shape.Spine):
// each step is one single-token pass of the draft model per sequence. It
// stops a sequence's spine where one more step no longer pays for itself
// (spec.StopProb), pricing the step at the draft model's measured step and
// the verified token at the target's cost curve (plain and marginal, set
// by the backend for the iteration's load).
//
// Where even a certain node could not pay for the step that drafts it
// (the stop probability is 1 or more: with several sequences a draft step
// costs a batched pass while a verified token is worth a share of one),
// it skips the step and leaves the trees bare. The step is priced from
// measured draft passes of as many tokens as it has sequences
// (draftNet.stepAt), once stepSamples of them were measured. It does not
// probe by drafting again later, which would first feed the draft model
// every token the skipped iterations emitted, a stall of a prompt's
// prefill; every repriceEvery skipped calls it times the step again on
// scratch instead (repriced), so that a price measured under contention
// does not bench it for good. Nor does a sequence catch up where the
// catch-up cannot pay (payingCatchUps).
type modelDrafter struct {
	beam spec.BeamDrafter
	dm   *draftNet

	plain, marginal time.Duration
	// at is the target's forward cost curve (nil without one): it prices
	// a draft step of a batch size not measured yet (see priorStep).
	at    func(int) time.Duration
	keepS []*spec.Seq // scratch of payingCatchUps
	keepT []*spec.Tree
	// skipped counts, per batch size, the calls the model sat out because
	// a step did not pay (see repriced).
	skipped map[int]int
	// always drafts even where no node can pay ("spec_adaptive": false,
	// which makes requests speculate where it does not pay, as the
	// simulator does and as tests of what speculation emits need).
	always bool
}

// stepSamples is how many draft steps of a batch size are measured before
// their price may stop drafting at that size (one can be an outlier).
const stepSamples = 3

func (m *modelDrafter) Draft(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	n := len(seqs)
	stop, priced := m.stopProb(n)
	if shape.Branch == nil && !m.always {
		if stop >= 1 && m.repriced(seqs[0], n) {
			stop, priced = m.stopProb(n)
		}
		if stop >= 1 {
			return nil
		}
		seqs, trees = m.payingCatchUps(seqs, trees, stop)
		if len(seqs) == 0 {
			return nil
		}
		if len(seqs) != n {
			stop, priced = m.stopProb(len(seqs)) // a smaller batch's step
		}
	}
	m.dm.seqs = seqs
	defer func() { m.dm.seqs = nil }()
	if shape.Branch == nil {
		shape.Spine = true
		// Every node is charged the whole step over all len(seqs)
		// sequences, though the step serves them all. Charging each
		// layer's step to the spines still drafting it instead (and
		// keeping the most probable spines whose sum pays) was tried: on
		// the Qwen pair with 4 streams it drafted 1.43–1.62 tokens a pass
		// and ran at 0.85× plain, against 0.97× here, most likely because
		// what drafting costs beyond the steps (each draft cache catching
		// up on what the target emitted) is not priced.
		if priced {
			shape.StopProb = stop
			if stop >= 1 && !m.always {
				return nil
			}
		} else if m.dm.Step.Observations() > 0 {
			// A batch size not drafted yet: draft (and so measure it),
			// cutting nodes at the price of the steps measured so far.
			shape.StopProb = spec.StopProb(m.dm.Step.Estimate(), m.marginal, m.plain)
		}
	}
	if err := m.beam.Draft(seqs, shape, trees); err != nil {
		return err
	}
	if shape.Spine && shape.StopProb > 0 {
		// Each request's gate weighs what its tree's steps cost against
		// the tokens verification accepts of it (spec.Payoff.Priced).
		for i, s := range seqs {
			s.Payoff.Priced(trees[i].Depth(), shape.StopProb)
		}
	}
	return nil
}

// repriceEvery is how many calls over n sequences the model sits out,
// their measured step being too dear to pay, before that step is measured
// again (draftNet.reprice): the measurement that benched it may have been
// a moment of contention, and a model that does not draft is not measured
// again. On the shared EPYC one benchmark runtime's draft model sat out
// nearly its whole first prompt set (0.98x plain on the code set, 2% of
// the time drafting, where the next run drafted at 1.39x) while another
// process had run beside its first steps. A re-measurement costs
// stepSamples draft passes, under 1% of the calls it follows.
const repriceEvery = 256

// repriced counts a call the model sits out for the price of a step over
// n sequences and, every repriceEvery of them, measures that step again on
// s's draft cache; it reports whether it did.
func (m *modelDrafter) repriced(s *spec.Seq, n int) bool {
	if m.skipped == nil {
		m.skipped = map[int]int{}
	}
	m.skipped[n]++
	return m.skipped[n]%repriceEvery == 0 && m.dm.reprice(s, n) == nil
}

// stopProb is the path probability below which a draft step over n
// sequences does not pay (spec.StopProb): priced is false while no step of
// that batch size was measured and none can be estimated (priorStep), and
// stop is then 0.
func (m *modelDrafter) stopProb(n int) (stop float64, priced bool) {
	step, ok := m.dm.stepAt(n)
	if !ok {
		step, ok = m.priorStep(n)
	}
	if !ok {
		return 0, false
	}
	return spec.StopProb(step, m.marginal, m.plain), true
}

// maxSaving is the largest share of a stream's remaining decode time
// speculation is taken to save. The best measured on a real pair is about
// a third (Qwen2.5-Coder 1.5B/0.5B, whole-file rewrites, 1.5x plain), so
// half is generous.
const maxSaving = 0.5

// savingShare is the share of the plain decoding time left that drafting
// can still save where a drafted node costs stop of a token's worth (the
// step and its verification: stop = StopProb): a node saves at most its
// token's worth less its cost, 1 − stop of the worth, and never more than
// maxSaving. Where stop is near 1 (on two cores, the 0.5B's step over two
// streams against the 1.5B's plain token), drafting saves next to nothing
// whatever its acceptance, so paying the draft cache's catch-up for it is
// a loss.
func savingShare(stop float64) float64 { return min(maxSaving, max(0, 1-stop)) }

// payingCatchUps keeps the sequences (and their trees) whose draft cache
// can catch up for less than what drafting could still save them: the
// draft pass over the tokens the cache lacks, against savingShare(stop)
// of the plain decoding of the tokens max_tokens and the cache still
// allow (Seq.MaxDepth; a sequence without that bound is kept). A request
// that drafted while it was alone, stopped when other streams made a step
// too dear, and is alone again near its end would otherwise feed the draft
// model its whole answer so far (hundreds of milliseconds on the Qwen
// pair) to draft its last few tokens; and a request that starts beside
// another would feed it its prompt for a step that barely pays.
func (m *modelDrafter) payingCatchUps(seqs []*spec.Seq, trees []*spec.Tree, stop float64) ([]*spec.Seq, []*spec.Tree) {
	if m.plain <= 0 {
		return seqs, trees
	}
	share := savingShare(stop)
	m.keepS, m.keepT = m.keepS[:0], m.keepT[:0]
	for i, s := range seqs {
		// Tokens the request may still emit: a tree of depth d emits at
		// most d+1 (limit sets MaxDepth so, or MaxNodes to 1 at the end).
		left := 0
		switch {
		case s.MaxDepth > 0:
			left = s.MaxDepth + 1
		case s.MaxNodes == 1:
			left = 1
		}
		if left > 0 {
			lag := m.dm.lag(s)
			if cost, ok := m.passPrice(lag); ok && cost.Seconds() > share*float64(left)*m.plain.Seconds() {
				continue
			}
		}
		m.keepS, m.keepT = append(m.keepS, s), append(m.keepT, trees[i])
	}
	return m.keepS, m.keepT
}

// passPrice is a draft pass over n tokens: measured (stepAt), else the
// prior (priorStep).
func (m *modelDrafter) passPrice(n int) (time.Duration, bool) {
	if t, ok := m.dm.stepAt(n); ok {
		return t, true
	}
	return m.priorStep(n)
}

// priorStep prices a draft step over n sequences before any was measured:
// the target's pass over n tokens scaled by the draft's measured cost
// relative to the target's at the nearest batch size measured (same
// kernels, so the two curves have one shape). Without it, every new batch
// size would be drafted stepSamples times to learn that it does not pay,
// and each of those steps first feeds the draft model every sequence's
// prompt: on two cores with eight streams, seconds of draft work for
// nothing. ok is false before any size was measured, or without a curve.
func (m *modelDrafter) priorStep(n int) (time.Duration, bool) {
	if m.at == nil {
		return 0, false
	}
	best := -1
	for k, t := range m.dm.stepBy {
		if t.Observations() >= stepSamples && (best < 0 || abs(k-n) < abs(best-n) || abs(k-n) == abs(best-n) && k < best) {
			best = k
		}
	}
	if best < 0 || m.at(best) <= 0 {
		return 0, false
	}
	ratio := float64(m.dm.stepBy[best].Estimate()) / float64(m.at(best))
	return time.Duration(ratio * float64(m.at(n))), true
}

func abs(x int) int { return max(x, -x) }

// draftState is a sequence's state in a draft model: its own KV cache and
// the tokens the cache holds (all committed). With a draft window the
// cache holds the sequence's tokens less skip of them after the first
// DraftSink (see draftNet.window); the cache's positions count what it
// holds.
type draftState struct {
	cache model.Cache
	toks  []int32
	skip  int
}

// DraftSink is how many leading tokens of a sequence a windowed draft
// cache keeps before its window: a model puts much of its attention on
// the first positions (StreamingLLM's "attention sinks"), and a context
// re-encoded without them predicts worse.
const DraftSink = 4

// view appends to dst the tokens of toks the cache is to hold: all of them,
// or without the skip tokens after the first DraftSink. ok is false where
// toks no longer reach past the skipped ones (a shorter sequence).
func (st *draftState) view(dst, toks []int32) (v []int32, ok bool) {
	if st.skip == 0 {
		return append(dst, toks...), true
	}
	if len(toks) < DraftSink+st.skip {
		return dst, false
	}
	return append(append(dst, toks[:DraftSink]...), toks[DraftSink+st.skip:]...), true
}

// held is how many leading tokens of toks the cache already holds: the
// common prefix that a sync keeps.
func (st *draftState) held(toks []int32) int {
	p := 0
	for p < len(st.toks) && p < len(toks) && st.toks[p] == toks[p] {
		p++
	}
	return p
}

// draftNet is spec.TopKDraftModel over a model.Runner (or its first
// layers). Each sequence keeps a KV cache of one path: its tokens and, after
// a spine step (spec.Shape.Spine), the drafted chain below its root. A query
// whose sequence is alone in the call is answered by syncing that cache to
// the query's Context followed by its Path — truncate to the longest common
// prefix, feed the rest, commit it — so a spine step feeds one token, and
// the next iteration's first step only feeds what verification did not
// take from the chain (the bonus token, or the accepted side leaf). Several
// queries of one sequence in a call (a beam or a fixed tree) are fed as the
// union of their paths below the committed root, in scratch, dropped after
// the call.
type draftNet struct {
	m      model.Runner
	layers int // > 0: the early exit, through m's first layers (m is a model.PrefixRunner)
	// headRows > 0 limits proposals to the token ids below it, computing
	// only those rows of the output head (m is a model.HeadRunner).
	headRows int
	// catchUp > 0 feeds a sequence's cache at most that many tokens in the
	// call's own pass: a longer catch-up (a new prompt) first runs in
	// passes of catchUp tokens, so that a local (sliding-window) layer of
	// the draft's cache needs room for its window and catchUp tokens, not
	// the whole prompt.
	catchUp int
	// window > 0 starts a sequence's cache with at most its first
	// DraftSink and last window tokens: feeding the draft model a whole
	// prompt costs a draft prefill on the iteration after the first
	// token (0.6–0.8 s for a 400-token prompt on the Qwen2.5-Coder 0.5B
	// on two cores), where the next tokens depend mostly on the recent
	// ones. The cache then grows with the sequence as before.
	window int
	// borrow, where set (the early exit, whose layers are the target's
	// first ones), commits to the draft cache dst the next n entries of
	// the target's own cache of s: the K/V the target computed for tokens
	// it committed, which a catch-up would compute again. It reports
	// false where it cannot (a cache of another device, a local layer
	// that no longer holds them); sync then feeds the tokens.
	borrow func(s *spec.Seq, dst model.Cache, n int) bool
	// sideFed says whether the current call ran a catch-up pass (its
	// time is then no draft step's).
	sideFed  bool
	side     model.Batch // a catch-up pass
	newCache func() (model.Cache, error)
	free     []model.Cache

	seqs   []*spec.Seq
	batch  model.Batch
	logits []float32
	qrow   []int   // per query: its batch index
	qfed   []int   // per query: tokens it fed to its cache (synced queries)
	rowOf  []int   // per batch entry: its logits row, or -1
	ident  []int   // 0, 1, 2, ...
	skip   []bool  // per sequence of the call: no room in its cache
	count  []int   // per sequence of the call: its queries
	full   []int32 // scratch: Context followed by Path
	sorted []int32 // scratch for top-k
	owner  map[*spec.Seq]*draftState

	// Step is the measured duration of one call that fed one token a
	// query (one draft step), for the cost model; stepBy the duration of
	// a call by the tokens its pass ran, whose cost it grows with.
	Step   spec.Timing
	stepBy map[int]*spec.Timing
}

// stepAt is the measured draft pass over n tokens, the price of a step
// over n sequences; ok is false until stepSamples passes of that size
// were measured.
func (d *draftNet) stepAt(n int) (time.Duration, bool) {
	if t := d.stepBy[n]; t != nil && t.Observations() >= stepSamples {
		return t.Estimate(), true
	}
	return 0, false
}

// observePass records a draft pass over n tokens that took took; step
// says it fed one token a query (Step's sample).
func (d *draftNet) observePass(n int, step bool, took time.Duration) {
	if step {
		d.Step.Observe(took)
	}
	t := d.stepBy[n]
	if t == nil {
		if d.stepBy == nil {
			d.stepBy = map[int]*spec.Timing{}
		}
		t = &spec.Timing{}
		d.stepBy[n] = t
	}
	t.Observe(took)
}

func (d *draftNet) Vocab() int { return d.m.Config().Vocab }

// rowWidth is the floats of one logits row: the ids proposals come from.
func (d *draftNet) rowWidth() int {
	if d.headRows > 0 {
		return d.headRows
	}
	return d.Vocab()
}

func (d *draftNet) forward(b *model.Batch, logits []float32) error {
	switch {
	case d.layers > 0:
		return d.m.(model.PrefixRunner).ForwardPrefix(b, logits, d.layers)
	case d.headRows > 0:
		return d.m.(model.HeadRunner).ForwardHead(b, logits, d.headRows)
	}
	return d.m.Forward(b, logits)
}

// feed runs toks, the cache's next positions, through the draft in a pass
// of their own (no logits) and commits them.
func (d *draftNet) feed(c model.Cache, toks []int32) error {
	if err := d.forward(d.sideChain(c, toks, false), nil); err != nil {
		return err
	}
	for len(d.ident) < len(toks) {
		d.ident = append(d.ident, len(d.ident))
	}
	return c.Commit(d.ident[:len(toks)])
}

// sideChain fills the catch-up batch with toks as a chain at c's next
// positions, each with a logits row or none.
func (d *draftNet) sideChain(c model.Cache, toks []int32, logits bool) *model.Batch {
	b := &d.side
	b.Tokens, b.Cache, b.Pos, b.Parent, b.Logits = b.Tokens[:0], b.Cache[:0], b.Pos[:0], b.Parent[:0], b.Logits[:0]
	for i, tok := range toks {
		b.Tokens = append(b.Tokens, tok)
		b.Cache = append(b.Cache, c)
		b.Pos = append(b.Pos, c.Len()+i)
		b.Parent = append(b.Parent, i-1)
		b.Logits = append(b.Logits, logits)
	}
	return b
}

// lag is how many tokens the sequence's draft cache lacks: what its next
// sync feeds before drafting. A cache that borrows the target's entries
// (borrow) feeds only the root, which the target has not committed.
func (d *draftNet) lag(s *spec.Seq) int {
	if d.borrow != nil {
		return 1
	}
	if st := d.state(s); st != nil && len(st.toks) > 0 {
		if v, ok := st.view(d.full[:0], s.Tokens); ok {
			d.full = v
			return len(v) - st.held(v)
		}
	}
	// A new cache, or one that starts again (see sync).
	return len(s.Tokens) - d.newSkip(len(s.Tokens))
}

// newSkip is how many of a sequence's n tokens a new cache leaves out
// after the first DraftSink: all but the last window (none without one).
func (d *draftNet) newSkip(n int) int {
	if d.window <= 0 {
		return 0
	}
	return max(0, n-DraftSink-d.window)
}

// state returns the sequence's draft state (see ensureStates).
func (d *draftNet) state(s *spec.Seq) *draftState { return d.owner[s] }

// ensureStates gives every queried sequence a draft cache, taking one from
// the pool or reserving a new one (which can fail on a device short of
// memory: the drafter then fails this iteration, not the streams).
func (d *draftNet) ensureStates(queries []spec.Query) error {
	for _, q := range queries {
		if _, err := d.stateFor(d.seqs[q.Seq]); err != nil {
			return err
		}
	}
	return nil
}

// stateFor returns the sequence's draft state, giving it one first (a
// cache from the pool, or a new one).
func (d *draftNet) stateFor(s *spec.Seq) (*draftState, error) {
	if st := d.owner[s]; st != nil {
		return st, nil
	}
	var c model.Cache
	if n := len(d.free); n > 0 {
		c, d.free = d.free[n-1], d.free[:n-1]
		c.Truncate(0)
	} else {
		var err error
		if c, err = d.newCache(); err != nil {
			return nil, fmt.Errorf("draft cache: %w", err)
		}
	}
	st := &draftState{cache: c}
	d.owner[s] = st
	return st, nil
}

// reprice measures a draft step over n sequences again and makes it the
// step's price (stepBy[n]), forgetting what was measured before: as many
// passes as a price needs (stepSamples), each of n tokens with a logits
// row apiece, as a step over n sequences has, fed to s's cache past what
// it holds and dropped after (nothing is committed, so the cache and what
// the drafter knows of it stay as they were).
func (d *draftNet) reprice(s *spec.Seq, n int) error {
	st, err := d.stateFor(s)
	if err != nil {
		return err
	}
	c := st.cache
	if n <= 0 || c.Len()+n > c.Cap() {
		return fmt.Errorf("draft cache: no room for %d tokens", n)
	}
	toks := make([]int32, n) // any ids: a step's cost does not depend on them
	for i := range toks {
		toks[i] = s.Tokens[len(s.Tokens)-1]
	}
	b := d.sideChain(c, toks, true)
	if v := n * d.rowWidth(); cap(d.logits) < v {
		d.logits = make([]float32, v)
	}
	t := &spec.Timing{}
	for range stepSamples {
		start := time.Now()
		err := d.forward(b, d.logits[:n*d.rowWidth()])
		took := time.Since(start)
		if err == nil {
			err = c.Commit(nil) // keep none of the scratch
		}
		if err != nil {
			return err
		}
		t.Observe(took)
	}
	if d.stepBy == nil {
		d.stepBy = map[int]*spec.Timing{}
	}
	d.stepBy[n] = t
	return nil
}

// release returns a finished sequence's cache to the pool.
func (d *draftNet) release(s *spec.Seq) {
	if st := d.owner[s]; st != nil {
		d.free = append(d.free, st.cache)
		delete(d.owner, s)
	}
}

func (d *draftNet) add(c model.Cache, tok int32, pos, parent int, logits bool) int {
	b := &d.batch
	b.Tokens = append(b.Tokens, tok)
	b.Cache = append(b.Cache, c)
	b.Pos = append(b.Pos, pos)
	b.Parent = append(b.Parent, parent)
	b.Logits = append(b.Logits, logits)
	return len(b.Tokens) - 1
}

func (d *draftNet) NextDistributions(queries []spec.Query, out []float32) error {
	return fmt.Errorf("draft model: only top-k queries are supported")
}

// sync adds to the batch what the sequence's cache lacks of Context
// followed by Path, after truncating the cache to their common prefix, and
// returns the batch index of the path's last token and how many tokens it
// fed (-1, 0 when the cache cannot hold the path).
func (d *draftNet) sync(st *draftState, q spec.Query) (int, int) {
	c := st.cache
	if c.Len() > 0 && len(q.Context) < DraftSink+st.skip {
		// The sequence no longer reaches past the skipped tokens: start
		// the cache again.
		if c.Truncate(0) != nil {
			return -1, 0
		}
	}
	if c.Len() == 0 {
		// A new (or emptied) cache chooses its window.
		st.toks, st.skip = st.toks[:0], d.newSkip(len(q.Context))
	}
	full, _ := st.view(d.full[:0], q.Context) // reaches past skip: checked above
	full = append(full, q.Path...)
	d.full = full
	if len(full) == 0 || len(full) > c.Cap() {
		return -1, 0
	}
	p := min(st.held(full), len(full)-1) // the last token is fed for its logits
	if p < c.Len() {
		if err := c.Truncate(p); err != nil {
			// A local layer no longer holds the window before p (it keeps
			// only a few positions behind its window): feed it all again.
			p = 0
			if err := c.Truncate(0); err != nil {
				return -1, 0
			}
		}
		st.toks = st.toks[:p]
	}
	if d.borrow != nil && st.skip == 0 {
		// Positions below the root's are the tokens the target has
		// committed (Seq.Committed), its K/V at those positions ours.
		if n := len(q.Context) - 1 - p; n > 0 && d.borrow(d.seqs[q.Seq], c, n) {
			st.toks = append(st.toks, full[p:p+n]...)
			p += n
		}
	}
	for d.catchUp > 0 && len(full)-p > d.catchUp {
		if err := d.feed(c, full[p:p+d.catchUp]); err != nil {
			return -1, 0
		}
		d.sideFed = true
		st.toks = append(st.toks, full[p:p+d.catchUp]...)
		p += d.catchUp
	}
	parent := -1
	for i := p; i < len(full); i++ {
		parent = d.add(c, full[i], i, parent, i == len(full)-1)
	}
	st.toks = append(st.toks, full[p:]...)
	return parent, len(full) - p
}

// NextTopK runs the draft model once over every query's context and writes
// each query's k most probable next tokens (softmax over the full row).
func (d *draftNet) NextTopK(queries []spec.Query, k int, ids []int32, probs []float32) error {
	start := time.Now()
	defer func() {
		// Every call's pass is timed by its tokens: a step over n
		// sequences feeds one token each, and the first step of an
		// iteration also feeds what the sequences emitted since their
		// last draft. Timing only the calls that fed one token a query
		// left several streams unpriced for good: their first calls
		// always carry a catch-up, and a spine stopped after one step
		// has no other. A call that ran a separate catch-up pass
		// (sideFed) is not a step's price.
		if !d.sideFed && len(d.batch.Tokens) > 0 {
			d.observePass(len(d.batch.Tokens), len(d.batch.Tokens) <= len(queries), time.Since(start))
		}
	}()
	d.sideFed = false
	if err := d.ensureStates(queries); err != nil {
		return err
	}
	b := &d.batch
	b.Tokens, b.Cache, b.Pos, b.Parent, b.Logits = b.Tokens[:0], b.Cache[:0], b.Pos[:0], b.Parent[:0], b.Logits[:0]
	d.qrow, d.qfed = d.qrow[:0], d.qfed[:0]
	d.skip = append(d.skip[:0], make([]bool, len(d.seqs))...)
	d.count = append(d.count[:0], make([]int, len(d.seqs))...)
	for _, q := range queries {
		d.count[q.Seq]++
	}
	start0 := 0
	for qi, q := range queries {
		st := d.state(d.seqs[q.Seq])
		c := st.cache
		if d.count[q.Seq] == 1 || q.Depth == 0 {
			// One path: sync the cache to it (a root's query has no path,
			// so the roots of a beam's first step sync to their context).
			row, fed := d.sync(st, q)
			d.qrow, d.qfed = append(d.qrow, row), append(d.qfed, fed)
			if row < 0 {
				d.skip[q.Seq] = true
			}
			continue
		}
		// The union of the paths, as a tree in scratch below the cache's
		// committed root (synced by the step of the roots).
		d.qfed = append(d.qfed, 0)
		if qi == 0 || queries[qi-1].Seq != q.Seq {
			start0 = len(b.Tokens)
		}
		if d.skip[q.Seq] || c.Len() != len(q.Context)-st.skip || c.Len()+len(b.Tokens)-start0+len(q.Path) > c.Cap() {
			d.skip[q.Seq] = true
			d.qrow = append(d.qrow, -1)
			continue
		}
		parent := -1
		for j, tok := range q.Path {
			found := -1
			for e := start0; e < len(b.Tokens); e++ {
				if b.Parent[e] == parent && b.Tokens[e] == tok && b.Pos[e] == c.Len()+j {
					found = e
					break
				}
			}
			if found < 0 {
				found = d.add(c, tok, c.Len()+j, parent, false)
			}
			parent = found
		}
		b.Logits[parent] = true
		d.qrow = append(d.qrow, parent)
	}
	d.rowOf = d.rowOf[:0]
	nl := 0
	for _, l := range b.Logits {
		if l {
			d.rowOf = append(d.rowOf, nl)
			nl++
		} else {
			d.rowOf = append(d.rowOf, -1)
		}
	}
	v := d.rowWidth()
	if cap(d.logits) < nl*v {
		d.logits = make([]float32, nl*v)
	}
	logits := d.logits[:nl*v]
	if len(b.Tokens) > 0 {
		if err := d.forward(&d.batch, logits); err != nil {
			// The synced tokens never reached the caches: forget them.
			for qi, q := range queries {
				if n := d.qfed[qi]; n > 0 {
					st := d.state(d.seqs[q.Seq])
					st.toks = st.toks[:len(st.toks)-n]
				}
			}
			return err
		}
	}
	// Keep the synced paths; drop the unions' scratch.
	for qi, q := range queries {
		c := d.state(d.seqs[q.Seq]).cache
		n := d.qfed[qi]
		for len(d.ident) < n {
			d.ident = append(d.ident, len(d.ident))
		}
		if err := c.Commit(d.ident[:n]); err != nil {
			return err
		}
	}
	for qi := range queries {
		if d.qrow[qi] < 0 {
			continue // probabilities stay 0: nothing proposed
		}
		row := logits[d.rowOf[d.qrow[qi]]*v : (d.rowOf[d.qrow[qi]]+1)*v]
		softmaxTopK(row, k, ids[qi*k:(qi+1)*k], probs[qi*k:(qi+1)*k])
	}
	return nil
}

// softmaxTopK writes the k most probable tokens of a logits row, by
// descending probability (ties: the lower id), and their softmax
// probabilities. It overwrites the row with its unnormalised softmax
// weights: one pass of comparisons finds the top k, whose first is the
// maximum, and the normaliser runs on the SIMD exponential (model.ExpSum).
func softmaxTopK(row []float32, k int, ids []int32, probs []float32) {
	if k <= 0 || len(row) == 0 {
		return
	}
	n := 0
	for i, v := range row {
		if n == k && v <= row[ids[n-1]] {
			continue
		}
		if n < k {
			n++
		}
		j := n - 1
		for ; j > 0 && row[ids[j-1]] < v; j-- {
			ids[j] = ids[j-1]
		}
		ids[j] = int32(i)
	}
	z := model.ExpSum(row, row[ids[0]])
	for j := range n {
		probs[j] = row[ids[j]] / z
	}
	for j := n; j < k; j++ {
		probs[j] = 0
	}
}
