package sample

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
)

// DefaultRepeatLastN is the penalty window used when Params.RepeatLastN is 0.
const DefaultRepeatLastN = 64

// The limits of Params, in one place so that request parsing (which names
// the request's fields and their byte offsets) and New agree on them.
const (
	// MinTemperature is the smallest temperature that samples; a positive
	// temperature below it decodes greedily, the limit of the softmax as T
	// goes to 0 (up to ties, which greedy breaks towards the lowest id).
	// Why a floor at all: 1/T overflows to +Inf for T below about 5.6e-309
	// (subnormal temperatures such as 1e-320), and long before that the
	// weights exp((l - lmax)/T) of every token but the argmax underflow to
	// 0, so sampling would cost a rejection loop for a greedy answer.
	// 1e-5 is where other servers draw the same line (vLLM's sampling
	// epsilon); it keeps 1/T at most 1e5, far from overflow.
	MinTemperature = 1e-5
	// MaxTemperature bounds the temperature: far above it the distribution
	// is uniform to float precision and a larger value is a caller's bug.
	MaxTemperature = 100
	// MinRepetitionPenalty and MaxRepetitionPenalty bound an active
	// repetition penalty (0 and 1 are off). The penalty is applied in
	// float32: outside these bounds it would round to 0 or overflow and
	// turn logits into infinities.
	MinRepetitionPenalty = 0.01
	MaxRepetitionPenalty = 100
	// MaxAdditivePenalty bounds |presence_penalty| and |frequency_penalty|
	// (in logits; a logit difference of 100 is already a factor e^100).
	MaxAdditivePenalty = 100
	// MaxRepeatLastN bounds the penalty window. The window's ring grows
	// with the tokens actually accepted, so memory never follows this
	// number, but a window longer than any context is a caller's bug.
	MaxRepeatLastN = 1 << 20
)

// boundarySlack makes the top-p and min-p thresholds inclusive in the way a
// person computing them by hand expects. Logits arrive as float32, so a
// probability that is "exactly" 0.25 reaches the sampler as 0.2499999x; a
// relative slack of 1e-6 (a few float32 ulps of a typical logit) keeps such a
// token on the inclusive side of the boundary and changes nothing else.
const boundarySlack = 1e-6

// Params selects the sampling pipeline. The zero value is greedy decoding
// with no penalties: every "off" setting has its zero value accepted as a
// synonym so that Params{} and partially filled literals are valid.
type Params struct {
	// Temperature divides the logits; 0 selects greedy decoding (argmax
	// after penalties, ties to the lowest id), and so does any temperature
	// below MinTemperature. Must be in [0, MaxTemperature].
	Temperature float64
	// TopK keeps the K most likely tokens (ties broken towards the lowest
	// id, so exactly K survive). 0 = off; K >= vocabulary size is off.
	TopK int
	// TopP keeps the smallest prefix of the tokens, by descending
	// probability, whose mass reaches TopP. In [0, 1]; 0 and 1 = off.
	TopP float64
	// MinP keeps the tokens whose probability is at least MinP times that of
	// the most likely token. In [0, 1]; 0 = off; 1 keeps only the tokens
	// tied for most likely.
	MinP float64
	// RepetitionPenalty (CTRL / llama.cpp style) divides positive logits and
	// multiplies negative ones for every token seen in the window, so a
	// value above 1 always makes a repeat less likely. 0 and 1 = off;
	// otherwise in [MinRepetitionPenalty, MaxRepetitionPenalty].
	RepetitionPenalty float64
	// PresencePenalty is subtracted once from the logit of every distinct
	// token in the window. In [-MaxAdditivePenalty, MaxAdditivePenalty];
	// 0 = off.
	PresencePenalty float64
	// FrequencyPenalty is subtracted count times from the logit of a token
	// seen count times in the window. In [-MaxAdditivePenalty,
	// MaxAdditivePenalty]; 0 = off.
	FrequencyPenalty float64
	// RepeatLastN is the number of most recent accepted tokens the
	// penalties look at. 0 = DefaultRepeatLastN; in [0, MaxRepeatLastN].
	RepeatLastN int
	// Seed makes the request reproducible when HasSeed is set; otherwise
	// the sampler seeds itself from crypto/rand.
	Seed    uint64
	HasSeed bool
}

// penalised reports whether any penalty is active.
func (p *Params) penalised() bool {
	return p.RepetitionPenalty != 1 || p.PresencePenalty != 0 || p.FrequencyPenalty != 0
}

