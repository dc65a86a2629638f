package main

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/spec/sim"
)

// replayRun is an engine run as the harness keeps it, made up: two
// policies at two loads, two replicas each, every request's tokens
// paced so that requests 0, 2 and 4 of a replica meet their SLO and 1
// and 3 miss it.
type replayRun struct {
	dir   string
	opts  engineOpts
	curve sim.Curve             // the run's, kept in dir
	recs  map[string][][]record // "policy load" → by replica
	order []string
}

func makeReplayRun(t *testing.T) replayRun {
	t.Helper()
	o := engineOpts{slots: 4, maxTokens: 64, seed: 3, adaptive: true}
	c := sim.Curve{N: []int{1, 2, 4, 8, 16, 64}, T: []time.Duration{6 * time.Millisecond, 6200 * time.Microsecond,
		6500 * time.Microsecond, 7 * time.Millisecond, 9 * time.Millisecond, 30 * time.Millisecond}}
	m := engineMachine(o, c, nil)
	s := sim.Setting{Machine: m, Mix: engineMix(o.maxTokens), Requests: 5, Loads: []float64{0.5, 1}, Seed: o.seed, Replicas: 2}
	r := replayRun{dir: t.TempDir(), opts: o, curve: c, recs: map[string][][]record{}}
	require.NoError(t, writeCurve(filepath.Join(r.dir, targetCurveFile), c.N, c.T))
	var b strings.Builder
	b.WriteString(requestHeader)
	for li, load := range s.Loads {
		for k := range s.Replicas {
			reqs, _, err := s.Replica(li, k)
			require.NoError(t, err)
			for pi, policy := range []string{"adaserve", "incremental"} {
				key := policy + " " + []string{"0.5", "1"}[li]
				if k == 0 {
					r.order = append(r.order, key)
				}
				var recs []record
				for i, q := range reqs {
					tpot := q.TPOTSLO / 2
					if i%2 == 1 {
						tpot = q.TPOTSLO * 3 / 2
					}
					rec := record{Req: q, PromptTokens: 40 + i, Chunks: 3 + i}
					if pi == 0 {
						rec.Proposed, rec.Accepted = 6, 2
					}
					first := q.Arrival + time.Duration(20+i)*time.Millisecond
					for j := range 4 + i {
						rec.Tokens = append(rec.Tokens, first+time.Duration(j)*tpot)
					}
					recs = append(recs, rec)
				}
				run, err := runOf(recs)
				require.NoError(t, err)
				for i, rec := range recs {
					b.WriteString(requestRow(policy, load, k, rec, run.Results[i]))
				}
				r.recs[key] = append(r.recs[key], recs)
			}
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "engine-requests.csv"), []byte(b.String()), 0o644))
	return r
}

// engine-requests.csv reads back into the runs the engine served: the
// same points in the same order, each replica's requests with the
// attainment, TTFT and TPOT the engine measured (to the file's rounding),
// the load's index for the seeds, and the draft tokens and decodes.
func TestReplayReadsBackTheEngine(t *testing.T) {
	r := makeReplayRun(t)
	m := engineMachine(r.opts, r.curve, nil)
	points, err := readEngineRequests(filepath.Join(r.dir, "engine-requests.csv"), engineMix(r.opts.maxTokens), m.Baseline())
	require.NoError(t, err)
	require.Len(t, points, len(r.order))
	for i, p := range points {
		require.Equal(t, r.order[i], p.Policy+" "+map[float64]string{0.5: "0.5", 1: "1"}[p.Load])
		require.Equal(t, i/2, p.LoadIndex)
		require.True(t, p.HasDecodes)
		require.Zero(t, p.Mismatched)
		require.Len(t, p.Runs, 2)
		for k, got := range p.Runs {
			require.InDelta(t, 0.6, sim.Summarize(got, 3).Attainment, 1e-9)
			want, err := runOf(r.recs[r.order[i]][k])
			require.NoError(t, err)
			require.Len(t, got.Results, len(want.Results))
			require.Equal(t, want.Decodes, got.Decodes)
			require.Equal(t, want.Emitted, got.Emitted)
			for j, x := range got.Results {
				w := want.Results[j]
				require.Equal(t, w.Attained(), x.Attained(), "request %d", j)
				require.Equal(t, w.TPOTSLO, x.TPOTSLO, "the SLO as drawn, not as rounded")
				require.Equal(t, w.TTFTSLO, x.TTFTSLO)
				require.Equal(t, w.Prompt, x.Prompt)
				require.InDelta(t, float64(w.TTFT()), float64(x.TTFT()), float64(100*time.Microsecond))
				require.InDelta(t, float64(w.TPOT()), float64(x.TPOT()), float64(10*time.Microsecond))
			}
		}
		if p.Policy == "adaserve" {
			require.Equal(t, 2*5*6, p.Proposed)
			require.Equal(t, 2*5*2, p.Accepted)
		}
	}
}

