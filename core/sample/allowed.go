package sample

import (
	"math"
	"slices"
)

// Constrained decoding samples from the logits with the tokens a grammar
// refuses set to -Inf. Computing which tokens it refuses costs a walk over
// the whole vocabulary, while a truncating pipeline (top-k, top-p, min-p)
// usually keeps a handful of the most likely tokens. DistributionAllowed
// finds that handful by testing tokens one at a time in descending order
// and stops as soon as the kept set is certain; the result is then the
// very Dist that Distribution gives on the masked row (same ids, same
// float64 probabilities), because each cut is decided by the same
// comparisons on the same numbers:
//
//   - top-k keeps the first K allowed tokens of the order (the masked
//     row's top K, ties to the lower id as topK breaks them);
//   - min-p keeps up to the first allowed token below MinP times the
//     weight of the first allowed one, which the scan meets in order;
//   - top-p compares the running mass with TopP times the normaliser Z
//     (the allowed mass, or the top K's). Z is only bounded during the
//     scan, by the allowed mass A seen so far and A plus what the unscanned
//     tokens could add; the cut is taken only where every Z in the bounds
//     puts it at the same token, else the scan goes on.
//
// The scan is bounded (allowedScan tokens), and the caller computes the
// mask when it does not settle, so the worst case costs the mask plus a
// selection pass and a few hundred single-token tests.

// allowedScan is the number of most likely tokens DistributionAllowed
// tests before giving up (4K with top-k, when that is more). Testing one
// token costs about as much as a few trie nodes of the full mask, so a few
// hundred tests stay well below a mask's walk over the vocabulary.
const allowedScan = 256

// maxAllowedTopK is the largest top-k DistributionAllowed tries: beyond it
// the scan costs as much as the mask.
const maxAllowedTopK = 1024

// zSlack widens the bounds of the normaliser to cover rounding: the masked
// path sums the weights in id order and this one in rank order, which
// differ by at most V float64 ulps of relative error (1e-11 at a 150,000
// token vocabulary), and expNeg may be non-monotone by a few ulps.
const zSlack = 1e-9

// DistributionAllowed returns Distribution(masked), where masked is logits
// with every token that allowed refuses set to -Inf, testing allowed only
// on the most likely tokens; ok is false when that does not settle the
// truncation (no cut, a greedy sampler, too many refused tokens, top-p
// bounds too loose, infinite logits), and the caller must mask the row and
// call Distribution. It consumes no randomness. The Dist aliases the
// sampler's buffers, as Distribution's does.
func (s *Sampler) DistributionAllowed(logits []float32, allowed func(int32) bool) (d Dist, ok bool) {
	p := &s.p
	if !s.Truncates() || p.TopK > maxAllowedTopK {
		return Dist{}, false
	}
	l := s.penalise(logits)
	m := min(len(l), max(allowedScan, 4*p.TopK))
	s.cands = selectTop(l, m, s.cands[:0])
	slices.SortFunc(s.cands, candCmp)
	invT := 1 / p.Temperature
	s.ids, s.probs = s.ids[:0], s.probs[:0]
	var lmax float32
	var mass float64 // of the allowed tokens scanned, summed in rank order
	thr := -1.0      // min-p's weight threshold, once the top weight is known
	minPAt := -1     // index in s.probs of the first allowed weight below thr
	below := false   // a scanned token is below thr, so every later one is
	for i, c := range s.cands {
		if math.IsInf(float64(c.l), 0) {
			// -Inf (or NaN) from here on, or +Inf: where tame rewrites the
			// logits; left to the masked path.
			return Dist{}, false
		}
		if allowed(c.id) {
			if len(s.ids) == 0 {
				lmax = c.l
				if p.MinP > 0 {
					thr = p.MinP * 1 * (1 - boundarySlack) // cutMinP's, the top weight being expNeg(0) = 1
				}
			}
			w := weight(c.l, lmax, invT)
			if minPAt < 0 && w < thr {
				minPAt = len(s.probs)
			}
			s.ids = append(s.ids, c.id)
			s.probs = append(s.probs, w)
			mass += w
			if p.TopK > 0 && len(s.ids) == p.TopK {
				// The masked row's top K exactly: the sampler's own cuts.
				s.cutTopP(mass)
				s.cutMinP()
				return s.finish(), true
			}
		}
		if len(s.ids) == 0 {
			continue
		}
		scanned := i + 1
		wScan := weight(c.l, lmax, invT) // bounds every unscanned weight
		if thr > 0 && wScan < thr*(1-zSlack) {
			below = true
		}
		rest := float64(s.uncounted(scanned, len(l))) * wScan
		if n, ok := s.settle(scanned, len(l), rest, mass, minPAt, below); ok {
			return s.settled(l, n, lmax, mass, rest)
		}
	}
	if p.TopK == 0 && p.TopP < 1 && len(s.ids) > 0 {
		// Top-p over the whole allowed mass: counting every unscanned
		// token at the weight of the last scanned one is loose on a flat
		// tail, so bound each by its own weight's order of magnitude
		// instead (one cheap pass) and try once more.
		scanned := len(s.cands)
		rest := s.restBound(l, lmax, invT)
		if n, ok := s.settle(scanned, len(l), rest, mass, minPAt, below); ok {
			return s.settled(l, n, lmax, mass, rest)
		}
	}
	return Dist{}, false
}