// normalise validates p and replaces the "off" synonyms by their canonical
// values, so the hot path tests one representation only.
func (p Params) normalise(vocabSize int) (Params, error) {
	if vocabSize <= 0 {
		return p, fmt.Errorf("sample: vocabulary size %d, want > 0", vocabSize)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("sample: "+format, args...)) }
	if !(p.Temperature >= 0 && p.Temperature <= MaxTemperature) {
		bad("temperature %v, want a value in [0, %v] (below %v = greedy)", p.Temperature, float64(MaxTemperature), MinTemperature)
	}
	if p.TopK < 0 {
		bad("top_k %d, want >= 0 (0 = off)", p.TopK)
	}
	if !(p.TopP >= 0 && p.TopP <= 1) {
		bad("top_p %v, want a value in [0, 1] (0 or 1 = off)", p.TopP)
	}
	if !(p.MinP >= 0 && p.MinP <= 1) {
		bad("min_p %v, want a value in [0, 1] (0 = off)", p.MinP)
	}
	if r := p.RepetitionPenalty; r != 0 && !(r >= MinRepetitionPenalty && r <= MaxRepetitionPenalty) {
		bad("repetition_penalty %v, want 0 or 1 (off) or a value in [%v, %v]", r, MinRepetitionPenalty, float64(MaxRepetitionPenalty))
	}
	if !(math.Abs(p.PresencePenalty) <= MaxAdditivePenalty) {
		bad("presence_penalty %v, want a value in [-%v, %v] (0 = off)", p.PresencePenalty, float64(MaxAdditivePenalty), float64(MaxAdditivePenalty))
	}
	if !(math.Abs(p.FrequencyPenalty) <= MaxAdditivePenalty) {
		bad("frequency_penalty %v, want a value in [-%v, %v] (0 = off)", p.FrequencyPenalty, float64(MaxAdditivePenalty), float64(MaxAdditivePenalty))
	}
	if p.RepeatLastN < 0 || p.RepeatLastN > MaxRepeatLastN {
		bad("repeat_last_n %d, want a value in [0, %d] (0 = default %d)", p.RepeatLastN, MaxRepeatLastN, DefaultRepeatLastN)
	}
	if len(errs) > 0 {
		return p, errors.Join(errs...)
	}
	p = p.Canonical()
	if p.TopK >= vocabSize {
		p.TopK = 0
	}
	return p, nil
}

// Canonical replaces the "off" synonyms of valid parameters by their
// canonical values: a temperature below MinTemperature is 0 (greedy), a
// top_p of 0 is 1, a repetition penalty of 0 is 1, a repeat_last_n of 0 is
// DefaultRepeatLastN. The request parser (core/loop) applies it once, so a
// request carries the values it decodes with to every backend; New applies
// it to whatever it is given (a no-op on canonical values).
func (p Params) Canonical() Params {
	if p.Temperature < MinTemperature {
		p.Temperature = 0
	}
	if p.TopP == 0 {
		p.TopP = 1
	}
	if p.RepetitionPenalty == 0 {
		p.RepetitionPenalty = 1
	}
	if p.RepeatLastN == 0 {
		p.RepeatLastN = DefaultRepeatLastN
	}
	return p
}

// cand is a candidate token during truncation: its (penalised) logit and id.
type cand struct {
	l  float32
	id int32
}

// better orders candidates by descending logit, ties to the lower id: the
// order of Dist and the tie-break rule of greedy decoding and top-k.
func better(a, b cand) bool { return a.l > b.l || (a.l == b.l && a.id < b.id) }

func candCmp(a, b cand) int {
	switch {
	case better(a, b):
		return -1
	case better(b, a):
		return 1
	}
	return 0
}

// Sampler turns logits into tokens for one request. It is not safe for
// concurrent use. After the first call its scratch buffers are sized for
// the vocabulary and no further call allocates.
type Sampler struct {
	p     Params
	vocab int
	rng   rng

	// Penalty window: a ring of the last RepeatLastN accepted tokens and
	// per-token counts over it (allocated only when a penalty is active).
	// The ring grows with the tokens accepted, up to RepeatLastN, so its
	// memory follows what the request generates, not the number it asked
	// for; it wraps (ringAt) once full.
	ring   []int32
	ringN  int // tokens in the ring
	ringAt int // next slot to overwrite, once the ring is full
	counts []int32
	work   []float32 // logits with penalties applied

	weights []float64 // per-id weights for top-p without top-k
	bkt     []uint8   // per-id bucket of sampleDense
	bcnt    [nBuckets]int32
	cands   []cand
	ids     []int32
	probs   []float64
}

