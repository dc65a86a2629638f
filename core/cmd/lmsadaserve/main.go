// Command lmsadaserve runs the AdaServe evaluation in the simulator
// (spec/sim): request-rate sweeps of every policy on a GPU-like cost curve,
// on the curve lmstream's CUDA backend measured on an H200 (sim.H200) and
// on the curve this machine's CPU engine measures at start-up, the
// §6.3 continuous-batching strategies and the §6.4 urgent-only study. It
// writes CSV files and SVG plots into -out and prints the tables.
//
//	lmsadaserve -out build/adaserve -model models/SmolLM2-135M-Instruct.Q4_1.gguf
//	lmsadaserve -quick ...   a small sweep (CI's smoke run)
//
// With -engine it runs the same kind of workload (the paper's categories,
// SLOs as multiples of the measured baseline TPOT, Poisson arrivals,
// prompts from the committed sets in core/engine/testdata) through the real
// engine instead, one runtime per policy and load, and replays each point
// in the simulator on the engine's measured curve to check one against
// the other (engine-rates.csv, engine-vs-sim.csv):
//
//	lmsadaserve -engine -model models/SmolLM2-135M-Instruct.Q4_1.gguf -out build/adaserve
//	lmsadaserve -engine -model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
//	    -draft models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf -out build/adaserve-qwen
//
// With -draft and without -engine, the measured setting is the pair's
// (cpu-measured-pair): the simulated engine of an -engine run of the pair,
// swept over every policy and load, on that run's curves and the
// acceptance fitted from its draft counts when -curves names it. The
// engine serves a few points of the pair in a quarter of an hour; the
// replays validate the simulator there, and this sweeps the rest:
//
//	lmsadaserve -out build/adaserve-qwen-sim -model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
//	    -draft models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf -curves build/adaserve-qwen -max-tokens 64
//
// -replay DIR checks the simulator as it is now against such a run kept
// in DIR (its engine-requests.csv and curves), without the engine:
//
//	lmsadaserve -replay build/adaserve -out build/replay
//
// The curve is each size's best of a few passes, and the engine serves
// at the machine's pace of the hour, often a few percent slower: -pace F
// replays on the run's curves made F times as slow while judging by the
// run's SLOs. A pace at which the baselines' simulated attainment meets
// the engine's is the machine's; a policy that still parts from the
// engine there is one the simulator models less well. (The Qwen pair at
// load 0.75, 8 replicas, on the AMX Xeon: at pace 1.05 GlobalGreedy and
// Sarathi were within 2 points of the engine, AdaServe 19 above it.
// Pricing the draft model's catch-up with each new request's context
// (sim.Machine.DraftWindow), a run of 4 replicas at pace 1.05: AdaServe
// 3.8 points above the engine, GlobalGreedy 3.7 and Sarathi 1.3 below.)
// The VM does not slow down evenly, though: big batches more (in one
// run a batch of one took 1.09× its price, a batch of eight 1.51×).
// -measured-pace scales each batch size to the pace the engine ran it at
// (engine-costs.csv) instead; on that run every policy then came within
// 5.6 points of the engine.
//
// The simulator prices a pass as the engine's batching rules do
// (spec.PassCost): the chain of the cost curve for a tree's nodes, the
// batches of sequences measured beside it for the roots (each reading its
// own KV cache, longer contexts at a price per row), and a prompt
// token's price for prompt chunks. Every -engine run also writes
// engine-costs.csv: the engine's root-only iterations by batch size,
// split into planning, the forward pass and verification, beside what
// the chain and the batches price them at.
//
// The replay drafts as the engine's drafter did: the engine counts its
// drafted trees against what the target emitted (spec.DraftStats: how
// often it drafted, how far, what the target took of each child and what
// the drafter believed of it), each run keeps the counts of every served
// workload in engine-drafts.json, and the replay of that workload runs
// on the acceptance they fit (sim.FitAcceptance; the table prints it).
// Without the file a replay takes the fixed n-gram model.
//
// Each run keeps the cost curves it used (curve.csv, curve-roots.csv,
// draft-curve.csv in -out). The curve sets the SLOs and the request
// rates (the urgent SLO is the batch of 8's pass), and a two-core VM
// measures it up to 20% apart from one run to the next (SmolLM2's T(8):
// 5.9 to 7.3 ms in one afternoon), enough to move the urgent category's
// attainment by 5–10 points. To compare two builds, run
// the second with -curves set to the first's -out: both then serve the
// same requests against the same SLOs.
//
// Within one run the machine drifts too: the same policy's attainment
// moved by ±7 points between runs of 40 requests on the Qwen pair, more
// than the policies differ. -replicas N (the simulator's default 8; the
// engine's 1) pools N independent workloads into each point, and the
// engine serves them replica by replica with the policies in turn, so
// that a slow stretch falls on every policy alike.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/spec/sim"
)

