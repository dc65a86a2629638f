package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
)

var perfect = Acceptance{Name: "perfect", Cond: [][]float64{{1}}}

// With a flat cost curve and a drafter the target always agrees with, one
// request speculating alone gains exactly d+1 tokens per iteration (d the
// depth Shape gives it), so every number of the run is known in closed
// form.
func TestFlatPerfectMatchesAnalysis(t *testing.T) {
	m := Machine{Curve: Flat(time.Millisecond), Accept: perfect, Slots: 1, Budget: 9}
	d := m.budgetDepth(t)
	const decodes = 4
	out := 1 + decodes*(d+1)
	reqs := []Request{{Prompt: 100, Output: out, TPOTSLO: time.Millisecond}}
	run, err := Simulate(m, serving.System{Name: "adaserve", Spec: spec.AdaServe}, reqs, 1)
	require.NoError(t, err)
	require.Equal(t, 1+decodes, run.Iterations, "one prefill iteration, then full trees")
	require.Equal(t, decodes*(d+1), run.Emitted)
	require.Equal(t, decodes*d, run.Verified-decodes, "d draft nodes a tree, each accepted, plus the bonus token")
	r := run.Results[0]
	require.Equal(t, time.Millisecond, r.First)
	require.Equal(t, time.Duration(1+decodes)*time.Millisecond, r.Last)
	require.Equal(t, time.Duration(decodes)*time.Millisecond/time.Duration(out-1), r.TPOT())

	run, err = Simulate(m, serving.System{Name: "incremental", Spec: spec.Incremental}, reqs, 1)
	require.NoError(t, err)
	require.Equal(t, out, run.Iterations, "one token per iteration")
	require.Equal(t, time.Millisecond, run.Results[0].TPOT())
	require.True(t, run.Results[0].Attained(), "a TPOT equal to the SLO meets it")
}

func (m Machine) budgetDepth(t *testing.T) int {
	t.Helper()
	s := (&spec.Config{Budget: m.Budget}).Shape(1)
	require.Positive(t, s.Depth)
	return s.Depth
}

// Acceptance with probability a per depth (no second candidate) makes a
// chain of depth d yield Σ_{k=0..d} a^k tokens on average; the simulator's
// verification draws must agree.
func TestVerifyDrawsMatchExpectation(t *testing.T) {
	const a, d = 0.7, 4
	acc := Acceptance{Cond: [][]float64{{a}}}
	m := Machine{Curve: Flat(time.Millisecond), Accept: acc, Slots: 1, Budget: d + 1, MaxDepth: d, MaxWidth: 1}
	reqs := []Request{{Prompt: 1, Output: 200000, TPOTSLO: time.Second}}
	run, err := Simulate(m, serving.System{Name: "specinfer", Spec: spec.SpecInfer, Branch: []int{1, 1, 1, 1}}, reqs, 3)
	require.NoError(t, err)
	want := 0.0
	for k := 0; k <= d; k++ {
		want += math.Pow(a, float64(k))
	}
	got := float64(run.Emitted) / float64(run.Decodes)
	require.InDelta(t, want, got, 0.03, "mean tokens per iteration")
}

// On a GPU-like curve, where a verification pass of dozens of tokens costs
// little more than one, AdaServe serves the paper's mix at least as well
// as incremental decoding and SpecInfer's fixed tree, and strictly better
// at moderate load, where the urgent category is at risk.
func TestAdaServeBeatsBaselinesOnGPULikeCurve(t *testing.T) {
	s := Setting{
		Name:    "gpu-like",
		Machine: Machine{Curve: GPULike, DraftStep: 300 * time.Microsecond, Accept: DraftModelAcceptance, Slots: 32, Budget: 64},
		Mix:     PaperMix, Requests: 120, Loads: []float64{0.5, 1.0}, Seed: 7,
	}
	byName := func(names ...string) []serving.System {
		var ps []serving.System
		for _, n := range names {
			p, err := serving.ByName(n)
			require.NoError(t, err)
			ps = append(ps, p)
		}
		return ps
	}
	rows, err := Sweep(s, byName("adaserve", "incremental", "specinfer", "vllm"))
	require.NoError(t, err)
	for i := 0; i < len(rows); i += 4 {
		ada := rows[i]
		for _, b := range rows[i+1 : i+4] {
			require.GreaterOrEqual(t, ada.Attainment, b.Attainment, "load %.2f: adaserve vs %s", ada.Load, b.Policy)
			require.GreaterOrEqual(t, ada.Goodput, b.Goodput, "load %.2f: adaserve vs %s", ada.Load, b.Policy)
		}
	}
	require.Greater(t, rows[0].Attainment, rows[1].Attainment+0.2, "at half load, incremental misses the urgent SLO")
	require.Greater(t, rows[0].PerCategory[0], 0.9, "adaserve meets nearly every urgent request at half load")
}