// New returns a sampler for a vocabulary of vocabSize tokens, or an error
// naming every parameter that is out of range.
func New(p Params, vocabSize int) (*Sampler, error) {
	p, err := p.normalise(vocabSize)
	if err != nil {
		return nil, err
	}
	s := &Sampler{p: p, vocab: vocabSize}
	if p.HasSeed {
		s.rng.seed(p.Seed)
	} else {
		s.rng.seedRandom()
	}
	if p.penalised() {
		// Windows up to ringPrealloc are allocated whole, so the usual
		// ones never allocate after New; longer ones grow by append.
		s.ring = make([]int32, 0, min(p.RepeatLastN, ringPrealloc))
		s.counts = make([]int32, vocabSize)
		s.work = make([]float32, vocabSize)
	}
	return s, nil
}

// RawArgmax reports whether every token this sampler picks is the plain
// argmax of the logits row (greedy, nothing penalised): then a device can
// hand back the argmax alone instead of the row.
func (s *Sampler) RawArgmax() bool { return s.p.Temperature == 0 && !s.p.penalised() }

// Truncates reports whether the pipeline cuts the vocabulary (top-k,
// top-p, min-p) after the softmax. Without a cut, a token's probability
// under a mask is its unmasked probability renormalised over the allowed
// tokens (penalties and temperature act on each logit alone), so an
// unmasked draw that lands on an allowed token is already an exact draw of
// the masked distribution: what constrained decoding relies on to skip
// computing the mask. Greedy decoding cuts nothing either (the masked
// argmax is the argmax whenever the mask allows it).
func (s *Sampler) Truncates() bool {
	return s.p.Temperature != 0 && (s.p.TopK != 0 || s.p.TopP != 1 || s.p.MinP != 0)
}

// Params returns the sampler's parameters with the "off" synonyms replaced
// by their canonical values (TopP 1, RepetitionPenalty 1, ...).
func (s *Sampler) Params() Params { return s.p }

// Accept records a token as generated (or, for prompt tokens the caller
// wants penalised, as seen) so the penalties account for it. It panics if
// id is outside the vocabulary, as that is a bug in the caller.
func (s *Sampler) Accept(id int32) {
	if id < 0 || int(id) >= s.vocab {
		panic(fmt.Sprintf("sample: Accept(%d) outside vocabulary of %d", id, s.vocab))
	}
	if s.counts == nil {
		return
	}
	s.counts[id]++
	if s.ringN < s.p.RepeatLastN {
		s.ring = append(s.ring, id)
		s.ringN++
		return
	}
	s.counts[s.ring[s.ringAt]]--
	s.ring[s.ringAt] = id
	s.ringAt++
	if s.ringAt == len(s.ring) {
		s.ringAt = 0
	}
}

// ringPrealloc is the largest penalty window New allocates up front.
const ringPrealloc = 4096

// Reset forgets the accepted tokens (the penalty window); the random stream
// continues.
func (s *Sampler) Reset() {
	for _, id := range s.ring[:s.ringN] {
		s.counts[id] = 0
	}
	s.ring = s.ring[:0]
	s.ringN, s.ringAt = 0, 0
}

// Uniform returns a uniform value in [0, 1) from the sampler's own stream,
// for the speculative verifier's accept/reject draws: sharing the stream
// keeps a seeded request reproducible end to end.
func (s *Sampler) Uniform() float64 { return s.rng.float64() }

// penalise returns the logits with the penalties applied: the caller's
// slice when no penalty is active or nothing has been accepted yet, else a
// copy in s.work (the caller's logits are never modified).
func (s *Sampler) penalise(logits []float32) []float32 {
	if len(logits) != s.vocab {
		panic(fmt.Sprintf("sample: %d logits for a vocabulary of %d", len(logits), s.vocab))
	}
	if s.ringN == 0 {
		return logits
	}
	w := s.work
	copy(w, logits)
	rep := float32(s.p.RepetitionPenalty)
	for _, id := range s.ring[:s.ringN] {
		c := s.counts[id]
		if c <= 0 {
			continue // already done: counts are negated below as a mark
		}
		l := w[id]
		// CTRL's rule divides the logit, but dividing a negative logit
		// would raise it; llama.cpp multiplies those instead so that a
		// penalty > 1 always lowers the token's probability.
		if l > 0 {
			l /= rep
		} else {
			l *= rep
		}
		l -= float32(float64(c)*s.p.FrequencyPenalty + s.p.PresencePenalty)
		w[id] = l
		s.counts[id] = -c
	}
	for _, id := range s.ring[:s.ringN] {
		if c := s.counts[id]; c < 0 {
			s.counts[id] = -c
		}
	}
	return w
}