func main() {
	out := flag.String("out", "build/adaserve", "output directory")
	modelPath := flag.String("model", "", "GGUF model whose CPU cost curve drives the measured setting (empty: skip it)")
	threads := flag.Int("threads", runtime.GOMAXPROCS(0), "threads for measuring the CPU curve")
	quick := flag.Bool("quick", false, "a small sweep (few requests, few loads)")
	requests := flag.Int("requests", 400, "requests per workload (the measured setting: half as many)")
	seed := flag.Uint64("seed", 1, "workload and acceptance seed")
	replicas := flag.Int("replicas", 8, "independent workloads pooled into each sweep point (-quick: 1; -engine: 1 unless given)")
	engine := flag.Bool("engine", false, "run the workload through the real engine (needs -model) and check the simulator against it")
	backend := flag.String("backend", "cpu", "with -engine: the device the engine runs on and measures its curves on (cpu or cuda)")
	draft := flag.String("draft", "", "draft model (drafter draft_model; default the n-gram drafter): with -engine the engine's, without it the measured setting's (see cpu-measured-pair)")
	prompts := flag.String("prompts", "core/engine/testdata", "with -engine or -draft: directory of the committed prompt sets")
	policies := flag.String("policies", "adaserve,specinfer,equal_greedy,global_greedy,incremental,sarathi,vllm", "with -engine: spec_policy values to compare")
	loads := flag.String("loads", "0.25,0.5,1,1.5", "with -engine: request rates as fractions of the measured capacity")
	maxTokens := flag.Int("max-tokens", 128, "with -engine or -draft: cap on each request's output length")
	slots := flag.Int("slots", 8, "with -engine or -draft: max_slots")
	check := flag.Bool("check", true, "with -engine: replay every point in the simulator on the measured curve")
	curves := flag.String("curves", "", "an earlier run's -out directory whose measured cost curves (curve.csv, curve-roots.csv, draft-curve.csv) to use instead of measuring, so that two builds serve the same SLOs and rates")
	adaptive := flag.Bool("adaptive", true, "with -engine: the engine's spec_adaptive (false: speculate as the simulator does, even where it does not pay)")
	replay := flag.String("replay", "", "an earlier -engine run's -out directory: check the simulator against its requests without the engine (give that run's -seed, -slots and -adaptive)")
	pace := flag.Float64("pace", 1, "with -replay: simulate on the run's cost curves scaled by this (the engine's pace against its curve), keeping its SLOs")
	measuredPace := flag.Bool("measured-pace", false, "with -replay: scale the run's curves batch size by batch size to the pace its engine ran at (engine-costs.csv) instead of by -pace")
	flag.Parse()
	if *replay != "" {
		if !(*pace > 0 && *pace < 100) {
			fmt.Fprintln(os.Stderr, "lmsadaserve: -pace must be above 0 and below 100")
			os.Exit(2)
		}
		if *measuredPace && *pace != 1 {
			fmt.Fprintln(os.Stderr, "lmsadaserve: -measured-pace and -pace are two ways to pace one replay: give one")
			os.Exit(2)
		}
		if _, err := runReplay(engineOpts{out: *out, slots: *slots, seed: *seed, adaptive: *adaptive, pace: *pace, measuredPace: *measuredPace}, *replay); err != nil {
			fmt.Fprintln(os.Stderr, "lmsadaserve:", err)
			os.Exit(1)
		}
		return
	}
	if *engine {
		ls, err := parseLoads(*loads)
		if err == nil && *modelPath == "" {
			err = fmt.Errorf("-engine needs -model")
		}
		n := 40 // a two-core CPU serves a point of 40 requests in about a minute
		reps := 1
		flag.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "requests":
				n = *requests
			case "replicas":
				reps = *replicas
			}
		})
		if err == nil {
			_, err = runEngine(engineOpts{out: *out, model: *modelPath, draft: *draft, prompts: *prompts, threads: *threads,
				slots: *slots, requests: n, replicas: reps, maxTokens: *maxTokens, policies: strings.Split(*policies, ","),
				loads: ls, seed: *seed, check: *check, adaptive: *adaptive, curves: *curves, backend: *backend})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "lmsadaserve:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(simOpts{out: *out, model: *modelPath, draft: *draft, prompts: *prompts, threads: *threads, quick: *quick,
		requests: *requests, replicas: *replicas, seed: *seed, curves: *curves, maxTokens: *maxTokens, slots: *slots}); err != nil {
		fmt.Fprintln(os.Stderr, "lmsadaserve:", err)
		os.Exit(1)
	}
}