// The same seed gives the same run; another seed a different one.
func TestDeterministic(t *testing.T) {
	m := Machine{Curve: GPULike, Accept: DraftModelAcceptance, Slots: 8, Budget: 32}
	reqs, err := Generate(Workload{Rate: 200, Requests: 40, Categories: PaperMix, Seed: 5}, m.Baseline())
	require.NoError(t, err)
	a, err := Simulate(m, serving.Systems[0], reqs, 1)
	require.NoError(t, err)
	b, err := Simulate(m, serving.Systems[0], reqs, 1)
	require.NoError(t, err)
	require.Equal(t, a, b)
	c, err := Simulate(m, serving.Systems[0], reqs, 2)
	require.NoError(t, err)
	require.NotEqual(t, a.End, c.End, "other acceptance draws, another schedule")
}

// Chunked prefill serves prompts earliest TTFT deadline first (the
// runtime's admission rule): of two requests arriving together, the one
// with the tighter TTFT SLO gets its first token first although it came
// second; FCFS admission reverses that.
func TestPrefillByTTFTDeadline(t *testing.T) {
	m := Machine{Curve: Flat(time.Millisecond), Accept: perfect, Slots: 4, Budget: 4, PrefillBudget: 64}
	reqs := []Request{
		{ID: 0, Prompt: 128, Output: 2, TPOTSLO: time.Second, TTFTSLO: time.Second},
		{ID: 1, Prompt: 128, Output: 2, TPOTSLO: time.Second, TTFTSLO: 10 * time.Millisecond},
	}
	run, err := Simulate(m, serving.System{Name: "incremental", Spec: spec.Incremental}, reqs, 1)
	require.NoError(t, err)
	require.Less(t, run.Results[1].First, run.Results[0].First)
	run, err = Simulate(m, serving.System{Name: "sarathi", Spec: spec.Incremental, FCFSAdmit: true}, reqs, 1)
	require.NoError(t, err)
	require.Less(t, run.Results[0].First, run.Results[1].First)
}

// vLLM-style prefill preempts decoding: a decoding request makes no
// progress in the iteration that prefills a newcomer.
func TestPreemptStallsDecoding(t *testing.T) {
	m := Machine{Curve: Flat(time.Millisecond), Accept: perfect, Slots: 4, Budget: 4}
	reqs := []Request{
		{ID: 0, Prompt: 8, Output: 10, TPOTSLO: time.Second},
		{ID: 1, Arrival: 3 * time.Millisecond, Prompt: 8, Output: 2, TPOTSLO: time.Second},
	}
	vllm, err := serving.ByName("vllm")
	require.NoError(t, err)
	run, err := Simulate(m, vllm, reqs, 1)
	require.NoError(t, err)
	// 1 prefill + 9 decodes, plus one iteration stolen by the newcomer's
	// prefill: its last token comes an iteration late.
	require.Equal(t, 11*time.Millisecond, run.Results[0].Last)
	sarathi, err := serving.ByName("sarathi")
	require.NoError(t, err)
	run, err = Simulate(m, sarathi, reqs, 1)
	require.NoError(t, err)
	require.Equal(t, 10*time.Millisecond, run.Results[0].Last)
}

// TestBatchesPriced: on a curve with batches measured apart, a pass over
// several requests' roots costs the batch's pass plus each committed
// token beyond the measured context, a prompt chunk its tokens at the
// prompt price, and the baseline is a batch of 8. Two requests decode
// plainly side by side after their prompts.
func TestBatchesPriced(t *testing.T) {
	ms := time.Millisecond
	c := Curve{Name: "cpu-like", N: []int{1, 2, 16, 64}, T: []time.Duration{ms, 2 * ms, 16 * ms, 64 * ms},
		RootN: []int{1, 2, 8}, RootT: []time.Duration{ms, 3 * ms, 12 * ms}, Context: 20, Entry: 10 * time.Microsecond,
		Prompt: ms / 2}
	m := Machine{Curve: c, Accept: perfect, Slots: 2, Budget: 4}
	require.Equal(t, 12*ms, m.Baseline())
	reqs := []Request{
		{ID: 0, Prompt: 20, Output: 3, TPOTSLO: time.Second},
		{ID: 1, Prompt: 20, Output: 3, TPOTSLO: time.Second},
	}
	run, err := Simulate(m, serving.System{Name: "incremental", Spec: spec.Incremental}, reqs, 1)
	require.NoError(t, err)
	// Both prompts in one pass of 40 prompt tokens (T(1) and 39 at
	// 0.5 ms), then two plain iterations over both roots: 3 ms, and each
	// sequence's committed tokens beyond 20 (none, then one, for each of
	// the two).
	first := ms + 39*ms/2
	require.Equal(t, first, run.Results[0].First)
	require.Equal(t, first+3*ms+3*ms+2*10*time.Microsecond, run.Results[0].Last)
	require.Equal(t, run.Results[0].Last, run.Results[1].Last)

	// The chain alone prices the prompts as 40 tokens of it, and those
	// iterations at T(2).
	c.RootN, c.RootT, c.Entry, c.Prompt = nil, nil, 0, 0
	m.Curve = c
	run, err = Simulate(m, serving.System{Name: "incremental", Spec: spec.Incremental}, reqs, 1)
	require.NoError(t, err)
	require.Equal(t, 40*ms+4*ms, run.Results[0].Last)
	require.Equal(t, 8*ms, m.Baseline())
}

