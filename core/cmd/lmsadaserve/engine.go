package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/lmstream/lmstream/core/cpu"
	"github.com/lmstream/lmstream/core/cuda"
	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/spec/sim"
	"github.com/lmstream/lmstream/streaming"
)

// engineOpts configure the real-engine run (-engine).
type engineOpts struct {
	out, model, draft, prompts string
	// backend is the device the engine runs on and its curves are
	// measured on: "cpu" (the default where empty) or "cuda".
	backend                  string
	threads, slots, requests int
	maxTokens                int // caps every category's output range
	policies                 []string
	loads                    []float64
	seed                     uint64
	// replicas is how many workloads (sim.Setting.Replicas) every policy
	// serves at each load, pooled into its point.
	replicas int
	check    bool // replay each point in the simulator
	// adaptive is the engine's "spec_adaptive": true (its default) lets
	// spec.Payoff make a request decode plainly while speculation is
	// measured not to pay, which the simulator does not model; false
	// makes the engine speculate as the simulator does.
	adaptive bool
	// curves, when set, is an earlier run's output directory whose cost
	// curves this run takes instead of measuring its own (see
	// engineCurve).
	curves string
	// pace, with -replay, scales the run's cost curves for the simulator
	// while the run's SLOs stay as they were: the engine's pace against
	// its curve, which a two-core VM moves by 10–20% (1: the curve as
	// measured). measuredPace, with -replay, instead scales each batch
	// size to the pace the engine ran it at (enginePaced).
	pace         float64
	measuredPace bool
}

// promptSets are the committed prompt sets (core/engine/testdata) each
// category of the paper's mix draws from: latency-critical requests are a
// coding assistant's (code, edit), moderate ones grounded rewriting and
// summarising, relaxed ones chat.
var promptSets = [][]string{{"code", "edit"}, {"grounded"}, {"chat"}}

// device is o.backend's name and device: the CPU or the GPU engine, whose
// curves and runs differ only in the device under the engine.
func (o engineOpts) device() (string, engine.Device, error) {
	switch o.backend {
	case "", "cpu":
		return "cpu", cpu.Device, nil
	case "cuda":
		return "cuda", cuda.Device, nil
	}
	return "", nil, fmt.Errorf("-backend %q: want cpu or cuda", o.backend)
}

// loadPromptSets reads a directory's prompt sets (JSON lines with a
// "content" field), one list per category of promptSets.
func loadPromptSets(dir string) ([][]string, error) {
	out := make([][]string, len(promptSets))
	for c, names := range promptSets {
		for _, n := range names {
			f, err := os.Open(filepath.Join(dir, n+".jsonl"))
			if err != nil {
				return nil, fmt.Errorf("prompt set: %w", err)
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			for line := 1; sc.Scan(); line++ {
				var l struct{ Content string }
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Content == "" {
					f.Close()
					return nil, fmt.Errorf("prompt set %s.jsonl line %d: no \"content\" (%v)", n, line, err)
				}
				out[c] = append(out[c], l.Content)
			}
			err = sc.Err()
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("prompt set %s.jsonl: %w", n, err)
			}
		}
		if len(out[c]) == 0 {
			return nil, fmt.Errorf("prompt sets %v are empty", names)
		}
	}
	return out, nil
}

// engineMix is the paper's mix with every output range capped at
// maxTokens (a two-core CPU serves far fewer tokens than the paper's GPU).
func engineMix(maxTokens int) []sim.Category {
	mix := append([]sim.Category(nil), sim.PaperMix...)
	for i := range mix {
		mix[i].Output = [2]int{min(mix[i].Output[0], maxTokens), min(mix[i].Output[1], maxTokens)}
	}
	return mix
}