// Penalised returns the logits with the penalties of the tokens accepted
// so far applied, as the sampling pipeline starts from them: the caller's
// slice when no penalty applies, else the sampler's scratch, which the next
// call to Penalised, Distribution or Sample overwrites. This is what
// reported log-probabilities are computed from (before temperature and
// truncation, as OpenAI and vLLM report them).
func (s *Sampler) Penalised(logits []float32) []float32 { return s.penalise(logits) }

// argmax returns the index of the largest logit, ties to the lowest index
// (the comparison is strict); NaN never wins, and an input with nothing
// above -Inf yields 0.
func argmax(l []float32) int32 {
	m := maxLogit(l)
	if m == float32(math.Inf(-1)) {
		return 0 // nothing above −Inf: the first token
	}
	return int32(firstEqual(l, m))
}

// maxLogitGo is maxLogit in Go: the largest logit, ignoring NaN (−Inf if
// there is none).
func maxLogitGo(l []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range l {
		if v > m {
			m = v
		}
	}
	return m
}

// firstEqualGo is firstEqual in Go: the index of the first logit equal to
// v, or −1.
func firstEqualGo(l []float32, v float32) int {
	for i, x := range l {
		if x == v {
			return i
		}
	}
	return -1
}

// max32 is the larger of a and b, neither NaN.
func max32(a, b float32) float32 {
	if b > a {
		return b
	}
	return a
}

// tame handles logits whose maximum is infinite, where the subtraction
// l - max would produce NaN (+Inf) or leave nothing to normalise (-Inf):
// the tokens tied at the maximum are then equally likely and all others
// impossible, which is the limit of the softmax; when no logit is above
// -Inf every token is equally likely. It returns logits with a
// finite maximum (rewritten into s.work when needed) and that maximum.
func (s *Sampler) tame(l []float32) ([]float32, float32) {
	m := maxLogit(l)
	if !math.IsInf(float64(m), 0) {
		return l, m
	}
	if s.work == nil {
		s.work = make([]float32, s.vocab)
	}
	w := s.work
	if m < 0 {
		// Nothing is better than -Inf (or NaN): all tokens equally likely.
		clear(w)
		return w, 0
	}
	for i, v := range l {
		if v == m {
			w[i] = 0
		} else {
			w[i] = float32(math.Inf(-1))
		}
	}
	return w, 0
}

// The pipeline, in order, and why that order:
//
//  1. Penalties edit raw logits: they are defined on logits (the CTRL rule
//     depends on the logit's sign) and must apply before anything judges
//     which tokens are likely, or a penalised token could survive
//     truncation on its unpenalised strength.
//  2. Temperature comes before truncation so that top-p and min-p measure
//     mass and ratios of the distribution that is actually sampled from. (It
//     cannot change which tokens top-k keeps, only their probabilities.)
//  3. Top-k first among the truncations because it is a pure rank cut: it
//     bounds the work of everything after it to K candidates without
//     computing a single exponential outside them.
//  4. Top-p on the renormalised top-k survivors.
//  5. Min-p last. Its test p_i >= MinP * p_max is a ratio, unchanged by the
//     renormalisations before it, so it is a logit-space cut on the
//     survivors.
//
// Every cut keeps a prefix of the candidates sorted by (probability
// descending, id ascending), so the result is that order's shortest prefix
// and each step renormalises over what it keeps.

