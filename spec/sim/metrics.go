package sim

import (
	"math"
	"slices"
	"time"
)

// Metrics summarise a run as the paper's evaluation does: TPOT SLO
// attainment (the share of requests whose average TPOT is within their
// SLO) and goodput (tokens per second of the requests that met it), with
// mean and p99 TPOT and TTFT beside them.
type Metrics struct {
	Requests   int
	Attainment float64 // 0..1
	// WithTTFT is the share that met their TPOT SLO and their TTFT SLO
	// too (where they had one). The paper judges TPOT alone; this shows
	// what a policy pays in first tokens for it (AdaServe's requests
	// that sit out hold their slots longer, and a prompt chunk too small
	// would win TPOT attainment by starving prompts).
	WithTTFT     float64
	Goodput      float64 // tokens/s of attaining requests
	Throughput   float64 // tokens/s of all requests
	MeanTPOT     time.Duration
	P99TPOT      time.Duration
	MeanTTFT     time.Duration
	P99TTFT      time.Duration
	TokensPerDec float64 // tokens a decoding request gained per iteration
	// Bound is the share of the iterations that planned trees in which
	// the budget bound the selection (Run.Bound); NaN where no iteration
	// was counted (the engine's runs, which the harness sees from outside).
	Bound       float64
	PerCategory []float64
}

// Summarize computes the metrics of a run over ncat categories.
func Summarize(r *Run, ncat int) Metrics { return SummarizeRuns([]*Run{r}, ncat) }

// SummarizeRuns computes the metrics of several runs of one policy at one
// load (replicas: independent workloads of the same rate) pooled as one:
// attainment and the TPOT and TTFT figures over all their requests,
// goodput and throughput as their tokens over the sum of their spans.
func SummarizeRuns(runs []*Run, ncat int) Metrics {
	m := Metrics{PerCategory: make([]float64, ncat), Bound: math.NaN()}
	count := make([]int, ncat)
	var tpots, ttfts []time.Duration
	var good, all, emitted, decodes, planned, bound int
	var span time.Duration
	for _, r := range runs {
		if len(r.Results) == 0 || r.End <= 0 {
			continue
		}
		m.Requests += len(r.Results)
		span += r.End - r.Results[0].Arrival
		emitted, decodes = emitted+r.Emitted, decodes+r.Decodes
		planned, bound = planned+r.Planned, bound+r.Bound
		for _, x := range r.Results {
			count[x.Category]++
			all += x.Generated
			if x.Attained() {
				m.Attainment++
				m.PerCategory[x.Category]++
				good += x.Generated
				if x.TTFTSLO <= 0 || x.TTFT() <= x.TTFTSLO {
					m.WithTTFT++
				}
			}
			tpots, ttfts = append(tpots, x.TPOT()), append(ttfts, x.TTFT())
		}
	}
	if m.Requests == 0 {
		return m
	}
	for c := range ncat {
		if count[c] > 0 {
			m.PerCategory[c] /= float64(count[c])
		}
	}
	m.Attainment /= float64(m.Requests)
	m.WithTTFT /= float64(m.Requests)
	m.Goodput = float64(good) / span.Seconds()
	m.Throughput = float64(all) / span.Seconds()
	m.MeanTPOT, m.P99TPOT = meanP99(tpots)
	m.MeanTTFT, m.P99TTFT = meanP99(ttfts)
	if decodes > 0 {
		m.TokensPerDec = float64(emitted) / float64(decodes)
	}
	if planned > 0 {
		m.Bound = float64(bound) / float64(planned)
	}
	return m
}

func meanP99(d []time.Duration) (time.Duration, time.Duration) {
	slices.Sort(d)
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(len(d)), d[min(len(d)-1, len(d)*99/100)]
}
