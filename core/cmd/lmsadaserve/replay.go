package main

import (
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/spec/sim"
)

// replayPoint is one policy at one load of an earlier -engine run, read
// back from its engine-requests.csv: the engine's run of each replica.
type replayPoint struct {
	Policy    string
	Load      float64
	LoadIndex int        // the load's place in the run's -loads (its seeds)
	Runs      []*sim.Run // by replica
	// Proposed and Accepted are the draft tokens of the point's requests;
	// Decodes is known only from files that have the column.
	Proposed, Accepted int
	HasDecodes         bool
	// Mismatched counts requests whose TPOT, as the file rounds it, judges
	// them otherwise than the engine did (its "attained" column): each
	// moves the engine's attainment by one request.
	Mismatched int
}

// maxField bounds every number of engine-requests.csv: 10⁹ (ms: 11 days;
// tokens, ids), so that no time overflows a time.Duration.
const maxField = 1e9

// requestColumns are the columns replay needs from engine-requests.csv,
// the policy first and attained last. Files of runs before replicas lack
// "replica" (all are replica 0), and before the decodes, "decodes".
var requestColumns = []string{"policy", "load", "id", "category", "arrival_ms",
	"prompt_tokens", "generated", "ttft_ms", "tpot_ms", "proposed", "accepted", "attained"}