// parseLoads reads a comma-separated list of positive loads.
func parseLoads(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x <= 0 || math.IsInf(x, 0) {
			return nil, fmt.Errorf("-loads: %q is not a positive number", f)
		}
		out = append(out, x)
	}
	return out, nil
}

// simOpts are the simulator's sweeps' settings (the flags).
type simOpts struct {
	out, model string
	// draft and prompts: with a draft model, the measured setting is
	// the pair's (cpu-measured-pair; see pairSetting), over the
	// committed prompt sets in prompts, with outputs capped at maxTokens
	// and slots sequences a batch, as an -engine run of the pair.
	draft, prompts   string
	maxTokens, slots int
	threads          int
	quick            bool
	requests         int
	// replicas: workloads pooled into each point (sim.Setting.Replicas).
	// On the CPU's measured curves the policies differ by a point or two,
	// and one workload of 200 requests puts either of two ahead depending
	// on the seed: on the Qwen2.5-Coder 1.5B's, AdaServe minus
	// EqualGreedy at half load was -0.8 to +1.0 points over seeds 1 and
	// 3–8 (500 requests each). Eight replicas take the whole run from
	// about 20 s to 30 s on two cores.
	replicas int
	seed     uint64
	// curves: an earlier run's -out directory whose curve.csv to use
	// instead of measuring the model's (the flag -curves).
	curves string
}

func run(o simOpts) error {
	out, modelPath, threads, requests, seed := o.out, o.model, o.threads, o.requests, o.seed
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	loads := []float64{0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0}
	replicas := max(1, o.replicas)
	if o.quick {
		loads, requests, replicas = []float64{0.5, 1.5}, 60, 1
	}
	// The paper's regime is budget-constrained: at high load a full batch
	// leaves each request about two verified tokens of the budget (B/n =
	// 32/16), too few for everyone, so how the budget is shared across
	// SLOs decides attainment. (With 32 slots and B = 64 the share is the
	// same, but a full pass plus a prefill chunk costs more than the
	// urgent SLO can absorb at any tree size, and every policy misses the
	// urgent category alike.)
	gpuLike := sim.Setting{
		Name: "gpu-like",
		Machine: sim.Machine{Curve: sim.GPULike, DraftStep: 300 * time.Microsecond, Accept: sim.DraftModelAcceptance,
			Slots: 16, Budget: 32},
		Mix: sim.PaperMix, Requests: requests, Loads: loads, Seed: seed, Replicas: replicas,
	}
	// The same machine on the curve lmstream's CUDA backend measured on an
	// H200 (sim.H200): the draft model's step and acceptance are still
	// gpu-like's assumptions, the target's passes are not.
	h200 := gpuLike
	h200.Name, h200.Machine.Curve = "gpu-h200", sim.H200
	settings := []sim.Setting{gpuLike, h200}
	if modelPath != "" {
		// Measured past a whole prefill chunk (128 prompt tokens, the
		// simulator's and the engine's default) plus a full decode batch,
		// so that no iteration is priced by extrapolating the curve; the
		// budget is still calibrated on the decode range.
		// Kept as curve.csv (read back with -curves): a two-core VM
		// measures curves that differ run to run, and the policies'
		// standings move with them.
		c, err := engineCurve(engineOpts{out: out, threads: threads, curves: o.curves}, modelPath, 160, 8, targetCurveFile)
		if err != nil {
			return err
		}
		c.Name = fmt.Sprintf("cpu measured (%s, %d threads)", filepath.Base(modelPath), threads)
		b := max(engine.DefaultMinBudget, spec.Calibrate(c.At, 48))
		fmt.Printf("measured CPU curve: T(1)=%v T(8)=%v T(48)=%v T(128)=%v T(160)=%v; budget B=%d\n", c.At(1), c.At(8), c.At(48), c.At(128), c.At(160), b)
		settings = append(settings, sim.Setting{
			Name:    "cpu-measured",
			Machine: sim.Machine{Curve: c, Accept: sim.NGramAcceptance, Slots: 8, Budget: b},
			Mix:     sim.PaperMix, Requests: requests / 2, Loads: loads, Seed: seed, Replicas: replicas,
		})
		if o.draft != "" {
			p, err := pairSetting(o, c, loads, requests/2, replicas)
			if err != nil {
				return err
			}
			settings = append(settings, p)
		}
	}
	for _, s := range settings {
		rows, err := sim.Sweep(s, serving.Systems)
		if err != nil {
			return err
		}
		if err := emit(out, s, "rates", rows); err != nil {
			return err
		}
	}
	// §6.3: continuous batching with dynamic batch size, and separate
	// pipelines, against AdaServe on the GPU-like curve.
	s := settings[0]
	rows, err := sim.Sweep(s, append([]serving.System{serving.Systems[0]}, serving.Strategies...))
	if err != nil {
		return err
	}
	sep, err := sim.SepPipe(s)
	if err != nil {
		return err
	}
	if err := emit(out, s, "strategies", append(rows, sep...)); err != nil {
		return err
	}
	// §6.4: only urgent requests, their SLO a shrinking multiple of the
	// baseline latency, at a fixed load.
	var urgent []sim.Row
	for _, x := range []float64{1.2, 1.0, 0.9, 0.8, 0.7, 0.6} {
		u := s
		cat := sim.PaperMix[0]
		cat.Share, cat.TPOTx = 1, x
		u.Mix, u.Loads = []sim.Category{cat}, []float64{0.5}
		var ps []serving.System
		for _, n := range []string{"adaserve", "specinfer", "incremental", "vllm"} {
			p, err := serving.ByName(n)
			if err != nil {
				return err
			}
			ps = append(ps, p)
		}
		rs, err := sim.Sweep(u, ps)
		if err != nil {
			return err
		}
		for i := range rs {
			rs[i].Load = x // the SLO multiple is this study's x axis
		}
		urgent = append(urgent, rs...)
	}
	return emitUrgent(out, urgent)
}