// engineSetting is the measured-curve setting the engine is compared
// with: the curve MeasureCurve takes for the model (the one the engine
// prices speculation with), the budget the engine calibrates from it, and
// the engine's tree limits.
func engineSetting(o engineOpts, prompts [][]string) (sim.Setting, error) {
	c, err := engineCurve(o, o.model, 160, o.slots, targetCurveFile)
	if err != nil {
		return sim.Setting{}, err
	}
	c.Name = fmt.Sprintf("%s measured (%s, %d threads)", cmp.Or(o.backend, "cpu"), filepath.Base(o.model), o.threads)
	return engineSettingOn(o, c, prompts)
}

// engineSettingOn is engineSetting on the target's curve c, already
// measured or read.
func engineSettingOn(o engineOpts, c sim.Curve, prompts [][]string) (sim.Setting, error) {
	var dc *sim.Curve
	if o.draft != "" {
		d, err := engineCurve(o, o.draft, 16, 1, draftCurveFile)
		if err != nil {
			return sim.Setting{}, err
		}
		dc = &d
	}
	m := engineMachine(o, c, dc)
	mix := engineMix(o.maxTokens)
	lens, err := promptTokens(o, prompts)
	if err != nil {
		return sim.Setting{}, err
	}
	for i := range mix {
		// The engine serves the committed prompts, not the mix's drawn
		// lengths; their mean is what the capacity (and so every load)
		// must count. The replay takes each request's served length.
		l := int(math.Round(lens[i]))
		mix[i].Prompt = [2]int{l, l}
	}
	return sim.Setting{Name: "engine", Machine: m, Mix: mix, Requests: o.requests,
		Loads: o.loads, Seed: o.seed, Replicas: o.replicas}, nil
}

// engineMachine is the simulated engine on the target's cost curve c and,
// with a draft model, the draft model's curve dc (nil: the n-gram
// drafter): the budget the engine calibrates from c and its tree limits.
func engineMachine(o engineOpts, c sim.Curve, dc *sim.Curve) sim.Machine {
	m := sim.Machine{Curve: c, Accept: sim.NGramAcceptance, Slots: o.slots,
		Budget: max(engine.DefaultMinBudget, spec.Calibrate(c.At, 48)), MaxDepth: 8, MaxWidth: 2}
	if dc != nil {
		// One batched draft layer: the draft model's pass over a batch's
		// beams, priced at 8 tokens.
		m.Accept, m.DraftStep = sim.DraftModelAcceptance, dc.At(8)
		// The engine prices each draft step at its batch size and, with
		// "spec_adaptive", skips the steps that cannot pay: the replay
		// does the same (without it the simulator speculates where the
		// engine declines, and the two part by tens of points).
		m.DraftCurve, m.Gate = dc, o.adaptive
		// A request's first draft feeds the draft model its context,
		// up to the window a new draft cache starts from.
		m.DraftWindow = engine.DefaultDraftWindow + engine.DraftSink
	}
	return m
}

// The files an -engine run keeps its cost curves in (CSV: tokens a pass,
// nanoseconds), for a later run's -curves; beside the target's, its
// batches' (rootsFile: sequences a pass, nanoseconds, the context, the
// row price and the prompt token price).
const (
	targetCurveFile = "curve.csv"
	draftCurveFile  = "draft-curve.csv"
)

// rootsHeader is the header of a rootsFile: a batch's sequences and its
// pass, with the context, row price and prompt token price on every line
// (spec.PassCost).
const rootsHeader = "sequences,ns,context,entry_ns,prompt_ns"

// rootsFile is the file beside a curve file that keeps its batches.
func rootsFile(curveFile string) string {
	return strings.TrimSuffix(curveFile, ".csv") + "-roots.csv"
}

// engineCurve is a model's cost curve up to maxN tokens, and its batches
// of up to maxRoots sequences (none below 2): measured as the engine
// measures them, or read from the files name (and its rootsFile, where
// the run kept one) in o.curves when that is set, and written to o.out
// either way. The curve sets the SLOs (the baseline is a batch of 8) and
// the arrival rates (the capacity), and a two-core VM measures T(8) up
// to 20% apart from one run to the next; two builds compared on one
// shared curve serve the same workload.
func engineCurve(o engineOpts, model string, maxN, maxRoots int, name string) (sim.Curve, error) {
	var c sim.Curve
	var err error
	if o.curves != "" {
		c, err = readCurves(filepath.Join(o.curves, name))
	} else {
		c, err = measureCurve(o, model, maxN, maxRoots)
	}
	if err != nil {
		return sim.Curve{}, err
	}
	return c, writeCurves(filepath.Join(o.out, name), c)
}

