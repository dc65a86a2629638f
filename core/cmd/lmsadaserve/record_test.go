package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/spec/sim"
)

const ms = time.Millisecond

func rec(id, cat int, arrival, slo time.Duration, tokens ...time.Duration) record {
	return record{Req: sim.Request{ID: id, Category: cat, Arrival: arrival, Output: 64, TPOTSLO: slo}, Tokens: tokens, Chunks: len(tokens) - 1}
}

// Attainment, goodput and the latencies come out of recorded token times
// as the simulator's metric defines them: TTFT from the scheduled arrival,
// TPOT over the tokens after the first, attaining at TPOT ≤ SLO.
func TestRunOfMetrics(t *testing.T) {
	recs := []record{
		rec(0, 0, 0, 10*ms, 100*ms, 110*ms, 120*ms),     // TPOT 10 ms: exactly at its SLO
		rec(1, 1, 50*ms, 10*ms, 200*ms, 215*ms, 230*ms), // TPOT 15 ms: missed
	}
	run, err := runOf(recs)
	require.NoError(t, err)
	m := sim.Summarize(run, 2)
	require.InDelta(t, 0.5, m.Attainment, 1e-12)
	require.Equal(t, []float64{1, 0}, m.PerCategory)
	// 3 tokens of the attaining request over the 230 ms from the first
	// arrival to the last token.
	require.InDelta(t, 3/0.230, m.Goodput, 1e-9)
	require.InDelta(t, 6/0.230, m.Throughput, 1e-9)
	require.Equal(t, 125*ms, m.MeanTTFT) // (100 + 150) / 2
	require.Equal(t, 150*ms, m.P99TTFT)
	require.Equal(t, 12500*time.Microsecond, m.MeanTPOT)
	require.Equal(t, 15*ms, m.P99TPOT)
	require.InDelta(t, 1.0, m.TokensPerDec, 1e-12)
	// The replayed workload carries what the engine served: the output
	// it generated rather than the max_tokens it was allowed.
	for _, q := range asWorkload(run) {
		require.Equal(t, 3, q.Output)
	}
}

// The first token is not an inter-token gap: 4 tokens 10 ms apart have a
// TPOT of 10 ms (30 ms over 3 gaps), so an SLO of 9 ms is missed and one
// of 10 ms met. Counting the first token (30/4 = 7.5 ms) would pass both.
func TestRunOfCountsGapsAfterTheFirstToken(t *testing.T) {
	for _, c := range []struct {
		slo  time.Duration
		want float64
	}{{9 * ms, 0}, {10 * ms, 1}} {
		run, err := runOf([]record{rec(0, 0, 0, c.slo, 40*ms, 50*ms, 60*ms, 70*ms)})
		require.NoError(t, err)
		require.Equal(t, c.want, sim.Summarize(run, 1).Attainment, "SLO %v", c.slo)
	}
}

func TestRunOfRefusesBadRecords(t *testing.T) {
	failed := rec(0, 0, 0, ms, 5*ms)
	failed.Err = "boom"
	for name, recs := range map[string][]record{
		"failed request":       {failed},
		"no token":             {rec(0, 0, 0, ms)},
		"token before arrival": {rec(0, 0, 10*ms, ms, 5*ms)},
		"times go backwards":   {rec(0, 0, 0, ms, 5*ms, 4*ms)},
		"not in arrival order": {rec(0, 0, 10*ms, ms, 20*ms), rec(1, 0, 5*ms, ms, 30*ms)},
	} {
		_, err := runOf(recs)
		require.Error(t, err, name)
	}
}

// engine-vs-sim.csv has the simulator's columns, an engine row and its
// replay per point.
func TestCheckCSVShape(t *testing.T) {
	run, err := runOf([]record{rec(0, 0, 0, 10*ms, 100*ms, 110*ms, 120*ms)})
	require.NoError(t, err)
	mix := engineMix(16)
	m := sim.Summarize(run, len(mix))
	rows := []engineRow{
		{Engine: sim.Row{Setting: "engine", Policy: "adaserve", Load: 0.5, Rate: 2, Metrics: m}, Sim: sim.Row{Setting: "sim-replay", Policy: "adaserve", Load: 0.5, Rate: 2, Metrics: m}},
		{Engine: sim.Row{Setting: "engine", Policy: "vllm", Load: 0.5, Rate: 2, Metrics: m}, Sim: sim.Row{Setting: "sim-replay", Policy: "vllm", Load: 0.5, Rate: 2, Metrics: m}},
	}
	path := filepath.Join(t.TempDir(), "check.csv")
	require.NoError(t, writeCheck(path, rows, mix))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	var head bytes.Buffer
	require.NoError(t, sim.WriteCSV(&head, nil, mix))
	want, err := csv.NewReader(&head).ReadAll()
	require.NoError(t, err)
	require.Equal(t, want[0], recs[0], "the simulator's header")
	require.Len(t, recs, 5)
	for i, setting := range []string{"engine", "sim-replay", "engine", "sim-replay"} {
		require.Equal(t, setting, recs[1+i][0])
		require.Len(t, recs[1+i], len(want[0]))
	}
	require.Equal(t, "1.0000", recs[1][5], "attainment")
}

func TestEngineMixCapsOutputs(t *testing.T) {
	mix := engineMix(100)
	require.Len(t, mix, len(sim.PaperMix))
	for i, c := range mix {
		require.Equal(t, sim.PaperMix[i].TPOTx, c.TPOTx)
		require.LessOrEqual(t, c.Output[1], 100)
		require.LessOrEqual(t, c.Output[0], c.Output[1])
	}
	require.Equal(t, 192, sim.PaperMix[0].Output[1], "the paper's mix is left alone")
}

func TestPromptSets(t *testing.T) {
	sets, err := loadPromptSets("../../engine/testdata")
	require.NoError(t, err)
	require.Len(t, sets, len(sim.PaperMix))
	for _, s := range sets {
		require.NotEmpty(t, s)
	}
	_, err = loadPromptSets(t.TempDir())
	require.ErrorContains(t, err, "code.jsonl")
	dir := t.TempDir()
	for _, n := range []string{"code", "edit", "grounded", "chat"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n+".jsonl"), []byte(`{"content":"hi"}`+"\n"), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chat.jsonl"), []byte("{\"content\":\"hi\"}\nnot json\n"), 0o644))
	_, err = loadPromptSets(dir)
	require.ErrorContains(t, err, "chat.jsonl line 2")
}

func TestPolicyAndLoadFlags(t *testing.T) {
	for in, want := range map[string]string{"adaserve": "adaserve", "equal_greedy": "equal-greedy", "global-greedy": "global-greedy", "FCFS": "sarathi", "vllm": "vllm"} {
		p, err := serving.ByConfigName(in)
		require.NoError(t, err, in)
		require.Equal(t, want, p.Name)
	}
	_, err := serving.ByConfigName("fastest")
	require.Error(t, err)
	l, err := parseLoads("0.5, 1,2")
	require.NoError(t, err)
	require.Equal(t, []float64{0.5, 1, 2}, l)
	for _, bad := range []string{"", "0", "-1", "x", "1,,2", "+Inf"} {
		_, err := parseLoads(bad)
		require.Error(t, err, bad)
	}
	_, err = runEngine(engineOpts{requests: 0})
	require.Error(t, err)
}