func TestWorkload(t *testing.T) {
	const n, rate = 20000, 50.0
	for _, arr := range []Arrivals{Poisson, Bursty} {
		reqs, err := Generate(Workload{Rate: rate, Requests: n, Arrivals: arr, Categories: PaperMix, Seed: 9}, time.Millisecond)
		require.NoError(t, err)
		span := reqs[n-1].Arrival.Seconds()
		require.InDelta(t, rate, n/span, rate*0.05, "%v: mean rate", arr)
		var gaps []float64
		share := make([]float64, len(PaperMix))
		for i, r := range reqs {
			share[r.Category]++
			c := PaperMix[r.Category]
			require.True(t, r.Prompt >= c.Prompt[0] && r.Prompt <= c.Prompt[1] && r.Output >= c.Output[0] && r.Output <= c.Output[1])
			require.Equal(t, time.Duration(c.TPOTx*float64(time.Millisecond)), r.TPOTSLO)
			if i > 0 {
				gaps = append(gaps, (r.Arrival - reqs[i-1].Arrival).Seconds())
			}
		}
		for c := range share {
			require.InDelta(t, PaperMix[c].Share, share[c]/n, 0.02)
		}
		mean, sq := 0.0, 0.0
		for _, g := range gaps {
			mean += g
		}
		mean /= float64(len(gaps))
		for _, g := range gaps {
			sq += (g - mean) * (g - mean)
		}
		cv2 := sq / float64(len(gaps)) / (mean * mean)
		want := map[Arrivals]float64{Poisson: 1, Bursty: 4}[arr]
		require.InDelta(t, want, cv2, want*0.2, "%v: squared coefficient of variation", arr)
	}
	for _, w := range []Workload{
		{Rate: 0, Requests: 1, Categories: PaperMix},
		{Rate: math.Inf(1), Requests: 1, Categories: PaperMix},
		{Rate: 1, Requests: 0, Categories: PaperMix},
		{Rate: 1, Requests: 1},
		{Rate: 1, Requests: 1, Categories: []Category{{Name: "x", Share: 1, TPOTx: 1, Prompt: [2]int{5, 1}, Output: [2]int{1, 1}}}},
	} {
		_, err := Generate(w, time.Millisecond)
		require.Error(t, err, "%+v", w)
	}
}

func TestCurve(t *testing.T) {
	require.NoError(t, GPULike.Validate())
	require.NoError(t, H200.Validate())
	require.Equal(t, 1450*time.Microsecond, GPULike.At(1))
	require.Equal(t, 1450*time.Microsecond, GPULike.At(0))
	require.Equal(t, (2510+2680)*time.Microsecond/2, GPULike.At(24))
	require.Equal(t, 7850*time.Microsecond+(7850-4820)*time.Microsecond, GPULike.At(384), "extrapolates the last segment")
	for _, c := range []Curve{
		{Name: "empty"},
		{Name: "unsorted", N: []int{1, 4, 2}, T: []time.Duration{1, 2, 3}},
		{Name: "falls", N: []int{1, 2}, T: []time.Duration{2, 1}},
		{Name: "zero", N: []int{0}, T: []time.Duration{1}},
		{Name: "roots falls", N: []int{1}, T: []time.Duration{1}, RootN: []int{1, 2}, RootT: []time.Duration{2, 1}},
		{Name: "roots unpaired", N: []int{1}, T: []time.Duration{1}, RootN: []int{1, 2}, RootT: []time.Duration{2}},
		{Name: "negative entry", N: []int{1}, T: []time.Duration{1}, Entry: -1},
		{Name: "negative prompt price", N: []int{1}, T: []time.Duration{1}, Prompt: -1},
	} {
		require.Error(t, c.Validate(), c.Name)
	}
	require.Error(t, Acceptance{Cond: [][]float64{{0.7, 0.5}}}.Validate(), "sums past 1")
	require.Error(t, Acceptance{Cond: [][]float64{{0.1, 0.5}}}.Validate(), "not descending")
	_, err := Simulate(Machine{Curve: Flat(1), Accept: perfect}, serving.Systems[0], nil, 1)
	require.Error(t, err, "no slots")
}