// -replay replays every point in the simulator on the run's curve with
// the run's seeds: the engine's side of each row is what the engine
// measured, and the simulator's is sim.Simulate of the same requests.
func TestReplayChecksEveryPoint(t *testing.T) {
	r := makeReplayRun(t)
	r.opts.out = t.TempDir()
	rows, err := runReplay(r.opts, r.dir)
	require.NoError(t, err)
	require.Len(t, rows, 4)
	for i, row := range rows {
		decodes := 0
		for _, recs := range r.recs[r.order[i]] {
			run, err := runOf(recs)
			require.NoError(t, err)
			decodes += run.Decodes
		}
		require.Equal(t, 10, row.Engine.Requests)
		require.Equal(t, 10, row.Sim.Requests)
		require.InDelta(t, 0.6, row.Engine.Attainment, 1e-9, "requests 0, 2 and 4 of each replica attain, 1 and 3 miss")
		require.InDelta(t, float64(decodes+row.Proposed)/float64(decodes), row.EngineNodes, 1e-9)
		require.Positive(t, row.SimNodes)
	}
	require.Equal(t, 1.0, rows[1].SimNodes, "incremental decoding verifies its roots alone")
	for _, row := range rows {
		require.True(t, math.IsNaN(row.EngineSatOut), "the file keeps no count of the engine's sitting out")
		require.False(t, math.IsNaN(row.SimSatOut))
	}
	// The simulator counts the iterations the budget bound; the engine's
	// runs, seen from outside, have no such count: its column is empty.
	f, err := os.Open(filepath.Join(r.opts.out, "engine-vs-sim.csv"))
	require.NoError(t, err)
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	require.NoError(t, err)
	require.Len(t, recs, 1+2*4)
	col := slices.Index(recs[0], "budget_bound")
	require.Positive(t, col)
	for _, rec := range recs[1:] {
		if rec[0] == "engine" {
			require.Empty(t, rec[col])
			continue
		}
		x, err := strconv.ParseFloat(rec[col], 64)
		require.NoError(t, err, rec[0])
		require.True(t, x >= 0 && x <= 1)
	}
	require.True(t, math.IsNaN(rows[0].Engine.Bound))

	// The replay of a point is the simulation of its requests with the
	// seed the run drew them with (the file rounds the arrivals to 0.1
	// ms, which moves the span, and so the goodput, a little).
	m := engineMachine(r.opts, r.curve, nil)
	s := sim.Setting{Seed: r.opts.seed}
	pol, err := serving.ByName("adaserve")
	require.NoError(t, err)
	var sruns []*sim.Run
	for k := range 2 {
		run, err := runOf(r.recs["adaserve 1"][k])
		require.NoError(t, err)
		sr, err := sim.Simulate(m, pol, asWorkload(run), s.ReplicaSeed(1, k))
		require.NoError(t, err)
		sruns = append(sruns, sr)
	}
	require.Equal(t, sim.SummarizeRuns(sruns, 3).Attainment, rows[2].Sim.Attainment)
	require.InEpsilon(t, sim.SummarizeRuns(sruns, 3).Goodput, rows[2].Sim.Goodput, 1e-3, "arrivals as the file rounds them")
}