// measureCurve measures model's cost curve on o's device, as the engine
// measures it at start.
func measureCurve(o engineOpts, model string, maxN, maxRoots int) (sim.Curve, error) {
	name, dev, err := o.device()
	if err != nil {
		return sim.Curve{}, err
	}
	rc, err := loop.ParseConfig([]byte(`{}`)) // the device's own fields at their defaults
	if err != nil {
		return sim.Curve{}, err
	}
	load, err := dev(rc)
	if err != nil {
		return sim.Curve{}, err
	}
	return engine.MeasureCurve(name, load, model, o.threads, maxN, maxRoots)
}

// writeCurves writes c's chain to path and, where c has them, its batches
// to path's rootsFile.
func writeCurves(path string, c sim.Curve) error {
	if err := writeCurve(path, c.N, c.T); err != nil || len(c.RootN) == 0 {
		return err
	}
	var b strings.Builder
	b.WriteString(rootsHeader + "\n")
	for i := range c.RootN {
		fmt.Fprintf(&b, "%d,%d,%d,%d,%d\n", c.RootN[i], c.RootT[i].Nanoseconds(), c.Context, c.Entry.Nanoseconds(), c.Prompt.Nanoseconds())
	}
	return os.WriteFile(rootsFile(path), []byte(b.String()), 0o644)
}

// readCurves reads what writeCurves wrote: the chain, and the batches
// where path's rootsFile exists (a run from before they were measured
// has none, and is replayed on the chain alone, as it was simulated).
func readCurves(path string) (sim.Curve, error) {
	ns, ts, err := readCurve(path)
	if err != nil {
		return sim.Curve{}, err
	}
	c := sim.Curve{Name: path, N: ns, T: ts}
	data, err := os.ReadFile(rootsFile(path))
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return sim.Curve{}, fmt.Errorf("curve: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != rootsHeader {
		return sim.Curve{}, fmt.Errorf("curve %s: header %q, want %q", rootsFile(path), lines[0], rootsHeader)
	}
	for i, l := range lines[1:] {
		var n, ctx int
		var t, e, p int64
		if _, err := fmt.Sscanf(l, "%d,%d,%d,%d,%d", &n, &t, &ctx, &e, &p); err != nil {
			return sim.Curve{}, fmt.Errorf("curve %s line %d: %q: %v", rootsFile(path), i+2, l, err)
		}
		if i > 0 && (ctx != c.Context || time.Duration(e) != c.Entry || time.Duration(p) != c.Prompt) {
			return sim.Curve{}, fmt.Errorf("curve %s line %d: context, entry and prompt prices differ from the first line's", rootsFile(path), i+2)
		}
		c.RootN, c.RootT = append(c.RootN, n), append(c.RootT, time.Duration(t))
		c.Context, c.Entry, c.Prompt = ctx, time.Duration(e), time.Duration(p)
	}
	if err := c.Validate(); err != nil {
		return sim.Curve{}, err
	}
	return c, nil
}