func TestCSVAndSVG(t *testing.T) {
	rows := []Row{{Setting: "s", Policy: "adaserve", Load: 0.5, Rate: 3, Metrics: Metrics{Requests: 2, Attainment: 0.5, PerCategory: []float64{1, 0, 0}}}}
	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, rows, PaperMix))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 2)
	require.Equal(t, len(strings.Split(lines[0], ",")), len(strings.Split(lines[1], ",")))
	b.Reset()
	require.NoError(t, PlotRows(&b, "t<&>", "y", rows, func(r Row) float64 { return r.Attainment }))
	require.Contains(t, b.String(), "t&lt;&amp;&gt;")
	require.Contains(t, b.String(), "<polyline")
	require.Error(t, PlotSVG(&b, "", "", "", nil))
}

// The simulator must hand each request's TPOT SLO to the scheduler, or
// every request is best effort and AdaServe's SLO phase never runs (it then
// selects exactly as GlobalGreedy does). Three relaxed requests and one
// urgent one, arriving last, share a budget of four draft nodes on a flat
// curve with a drafter the target always agrees with: global greedy breaks
// the ties by request order and starves the urgent request, which needs
// two tokens an iteration; AdaServe serves it first.
func TestAdaServeFeedsUrgentRequestGlobalGreedyStarves(t *testing.T) {
	m := Machine{Curve: Flat(time.Millisecond), Accept: perfect, Slots: 4, Budget: 8}
	var reqs []Request
	for i := range 4 {
		slo := 10 * time.Millisecond
		if i == 3 {
			slo = time.Millisecond / 2
		}
		reqs = append(reqs, Request{ID: i, Prompt: 1, Output: 60, TPOTSLO: slo})
	}
	ada, err := Simulate(m, serving.System{Name: "adaserve", Spec: spec.AdaServe}, reqs, 1)
	require.NoError(t, err)
	gg, err := Simulate(m, serving.System{Name: "global-greedy", Spec: spec.GlobalGreedy}, reqs, 1)
	require.NoError(t, err)
	for i := range 3 {
		require.True(t, ada.Results[i].Attained(), "relaxed request %d under adaserve", i)
		require.True(t, gg.Results[i].Attained(), "relaxed request %d under global greedy", i)
	}
	require.True(t, ada.Results[3].Attained(), "adaserve meets the urgent SLO (TPOT %v)", ada.Results[3].TPOT())
	require.False(t, gg.Results[3].Attained(), "global greedy misses it (TPOT %v)", gg.Results[3].TPOT())
}

// TestMinProbPricing: the simulator prices the node floor as the engine
// does: small on the GPU-like curve (0.16 at 8 requests), 0.99 (a token costs what
// it yields) on a curve linear from the origin, and in between on a CPU
// curve whose slope is a share of a token's worth.
func TestMinProbPricing(t *testing.T) {
	require.Less(t, Machine{Curve: GPULike}.minProb(8), 0.2, "nearly flat: nodes are cheap")
	linear := Curve{Name: "linear", N: []int{1, 2, 64}, T: []time.Duration{10, 20, 640}}
	require.InDelta(t, 0.99, Machine{Curve: linear}.minProb(4), 1e-12)
	cpu := Curve{Name: "cpu", N: []int{1, 2, 4, 8, 16}, T: []time.Duration{100, 120, 160, 240, 400}}
	// n = 4: a token is worth 160/4 = 40, one more costs (240-160)/4 = 20.
	require.InDelta(t, 0.5, Machine{Curve: cpu}.minProb(4), 1e-12)
}

