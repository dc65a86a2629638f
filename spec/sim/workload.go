package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Category is one kind of request of the evaluation's mix (the paper's
// Table 2): its share of arrivals, its TPOT and TTFT SLOs as multiples of
// the baseline latency (incremental decoding at batch 8: Curve.At(8)), and
// uniform ranges of prompt and output lengths.
type Category struct {
	Name           string
	Share          float64
	TPOTx, TTFTx   float64 // SLO = multiple × baseline; TTFTx 0: none
	Prompt, Output [2]int  // [min, max] tokens
}

// PaperMix is the paper's §6.2 mix: 60% latency-critical requests whose
// TPOT SLO is the baseline latency itself (coding assistants, agents), 20%
// moderate ones (search; 30 ms against a 12.5 ms baseline, so 2.4×) and
// 20% relaxed ones (chatbots; 100 ms, 8×). Lengths are ours: the paper
// draws them from a trace we do not have.
var PaperMix = []Category{
	{Name: "urgent", Share: 0.6, TPOTx: 1.0, TTFTx: 200, Prompt: [2]int{32, 256}, Output: [2]int{64, 192}},
	{Name: "moderate", Share: 0.2, TPOTx: 2.4, TTFTx: 500, Prompt: [2]int{64, 512}, Output: [2]int{64, 192}},
	{Name: "relaxed", Share: 0.2, TPOTx: 8.0, TTFTx: 2000, Prompt: [2]int{64, 512}, Output: [2]int{128, 320}},
}

// Arrivals is the arrival process.
type Arrivals int

const (
	// Poisson arrivals: exponential gaps.
	Poisson Arrivals = iota
	// Bursty arrivals: hyperexponential gaps with a squared coefficient of
	// variation of 4 (the same mean rate as Poisson, in bursts and lulls),
	// like the traces serving papers replay.
	Bursty
)

func (a Arrivals) String() string {
	if a == Bursty {
		return "bursty"
	}
	return "poisson"
}

// Workload describes an open-loop request stream.
type Workload struct {
	Rate       float64 // requests per second
	Requests   int
	Arrivals   Arrivals
	Categories []Category
	Seed       uint64
}

// Request is one generated request.
type Request struct {
	ID       int
	Category int
	Arrival  time.Duration
	Prompt   int
	Output   int
	TPOTSLO  time.Duration
	TTFTSLO  time.Duration // 0: none
}

// Generate draws the requests of w; baseline scales the categories' SLOs.
func Generate(w Workload, baseline time.Duration) ([]Request, error) {
	switch {
	case w.Rate <= 0 || math.IsInf(w.Rate, 0) || math.IsNaN(w.Rate):
		return nil, fmt.Errorf("sim: request rate must be positive and finite, got %v", w.Rate)
	case w.Requests <= 0:
		return nil, fmt.Errorf("sim: request count must be positive, got %d", w.Requests)
	case len(w.Categories) == 0:
		return nil, fmt.Errorf("sim: no request categories")
	case baseline <= 0:
		return nil, fmt.Errorf("sim: baseline latency must be positive")
	}
	total := 0.0
	for _, c := range w.Categories {
		if c.Share < 0 || c.TPOTx <= 0 || c.Prompt[0] < 1 || c.Prompt[1] < c.Prompt[0] || c.Output[0] < 1 || c.Output[1] < c.Output[0] {
			return nil, fmt.Errorf("sim: category %q: bad share, SLO or length range", c.Name)
		}
		total += c.Share
	}
	if total <= 0 {
		return nil, fmt.Errorf("sim: category shares sum to zero")
	}
	rng := rand.New(rand.NewPCG(w.Seed, 0x5eed))
	// Balanced-means hyperexponential with squared CV c2: with probability
	// p a gap has rate 2pλ, otherwise 2(1−p)λ.
	const c2 = 4.0
	p := 0.5 * (1 + math.Sqrt((c2-1)/(c2+1)))
	gap := func() float64 {
		if w.Arrivals == Bursty {
			if rng.Float64() < p {
				return rng.ExpFloat64() / (2 * p * w.Rate)
			}
			return rng.ExpFloat64() / (2 * (1 - p) * w.Rate)
		}
		return rng.ExpFloat64() / w.Rate
	}
	between := func(r [2]int) int { return r[0] + rng.IntN(r[1]-r[0]+1) }
	out := make([]Request, w.Requests)
	t := 0.0
	for i := range out {
		t += gap()
		u, k := rng.Float64()*total, 0
		for k < len(w.Categories)-1 && u >= w.Categories[k].Share {
			u -= w.Categories[k].Share
			k++
		}
		c := w.Categories[k]
		out[i] = Request{
			ID: i, Category: k, Arrival: time.Duration(t * float64(time.Second)),
			Prompt: between(c.Prompt), Output: between(c.Output),
			TPOTSLO: time.Duration(c.TPOTx * float64(baseline)),
			TTFTSLO: time.Duration(c.TTFTx * float64(baseline)),
		}
	}
	return out, nil
}