// A request the file rounds across its SLO is counted, and a file the
// replay cannot read says which line and column.
func TestReplayRefusesBadFiles(t *testing.T) {
	mix := engineMix(64)
	base := 7152905 * time.Nanosecond
	dir := t.TempDir()
	path := filepath.Join(dir, "engine-requests.csv")
	// Category 0's SLO is 7.152905 ms: 7.153 ms misses it, and rounds to
	// 7.15, which meets it.
	good := "adaserve,0.5000,0,0,0,10.0,50,64,3,20.0,7.15,7.15,0,0,false,2\n"
	require.NoError(t, os.WriteFile(path, []byte(requestHeader+good), 0o644))
	points, err := readEngineRequests(path, mix, base)
	require.NoError(t, err)
	require.Equal(t, 1, points[0].Mismatched)

	for line, want := range map[string]string{
		"adaserve,0.5000,0,0,7,10.0,50,64,3,20.0,7.15,7.15,0,0,false,2\n":  "category",
		"adaserve,0.5000,0,0,0,x,50,64,3,20.0,7.15,7.15,0,0,false,2\n":     "arrival_ms",
		"adaserve,0.5000,0,0,0,10.0,50,64,3,NaN,7.15,7.15,0,0,false,2\n":   "ttft_ms",
		"adaserve,0.5000,0,0,0,1e300,50,64,3,20.0,7.15,7.15,0,0,false,2\n": "arrival_ms",
		"adaserve,0.5000,0,0,0,10.0,50,64,-3,20.0,7.15,7.15,0,0,false,2\n": "generated",
		"adaserve,0.5000,0,0,0,10.0,50,64,0,20.0,7.15,7.15,0,0,false,2\n":  "generated",
		"adaserve,0.5000,0,0,0,10.0,50,64,3,20.0,7.15,7.15,0,0,maybe,2\n":  "attained",
		"adaserve,0.5000,0,0,0,1.0,50,64,3,20.0,7.15,7.15,0,0,false,2\n":   "arrival order",
	} {
		require.NoError(t, os.WriteFile(path, []byte(requestHeader+good+line), 0o644))
		_, err := readEngineRequests(path, mix, base)
		require.ErrorContains(t, err, want, "%q", line)
		require.ErrorContains(t, err, "line 3")
	}
	require.NoError(t, os.WriteFile(path, []byte("policy,load,id\nadaserve,0.5,0\n"), 0o644))
	_, err = readEngineRequests(path, mix, base)
	require.ErrorContains(t, err, `no "category" column`)
	require.NoError(t, os.WriteFile(path, []byte(requestHeader), 0o644))
	_, err = readEngineRequests(path, mix, base)
	require.ErrorContains(t, err, "no requests")
}

// -pace replays the same requests, judged by the run's SLOs, on a machine
// that many times as slow: the engine's side of the check is unchanged,
// and the simulator's requests take longer and meet no more SLOs.
func TestReplayPace(t *testing.T) {
	r := makeReplayRun(t)
	r.opts.out = t.TempDir()
	base, err := runReplay(r.opts, r.dir)
	require.NoError(t, err)
	r.opts.pace = 3
	slow, err := runReplay(r.opts, r.dir)
	require.NoError(t, err)
	require.Len(t, slow, len(base))
	fewer := false
	for i := range base {
		require.Equal(t, base[i].Engine.Attainment, slow[i].Engine.Attainment, "the run's SLOs judge the engine as before")
		require.LessOrEqual(t, slow[i].Sim.Attainment, base[i].Sim.Attainment)
		require.Greater(t, slow[i].Sim.MeanTPOT, base[i].Sim.MeanTPOT)
		fewer = fewer || slow[i].Sim.Attainment < base[i].Sim.Attainment
	}
	require.True(t, fewer, "a machine three times as slow misses SLOs the curve met")
	r.opts.pace = 1
	same, err := runReplay(r.opts, r.dir)
	require.NoError(t, err)
	require.Equal(t, base[0].Sim, same[0].Sim)
}