// Machine.Gate prices a draft step at the iteration's batch size as the
// engine does: where even a certain node cannot pay for the step, nothing
// is drafted and the run is incremental decoding's, draft time included
// (none); where the step is cheap, it drafts and pays for the layers it
// drafted.
func TestGateSkipsStepsThatCannotPay(t *testing.T) {
	// A pass costs 10 ms plus 1 ms a token: a token is worth 10.x ms of
	// one sequence's pass and an extra verified token costs 1 ms.
	c := Curve{Name: "linear", N: []int{1, 64}, T: []time.Duration{11 * time.Millisecond, 74 * time.Millisecond}}
	reqs := []Request{{Prompt: 8, Output: 40, TPOTSLO: time.Second}}
	sim := func(step time.Duration, gate bool) *Run {
		t.Helper()
		m := Machine{Curve: c, Accept: perfect, Slots: 1, Budget: 8, DraftStep: step, Gate: gate}
		run, err := Simulate(m, serving.System{Name: "adaserve", Spec: spec.AdaServe}, reqs, 1)
		require.NoError(t, err)
		return run
	}
	incr, err := Simulate(Machine{Curve: c, Accept: perfect, Slots: 1, Budget: 8}, serving.System{Name: "incremental", Spec: spec.Incremental}, reqs, 1)
	require.NoError(t, err)

	costly := sim(20*time.Millisecond, true) // step + marginal > a token's worth
	require.Equal(t, costly.Decodes, costly.Emitted, "no drafted token verified")
	require.Equal(t, incr.End, costly.End, "no draft time either")

	ungated := sim(20*time.Millisecond, false)
	require.Greater(t, ungated.Emitted, ungated.Decodes, "without the gate it speculates")

	cheap := sim(time.Millisecond, true)
	require.Greater(t, cheap.Emitted, cheap.Decodes, "a cheap step pays: it drafts")
	require.Less(t, cheap.End, incr.End)
}

// TestCapacityCountsPrompts: a request costs its output at the full
// batch's per-token price and its prompt at the prefill rate. On a curve of
// 1 ms a token, 10 output and 20 prompt tokens make 30 ms a request: 33
// requests/s, not the 100 that counting the outputs alone gives.
func TestCapacityCountsPrompts(t *testing.T) {
	linear := Curve{Name: "linear", N: []int{1, 256}, T: []time.Duration{time.Millisecond, 256 * time.Millisecond}}
	s := Setting{Machine: Machine{Curve: linear, Slots: 4},
		Mix: []Category{{Name: "one", Share: 1, TPOTx: 1, Prompt: [2]int{10, 30}, Output: [2]int{5, 15}}}}
	require.InDelta(t, 1000.0/30, s.Capacity(), 1e-9)
	// On a flat curve prompts are nearly free: the decode batch decides.
	s.Machine.Curve = Curve{Name: "flat", N: []int{1, 256}, T: []time.Duration{4 * time.Millisecond, 4 * time.Millisecond}}
	require.InDelta(t, 1/(10*0.001+20*0.004/256), s.Capacity(), 1e-9)
}

// Replicas pool independent workloads of one rate into a row: the first is
// the workload a sweep without replicas serves, the others are new draws,
// and the row counts every request of them all, its goodput their good
// tokens over the sum of their spans.
func TestReplicasPoolWorkloads(t *testing.T) {
	s := Setting{
		Name:    "gpu-like",
		Machine: Machine{Curve: GPULike, DraftStep: 300 * time.Microsecond, Accept: DraftModelAcceptance, Slots: 8, Budget: 16},
		Mix:     PaperMix, Requests: 40, Loads: []float64{0.5, 1.5}, Seed: 3,
	}
	ps := []serving.System{serving.Systems[0]}
	one, err := Sweep(s, ps)
	require.NoError(t, err)
	s.Replicas = 2
	two, err := Sweep(s, ps)
	require.NoError(t, err)
	require.Len(t, two, len(one))
	for li := range s.Loads {
		first, _, err := s.Replica(li, 0)
		require.NoError(t, err)
		second, seed, err := s.Replica(li, 1)
		require.NoError(t, err)
		require.NotEqual(t, first, second, "replica 1 is a new draw")
		r0, err := Simulate(s.Machine, ps[0], first, s.Seed+uint64(li))
		require.NoError(t, err)
		r1, err := Simulate(s.Machine, ps[0], second, seed)
		require.NoError(t, err)

		require.Equal(t, Summarize(r0, len(s.Mix)), one[li].Metrics, "replica 0 is the sweep without replicas")
		require.Equal(t, 2*s.Requests, two[li].Requests)
		m0, m1 := Summarize(r0, len(s.Mix)), Summarize(r1, len(s.Mix))
		require.InDelta(t, (m0.Attainment+m1.Attainment)/2, two[li].Attainment, 1e-12)
		span := func(r *Run) float64 { return (r.End - r.Results[0].Arrival).Seconds() }
		good := m0.Goodput*span(r0) + m1.Goodput*span(r1)
		require.InDelta(t, good/(span(r0)+span(r1)), two[li].Goodput, 1e-9)
		require.Equal(t, float64(r0.Emitted+r1.Emitted)/float64(r0.Decodes+r1.Decodes), two[li].TokensPerDec)
	}
}