// Distribution returns the final sampling distribution for logits (one per
// vocabulary entry): penalties, temperature, top-k, top-p, min-p. The Dist
// aliases the sampler's buffers and is valid until the next call of
// Distribution or Sample; Clone it to keep it. With Temperature 0 it is the
// point mass on the greedy token.
func (s *Sampler) Distribution(logits []float32) Dist {
	l := s.penalise(logits)
	if s.p.Temperature == 0 {
		s.ids = append(s.ids[:0], argmax(l))
		s.probs = append(s.probs[:0], 1)
		return Dist{IDs: s.ids, Probs: s.probs}
	}
	l, lmax := s.tame(l)
	invT := 1 / s.p.Temperature
	p := &s.p
	switch {
	case p.TopK > 0:
		s.topK(l)
	case p.TopP < 1:
		// Top-p needs the mass of the whole vocabulary, so every weight
		// is computed; the sort is limited to tokens that can be in the
		// nucleus (see nucleusFloor) or that pass min-p.
		w := s.denseWeights(l, lmax, invT)
		var z float64
		for _, v := range w {
			z += v
		}
		floor := (1 - p.TopP) * z / float64(s.vocab) * (1 - boundarySlack)
		floor = max(floor, p.MinP*(1-boundarySlack))
		s.cands = s.cands[:0]
		for i, v := range w {
			if v >= floor {
				s.cands = append(s.cands, cand{l[i], int32(i)})
			}
		}
		slices.SortFunc(s.cands, candCmp)
		s.fill(lmax, invT)
		s.cutTopP(z)
		s.cutMinP()
		return s.finish()
	case p.MinP > 0:
		// Only min-p: a logit-space threshold, so tokens below it never
		// need an exponential.
		// The threshold is loosened a little so the cut is a superset of
		// the exact one cutMinP makes on the weights below.
		thr := float64(lmax) + s.p.Temperature*math.Log(p.MinP*(1-2*boundarySlack))
		s.cands = s.cands[:0]
		for i, v := range l {
			if float64(v) >= thr {
				s.cands = append(s.cands, cand{v, int32(i)})
			}
		}
		slices.SortFunc(s.cands, candCmp)
	default:
		s.cands = s.cands[:0]
		negInf := float32(math.Inf(-1))
		for i, v := range l {
			if v != v {
				v = negInf // NaN would make the sort order inconsistent
			}
			s.cands = append(s.cands, cand{v, int32(i)})
		}
		slices.SortFunc(s.cands, candCmp)
	}
	s.cutTopP(s.fill(lmax, invT))
	s.cutMinP()
	return s.finish()
}

// Sample draws a token: the argmax after penalties for Temperature 0,
// otherwise a draw from Distribution(logits) using the sampler's stream.
// When nothing truncates it skips building the sorted Dist and draws from
// the per-id weights directly (same distribution, one pass, no sort).
func (s *Sampler) Sample(logits []float32) int32 {
	p := &s.p
	if p.Temperature == 0 {
		return argmax(s.penalise(logits))
	}
	if p.TopK == 0 && p.TopP == 1 && p.MinP == 0 {
		l, lmax := s.tame(s.penalise(logits))
		return s.sampleDense(l, lmax, 1/p.Temperature)
	}
	return s.Distribution(logits).Draw(s.rng.float64())
}

const (
	// bucketsPerNat sets the width of the rejection sampler's buckets to a
	// quarter of a nat, so a proposal is accepted with probability at least
	// e^-0.25 = 0.78.
	bucketsPerNat = 4
	// nBuckets covers weights down to e^-40; the last bucket holds all the
	// rest (weights below 4e-18, with NaN and -Inf logits), which is
	// proposed almost never.
	nBuckets = 40*bucketsPerNat + 1
)

// bucketTop[b] = e^(-b/bucketsPerNat), the largest weight in bucket b,
// computed with expNeg so that it bounds expNeg's own values.
var bucketTop = func() (t [nBuckets]float64) {
	for b := range t {
		t[b] = expNeg(-float64(b) / bucketsPerNat)
	}
	return t
}()

