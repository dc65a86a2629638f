package main

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/spec/sim"
)

const smokeModel = "../../../models/SmolLM2-135M-Instruct.Q4_1.gguf"

// The engine mode's smoke run (CI): three requests of the paper's mix at
// one rate through the real engine on the default model, under AdaServe
// and incremental decoding, each point replayed in the simulator. The
// numbers depend on the machine; what must hold is that every request
// was served within its max_tokens and the CSVs carry every point and
// every request.
func TestEngineSmoke(t *testing.T) {
	if race.Enabled {
		t.Skip("the real engine under -race is too slow for a timed workload; run without -race")
	}
	testmodel.Need(t, smokeModel)
	out := t.TempDir()
	rows, err := runEngine(engineOpts{out: out, model: smokeModel, prompts: "../../engine/testdata", threads: 2, slots: 4,
		requests: 3, replicas: 2, maxTokens: 12, policies: []string{"adaserve", "incremental"}, loads: []float64{0.5}, seed: 1, check: true, adaptive: true})
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for _, r := range rows {
		require.Equal(t, 2*3, r.Engine.Requests, "both replicas pooled")
		require.Equal(t, 2*3, r.Sim.Requests)
		require.Positive(t, r.Engine.Throughput)
		require.LessOrEqual(t, r.Engine.Goodput, r.Engine.Throughput)
		require.GreaterOrEqual(t, r.Engine.Attainment, 0.0)
		require.LessOrEqual(t, r.Engine.Attainment, 1.0)
		require.Positive(t, r.Engine.MeanTTFT)
	}
	require.Zero(t, rows[1].Proposed, "incremental decoding drafts nothing")
	// The backend's own count of the request-iterations that sat out:
	// known on both sides, and none under incremental decoding.
	for _, r := range rows {
		require.False(t, math.IsNaN(r.EngineSatOut), r.Engine.Policy)
		require.False(t, math.IsNaN(r.SimSatOut), r.Engine.Policy)
	}
	require.Zero(t, rows[1].EngineSatOut)
	require.Zero(t, rows[1].SimSatOut)
	for name, n := range map[string]int{"engine-rates.csv": 1 + 2, "engine-vs-sim.csv": 1 + 2*2, "engine-requests.csv": 1 + 2*2*3} {
		f, err := os.Open(filepath.Join(out, name))
		require.NoError(t, err)
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		require.NoError(t, err)
		require.Len(t, recs, n, name)
		if name == "engine-requests.csv" {
			// Replica by replica, each policy in turn.
			var order []string
			for _, r := range recs[1:] {
				if r[3] == "0" { // a workload's first request
					order = append(order, r[0]+" "+r[2])
				}
			}
			require.Equal(t, []string{"adaserve 0", "incremental 0", "adaserve 1", "incremental 1"}, order)
		}
	}
	// The engine's root-only iterations by batch size, beside the curve:
	// 4 slots, so batches of 1 to 4, each timed.
	f, err := os.Open(filepath.Join(out, "engine-costs.csv"))
	require.NoError(t, err)
	costs, err := csv.NewReader(f).ReadAll()
	f.Close()
	require.NoError(t, err)
	require.Equal(t, []string{"batch", "iterations", "engine_ms", "plan_ms", "forward_ms", "verify_ms", "curve_ms", "priced_ms"}, costs[0])
	require.Greater(t, len(costs), 1, "some iteration decoded roots alone")
	for _, c := range costs[1:] {
		n, err := strconv.Atoi(c[0])
		require.NoError(t, err)
		require.True(t, n >= 1 && n <= 4, "batch %d with 4 slots", n)
		var x [8]float64
		for i, v := range c[1:] {
			x[i+1], err = strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			require.GreaterOrEqual(t, x[i+1], 0.0, c)
		}
		require.Positive(t, x[1], "iterations")
		require.Positive(t, x[4], "the forward pass")
		// Four figures rounded to the microsecond: at most 2 µs apart.
		require.InDelta(t, x[2], x[3]+x[4]+x[5], 0.0021, "the phases make up the iteration")
		require.Positive(t, x[6], "the chain")
		require.GreaterOrEqual(t, x[7], x[6]*0.999, "a batch is priced at least as the chain")
	}
	for _, ext := range []string{"-attainment.svg", "-goodput.svg"} {
		_, err := os.Stat(filepath.Join(out, "engine-rates"+ext))
		require.NoError(t, err)
	}
	// Each served workload's draft counts, for -replay: AdaServe's
	// n-gram drafter was asked, and every tree it verified was counted
	// as asked; incremental decoding asks for none.
	drafts, err := readDrafts(out)
	require.NoError(t, err)
	require.Len(t, drafts, 2*2)
	for k := range 2 {
		ada, inc := drafts[keyOf("adaserve", 0.5, k)], drafts[keyOf("incremental", 0.5, k)]
		require.Positive(t, ada.Asked, "replica %d", k)
		require.GreaterOrEqual(t, ada.Asked, ada.Drafted)
		require.Zero(t, inc.Asked)
	}
}