// verifiedAndEmitted simulates the requests and returns the tree nodes
// verified and the tokens emitted per request-iteration that decoded.
func verifiedAndEmitted(t *testing.T, m Machine, p serving.System, reqs []Request) (nodes, tokens float64) {
	t.Helper()
	run, err := Simulate(m, p, reqs, 1)
	require.NoError(t, err)
	return float64(run.Verified) / float64(run.Decodes), float64(run.Emitted) / float64(run.Decodes)
}

// A drafter with nothing to propose in most iterations (Drafts) leaves
// those requests decoding plainly: verified nodes and tokens per decode
// fall towards 1, in proportion.
func TestDraftsShare(t *testing.T) {
	reqs, err := Generate(Workload{Rate: 2, Requests: 60, Categories: PaperMix, Seed: 5}, 10*time.Millisecond)
	require.NoError(t, err)
	m := Machine{Curve: Flat(10 * time.Millisecond), Accept: perfect, Slots: 4, Budget: 16, MaxDepth: 3, MaxWidth: 1}
	p, err := serving.ByName("global-greedy")
	require.NoError(t, err)
	perDecode := func(drafts float64) (nodes, tokens float64) {
		m.Accept.Drafts = drafts
		return verifiedAndEmitted(t, m, p, reqs)
	}
	allNodes, allTokens := perDecode(1)
	require.Greater(t, allTokens, 3.0, "a perfect drafter of depth 3 gains nearly 4 tokens a decode")
	nodes, tokens := perDecode(0.25)
	require.InDelta(t, 1+0.25*(allNodes-1), nodes, 0.15)
	require.InDelta(t, 1+0.25*(allTokens-1), tokens, 0.15)
	for _, bad := range []float64{1.5, -0.1, math.NaN()} {
		m.Accept.Drafts = bad
		_, err = Simulate(m, p, reqs, 1)
		require.ErrorContains(t, err, "drafts", "%v", bad)
	}
	m.Accept = Acceptance{Name: "nan", Cond: [][]float64{{math.NaN()}}}
	_, err = Simulate(m, p, reqs, 1)
	require.ErrorContains(t, err, "probabilities")
}

// Continues shortens what a fixed tree verifies to the chains the drafter
// has: with a perfect single-candidate drafter and SpecInfer's chain of
// depth 4, every layer below the first is there with probability c, so a
// tree holds 1 + (1 + c + c² + c³) nodes on average, and the accepted
// path is the whole chain drafted.
func TestContinuesShortensChains(t *testing.T) {
	reqs, err := Generate(Workload{Rate: 2, Requests: 60, Categories: PaperMix, Seed: 5}, 10*time.Millisecond)
	require.NoError(t, err)
	m := Machine{Curve: Flat(10 * time.Millisecond), Accept: perfect, Slots: 4, Budget: 16}
	p := serving.System{Name: "chain", Spec: spec.SpecInfer, Branch: []int{1, 1, 1, 1}}
	perDecode := func(c float64) (nodes, tokens float64) {
		m.Accept.Continues = c
		return verifiedAndEmitted(t, m, p, reqs)
	}
	nodes, tokens := perDecode(0)
	require.InDelta(t, 5, nodes, 0.2, "0 means always: the whole chain")
	require.InDelta(t, 5, tokens, 0.2)
	const c = 0.5
	want := 1 + (1 + c + c*c + c*c*c)
	nodes, tokens = perDecode(c)
	require.InDelta(t, want, nodes, 0.15)
	require.InDelta(t, want, tokens, 0.15, "a perfect drafter's every node is accepted")
	for _, bad := range []float64{1.5, -0.1, math.NaN()} {
		m.Accept.Continues = bad
		_, err = Simulate(m, p, reqs, 1)
		require.ErrorContains(t, err, "continues", "%v", bad)
	}
}

