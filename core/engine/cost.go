package engine

import (
	"fmt"
	"sync"
	"time"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
)

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
	// roots is the largest batch measureCost was asked to measure: the
	// batches reach it, or the model's context was too short for any.
	roots int
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
// once (curveStore keeps them across processes). A cached curve serves
// any maxN it reaches; a longer one is measured anew and replaces it.
var curves sync.Map // string -> *costCurve

// reaches reports whether the curve was measured up to at least n tokens
// and, beside it, batches of up to at least roots sequences where the
// model's context allows batches (measureCost).
func (c *costCurve) reaches(n, roots int) bool {
	return len(c.ns) > 0 && c.ns[len(c.ns)-1] >= n && (roots <= 1 || c.roots >= roots)
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
//
// Every step that touches the model or a cache runs through the gate g
// (nil: at once; see calibrate.go). A quick measurement (idle-time
// calibration's stand-in) runs quickSizes once each, and neither the
// prompt price nor batches, and is not kept.
func measureCost(key string, m model.Runner, maxN, maxRoots int, progress func(float64), g *passGate, quick bool) *costCurve {
	if c, ok := curves.Load(key); ok && c.(*costCurve).reaches(maxN, maxRoots) {
		return c.(*costCurve)
	}
	curveMeasurements.Add(1)
	ctx := max(0, min(curveContext, m.Config().ContextTrain-maxN-1))
	var c model.Cache
	var err error
	if !g.run(func() { c, err = m.NewCache(ctx + maxN + 1) }) || err != nil {
		return nil
	}
	defer g.run(func() { c.Truncate(0) })
	rounds := rounds
	if quick {
		rounds = func(int) int { return 1 }
	}
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
	if quick {
		sizes, maxRoots = quickSizes(maxN), 1
	}
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
	// scratch the runner sized), committed; a quick measurement fills
	// the rows without computing them where the cache can.
	filled := false
	if f, ok := c.(interface{ Fill(int) error }); ok && quick {
		if !g.run(func() { err = f.Fill(ctx) }) || err != nil {
			return nil
		}
		filled = true
	}
	for from := 0; from < ctx && !filled; from += maxN {
		n := min(maxN, ctx-from)
		keep := make([]int, n)
		for i := range keep {
			keep[i] = i
		}
		step := func() {
			if err = pass(from, n, false); err == nil {
				err = c.Commit(keep)
			}
		}
		if !g.run(step) || err != nil {
			return nil
		}
	}
	cost := func(n int) (d time.Duration) {
		ok := g.run(func() {
			c.Truncate(ctx)
			t := time.Now()
			if pass(ctx, n, true) != nil {
				failed = true
			}
			d = time.Since(t)
		})
		failed = failed || !ok
		return d
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
	curve := &costCurve{roots: maxRoots}
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
	if lo := maxN / 4; lo >= 2 && !quick {
		sizes := [2]int{lo, maxN}
		var best [2]time.Duration
		for r := range rounds(maxN) {
			for i, n := range sizes {
				var d time.Duration
				ok := g.run(func() {
					c.Truncate(0)
					t := time.Now()
					if pass(0, n, false) != nil {
						failed = true
					}
					d = time.Since(t)
				})
				failed = failed || !ok
				if r == 0 || d < best[i] {
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
		if !measureRoots(m, curve, maxRoots, maxN, ran, g) {
			return nil
		}
	}
	if !quick {
		curves.Store(key, curve)
	}
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
func measureRoots(m model.Runner, c *costCurve, maxRoots, maxN int, ran func(tokens int), g *passGate) bool {
	short, long := make([]model.Cache, maxRoots), make([]model.Cache, maxRoots)
	defer g.run(func() {
		for _, q := range append(short, long...) {
			if q != nil {
				q.Truncate(0)
			}
		}
	})
	for i := range maxRoots {
		var err error
		if !g.run(func() { short[i], err = filledCache(m, curveContext, i, maxN) }) || err != nil {
			return false
		}
		if !g.run(func() { long[i], err = filledCache(m, 2*curveContext, maxRoots+i, maxN) }) || err != nil {
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
	var rootsPass func(caches []model.Cache, n int) time.Duration
	cost := func(caches []model.Cache, n int) (d time.Duration) {
		if !g.run(func() { d = rootsPass(caches, n) }) {
			failed = true
		}
		return d
	}
	rootsPass = func(caches []model.Cache, n int) time.Duration {
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

// setCurve makes c (nil: none) the curve the backend prices with: its
// passes (spec.PassCost, batches at rootsPrice) are what AdaServe's SLO
// guard (spec.Guard) prices a plain iteration with, as do the batching
// rules (sitOut, prefillBudget, promptFloor).
func (b *Backend) setCurve(c *costCurve) {
	b.price.curve, b.price.cost, b.sched.PlainCost = c, spec.PassCost{}, nil
	if c != nil {
		b.price.cost = spec.PassCost{Chain: c.at, Roots: b.rootsPrice, Context: curveContext, Entry: c.entry, Prompt: c.prompt}
		b.sched.PlainCost = b.price.cost.Plain
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
	at := b.price.curve.rootsAt
	t := at(n)
	for m := min(n, len(b.price.plainPass)-1); m >= 1; m-- {
		if p := b.price.plainPass[m]; p > 0 {
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
	if n >= len(b.price.plainPass) || b.price.plainPass[n] <= 0 || b.price.curve == nil {
		return 1
	}
	if at := b.price.curve.at(n); at > 0 {
		return float64(b.price.plainPass[n]) / float64(at)
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

// MeasureCurve measures the forward pass's cost curve of the model at path
// on a device (load; device names it in the calibration key) with the
// given threads, up to maxN tokens, a prompt token's price, and batches of
// up to maxRoots sequences (none below 2; see costCurve), exactly as a
// runtime does at start-up (the sizes of spec.CalibrationSizes, the best of a few runs
// each): for the AdaServe simulator, which must be driven by the curves
// the engine itself prices with. The curve is unnamed.
func MeasureCurve(device string, load LoadRunner, path string, threads, maxN, maxRoots int) (spec.Curve, error) {
	if threads < 1 || maxN < 2 {
		return spec.Curve{}, status.Errorf(status.InvalidArgument, "MeasureCurve: threads %d and maxN %d must be ≥ 1 and ≥ 2", threads, maxN)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return spec.Curve{}, status.Errorf(status.Model, "%v", err)
	}
	defer f.Close()
	m, err := load(f, threads, nil)
	if err != nil {
		return spec.Curve{}, status.Errorf(status.Model, "%v", err)
	}
	defer m.Close()
	c := measureCost(fmt.Sprintf("%s/%s/%d", device, path, threads), m, maxN, maxRoots, nil, nil, false)
	if c == nil {
		return spec.Curve{}, status.Errorf(status.Backend, "MeasureCurve: a forward pass failed")
	}
	out := spec.Curve{N: c.ns, T: c.ts, RootN: c.rootNs, RootT: c.rootTs, Entry: c.entry, Prompt: c.prompt}
	if len(c.rootNs) > 0 {
		out.Context = curveContext
	}
	return out, nil
}