// The capacity counts the prompts as the engine prefills them: each
// category's committed prompts in the model's chat template. The grounded
// set's passages are several times the chat set's questions.
func TestPromptTokens(t *testing.T) {
	testmodel.Need(t, smokeModel)
	prompts, err := loadPromptSets("../../engine/testdata")
	require.NoError(t, err)
	lens, err := promptTokens(engineOpts{model: smokeModel, threads: 2}, prompts)
	require.NoError(t, err)
	require.Len(t, lens, 3)
	for c, l := range lens {
		require.Greater(t, l, 10.0, "category %d: the template alone is more", c)
		require.Less(t, l, 1000.0, "category %d", c)
	}
	require.Greater(t, lens[1], 2*lens[2], "grounded against chat")
}

// TestCurvesAreReused: a run keeps the curves it used, the chain and its
// batches, and a run given -curves takes them, measuring nothing (its
// model path need not even exist), and keeps them in its own output too.
// Curves the simulator would not take are refused with the file named; a
// run from before batches were measured has only the chain.
func TestCurvesAreReused(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	c := sim.Curve{N: []int{1, 2, 8}, T: []time.Duration{36 * time.Millisecond, 38 * time.Millisecond, 53 * time.Millisecond},
		RootN: []int{1, 8}, RootT: []time.Duration{36 * time.Millisecond, 60 * time.Millisecond}, Context: 128, Entry: 4 * time.Microsecond, Prompt: 900 * time.Microsecond}
	require.NoError(t, writeCurves(filepath.Join(first, targetCurveFile), c))

	got, err := engineCurve(engineOpts{out: second, curves: first}, "no-such-model.gguf", 160, 8, targetCurveFile)
	require.NoError(t, err)
	c.Name = filepath.Join(first, targetCurveFile)
	require.Equal(t, c, got)
	kept, err := os.ReadFile(filepath.Join(second, targetCurveFile))
	require.NoError(t, err)
	require.Equal(t, "tokens,ns\n1,36000000\n2,38000000\n8,53000000\n", string(kept))
	kept, err = os.ReadFile(filepath.Join(second, "curve-roots.csv"))
	require.NoError(t, err)
	require.Equal(t, "sequences,ns,context,entry_ns,prompt_ns\n1,36000000,128,4000,900000\n8,60000000,128,4000,900000\n", string(kept))

	_, err = engineCurve(engineOpts{out: second, curves: first}, "", 16, 1, draftCurveFile)
	require.ErrorContains(t, err, draftCurveFile, "an earlier run without a draft model kept no draft curve")

	// The chain alone.
	require.NoError(t, os.Remove(filepath.Join(first, "curve-roots.csv")))
	got, err = readCurves(filepath.Join(first, targetCurveFile))
	require.NoError(t, err)
	require.Empty(t, got.RootN)
	require.Equal(t, 53*time.Millisecond, got.Cost().Pass(8, 1000, 0, 0), "priced on the chain alone")

	for body, want := range map[string]string{
		"":                        "header",
		"n,t\n1,5\n":              "header",
		"tokens,ns\n1,5\n2,x\n":   "line 3",
		"tokens,ns\n1,50\n2,40\n": "falls",
		"tokens,ns\n2,50\n1,60\n": "ascending",
		"tokens,ns\n1,-5\n":       "not positive",
	} {
		path := filepath.Join(first, "bad.csv")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		_, _, err := readCurve(path)
		require.ErrorContains(t, err, want, "%q", body)
		require.ErrorContains(t, err, path)
	}
	for body, want := range map[string]string{
		"sequences,ns\n1,5\n": "header",
		"sequences,ns,context,entry_ns,prompt_ns\n1,5,128,4\n":                  "line 2",
		"sequences,ns,context,entry_ns,prompt_ns\n1,50,128,4,9\n2,40,128,4,9\n": "falls",
		"sequences,ns,context,entry_ns,prompt_ns\n1,50,128,4,9\n2,60,64,4,9\n":  "differ",
		"sequences,ns,context,entry_ns,prompt_ns\n1,50,128,4,9\n2,60,128,4,8\n": "differ",
		"sequences,ns,context,entry_ns,prompt_ns\n1,50,128,-4,9\n":              "negative",
		"sequences,ns,context,entry_ns,prompt_ns\n1,50,128,4,-9\n":              "negative",
	} {
		path := filepath.Join(first, "bad.csv")
		require.NoError(t, writeCurve(path, c.N, c.T))
		require.NoError(t, os.WriteFile(filepath.Join(first, "bad-roots.csv"), []byte(body), 0o644))
		_, err := readCurves(path)
		require.ErrorContains(t, err, want, "%q", body)
	}
}

