package engine

import (
	"math"

	"github.com/lmstream/lmstream/streaming"
)

// Log-probabilities, for requests that ask for them ("logprobs",
// "top_logprobs"). A token's log-probability is its log-softmax under the
// logits the sampling pipeline starts from: the model's row for that
// position after the request's penalties (and, for a constrained request,
// after the grammar's mask, which gives disallowed tokens probability 0),
// at temperature 1 and before top-k, top-p and min-p. That is what OpenAI's
// API and vLLM report: a property of the model's distribution, not of the
// sampling settings, so the same text has the same logprobs however it was
// sampled. Under speculation each emitted token's row is the target's row
// at that node of the verified tree, with the penalty window of the path
// to it, which is the row plain decoding would have computed.

// rowStats is one position's distribution, kept until the token chosen
// there is known.
type rowStats struct {
	row []float32 // the penalised logits (the logits buffer, or a copy)
	lse float64   // log of the sum of exp over row
	top []streaming.Logprob
}

// logSumExp is log Σ exp(v) over the row, in float64; NaN entries (which
// never win a sample) and -Inf ones (masked) count for nothing.
func logSumExp(row []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		if float64(v) > mx {
			mx = float64(v)
		}
	}
	if math.IsInf(mx, -1) {
		return mx
	}
	var sum float64
	for _, v := range row {
		if v == v { // not NaN
			sum += math.Exp(float64(v) - mx)
		}
	}
	return mx + math.Log(sum)
}

// topLogprobs appends the k most likely tokens of row to dst, most likely
// first, ties to the lower id (the order greedy decoding breaks ties in).
// Tokens of probability 0 (masked: -Inf) are not alternatives.
func topLogprobs(dst []streaming.Logprob, row []float32, lse float64, k int) []streaming.Logprob {
	dst = dst[:0]
	if k <= 0 {
		return dst
	}
	// Insertion into a list of at most k, kept sorted: k is at most 20
	// and most logits fail the first comparison against the smallest.
	for id, v := range row {
		if !(v > float32(math.Inf(-1))) { // -Inf or NaN
			continue
		}
		if len(dst) == k && !(float64(v) > dst[k-1].Logprob) {
			continue
		}
		e := streaming.Logprob{ID: int32(id), Logprob: float64(v)}
		i := len(dst)
		if i < k {
			dst = append(dst, e)
		} else {
			i = k - 1
		}
		// Strictly greater moves up: an equal logit keeps the lower id first.
		for ; i > 0 && float64(v) > dst[i-1].Logprob; i-- {
			dst[i] = dst[i-1]
		}
		dst[i] = e
	}
	for i := range dst {
		dst[i].Logprob -= lse
	}
	return dst
}

// stats measures the penalised row pen of one position. own is where a
// copy goes when pen is the sampler's scratch (the next position's
// penalties overwrite that); the row of the logits buffer is kept as is.
func (st *rowStats) measure(pen, logits []float32, own *[]float32, k int) {
	if len(pen) > 0 && len(logits) > 0 && &pen[0] != &logits[0] {
		*own = append((*own)[:0], pen...)
		pen = *own
	}
	st.row = pen
	st.lse = logSumExp(pen)
	st.top = topLogprobs(st.top, pen, st.lse, k)
}

// entry is the logprobs of the token chosen at this position.
func (st *rowStats) entry(tok int32) streaming.TokenLogprob {
	return streaming.TokenLogprob{ID: tok, Logprob: float64(st.row[tok]) - st.lse, Top: st.top}
}