// sampleDense draws from the untruncated softmax exp((l_i - lmax)/T)
// without evaluating an exponential per token, which at 49,152 tokens would
// cost far more than everything else in the step. One pass sorts the tokens
// into buckets by their weight's order of magnitude (a subtraction, a
// multiply and a conversion each); then rejection sampling proposes a
// bucket in proportion to count*(its largest weight), a uniform member of
// it, and accepts with probability weight/(largest weight). The accepted
// token is distributed exactly as the softmax (the bucket bound cancels),
// and the expected number of proposals is below 1/0.78.
func (s *Sampler) sampleDense(l []float32, lmax float32, invT float64) int32 {
	if s.bkt == nil {
		s.bkt = make([]uint8, s.vocab)
	}
	bkt := s.bkt[:len(l)]
	cnt := &s.bcnt
	*cnt = [nBuckets]int32{}
	// invT*4 is exact, so d is exactly -4x for x the weight's exponent as
	// Distribution computes it: a token's bucket never claims a bound below
	// its weight.
	scale := invT * bucketsPerNat
	top := float64(lmax)
	// Neighbouring tokens mostly land in the same few buckets; counting
	// even and odd positions separately halves the chain of dependent
	// increments of one counter.
	var odd [nBuckets]int32
	i := 0
	for ; i+1 < len(l); i += 2 {
		b0 := int((top - float64(l[i])) * scale)
		b1 := int((top - float64(l[i+1])) * scale)
		// Also catches NaN and +Inf, whose conversions are out of range.
		if uint(b0) >= nBuckets {
			b0 = nBuckets - 1
		}
		if uint(b1) >= nBuckets {
			b1 = nBuckets - 1
		}
		bkt[i], bkt[i+1] = uint8(b0), uint8(b1)
		cnt[b0]++
		odd[b1]++
	}
	if i < len(l) {
		b := int((top - float64(l[i])) * scale)
		if uint(b) >= nBuckets {
			b = nBuckets - 1
		}
		bkt[i] = uint8(b)
		cnt[b]++
	}
	for b, c := range odd {
		cnt[b] += c
	}
	var total float64
	for b, c := range cnt {
		total += float64(c) * bucketTop[b]
	}
	for range maxProposals {
		u := s.rng.float64() * total
		b := nBuckets - 1
		var cum float64
		for j, c := range cnt {
			cum += float64(c) * bucketTop[j]
			if u < cum {
				b = j
				break
			}
		}
		n := int(cnt[b])
		if n == 0 {
			continue // rounding at the top of the cumulative sum
		}
		r := min(int(s.rng.float64()*float64(n)), n-1)
		i := nthIndex(bkt, uint8(b), r)
		w := weight(l[i], lmax, invT)
		if s.rng.float64()*bucketTop[b] < w {
			return int32(i)
		}
	}
	return s.sampleExact(l, lmax, invT)
}

// maxProposals bounds sampleDense's rejection loop. With every bucket
// bound honest a proposal is accepted with probability at least 0.78, so
// 64 failures in a row happen with probability below 1e-42: reaching the
// bound means the weights are not what the buckets claim (logits or a
// temperature outside what the bucketing assumes), and the loop must not
// bet the engine on luck. Falling back after a fixed number of rejections
// keeps the draw exact, as each accepted proposal is distributed as the
// softmax whatever the number of rejections before it.
const maxProposals = 64

// sampleExact draws from exp((l_i - lmax)/T) by inverse CDF over every
// token's weight: one exponential per token, no loop that depends on
// luck. When the weights carry no usable mass (all zero or not finite) it
// returns the argmax, the limit the softmax tends to.
func (s *Sampler) sampleExact(l []float32, lmax float32, invT float64) int32 {
	w := s.denseWeights(l, lmax, invT)
	var z float64
	for _, v := range w {
		z += v
	}
	if !(z > 0) || math.IsInf(z, 0) {
		return argmax(l)
	}
	u := s.rng.float64() * z
	var cum float64
	last := int32(-1)
	for i, v := range w {
		if !(v > 0) {
			continue
		}
		cum += v
		last = int32(i)
		if u < cum {
			return last
		}
	}
	return last // rounding: u at the very top of the range
}

// nthIndex returns the index of the r-th (0-based) occurrence of c in p,
// which must exist. bytes.Count and bytes.IndexByte are vectorised, so this
// skips whole chunks instead of testing byte by byte.
func nthIndex(p []uint8, c uint8, r int) int {
	const chunk = 1024
	base := 0
	for len(p) > chunk {
		n := bytes.Count(p[:chunk], []byte{c})
		if r < n {
			break
		}
		r -= n
		p = p[chunk:]
		base += chunk
	}
	for {
		j := bytes.IndexByte(p, c)
		if r == 0 {
			return base + j
		}
		r--
		p = p[j+1:]
		base += j + 1
	}
}

// weight is the unnormalised probability exp((v - lmax)/T), the one
// definition every path shares so that Sample and Distribution describe the
// same distribution. The difference is taken in float64, where it is exact
// for float32 inputs, so no rounding is added before the exponential.
func weight(v, lmax float32, invT float64) float64 {
	return expNeg((float64(v) - float64(lmax)) * invT)
}