// -replay fits each replica's acceptance from the draft counts the run
// kept (engine-drafts.json), where it kept them: the simulator's side of
// a point is then the simulation with that fit, and the row shows the
// fit pooled over the replicas. A run without the file replays on the
// fixed model; a broken file is refused.
func TestReplayFitsTheEnginesDrafts(t *testing.T) {
	r := makeReplayRun(t)
	r.opts.out = t.TempDir()
	base := engineMachine(r.opts, r.curve, nil)
	truth := sim.Acceptance{Name: "truth", Cond: [][]float64{{0.7, 0.1}, {0.6, 0.1}}, Drafts: 0.5, Continues: 0.7}
	pol, err := serving.ByName("adaserve")
	require.NoError(t, err)
	// Counts as a drafter of that acceptance leaves them, from a longer
	// workload than the run's five requests.
	m := base
	m.Accept = truth
	long, err := sim.Generate(sim.Workload{Rate: 2, Requests: 100, Categories: engineMix(64), Seed: 9}, base.Baseline())
	require.NoError(t, err)
	var served []servedDrafts
	for li, load := range []float64{0.5, 1} {
		for k := range 2 {
			sr, err := sim.Simulate(m, pol, long, uint64(10*li+k))
			require.NoError(t, err)
			served = append(served, servedDrafts{"adaserve", load, k, sr.Drafts})
		}
	}
	require.NoError(t, writeDrafts(filepath.Join(r.dir, draftsFile), served))
	rows, err := runReplay(r.opts, r.dir)
	require.NoError(t, err)
	require.Len(t, rows, 4)
	for i, row := range rows {
		if row.Engine.Policy == "incremental" {
			require.Nil(t, row.Fit, "no counts kept for it")
			continue
		}
		require.NotNil(t, row.Fit)
		require.InDelta(t, truth.Cond[0][0], row.Fit.Cond[0][0], 0.05)
		require.InDelta(t, truth.Drafts, row.Fit.Drafts, 0.05)
		require.InDelta(t, truth.Continues, row.Fit.Continues, 0.05)
		// The simulator's side is the replay on each replica's own fit.
		var sruns []*sim.Run
		for k := range 2 {
			run, err := runOf(r.recs[r.order[i]][k])
			require.NoError(t, err)
			fm, ok := fittedMachine(base, served[2*(i/2)+k].Drafts, false)
			require.True(t, ok)
			sr, err := sim.Simulate(fm, pol, asWorkload(run), sim.Setting{Seed: r.opts.seed}.ReplicaSeed(i/2, k))
			require.NoError(t, err)
			sruns = append(sruns, sr)
		}
		require.Equal(t, sim.SummarizeRuns(sruns, 3).Attainment, row.Sim.Attainment, "load %v", row.Engine.Load)
	}

	require.NoError(t, os.WriteFile(filepath.Join(r.dir, draftsFile), []byte("[{"), 0o644))
	_, err = runReplay(r.opts, r.dir)
	require.ErrorContains(t, err, draftsFile)
}

// The pair's measured setting (cpu-measured-pair) is the simulated engine
// of an -engine run of a draft model: that run's target and draft curves,
// the draft cache's catch-up, the step gate, outputs capped and prompts
// as long as the committed ones, and the acceptance fitted from every
// draft the run counted, pooled; without counts, the fixed draft-model
// acceptance. It sweeps like any other setting.
func TestPairSetting(t *testing.T) {
	testmodel.Need(t, smokeModel)
	r := makeReplayRun(t)
	draft := sim.Curve{N: []int{1, 2, 4, 8, 16}, T: []time.Duration{2 * time.Millisecond, 2100 * time.Microsecond,
		2300 * time.Microsecond, 2600 * time.Microsecond, 3500 * time.Microsecond}}
	require.NoError(t, writeCurve(filepath.Join(r.dir, draftCurveFile), draft.N, draft.T))
	o := simOpts{out: t.TempDir(), model: smokeModel, draft: "unused: the curves are read", prompts: "../../engine/testdata",
		threads: 1, maxTokens: 48, slots: 4, seed: 2, curves: r.dir}
	loads := []float64{0.5}

	s, err := pairSetting(o, r.curve, loads, 6, 1)
	require.NoError(t, err)
	require.Equal(t, "cpu-measured-pair", s.Name)
	require.Equal(t, sim.DraftModelAcceptance.Name, s.Machine.Accept.Name, "no counts kept: the fixed model")
	require.NotNil(t, s.Machine.DraftCurve)
	require.Equal(t, draft.T, s.Machine.DraftCurve.T)
	require.True(t, s.Machine.Gate)
	require.Equal(t, engine.DefaultDraftWindow+engine.DraftSink, s.Machine.DraftWindow)
	require.Equal(t, 4, s.Machine.Slots)
	for _, c := range s.Mix {
		require.LessOrEqual(t, c.Output[1], 48)
		require.Equal(t, c.Prompt[0], c.Prompt[1], "the committed prompts' mean length")
		require.Positive(t, c.Prompt[0])
	}

	// Counts kept by the run, of a drafter whose acceptance is known.
	truth := sim.Acceptance{Name: "truth", Cond: [][]float64{{0.8, 0.1}, {0.7, 0.1}}, Drafts: 1, Continues: 1}
	m := s.Machine
	m.Accept = truth
	long, err := sim.Generate(sim.Workload{Rate: 2, Requests: 60, Categories: engineMix(48), Seed: 9}, m.Baseline())
	require.NoError(t, err)
	pol, err := serving.ByName("global-greedy")
	require.NoError(t, err)
	var served []servedDrafts
	for k := range 2 {
		sr, err := sim.Simulate(m, pol, long, uint64(k))
		require.NoError(t, err)
		served = append(served, servedDrafts{"global_greedy", 0.5, k, sr.Drafts})
	}
	require.NoError(t, writeDrafts(filepath.Join(r.dir, draftsFile), served))
	s, err = pairSetting(o, r.curve, loads, 6, 1)
	require.NoError(t, err)
	require.Contains(t, s.Machine.Accept.Name, draftsFile)
	require.InDelta(t, truth.Cond[0][0], s.Machine.Accept.Cond[0][0], 0.05)
	require.Equal(t, 1.0, s.Machine.Accept.Drafts, "a draft model's gate decides when it drafts")

	rows, err := sim.Sweep(s, serving.Systems)
	require.NoError(t, err)
	require.Len(t, rows, len(serving.Systems))

	require.NoError(t, os.WriteFile(filepath.Join(r.dir, draftsFile), []byte("[{"), 0o644))
	_, err = pairSetting(o, r.curve, loads, 6, 1)
	require.ErrorContains(t, err, draftsFile)
}