func writeCurve(path string, ns []int, ts []time.Duration) error {
	var b strings.Builder
	b.WriteString("tokens,ns\n")
	for i := range ns {
		fmt.Fprintf(&b, "%d,%d\n", ns[i], ts[i].Nanoseconds())
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// readCurve reads what writeCurve wrote, refusing a curve sim.Curve would
// not take (no points, sizes not ascending from 1, costs that fall).
func readCurve(path string) ([]int, []time.Duration, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("curve: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != "tokens,ns" {
		return nil, nil, fmt.Errorf("curve %s: header %q, want \"tokens,ns\"", path, lines[0])
	}
	var c sim.Curve
	for i, l := range lines[1:] {
		var n int
		var t int64
		if _, err := fmt.Sscanf(l, "%d,%d", &n, &t); err != nil {
			return nil, nil, fmt.Errorf("curve %s line %d: %q: %v", path, i+2, l, err)
		}
		c.N, c.T = append(c.N, n), append(c.T, time.Duration(t))
	}
	c.Name = path
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	return c.N, c.T, nil
}

// promptTokens is the mean length in tokens of each category's prompts as
// the engine prefills them: the user message in the model's chat template.
func promptTokens(o engineOpts, prompts [][]string) ([]float64, error) {
	cj, _ := json.Marshal(map[string]any{"model_path": o.model, "threads": o.threads})
	rt, err := loop.New(cj)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	in, err := rt.Introspector()
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(prompts))
	for c, ps := range prompts {
		for _, p := range ps {
			text, err := in.RenderChat([]loop.Message{{Role: "user", Content: p}}, true, nil)
			if err != nil {
				return nil, err
			}
			ids, err := in.Tokenize(text, true, true)
			if err != nil {
				return nil, err
			}
			out[c] += float64(len(ids)) / float64(len(ps))
		}
	}
	return out, nil
}

// serve runs one workload through a fresh runtime under one policy: each
// request submitted at its arrival time (open loop) with its SLOs, its
// prompt the category's next one, every token's arrival on its channel
// timed. It also returns the backend's decoding request-iterations and
// how many of them sat out (engine.Timings), warm-up excluded.
func serve(o engineOpts, policy string, reqs []sim.Request, prompts [][]string) ([]record, engine.Timings, error) {
	cfg := map[string]any{"model_path": o.model, "max_slots": o.slots, "max_queue": len(reqs) + 1,
		"context_length": 1024, "threads": o.threads, "spec_policy": strings.ReplaceAll(policy, "-", "_"), "spec_adaptive": o.adaptive}
	if o.draft != "" {
		cfg["drafter"], cfg["draft_model_path"] = "draft_model", o.draft
	}
	cj, _ := json.Marshal(cfg)
	rc, err := loop.ParseConfig(cj)
	if err != nil {
		return nil, engine.Timings{}, err
	}
	// The backend built here rather than by loop.New, so that its counts
	// can be read once the runtime is closed.
	name, dev, err := o.device()
	if err != nil {
		return nil, engine.Timings{}, err
	}
	be, err := engine.NewOnDevice(rc, name, dev)
	if err != nil {
		return nil, engine.Timings{}, err
	}
	b := be.(*engine.Backend)
	rt := loop.Start(b, rc.MaxSlots, rc.MaxQueue)
	defer rt.Close() // a second Close is harmless
	// Warm up (scratch buffers, page cache), as the benchmarks do.
	if _, err := rt.Complete([]byte(`{"prompt":"Hello","max_tokens":4}`)); err != nil {
		return nil, engine.Timings{}, err
	}
	// Complete returns after the terminal chunk, which the engine sends
	// from its last Step of the request: its counts are in.
	warm := b.Timings()
	recs := make([]record, len(reqs))
	next := make([]int, len(prompts))
	var wg sync.WaitGroup
	start := time.Now()
	for i, q := range reqs {
		recs[i].Req = q
		p := prompts[q.Category][next[q.Category]%len(prompts[q.Category])]
		next[q.Category]++
		body := map[string]any{"messages": []map[string]string{{"role": "user", "content": p}}, "max_tokens": q.Output,
			"tpot_slo_ms": float64(q.TPOTSLO) / 1e6}
		if q.TTFTSLO > 0 {
			body["ttft_slo_ms"] = float64(q.TTFTSLO) / 1e6
		}
		bj, _ := json.Marshal(body)
		time.Sleep(time.Until(start.Add(q.Arrival)))
		ch := streaming.NewChannel()
		if err := rt.Submit(bj, []*streaming.Channel{ch}); err != nil {
			recs[i].Err = err.Error()
			continue
		}
		wg.Add(1)
		go func(r *record) {
			defer wg.Done()
			defer ch.Release()
			err := ch.Consume(func(c *streaming.Chunk) bool {
				now := time.Since(start)
				if len(c.TokenIDs) > 0 {
					if len(r.Tokens) > 0 {
						r.Chunks++
					}
					for range c.TokenIDs {
						r.Tokens = append(r.Tokens, now)
					}
				}
				if c.Finished {
					if c.Reason == streaming.Error {
						r.Err = c.ErrMessage
					}
					r.PromptTokens, r.Proposed, r.Accepted = c.Usage.PromptTokens, c.Usage.DraftProposed, c.Usage.DraftAccepted
				}
				return true
			})
			if err != nil && r.Err == "" {
				r.Err = err.Error()
			}
		}(&recs[i])
	}
	wg.Wait()
	rt.Close() // the engine's goroutine is done with b's counts
	return recs, b.Timings().Since(warm), nil
}

// engineRow is one point of the engine's sweep with its simulator replay.
type engineRow struct {
	Engine, Sim        sim.Row
	Proposed, Accepted int
	// Tree nodes verified per request-iteration (roots included): where
	// the two disagree, the simulator's drafter is not the engine's (the
	// synthetic one always has candidates; the n-gram drafter only where
	// the text repeats).
	EngineNodes, SimNodes float64
	// SimAccept is the share of the simulator's drafted nodes accepted,
	// beside the engine's Accepted/Proposed.
	SimAccept float64
	// EngineSatOut and SimSatOut are the shares of the decoding
	// request-iterations that sat out (spec.SitOut); NaN where not known
	// (a replayed file does not keep the engine's).
	EngineSatOut, SimSatOut float64
	// EngineHeld and SimHeld count the draft model's catch-ups AdaServe
	// held back (spec.HoldCatchUps); EngineHeld is -1 where not known.
	EngineHeld, SimHeld int
	// Fit is the acceptance the engine's drafts over the point's
	// replicas fit to (the replay of each replica fits its own), or nil
	// where they counted too little or were not kept.
	Fit *sim.Acceptance
}

// fitOf is the acceptance fitted from d, or nil where d counts too little.
func fitOf(m sim.Machine, d spec.DraftStats, draftModel bool) *sim.Acceptance {
	if f, ok := fittedMachine(m, d, draftModel); ok {
		return &f.Accept
	}
	return nil
}

// runEngine sweeps the real engine over the setting's loads and the
// policies, writes engine-rates.csv (the simulator's columns) with its
// plots, engine-requests.csv (every request: its TTFT, TPOT and SLO) and,
// with check, engine-vs-sim.csv: each point replayed in the
// simulator on the measured curve, the same requests, prompt lengths and
// output lengths the engine served.
func runEngine(o engineOpts) ([]engineRow, error) {
	if o.requests < 1 || o.slots < 1 || o.maxTokens < 2 || len(o.loads) == 0 || len(o.policies) == 0 {
		return nil, fmt.Errorf("engine run needs requests ≥ 1, slots ≥ 1, max tokens ≥ 2, a load and a policy")
	}
	var pols []serving.System
	for _, n := range o.policies {
		p, err := serving.ByConfigName(n) // its Name is the simulator's, which the CSV rows carry

		if err != nil {
			return nil, err
		}
		pols = append(pols, p)
	}
	prompts, err := loadPromptSets(o.prompts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	s, err := engineSetting(o, prompts)
	if err != nil {
		return nil, err
	}
	var plens []int
	for _, c := range s.Mix {
		plens = append(plens, c.Prompt[0])
	}
	fmt.Printf("engine: %s, %s, baseline TPOT %v, B=%d, %d slots, mean prompt tokens %v, capacity %.2f req/s\n",
		s.Machine.Curve.Name, s.Machine.Accept.Name, s.Machine.Baseline(), s.Machine.Budget, s.Machine.Slots, plens, s.Capacity())
	var rows []engineRow
	var reqRows []string                                 // engine-requests.csv
	var roots [engine.MaxRootBatch + 1]engine.RootPasses // engine-costs.csv, every run's
	var paired []string                                  // the first policy against each other one, per load
	var served []servedDrafts                            // engine-drafts.json
	for li, load := range s.Loads {
		rate := load * s.Capacity()
		eruns := make([][]*sim.Run, len(pols)) // per policy, one run per replica
		sruns := make([][]*sim.Run, len(pols))
		proposed, accepted := make([]int, len(pols)), make([]int, len(pols)) // draft tokens
		decoding, satOut := make([]int, len(pols)), make([]int, len(pols))   // request-iterations (engine.Timings)
		held := make([]int, len(pols))                                       // catch-ups held back (engine.Timings)
		drafts := make([]spec.DraftStats, len(pols))                         // the engine's, over the replicas
		// Replica by replica, every policy in turn: the machine's pace
		// drifts over a long sweep, and interleaving spreads the drift
		// over the policies instead of handing it to the last.
		for k := range max(1, s.Replicas) {
			reqs, seed, err := s.Replica(li, k)
			if err != nil {
				return nil, err
			}
			for pi, p := range pols {
				recs, tm, err := serve(o, p.Name, reqs, prompts)
				if err != nil {
					return nil, fmt.Errorf("%s at load %.2f: %w", p.Name, load, err)
				}
				decoding[pi] += tm.Decoding
				satOut[pi] += tm.SatOut
				held[pi] += tm.Held
				drafts[pi] = drafts[pi].Add(tm.Drafts)
				served = append(served, servedDrafts{p.Name, load, k, tm.Drafts})
				for n, r := range tm.Roots {
					roots[n] = roots[n].Add(r)
				}
				run, err := runOf(recs)
				if err != nil {
					return nil, fmt.Errorf("%s at load %.2f: %w", p.Name, load, err)
				}
				for i, r := range recs {
					reqRows = append(reqRows, requestRow(p.Name, load, k, r, run.Results[i]))
					proposed[pi] += r.Proposed
					accepted[pi] += r.Accepted
				}
				eruns[pi] = append(eruns[pi], run)
				if o.check {
					// The replay drafts as this run's drafter did.
					m, _ := fittedMachine(s.Machine, tm.Drafts, o.draft != "")
					sr, err := sim.Simulate(m, p, asWorkload(run), seed)
					if err != nil {
						return nil, err
					}
					sruns[pi] = append(sruns[pi], sr)
				}
			}
		}
		for pi, p := range pols {
			row := pointRow(len(s.Mix), p.Name, load, rate, eruns[pi], sruns[pi], proposed[pi], accepted[pi], true)
			if decoding[pi] > 0 {
				row.EngineSatOut = float64(satOut[pi]) / float64(decoding[pi])
			}
			row.EngineHeld = held[pi]
			row.Fit = fitOf(s.Machine, drafts[pi], o.draft != "")
			rows = append(rows, row)
		}
		for pi := 1; pi < len(pols) && s.Replicas > 1; pi++ {
			mean, se := pairedDiff(eruns[0], eruns[pi], len(s.Mix))
			paired = append(paired, fmt.Sprintf("%s\t%.2f\t%s\t%+.1f\t%.1f\t", pols[0].Name, load, pols[pi].Name, 100*mean, 100*se))
		}
	}
	var eng []sim.Row
	for _, r := range rows {
		eng = append(eng, r.Engine)
	}
	if err := emit(o.out, s, "rates", eng); err != nil {
		return nil, err
	}
	// Every request of every point: which ones missed, and by how much.
	reqCSV := requestHeader + strings.Join(reqRows, "")
	if err := os.WriteFile(filepath.Join(o.out, "engine-requests.csv"), []byte(reqCSV), 0o644); err != nil {
		return nil, err
	}
	if err := writeCosts(filepath.Join(o.out, costsFile), roots[:], s.Machine.Curve); err != nil {
		return nil, err
	}
	if err := writeDrafts(filepath.Join(o.out, draftsFile), served); err != nil {
		return nil, err
	}
	if len(paired) > 0 {
		// Whole points move by several points from one workload to the
		// next; the same workload served by two policies differs far less.
		fmt.Printf("\n## %s minus each policy, replica by replica (%d replicas; points of attainment)\n", pols[0].Name, s.Replicas)
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "policy\tload\tagainst\tmean\tstd error\t")
		for _, l := range paired {
			fmt.Fprintln(w, l)
		}
		w.Flush()
	}
	if o.check {
		if err := writeCheck(filepath.Join(o.out, "engine-vs-sim.csv"), rows, s.Mix); err != nil {
			return nil, err
		}
		checkTable(rows)
	}
	return rows, nil
}

// requestHeader heads engine-requests.csv: a line per request served
// (requestRow), which -replay reads back (readEngineRequests).
const requestHeader = "policy,load,replica,id,category,arrival_ms,prompt_tokens,max_tokens,generated,ttft_ms,tpot_ms,tpot_slo_ms,proposed,accepted,attained,decodes\n"

// requestRow is engine-requests.csv's line for the request r of replica
// k, which the engine served under policy at load as x.
func requestRow(policy string, load float64, k int, r record, x sim.Result) string {
	return fmt.Sprintf("%s,%.4f,%d,%d,%d,%.1f,%d,%d,%d,%.1f,%.2f,%.2f,%d,%d,%v,%d\n", policy, load, k, r.Req.ID, r.Req.Category,
		millis(r.Req.Arrival), r.PromptTokens, r.Req.Output, len(r.Tokens), millis(x.TTFT()), millis(x.TPOT()), millis(x.TPOTSLO),
		r.Proposed, r.Accepted, x.Attained(), r.Chunks)
}

// pointRow is one point of the check: the engine's runs of its replicas
// and, when the point was replayed, the simulator's (nil otherwise),
// with the draft tokens the engine proposed and accepted. Nodes per
// decode need the engine's decode count (knownDecodes).
func pointRow(ncat int, policy string, load, rate float64, eruns, sruns []*sim.Run, proposed, accepted int, knownDecodes bool) engineRow {
	row := engineRow{Proposed: proposed, Accepted: accepted, EngineSatOut: math.NaN(), SimSatOut: math.NaN(), EngineHeld: -1}
	row.Engine = sim.Row{Setting: "engine", Policy: policy, Load: load, Rate: rate, Metrics: sim.SummarizeRuns(eruns, ncat)}
	decodes := func(r *sim.Run) int { return r.Decodes }
	if d := total(eruns, decodes); d > 0 && knownDecodes {
		row.EngineNodes = float64(d+proposed) / float64(d)
	}
	if sruns != nil {
		if d := total(sruns, decodes); d > 0 {
			verified := total(sruns, func(r *sim.Run) int { return r.Verified })
			row.SimNodes = float64(verified) / float64(d)
			if verified > d {
				row.SimAccept = float64(total(sruns, func(r *sim.Run) int { return r.Emitted })-d) / float64(verified-d)
			}
			sat := total(sruns, func(r *sim.Run) int { return r.SatOut })
			row.SimSatOut = float64(sat) / float64(d+sat)
			row.SimHeld = total(sruns, func(r *sim.Run) int { return r.Held })
		}
		row.Sim = sim.Row{Setting: "sim-replay", Policy: policy, Load: load, Rate: rate, Metrics: sim.SummarizeRuns(sruns, ncat)}
	}
	return row
}

// writeCheck writes the engine's and the simulator's rows of each point,
// one after the other, in the simulator's CSV columns (setting "engine"
// or "sim-replay").
func writeCheck(path string, rows []engineRow, mix []sim.Category) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var all []sim.Row
	for _, r := range rows {
		all = append(all, r.Engine, r.Sim)
	}
	if err := sim.WriteCSV(f, all, mix); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func checkTable(rows []engineRow) {
	fmt.Printf("\n## engine vs simulator (measured curve, same requests)\n")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "policy\tload\trate r/s\tengine attain %\tsim attain %\tdiff pts\tengine goodput\tsim goodput\taccept % engine\tsim\tnodes/decode engine\tsim\tsat out % engine\tsim\tsim budget bound %\tcatch-ups held engine\tsim\tfit: drafts %\tgoes on %\ttop-1 % by depth (taken/believed)\t")
	for _, r := range rows {
		acc := 0.0
		if r.Proposed > 0 {
			acc = 100 * float64(r.Accepted) / float64(r.Proposed)
		}
		nodes := "–" // a file without the engine's decodes
		if r.EngineNodes > 0 {
			nodes = fmt.Sprintf("%.2f", r.EngineNodes)
		}
		fit := "–\t–\t–"
		if f := r.Fit; f != nil {
			var top []string
			for d, row := range f.Cond {
				t := fmt.Sprintf("%.0f", 100*row[0])
				if f.Believed != nil {
					t += fmt.Sprintf("/%.0f", 100*f.Believed[d][0])
				}
				top = append(top, t)
			}
			fit = fmt.Sprintf("%.0f\t%.0f\t%s", 100*f.Drafts, 100*f.Continues, strings.Join(top, " "))
		}
		held := "–" // a file without the engine's count
		if r.EngineHeld >= 0 {
			held = strconv.Itoa(r.EngineHeld)
		}
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.1f\t%.1f\t%+.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%s\t%.2f\t%s\t%s\t%.1f\t%s\t%d\t%s\t\n", r.Engine.Policy, r.Engine.Load, r.Engine.Rate,
			100*r.Engine.Attainment, 100*r.Sim.Attainment, 100*(r.Engine.Attainment-r.Sim.Attainment),
			r.Engine.Goodput, r.Sim.Goodput, acc, 100*r.SimAccept, nodes, r.SimNodes, percent(r.EngineSatOut), percent(r.SimSatOut), 100*r.Sim.Bound, held, r.SimHeld, fit)
	}
	w.Flush()
}