func emit(out string, s sim.Setting, what string, rows []sim.Row) error {
	base := filepath.Join(out, s.Name+"-"+what)
	f, err := os.Create(base + ".csv")
	if err != nil {
		return err
	}
	if err := sim.WriteCSV(f, rows, s.Mix); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	title := fmt.Sprintf("%s: %s, B=%d, %d slots", s.Name, s.Machine.Curve.Name, s.Machine.Budget, s.Machine.Slots)
	for _, p := range []struct {
		name, label string
		metric      func(sim.Row) float64
	}{
		{"attainment", "TPOT SLO attainment (%)", func(r sim.Row) float64 { return 100 * r.Attainment }},
		{"goodput", "goodput (tokens/s)", func(r sim.Row) float64 { return r.Goodput }},
	} {
		g, err := os.Create(base + "-" + p.name + ".svg")
		if err != nil {
			return err
		}
		if err := sim.PlotRows(g, title, p.label, rows, p.metric); err != nil {
			g.Close()
			return err
		}
		if err := g.Close(); err != nil {
			return err
		}
	}
	fmt.Printf("\n## %s — %s (%s; baseline TPOT %v)\n", s.Name, what, s.Machine.Curve.Name, s.Machine.Baseline())
	table(rows)
	return nil
}

func emitUrgent(out string, rows []sim.Row) error {
	base := filepath.Join(out, "gpu-like-urgent")
	f, err := os.Create(base + ".csv")
	if err != nil {
		return err
	}
	if err := sim.WriteCSV(f, rows, sim.PaperMix[:1]); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	by := map[string]*sim.Series{}
	var order []string
	for _, r := range rows {
		if by[r.Policy] == nil {
			by[r.Policy] = &sim.Series{Name: r.Policy}
			order = append(order, r.Policy)
		}
		by[r.Policy].X = append(by[r.Policy].X, r.Load)
		by[r.Policy].Y = append(by[r.Policy].Y, 100*r.Attainment)
	}
	var ss []sim.Series
	for _, n := range order {
		ss = append(ss, *by[n])
	}
	g, err := os.Create(base + "-attainment.svg")
	if err != nil {
		return err
	}
	if err := sim.PlotSVG(g, "gpu-like: urgent requests only, half load", "TPOT SLO / baseline latency", "TPOT SLO attainment (%)", ss); err != nil {
		g.Close()
		return err
	}
	if err := g.Close(); err != nil {
		return err
	}
	fmt.Printf("\n## gpu-like — urgent only (load 0.5; first column is the SLO as a multiple of the baseline)\n")
	table(rows)
	return nil
}

func table(rows []sim.Row) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "policy\tload\trate r/s\tattain %\twith TTFT %\tgoodput tok/s\tp99 TPOT ms\tp99 TTFT ms\ttok/decode\tbudget bound %\t")
	for _, r := range rows {
		bound := "–" // not counted: the engine's rows
		if !math.IsNaN(r.Bound) {
			bound = fmt.Sprintf("%.1f", 100*r.Bound)
		}
		fmt.Fprintf(w, "%s\t%.2f\t%.1f\t%.1f\t%.1f\t%.0f\t%.2f\t%.0f\t%.2f\t%s\t\n", r.Policy, r.Load, r.Rate, 100*r.Attainment, 100*r.WithTTFT, r.Goodput,
			float64(r.P99TPOT)/1e6, float64(r.P99TTFT)/1e6, r.TokensPerDec, bound)
	}
	w.Flush()
}