// -measured-pace replays on the run's curves scaled batch size by batch
// size to the pace its engine ran at (engine-costs.csv): each batch's
// pass by its own ratio (an untimed size by the nearest timed one), the
// chain, row and prompt prices by the smallest batch's. Malformed files
// are refused by name.
func TestEnginePaced(t *testing.T) {
	dir := t.TempDir()
	c := sim.Curve{Name: "c", N: []int{1, 16}, T: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond},
		RootN: []int{1, 2, 4, 8}, RootT: []time.Duration{10 * time.Millisecond, 11 * time.Millisecond, 13 * time.Millisecond, 17 * time.Millisecond},
		Context: 128, Entry: time.Microsecond, Prompt: 2 * time.Millisecond}
	write := func(body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, costsFile), []byte(body), 0o644))
	}
	write("batch,iterations,engine_ms,plan_ms,forward_ms,verify_ms,curve_ms,priced_ms\n" +
		"1,10,11.000,0,0,0,10.000,10.000\n2,10,13.200,0,0,0,11.000,11.000\n8,10,25.500,0,0,0,17.000,17.000\n")
	got, paces, err := enginePaced(c, dir)
	require.NoError(t, err)
	require.Equal(t, []batchPace{{1, 1.1}, {2, 1.2}, {8, 1.5}}, paces)
	want := []time.Duration{11 * time.Millisecond, 13200 * time.Microsecond, 15600 * time.Microsecond, 25500 * time.Microsecond}
	for i := range want {
		require.InDelta(t, float64(want[i]), float64(got.RootT[i]), 1e3, "batch %d", c.RootN[i])
	}
	require.InDelta(t, float64(22*time.Millisecond), float64(got.T[1]), 1e3, "the chain at the batch of one's pace")
	require.InDelta(t, float64(2200*time.Microsecond), float64(got.Prompt), 1e3)
	require.InDelta(t, float64(1100*time.Nanosecond), float64(got.Entry), 1)
	require.Equal(t, 17*time.Millisecond, c.RootT[3], "the run's curve is left as it was")

	for _, bad := range []string{
		"",
		"batch,iterations,engine_ms,plan_ms,forward_ms,verify_ms,curve_ms,priced_ms\n",
		"batch,iterations,engine_ms,plan_ms,forward_ms,verify_ms,curve_ms,priced_ms\n2,1,1,0,0,0,1,1\n1,1,1,0,0,0,1,1\n",
		"batch,iterations,engine_ms,plan_ms,forward_ms,verify_ms,curve_ms,priced_ms\n1,1,-1,0,0,0,1,1\n",
		"batch,iterations,engine_ms,plan_ms,forward_ms,verify_ms,curve_ms,priced_ms\n1,1,NaN,0,0,0,1,1\n",
		"policy,load\nx,1\n",
	} {
		write(bad)
		_, _, err := enginePaced(c, dir)
		require.ErrorContains(t, err, costsFile, "%q", bad)
	}
	require.NoError(t, os.Remove(filepath.Join(dir, costsFile)))
	_, _, err = enginePaced(c, dir)
	require.Error(t, err)

	// A whole replay at the engine's pace.
	r := makeReplayRun(t)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, costsFile), []byte("batch,iterations,engine_ms,plan_ms,forward_ms,verify_ms,curve_ms,priced_ms\n1,3,6.600,0,0,0,6.000,6.000\n"), 0o644))
	r.opts.out, r.opts.measuredPace = t.TempDir(), true
	rows, err := runReplay(r.opts, r.dir)
	require.NoError(t, err)
	require.Len(t, rows, 4)
}