// pairedDiff is the mean over replicas of a's attainment minus b's, where
// a[k] and b[k] served the same requests, and the mean's standard error
// (0 with one replica).
func pairedDiff(a, b []*sim.Run, ncat int) (mean, se float64) {
	d := make([]float64, len(a))
	for k := range a {
		d[k] = sim.Summarize(a[k], ncat).Attainment - sim.Summarize(b[k], ncat).Attainment
		mean += d[k]
	}
	n := float64(len(d))
	mean /= n
	if len(d) < 2 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range d {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / (n - 1) / n)
}

// total sums a count of each run (its decodes, its verified nodes) over
// the replicas of a point.
func total(runs []*sim.Run, count func(*sim.Run) int) int {
	n := 0
	for _, r := range runs {
		n += count(r)
	}
	return n
}

// writeCosts writes engine-costs.csv: for each batch size n the engine
// ran root-only iterations of, how many it ran, their mean time and its
// phases (planning, the forward pass, verification), and beside them the
// chain's T(n) and the pass the simulator and the engine's batching rules
// price for n sequences at the measured context (spec.PassCost; the chain
// where no batches were measured). The chain times n tokens of one
// sequence, the engine n sequences each reading its own cache.
func writeCosts(path string, roots []engine.RootPasses, c sim.Curve) error {
	var b strings.Builder
	b.WriteString("batch,iterations,engine_ms,plan_ms,forward_ms,verify_ms,curve_ms,priced_ms\n")
	cost := c.Cost()
	for n, r := range roots {
		if n == 0 || r.Count == 0 {
			continue
		}
		mean := func(d time.Duration) float64 { return millis(d) / float64(r.Count) }
		fmt.Fprintf(&b, "%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", n, r.Count, mean(r.Total()), mean(r.Plan), mean(r.Forward), mean(r.Verify),
			millis(c.At(n)), millis(cost.Pass(n, 0, 0, 0)))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// percent is a share as the check table prints it, "–" when unknown.
func percent(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.1f", 100*x)
}

// millis is d in milliseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