// A run counts the iterations whose selection the budget bound: with four
// requests drafting depth-3 chains on a flat curve (every node worth
// verifying), a budget of 8 (4 roots, 4 nodes) binds whenever more than
// one request decodes, and a budget of 64 never does; incremental
// decoding selects nothing.
func TestRunCountsBoundSelections(t *testing.T) {
	reqs, err := Generate(Workload{Rate: 50, Requests: 40, Categories: PaperMix, Seed: 2}, 10*time.Millisecond)
	require.NoError(t, err)
	m := Machine{Curve: Flat(10 * time.Millisecond), Accept: perfect, Slots: 4, MaxDepth: 3, MaxWidth: 1}
	share := func(policy string, budget int) float64 {
		p, err := serving.ByName(policy)
		require.NoError(t, err)
		m.Budget = budget
		run, err := Simulate(m, p, reqs, 1)
		require.NoError(t, err)
		require.Positive(t, run.Planned)
		return SummarizeRuns([]*Run{run}, len(PaperMix)).Bound
	}
	require.Greater(t, share("global-greedy", 8), 0.5)
	require.Greater(t, share("adaserve", 8), 0.5)
	require.Zero(t, share("global-greedy", 64))
	require.Zero(t, share("incremental", 8))
}

// TestAttainmentWithTTFT: a request counts there only when it met its
// TPOT SLO and its TTFT SLO too, where it had one.
func TestAttainmentWithTTFT(t *testing.T) {
	ms := time.Millisecond
	res := func(ttft, ttftSLO time.Duration, tpotOK bool) Result {
		last := 10 * ms // 9 tokens after the first: a TPOT of ~1.1 ms
		if !tpotOK {
			last = 100 * ms
		}
		return Result{Request: Request{TPOTSLO: 2 * ms, TTFTSLO: ttftSLO}, First: ttft, Last: ttft + last, Generated: 10}
	}
	run := &Run{End: time.Second, Results: []Result{
		res(5*ms, 10*ms, true),  // both
		res(50*ms, 10*ms, true), // TPOT only: a late first token
		res(50*ms, 0, true),     // no TTFT SLO: TPOT decides
		res(5*ms, 10*ms, false), // neither
	}}
	m := Summarize(run, 1)
	require.Equal(t, 0.75, m.Attainment)
	require.Equal(t, 0.5, m.WithTTFT)
	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, []Row{{Setting: "s", Policy: "p", Metrics: m}}, PaperMix[:1]))
	recs := strings.Split(strings.TrimSpace(b.String()), "\n")
	head, row := strings.Split(recs[0], ","), strings.Split(recs[1], ",")
	require.Equal(t, "attain_with_ttft", head[len(head)-1])
	require.Equal(t, "0.5000", row[len(row)-1])
}

// The counts a simulation keeps of its drafted trees (Run.Drafts) fit back
// to the acceptance model it ran: what lets the engine's counts stand for
// the engine's drafter in a replay.
func TestFitAcceptanceRecoversTheModel(t *testing.T) {
	reqs, err := Generate(Workload{Rate: 2, Requests: 200, Categories: PaperMix, Seed: 11}, 10*time.Millisecond)
	require.NoError(t, err)
	truth := Acceptance{Name: "truth", Cond: [][]float64{{0.6, 0.15}, {0.5, 0.12}, {0.4, 0.1}}, Drafts: 0.7, Continues: 0.8}
	m := Machine{Curve: Flat(10 * time.Millisecond), Accept: truth, Slots: 4, Budget: 64, MaxDepth: 4, MaxWidth: 2}
	p, err := serving.ByName("global-greedy")
	require.NoError(t, err)
	run, err := Simulate(m, p, reqs, 3)
	require.NoError(t, err)
	fit, err := FitAcceptance("fit", run.Drafts, 200)
	require.NoError(t, err)
	require.InDelta(t, truth.Drafts, fit.Drafts, 0.03)
	require.InDelta(t, truth.Continues, fit.Continues, 0.03)
	require.GreaterOrEqual(t, len(fit.Cond), 3, "depths reached often enough: %v", run.Drafts.Offered)
	for d, row := range truth.Cond {
		for k, want := range row {
			require.InDelta(t, want, fit.Cond[d][k], 0.04, "depth %d child %d", d, k)
			// The synthetic drafter reports the truth: what it believed
			// is what was taken.
			require.InDelta(t, want, fit.Believed[d][k], 1e-6, "belief at depth %d child %d", d, k)
		}
	}
	// A drafter that believes less than it gets: the fit keeps both, and
	// a simulation of the fit verifies the shorter trees the belief buys.
	shy := truth
	shy.Believed = [][]float64{{0.3, 0.1}, {0.25, 0.05}}
	m.Accept = shy
	shyRun, err := Simulate(m, p, reqs, 3)
	require.NoError(t, err)
	shyFit, err := FitAcceptance("shy", shyRun.Drafts, 200)
	require.NoError(t, err)
	require.InDelta(t, 0.3, shyFit.Believed[0][0], 1e-6)
	require.InDelta(t, 0.25, shyFit.Believed[2][0], 1e-6, "the last row serves deeper")
	require.InDelta(t, truth.Cond[0][0], shyFit.Cond[0][0], 0.04, "the target takes what it took")
	require.Less(t, shyRun.Verified, run.Verified, "less believed, less verified")
	// Counts from another model fit to that model, not to this one.
	m.Accept = NGramAcceptance
	run, err = Simulate(m, p, reqs, 3)
	require.NoError(t, err)
	other, err := FitAcceptance("other", run.Drafts, 200)
	require.NoError(t, err)
	require.InDelta(t, NGramAcceptance.Cond[0][0], other.Cond[0][0], 0.04)
	require.Greater(t, math.Abs(other.Cond[0][0]-fit.Cond[0][0]), 0.05)

	_, err = FitAcceptance("none", spec.DraftStats{}, 1)
	require.ErrorContains(t, err, "no drafted trees")
	_, err = FitAcceptance("thin", run.Drafts, 1<<30)
	require.ErrorContains(t, err, "fewer than")
}