// readEngineRequests reads an -engine run's engine-requests.csv back into
// its points, in the order the run served them. The SLOs are recomputed
// from the mix and the baseline as the workload generator drew them (the
// file rounds them to 10 µs), so each request is judged against the exact
// SLO it was served with.
func readEngineRequests(path string, mix []sim.Category, baseline time.Duration) ([]*replayPoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(recs) < 2 {
		return nil, fmt.Errorf("%s: no requests", path)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	for _, name := range requestColumns {
		if _, ok := col[name]; !ok {
			return nil, fmt.Errorf("%s: no %q column", path, name)
		}
	}
	_, hasDecodes := col["decodes"]
	_, hasReplica := col["replica"]
	type key struct {
		policy string
		load   float64
	}
	byKey := map[key]*replayPoint{}
	var points []*replayPoint
	var loads []float64
	for line, r := range recs[1:] {
		bad := func(name string, err error) error {
			return fmt.Errorf("%s line %d: %s %q: %v", path, line+2, name, r[col[name]], err)
		}
		num := func(name string) (float64, error) {
			x, err := strconv.ParseFloat(r[col[name]], 64)
			if err == nil && !(x >= 0 && x <= maxField) { // NaN too
				err = fmt.Errorf("not a number in [0, %g]", maxField)
			}
			if err != nil {
				return 0, bad(name, err)
			}
			return x, nil
		}
		vals := map[string]float64{}
		for _, name := range requestColumns[1 : len(requestColumns)-1] {
			x, err := num(name)
			if err != nil {
				return nil, err
			}
			vals[name] = x
		}
		for name, has := range map[string]bool{"decodes": hasDecodes, "replica": hasReplica} {
			if has {
				if vals[name], err = num(name); err != nil {
					return nil, err
				}
			}
		}
		attained, err := strconv.ParseBool(r[col["attained"]])
		if err != nil {
			return nil, bad("attained", err)
		}
		cat, gen, replica := int(vals["category"]), int(vals["generated"]), int(vals["replica"])
		switch {
		case cat >= len(mix):
			return nil, bad("category", fmt.Errorf("the mix has %d categories", len(mix)))
		case gen < 1:
			return nil, bad("generated", errors.New("a served request has a token"))
		case replica > 1<<16:
			return nil, bad("replica", errors.New("too large"))
		}
		k := key{r[col["policy"]], vals["load"]}
		p := byKey[k]
		if p == nil {
			li := len(loads)
			for i, l := range loads {
				if l == k.load {
					li = i
				}
			}
			if li == len(loads) {
				loads = append(loads, k.load)
			}
			p = &replayPoint{Policy: k.policy, Load: k.load, LoadIndex: li, HasDecodes: hasDecodes}
			byKey[k] = p
			points = append(points, p)
		}
		for len(p.Runs) <= replica {
			p.Runs = append(p.Runs, &sim.Run{})
		}
		run := p.Runs[replica]
		ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
		c := mix[cat]
		req := sim.Request{ID: int(vals["id"]), Category: cat, Arrival: ms(vals["arrival_ms"]),
			Prompt: int(vals["prompt_tokens"]), Output: gen,
			TPOTSLO: time.Duration(c.TPOTx * float64(baseline)), TTFTSLO: time.Duration(c.TTFTx * float64(baseline))}
		if n := len(run.Results); n > 0 && req.Arrival < run.Results[n-1].Arrival {
			return nil, bad("arrival_ms", errors.New("requests of a replica out of arrival order"))
		}
		first := req.Arrival + ms(vals["ttft_ms"])
		res := sim.Result{Request: req, First: first, Last: first + time.Duration(gen-1)*ms(vals["tpot_ms"]), Generated: gen}
		if res.Attained() != attained {
			p.Mismatched++
		}
		run.Results = append(run.Results, res)
		run.End = max(run.End, res.Last)
		run.Emitted += gen - 1
		run.Decodes += int(vals["decodes"])
		p.Proposed += int(vals["proposed"])
		p.Accepted += int(vals["accepted"])
	}
	for _, p := range points {
		for k, run := range p.Runs {
			if len(run.Results) == 0 {
				return nil, fmt.Errorf("%s: %s at load %v has no requests in replica %d", path, p.Policy, p.Load, k)
			}
		}
	}
	return points, nil
}

// runReplay checks the simulator as it is now against an earlier -engine
// run kept in dir, without the engine: every point's requests, read back
// from engine-requests.csv, replayed on the run's cost curves (curve.csv,
// and draft-curve.csv where the run had a draft model) with the seeds the
// run drew them with. It prints the check table and writes
// engine-vs-sim.csv into o.out. o's seed, slots and adaptive must be the
// run's; nothing else is needed. o.pace, when set, replays on the curves
// scaled by it and judges the requests by the run's SLOs all the same.
func runReplay(o engineOpts, dir string) ([]engineRow, error) {
	c, err := readCurves(filepath.Join(dir, targetCurveFile))
	if err != nil {
		return nil, err
	}
	c.Name = "cpu measured (" + dir + ")"
	var dc *sim.Curve
	draftCurve := filepath.Join(dir, draftCurveFile)
	if _, err := os.Stat(draftCurve); err == nil {
		dns, dts, err := readCurve(draftCurve)
		if err != nil {
			return nil, err
		}
		dc = &sim.Curve{N: dns, T: dts}
	}
	m := engineMachine(o, c, dc)
	mix := sim.PaperMix // the SLOs and the names: the lengths are the file's
	points, err := readEngineRequests(filepath.Join(dir, "engine-requests.csv"), mix, m.Baseline())
	if err != nil {
		return nil, err
	}
	if o.pace > 0 && o.pace != 1 {
		// The same requests and SLOs on a machine o.pace times as slow:
		// the curve is measured at its best of a few passes, and the
		// engine then serves at whatever pace the machine has.
		c = paced(c, o.pace)
		c.Name = fmt.Sprintf("%s ×%.2f", c.Name, o.pace)
		if dc != nil {
			d := paced(*dc, o.pace)
			dc = &d
		}
		m = engineMachine(o, c, dc)
	}
	if o.measuredPace {
		var ratios []batchPace
		c, ratios, err = enginePaced(c, dir)
		if err != nil {
			return nil, err
		}
		if dc != nil {
			d := paced(*dc, ratios[0].ratio)
			dc = &d
		}
		m = engineMachine(o, c, dc)
		fmt.Printf("paced as the engine ran (%s):", costsFile)
		for _, r := range ratios {
			fmt.Printf(" %d×%.2f", r.batch, r.ratio)
		}
		fmt.Println()
	}
	s := sim.Setting{Machine: m, Mix: mix, Seed: o.seed}
	drafts, err := readDrafts(dir)
	if err != nil {
		return nil, err
	}
	accept := m.Accept.Name
	if drafts != nil {
		accept = "acceptance fitted from each run's drafts (" + draftsFile + "), else " + accept
	}
	fmt.Printf("replay of %s: %s, %s, B=%d, %d slots\n", dir, c.Name, accept, m.Budget, m.Slots)
	var rows []engineRow
	for _, p := range points {
		pol, err := serving.ByName(p.Policy)
		if err != nil {
			return nil, err
		}
		var sruns []*sim.Run
		var pooled spec.DraftStats
		for k, run := range p.Runs {
			mk := m
			if d, ok := drafts[keyOf(p.Policy, p.Load, k)]; ok {
				mk, _ = fittedMachine(m, d, dc != nil)
				pooled = pooled.Add(d)
			}
			sr, err := sim.Simulate(mk, pol, asWorkload(run), s.ReplicaSeed(p.LoadIndex, k))
			if err != nil {
				return nil, fmt.Errorf("%s at load %v: %w", p.Policy, p.Load, err)
			}
			sruns = append(sruns, sr)
		}
		if p.Mismatched > 0 {
			fmt.Printf("%s at load %v: %d requests judged otherwise at the file's rounding\n", p.Policy, p.Load, p.Mismatched)
		}
		row := pointRow(len(mix), p.Policy, p.Load, arrivalRate(p.Runs), p.Runs, sruns, p.Proposed, p.Accepted, p.HasDecodes)
		row.Fit = fitOf(m, pooled, dc != nil)
		rows = append(rows, row)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	if err := writeCheck(filepath.Join(o.out, "engine-vs-sim.csv"), rows, mix); err != nil {
		return nil, err
	}
	checkTable(rows)
	return rows, nil
}

// paced is c with every pass pace times as long.
func paced(c sim.Curve, pace float64) sim.Curve {
	scale := func(ts []time.Duration) []time.Duration {
		out := make([]time.Duration, len(ts))
		for i, t := range ts {
			out[i] = time.Duration(float64(t) * pace)
		}
		return out
	}
	c.T, c.RootT = scale(c.T), scale(c.RootT)
	c.Entry = time.Duration(float64(c.Entry) * pace)
	c.Prompt = time.Duration(float64(c.Prompt) * pace)
	return c
}

// costsFile is where an -engine run keeps its root-only iterations by
// batch size beside their price (writeCosts).
const costsFile = "engine-costs.csv"

// batchPace is how much slower than its price the engine ran a batch of
// batch sequences' roots.
type batchPace struct {
	batch int
	ratio float64
}

// enginePaced is c at the pace the engine of the run kept in dir ran at,
// batch size by batch size: each batch's pass (c.RootT) scaled by what
// that run's root-only iterations of the size took against their price
// (costsFile: engine_ms over priced_ms), a size the run did not time by
// the nearest it did (the smaller of two), and the chain, the row price
// and the prompt token by the ratio of the smallest batch timed. A two-core
// VM does not slow down evenly: in session 31 a batch of one ran 1.07×
// its price and a batch of eight 1.38×, so one -pace for every pass
// either flatters the policies that run full batches or wrongs those
// that sit requests out. It returns the ratios by batch, smallest first.
func enginePaced(c sim.Curve, dir string) (sim.Curve, []batchPace, error) {
	path := filepath.Join(dir, costsFile)
	f, err := os.Open(path)
	if err != nil {
		return c, nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return c, nil, fmt.Errorf("%s: %w", costsFile, err)
	}
	if len(recs) < 2 || len(recs[0]) < 8 || recs[0][0] != "batch" || recs[0][2] != "engine_ms" || recs[0][7] != "priced_ms" {
		return c, nil, fmt.Errorf("%s: not an engine-costs file, or no batch timed", costsFile)
	}
	var paces []batchPace
	for i, r := range recs[1:] {
		n, err1 := strconv.Atoi(r[0])
		took, err2 := strconv.ParseFloat(r[2], 64)
		price, err3 := strconv.ParseFloat(r[7], 64)
		if err := errors.Join(err1, err2, err3); err != nil || n < 1 || !(took > 0 && took < maxField) || !(price > 0 && price < maxField) {
			return c, nil, fmt.Errorf("%s: line %d: want a batch size and two positive times", costsFile, i+2)
		}
		if len(paces) > 0 && n <= paces[len(paces)-1].batch {
			return c, nil, fmt.Errorf("%s: line %d: batch sizes out of order", costsFile, i+2)
		}
		paces = append(paces, batchPace{n, took / price})
	}
	at := func(n int) float64 {
		best := paces[0]
		for _, p := range paces[1:] {
			if abs(p.batch-n) < abs(best.batch-n) {
				best = p
			}
		}
		return best.ratio
	}
	out := paced(c, paces[0].ratio)
	out.RootT = make([]time.Duration, len(c.RootT))
	for i, t := range c.RootT {
		out.RootT[i] = time.Duration(float64(t) * at(c.RootN[i]))
	}
	out.Name = c.Name + " at the engine's pace"
	return out, paces, nil
}

func abs(x int) int { return max(x, -x) }

// arrivalRate is the requests per second that arrived over a point's
// replicas (the file keeps the loads, not the capacity they scaled).
func arrivalRate(runs []*sim.Run) float64 {
	n, span := 0, time.Duration(0)
	for _, r := range runs {
		n += len(r.Results)
		span += r.Results[len(r.Results)-1].Arrival
	}
	if span <= 0 {
		return 0
	}
	return float64(n) / span.Seconds()
}
