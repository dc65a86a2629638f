package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
)

// Setting is one machine with the workload family it is swept over.
type Setting struct {
	Name     string
	Machine  Machine
	Mix      []Category
	Arrivals Arrivals
	Requests int
	// Loads are request rates as fractions of Capacity.
	Loads []float64
	Seed  uint64
	// Replicas is how many independent workloads (at least 1) are served
	// at each load, pooled into one row (SummarizeRuns). One workload of a
	// few hundred requests is a single draw of the arrival process: on
	// the CPU's measured curve, where the policies differ by a point or
	// two, the order of two policies flips from one seed to the next.
	Replicas int
}

// Replica is the workload of replica k at load index li, and the seed it
// was drawn with (a simulation of it takes the same): replica 0 is the
// workload a sweep without replicas serves.
func (s Setting) Replica(li, k int) ([]Request, uint64, error) {
	seed := s.ReplicaSeed(li, k)
	reqs, err := Generate(Workload{Rate: s.Loads[li] * s.Capacity(), Requests: s.Requests, Arrivals: s.Arrivals, Categories: s.Mix, Seed: seed}, s.Machine.Baseline())
	return reqs, seed, err
}

// ReplicaSeed is the seed of replica k at load index li: its workload's
// and its simulation's.
func (s Setting) ReplicaSeed(li, k int) uint64 { return s.Seed + uint64(li) + uint64(k)<<32 }

// Capacity is a rough rate (requests/s) at which incremental decoding with
// every slot busy keeps up with arrivals: each request costs its mean
// output at T(Slots)/Slots a token plus its mean prompt at the prefill
// rate of the curve's largest measured pass. Sweeps are given relative to
// it so that one list of loads spans light load to overload on any curve.
//
// Why the prompts count: on a CPU a prompt token costs about what a
// generated one does. The engine's sweep on SmolLM2 (prompts of about 80
// tokens, outputs of 64) had a capacity counting outputs alone twice the
// rate the machine could serve, so its "half load" was already overload.
func (s Setting) Capacity() float64 {
	total, out, prompt := 0.0, 0.0, 0.0
	for _, c := range s.Mix {
		total += c.Share
		out += c.Share * float64(c.Output[0]+c.Output[1]) / 2
		prompt += c.Share * float64(c.Prompt[0]+c.Prompt[1]) / 2
	}
	out, prompt = out/total, prompt/total
	c := s.Machine.Curve
	decode := c.At(s.Machine.Slots).Seconds() / float64(s.Machine.Slots)
	big := c.N[len(c.N)-1]
	prefill := c.At(big).Seconds() / float64(big)
	return 1 / (out*decode + prompt*prefill)
}

// Row is one point of a sweep.
type Row struct {
	Setting string
	Policy  string
	Load    float64 // fraction of Capacity
	Rate    float64 // requests/s
	Metrics
}

// Sweep runs every policy at every load of the setting on the same
// generated workloads (the same requests for every policy at one load).
func Sweep(s Setting, policies []serving.System) ([]Row, error) {
	var rows []Row
	for li, load := range s.Loads {
		rate := load * s.Capacity()
		runs := make([][]*Run, len(policies))
		for k := range max(1, s.Replicas) {
			reqs, seed, err := s.Replica(li, k)
			if err != nil {
				return nil, err
			}
			for pi, p := range policies {
				run, err := Simulate(s.Machine, p, reqs, seed)
				if err != nil {
					return nil, fmt.Errorf("%s at load %.2f: %w", p.Name, load, err)
				}
				runs[pi] = append(runs[pi], run)
			}
		}
		for pi, p := range policies {
			rows = append(rows, Row{Setting: s.Name, Policy: p.Name, Load: load, Rate: rate, Metrics: SummarizeRuns(runs[pi], len(s.Mix))})
		}
	}
	return rows, nil
}

// SepPipe is §6.3's separate-pipelines strategy: one engine (a replica of
// the whole machine) per category, each running incremental decoding on
// its own category's requests. Its goodput is the sum over the replicas,
// with three times the hardware of the others.
func SepPipe(s Setting) ([]Row, error) {
	var rows []Row
	for li, load := range s.Loads {
		rate := load * s.Capacity()
		var runs []*Run
		for k := range max(1, s.Replicas) {
			reqs, seed, err := s.Replica(li, k)
			if err != nil {
				return nil, err
			}
			all := &Run{}
			for c := range s.Mix {
				var part []Request
				for _, r := range reqs {
					if r.Category == c {
						part = append(part, r)
					}
				}
				if len(part) == 0 {
					continue
				}
				run, err := Simulate(s.Machine, serving.System{Name: "seppipe", Spec: spec.Incremental}, part, seed)
				if err != nil {
					return nil, err
				}
				all.Results = append(all.Results, run.Results...)
				all.End = max(all.End, run.End)
				all.Emitted, all.Decodes = all.Emitted+run.Emitted, all.Decodes+run.Decodes
			}
			// Results back in arrival order for the span.
			slicesSortByArrival(all.Results)
			runs = append(runs, all)
		}
		rows = append(rows, Row{Setting: s.Name, Policy: "seppipe", Load: load, Rate: rate, Metrics: SummarizeRuns(runs, len(s.Mix))})
	}
	return rows, nil
}

// WriteCSV writes rows with a header.
func WriteCSV(w io.Writer, rows []Row, mix []Category) error {
	cw := csv.NewWriter(w)
	head := []string{"setting", "policy", "load", "rate_rps", "requests", "attainment", "goodput_tps", "throughput_tps",
		"mean_tpot_ms", "p99_tpot_ms", "mean_ttft_ms", "p99_ttft_ms", "tokens_per_decode"}
	for _, c := range mix {
		head = append(head, "attain_"+c.Name)
	}
	// attain_with_ttft comes last so that the columns before it keep
	// their places for earlier readers.
	head = append(head, "budget_bound", "attain_with_ttft")
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	ms := func(d time.Duration) string { return f(float64(d) / 1e6) }
	for _, r := range rows {
		rec := []string{r.Setting, r.Policy, f(r.Load), f(r.Rate), strconv.Itoa(r.Requests), f(r.Attainment), f(r.Goodput), f(r.Throughput),
			ms(r.MeanTPOT), ms(r.P99TPOT), ms(r.MeanTTFT), ms(r.P99TTFT), f(r.TokensPerDec)}
		for _, a := range r.PerCategory {
			rec = append(rec, f(a))
		}
		bound := "" // not counted
		if !math.IsNaN(r.Bound) {
			bound = f(r.Bound)
		}
		rec = append(rec, bound, f(r.WithTTFT))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