// settled returns the masked Dist keeping the first n allowed tokens, or
// declines where the masked path would not have sorted them all (see
// candidates).
func (s *Sampler) settled(l []float32, n int, lmax float32, mass, rest float64) (Dist, bool) {
	if !s.candidates(l, n, lmax, mass, rest) {
		return Dist{}, false
	}
	s.keep(n)
	return s.finish(), true
}

// uncounted is the number of unscanned tokens that may still count in
// top-p's normaliser: all of them, or with top-k those that may still be
// among the K.
func (s *Sampler) uncounted(scanned, v int) int {
	rest := v - scanned
	if s.p.TopK > 0 {
		rest = min(rest, s.p.TopK-len(s.probs))
	}
	return rest
}

// restBound bounds the weight of the tokens not scanned (the selection in
// s.cands) on the masked row: each token is counted at the top of its
// quarter-nat bucket (the bounds sampleDense uses), the scanned ones taken
// out of the counts again, so the bound is within e^0.25 of their true
// mass (allowed or not) however flat the tail.
func (s *Sampler) restBound(l []float32, lmax float32, invT float64) float64 {
	var cnt [nBuckets]int32
	scale := invT * bucketsPerNat
	top := float64(lmax)
	bucket := func(v float32) int {
		b := int((top - float64(v)) * scale)
		if uint(b) >= nBuckets { // also NaN, +Inf, and the scanned tokens above lmax
			b = nBuckets - 1
		}
		return b
	}
	for _, v := range l {
		cnt[bucket(v)]++
	}
	for _, c := range s.cands {
		cnt[bucket(l[c.id])]--
	}
	var rest float64
	for b, c := range cnt {
		rest += float64(c) * bucketTop[b]
	}
	return rest
}

// SampleAllowed draws like Sample on the masked row (see
// DistributionAllowed), with the same single uniform from the sampler's
// stream, so a seeded request picks the same tokens either way; ok is
// false, and nothing is drawn, when the scan does not settle.
func (s *Sampler) SampleAllowed(logits []float32, allowed func(int32) bool) (int32, bool) {
	d, ok := s.DistributionAllowed(logits, allowed)
	if !ok {
		return 0, false
	}
	return d.Draw(s.rng.float64()), true
}

// settle returns how many of the allowed tokens found so far (s.probs, in
// rank order) the truncations keep, when that is certain after scanning
// the first scanned of v tokens (rest bounds the weight the unscanned
// ones may add to top-p's normaliser): each cut is known to keep a number
// in [lo, hi], and the result is their minimum when the smallest hi is
// also the smallest lo.
func (s *Sampler) settle(scanned, v int, rest, mass float64, minPAt int, below bool) (int, bool) {
	p := &s.p
	n := len(s.probs)
	const unknown = math.MaxInt
	lo, hi := unknown, unknown
	cut := func(l, h int) { lo, hi = min(lo, l), min(hi, h) }
	exhausted := scanned == v
	if p.TopK > 0 {
		cut(p.TopK, p.TopK) // > n: the exact case returned earlier
	}
	if p.MinP > 0 {
		switch {
		case minPAt >= 0:
			cut(minPAt, minPAt)
		case below || exhausted:
			cut(n, n)
		default:
			cut(n, unknown) // the next allowed token may be below
		}
	}
	if p.TopP < 1 {
		zlo, zhi := zBounds(mass, rest)
		tlo := p.TopP * zlo * (1 - boundarySlack) // cutTopP's target at zlo
		thi := p.TopP * zhi * (1 - boundarySlack)
		plo, phi := n+1, unknown
		var cum float64
		for i, w := range s.probs {
			cum += w
			if cum >= tlo && plo > n {
				plo = i + 1
			}
			if cum >= thi {
				phi = i + 1
				break
			}
		}
		cut(plo, phi)
	}
	return hi, hi <= n && hi == lo
}

// zBounds bounds the normaliser top-p divides by on the masked row: the
// allowed mass (top-k: the mass of the top K allowed), of which mass is
// scanned and at most rest is not.
func zBounds(mass, rest float64) (float64, float64) {
	return mass * (1 - zSlack), (mass + rest) * (1 + zSlack)
}

// candidates reports whether the first n allowed tokens (l: the
// penalised logits) are all among the
// candidates Distribution's masked path sorts, which it narrows before
// cutting: top-p without top-k to weights at or above a floor that
// depends on Z (where a token below cannot be in the nucleus), min-p alone
// to a loosened logit threshold. It checks against the highest floor the
// bounds allow, so a kept token passing it passes the exact one.
func (s *Sampler) candidates(l []float32, n int, lmax float32, mass, rest float64) bool {
	p := &s.p
	switch {
	case p.TopK > 0:
		return true
	case p.TopP < 1:
		_, zhi := zBounds(mass, rest)
		floor := (1 - p.TopP) * zhi / float64(s.vocab) * (1 - boundarySlack)
		floor = max(floor, p.MinP*(1-boundarySlack))
		for _, w := range s.probs[:n] {
			if !(w >= floor) {
				return false
			}
		}
	default: // min-p alone
		thr := float64(lmax) + p.Temperature*math.Log(p.MinP*(1-2*boundarySlack))
		for _, id := range s.ids[:n] {
			if !(float64(l[id]) >= thr) {
				return false
			}
		}
	}
	return true
}