// pairedDiff compares two policies replica by replica: with attainments
// of 1/2 and 1/4 on the first workload and 1 and 1/2 on the second, the
// differences are 1/4 and 1/2, their mean 3/8 and its standard error 1/8.
func TestPairedDiff(t *testing.T) {
	run := func(attained ...bool) *sim.Run {
		r := &sim.Run{End: time.Second}
		for i, ok := range attained {
			x := sim.Result{Request: sim.Request{ID: i, TPOTSLO: 10 * time.Millisecond}, First: 0, Last: 20 * time.Millisecond, Generated: 2}
			if ok {
				x.Last = 5 * time.Millisecond
			}
			r.Results = append(r.Results, x)
		}
		return r
	}
	a := []*sim.Run{run(true, true, false, false), run(true, true, true, true)}
	b := []*sim.Run{run(true, false, false, false), run(true, true, false, false)}
	mean, se := pairedDiff(a, b, 1)
	require.InDelta(t, 3.0/8, mean, 1e-12)
	require.InDelta(t, 1.0/8, se, 1e-12)
	mean, se = pairedDiff(a[:1], b[:1], 1)
	require.InDelta(t, 1.0/4, mean, 1e-12)
	require.Zero(t, se, "one replica has no spread to judge")
}

// -backend picks the device under the engine; a name it does not know is
// refused before any model is loaded or any file written.
func TestEngineBackend(t *testing.T) {
	for _, c := range []struct{ flag, name string }{{"", "cpu"}, {"cpu", "cpu"}, {"cuda", "cuda"}} {
		name, dev, err := engineOpts{backend: c.flag}.device()
		require.NoError(t, err, c.flag)
		require.Equal(t, c.name, name)
		require.NotNil(t, dev)
	}
	out := t.TempDir()
	_, err := runEngine(engineOpts{out: out, model: "no-such.gguf", backend: "tpu", prompts: "../../engine/testdata", threads: 1, slots: 1,
		requests: 1, replicas: 1, maxTokens: 4, policies: []string{"adaserve"}, loads: []float64{0.5}, seed: 1})
	require.ErrorContains(t, err, `-backend "tpu": want cpu or cuda`)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Empty(t, entries)
}