// A draft model catches up with a request's context before its first
// draft (Machine.DraftWindow): one pass over at most the window's tokens
// on the draft curve, once per request, and nothing where it never
// drafts.
func TestDraftModelCatchesUpOnce(t *testing.T) {
	c := Curve{Name: "linear", N: []int{1, 64}, T: []time.Duration{11 * time.Millisecond, 74 * time.Millisecond}}
	dc := Curve{Name: "draft", N: []int{1, 64}, T: []time.Duration{time.Millisecond, 64 * time.Millisecond}}
	reqs := []Request{{Prompt: 30, Output: 40, TPOTSLO: time.Second}}
	run := func(window int, p serving.System) *Run {
		t.Helper()
		m := Machine{Curve: c, Accept: perfect, Slots: 1, Budget: 8, DraftCurve: &dc, DraftWindow: window}
		r, err := Simulate(m, p, reqs, 1)
		require.NoError(t, err)
		return r
	}
	ada := serving.System{Name: "adaserve", Spec: spec.AdaServe}
	without, with := run(0, ada), run(16, ada)
	require.Zero(t, without.CatchUps)
	require.Equal(t, 1, with.CatchUps, "one request, one catch-up")
	require.Greater(t, with.Emitted, with.Decodes, "it drafted")
	// The same draws (a perfect drafter), so the runs differ by the
	// catch-up alone: the window's 16 tokens, not the 31 of the context.
	require.Equal(t, without.Emitted, with.Emitted)
	require.Equal(t, dc.At(16), with.End-without.End)
	wide := run(1000, ada)
	require.Equal(t, dc.At(31), wide.End-without.End, "the prompt and the first token, where the window holds them")

	incr := run(16, serving.System{Name: "incremental", Spec: spec.Incremental})
	require.Zero(t, incr.CatchUps, "no drafts, no catch-up")
}

// Under AdaServe the draft model's catch-up waits for a batch that can
// wait for it (spec.HoldCatchUps): beside a request too close to its SLO
// to absorb a 150 ms catch-up, no request starts drafting, and the held
// catch-ups are counted; with a loose SLO, or under GlobalGreedy, each
// request catches up once, at once.
func TestCatchUpsWaitForSlack(t *testing.T) {
	c := Curve{Name: "linear", N: []int{1, 64}, T: []time.Duration{11 * time.Millisecond, 74 * time.Millisecond}}
	dc := Curve{Name: "draft", N: []int{1, 64}, T: []time.Duration{time.Millisecond, 640 * time.Millisecond}}
	run := func(slo time.Duration, p serving.System) *Run {
		t.Helper()
		reqs := []Request{
			{Prompt: 30, Output: 60, TPOTSLO: slo},
			{Arrival: 50 * time.Millisecond, Prompt: 30, Output: 20, TPOTSLO: time.Second},
		}
		m := Machine{Curve: c, Accept: perfect, Slots: 2, Budget: 8, DraftCurve: &dc, DraftWindow: 16}
		r, err := Simulate(m, p, reqs, 1)
		require.NoError(t, err)
		return r
	}
	ada := serving.System{Name: "adaserve", Spec: spec.AdaServe}
	tight := run(12*time.Millisecond, ada)
	require.Positive(t, tight.Held)
	require.Equal(t, tight.Decodes, tight.Emitted, "nothing drafted while the tight request decodes")
	loose := run(time.Second, ada)
	require.Zero(t, loose.Held)
	require.Equal(t, 2, loose.CatchUps)
	gg := run(12*time.Millisecond, serving.System{Name: "global-greedy", Spec: spec.GlobalGreedy})
	require.Zero(t, gg.Held)
	require.Equal(t, 2, gg.CatchUps)
}
