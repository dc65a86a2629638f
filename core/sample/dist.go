package sample

// Dist is a sampling distribution over token ids: the survivors of the
// truncations with their probabilities, sorted by probability descending
// (ties by ascending id) and summing to 1 (up to rounding). A token absent
// from IDs has probability 0. IDs and Probs are parallel.
//
// A Dist returned by a Sampler aliases the sampler's buffers and is valid
// only until its next Distribution or Sample call; use Clone to keep one,
// as a speculative verifier holding the target's distribution for several
// positions must.
type Dist struct {
	IDs   []int32
	Probs []float64
}

// Len is the number of tokens with non-zero probability.
func (d Dist) Len() int { return len(d.IDs) }

// Prob returns the probability of id, 0 if it did not survive truncation.
// It scans the survivors, which is cheap for truncated distributions (the
// usual case) and still only one pass over the vocabulary for a dense one.
func (d Dist) Prob(id int32) float64 {
	for i, x := range d.IDs {
		if x == id {
			return d.Probs[i]
		}
	}
	return 0
}

// Draw maps a uniform u in [0, 1) to a token by inverse CDF over the
// sorted survivors, so the most likely token is found first on average.
// If rounding leaves u above the total mass, the last survivor is returned.
// It panics on an empty Dist.
func (d Dist) Draw(u float64) int32 {
	var cum float64
	for i, p := range d.Probs {
		cum += p
		if u < cum {
			return d.IDs[i]
		}
	}
	return d.IDs[len(d.IDs)-1]
}

// Clone returns a copy that does not alias the sampler's buffers.
func (d Dist) Clone() Dist {
	return Dist{IDs: append([]int32(nil), d.IDs...), Probs: append([]float64(nil), d.Probs...)}
}