// denseWeights stores exp((l_i - lmax)/T) for every token in s.weights.
func (s *Sampler) denseWeights(l []float32, lmax float32, invT float64) []float64 {
	if s.weights == nil {
		s.weights = make([]float64, s.vocab)
	}
	w := s.weights
	for i, v := range l {
		w[i] = weight(v, lmax, invT)
	}
	return w
}

// topK leaves the K best candidates in s.cands, sorted.
func (s *Sampler) topK(l []float32) {
	s.cands = selectTop(l, s.p.TopK, s.cands[:0])
	slices.SortFunc(s.cands, candCmp)
}

// selectTop appends to h (empty) the k best candidates of l (0 < k <=
// len(l)) in the order better defines, NaN ranking as -Inf, unsorted. It
// keeps a min-heap of the best k seen so far with the worst at the root:
// one comparison per token against the root, O(V log k) at worst and about
// O(V) on real logits, instead of sorting the vocabulary. Ties go to the
// lower id because the scan visits ids in increasing order and a later
// token must be strictly better than the root to replace it.
func selectTop(l []float32, k int, h []cand) []cand {
	negInf := float32(math.Inf(-1))
	for i := 0; i < k; i++ {
		v := l[i]
		if v != v { // NaN ranks below everything
			v = negInf
		}
		h = append(h, cand{v, int32(i)})
		// sift up
		for j := len(h) - 1; j > 0; {
			parent := (j - 1) / 2
			if !better(h[parent], h[j]) {
				break
			}
			h[parent], h[j] = h[j], h[parent]
			j = parent
		}
	}
	root := h[0].l
	for i := k; i < len(l); i++ {
		v := l[i]
		if !(v > root) {
			continue
		}
		h[0] = cand{v, int32(i)}
		// sift down: move the worse child up while it is worse than us
		for j := 0; ; {
			c := 2*j + 1
			if c >= k {
				break
			}
			if c+1 < k && better(h[c], h[c+1]) {
				c++
			}
			if !better(h[j], h[c]) {
				break
			}
			h[j], h[c] = h[c], h[j]
			j = c
		}
		root = h[0].l
	}
	return h
}

// fill stores the ids of the sorted candidates in s.ids and their weights
// exp((l - lmax)/T) in s.probs (normalised later by finish), and returns the
// candidates' total weight.
func (s *Sampler) fill(lmax float32, invT float64) float64 {
	s.ids = s.ids[:0]
	s.probs = s.probs[:0]
	var z float64
	for _, c := range s.cands {
		w := weight(c.l, lmax, invT)
		s.ids = append(s.ids, c.id)
		s.probs = append(s.probs, w)
		z += w
	}
	return z
}

// cutTopP keeps the shortest prefix of the candidates whose weight reaches
// TopP of total, the weight of the distribution top-p applies to (which may
// include tokens that were never made candidates because they could not be
// in the nucleus).
func (s *Sampler) cutTopP(total float64) {
	if s.p.TopP >= 1 {
		return
	}
	target := s.p.TopP * total * (1 - boundarySlack)
	var cum float64
	for i, w := range s.probs {
		cum += w
		if cum >= target {
			s.keep(i + 1)
			return
		}
	}
}

// cutMinP keeps the candidates with weight >= MinP times the top one's.
func (s *Sampler) cutMinP() {
	if s.p.MinP == 0 || len(s.probs) == 0 {
		return
	}
	thr := s.p.MinP * s.probs[0] * (1 - boundarySlack)
	for i, w := range s.probs {
		if w < thr {
			s.keep(i)
			return
		}
	}
}

func (s *Sampler) keep(n int) {
	s.ids = s.ids[:n]
	s.probs = s.probs[:n]
}

// finish normalises the surviving weights into probabilities, dropping
// tokens of weight 0 (-Inf and NaN logits, or weights below expNeg's
// range) so that a Dist lists only possible tokens.
func (s *Sampler) finish() Dist {
	n := len(s.probs)
	for n > 1 && s.probs[n-1] == 0 {
		n--
	}
	s.keep(n)
	var z float64
	for _, w := range s.probs {
		z += w
	}
	inv := 1 / z
	for i := range s.probs {
		s.probs[i] *= inv
	}
	return Dist{IDs: s.ids, Probs: s.probs}
}
