package engine

import (
	"time"

	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/spec"
)

// drafters dispatches each sequence to the drafter its request chose. The
// scheduler sees one Drafter; the kinds live beside the sequences.
type drafters struct {
	kind map[*spec.Seq]drafterKind
	// target is each sequence's KV cache in the target, which the early
	// exit's caches borrow from (draftNet.borrow).
	target map[*spec.Seq]model.Cache
	ngram  spec.NGramDrafter
	model  *modelDrafter // nil without a draft model
	early  *modelDrafter // nil until an early-exit request comes
	seqs   [4][]*spec.Seq
	trees  [4][]*spec.Tree
	errs   int // drafter failures (each cost one iteration's speculation)
	// accept calibrates each kind's path probabilities against what
	// verification accepted (the backend reports every verified tree);
	// calib holds a kind's factors for its drafter's stop rule.
	accept [4]spec.Acceptance
	calib  [4][spec.CalibDepths]float64
	// used is the drafter whose tree each sequence verifies this
	// iteration: a model-drafted request's tree may come from the n-gram
	// index instead (see Draft).
	used map[*spec.Seq]drafterKind
	// probeS and probeT are ngramFirst's scratch: the model drafters'
	// sequences and trees.
	probeS []*spec.Seq
	probeT []*spec.Tree
	// modelPace is, per model-drafted sequence, the measured time per
	// emitted token of its iterations that the model drafted (the draft
	// steps, catching its cache up, and the verify pass), which the
	// n-gram index's tree must beat to stand in.
	modelPace map[*spec.Seq]*spec.Pace
	// at is the target's forward cost curve (nil without one): it prices
	// an n-gram tree's verify pass.
	at func(int) time.Duration
	// streams is how many sequences decode in the iteration (set with
	// at): a standby tree's nodes cost all of them a longer pass.
	streams int
	// ngramDeeper lets the n-gram index draft deeper than the scheduler's
	// shape (ngramShape): the config gave no "spec_max_depth".
	ngramDeeper bool
}

// ngramMaxDepth is the n-gram index's D_max where the config leaves
// "spec_max_depth" to the defaults (spec.DefaultMaxDepth, the draft
// model's): its nodes cost microseconds to draft where a model's layer
// costs a pass, and a stretch being copied is often longer than 8 tokens.
// The draft model keeps 8: deeper lost for it (NOTES.md, "n-gram depth").
const ngramMaxDepth = 12

// ngramShape is the shape the n-gram index drafts with for the requests
// that chose it: the scheduler's, its depth scaled by ngramMaxDepth/spec.DefaultMaxDepth where allowed
// (the share of the budget per request bounds both alike).
func (d *drafters) ngramShape(shape spec.Shape) spec.Shape {
	if d.ngramDeeper && shape.Branch == nil {
		shape.Depth = shape.Depth * ngramMaxDepth / spec.DefaultMaxDepth
	}
	return shape
}

// modelPaceDecay per iteration: a horizon of about ten iterations, longer
// than the speculation gate's (spec.Payoff), since a model-drafted
// iteration's tokens swing from one to a whole spine.
const modelPaceDecay = 0.9

// observe records one verified iteration of a speculating sequence: how
// long it took and the tokens it emitted.
func (d *drafters) observe(s *spec.Seq, requested drafterKind, took time.Duration, tokens int) {
	if tokens <= 0 || requested == draftNGram || d.usedBy(s, requested) != requested {
		return
	}
	if d.modelPace == nil {
		d.modelPace = map[*spec.Seq]*spec.Pace{}
	}
	p := d.modelPace[s]
	if p == nil {
		// The first model-drafted iteration fed the draft model the
		// whole prompt: a cost paid once, not the pace.
		d.modelPace[s] = &spec.Pace{Decay: modelPaceDecay}
		return
	}
	p.Add(took, tokens)
}

// forget drops a finished sequence's state.
func (d *drafters) forget(s *spec.Seq) {
	delete(d.kind, s)
	delete(d.target, s)
	delete(d.modelPace, s)
}

// ngramStandsIn says whether the n-gram index's tree t, drafted for a
// sequence that asked for a model drafter, is expected to emit tokens
// faster than the model drafter has been: its verify pass (the curve
// over the iteration's other roots and t's nodes) over one plus the
// expected accepted nodes (the sum of their calibrated path
// probabilities), against the sequence's measured model pace. Before the
// model's pace is known the tree must expect a whole accepted token.
//
// A bare tree (plain decoding) never stands in: a few slow iterations
// would bench a model that pays (NOTES.md, "bare stand-ins").
func (d *drafters) ngramStandsIn(s *spec.Seq, t *spec.Tree, others int) bool {
	if t.Len() < 2 {
		return false
	}
	e := expectedNodes(t)
	p := d.modelPace[s]
	if p == nil || p.Iterations() == 0 || d.at == nil {
		return e >= 1
	}
	return d.at(others+t.Len()).Seconds()/(1+e) < p.PerToken()
}

// ngramFirst lets the n-gram index draft, in one call, for every request
// of a model drafter, and takes out of the model drafters' lists those
// whose n-gram tree stands in (ngramStandsIn; the others' trees are reset
// for their model). The index drafts in microseconds, and where an answer
// copies its prompt (a file rewritten with a small change) its tree often
// beats the model's, whose every step is a pass. n is the number of
// sequences in the iteration.
func (d *drafters) ngramFirst(shape spec.Shape, n int) {
	modelKinds := [...]drafterKind{draftModel, draftEarlyExit}
	d.probeS, d.probeT = d.probeS[:0], d.probeT[:0]
	for _, k := range modelKinds {
		if k == draftModel && d.model != nil || k == draftEarlyExit && d.early != nil {
			d.probeS = append(d.probeS, d.seqs[k]...)
			d.probeT = append(d.probeT, d.trees[k]...)
		}
	}
	if len(d.probeS) == 0 {
		return
	}
	// The scheduler's shape, not ngramShape's: deeper stand-ins leave the
	// draft model further to catch up (NOTES.md, "stand-in depth").
	if !d.probeNGram(shape) {
		return
	}
	for _, k := range modelKinds {
		ss, ts := d.seqs[k][:0], d.trees[k][:0]
		for i, s := range d.seqs[k] {
			t := d.trees[k][i]
			if d.ngramStandsIn(s, t, n-1) {
				d.used[s] = draftNGram
				continue
			}
			t.Reset(s.Tokens[len(s.Tokens)-1])
			ss, ts = append(ss, s), append(ts, t)
		}
		d.seqs[k], d.trees[k] = ss, ts
	}
}

// probeNGram lets the n-gram index draft the trees of probeS (probeT) in
// the given shape, its path probabilities calibrated by what verification
// accepted of its trees. Where the index fails it leaves the trees bare
// and returns false.
func (d *drafters) probeNGram(shape spec.Shape) bool {
	d.accept[draftNGram].Factors(d.calib[draftNGram][:])
	shape.Calib = d.calib[draftNGram][:]
	if d.ngram.Draft(d.probeS, shape, d.probeT) != nil {
		for i, t := range d.probeT {
			t.Reset(d.probeS[i].Tokens[len(d.probeS[i].Tokens)-1])
		}
		return false
	}
	for _, t := range d.probeT {
		d.accept[draftNGram].Scale(t)
	}
	return true
}

// expectedNodes is the sum of the path probabilities of t's drafted nodes:
// how many of them verification is expected to accept.
func expectedNodes(t *spec.Tree) float64 {
	e := 0.0
	for _, n := range t.Nodes[1:] {
		e += n.Prob
	}
	return e
}

// Standby implements spec.StandbyDrafter: for the model-drafted requests
// whose speculation is backed off (spec.Payoff), the n-gram index drafts
// in microseconds, and a tree is kept where it beats plain decoding on
// its own (ngramBeatsPlain). On the Qwen2.5-Coder pair, whole-file
// rewrites lost to plain decoding wherever the model drafted new lines
// (26 ms a token against 25: its steps, and its cache catching up on
// what the index had drafted), so their requests backed off, 35% of
// their iterations, and decoded the copied lines in those stretches one
// token a pass. Requests that chose the n-gram index itself get nothing
// here: what backed them off was the index.
func (d *drafters) Standby(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	d.probeS, d.probeT = d.probeS[:0], d.probeT[:0]
	for i, s := range seqs {
		delete(d.used, s)
		trees[i].Reset(s.Tokens[len(s.Tokens)-1])
		if k := d.kind[s]; k == draftModel || k == draftEarlyExit {
			d.probeS = append(d.probeS, s)
			d.probeT = append(d.probeT, trees[i])
		}
	}
	if len(d.probeS) == 0 {
		return nil
	}
	if !d.probeNGram(shape) {
		d.errs++
		return nil
	}
	if d.used == nil {
		d.used = map[*spec.Seq]drafterKind{}
	}
	for i, t := range d.probeT {
		s := d.probeS[i]
		if !d.ngramBeatsPlain(t, max(len(seqs), d.streams)) {
			t.Reset(s.Tokens[len(s.Tokens)-1])
			continue
		}
		d.used[s] = draftNGram
	}
	return nil
}

// ngramBeatsPlain says whether verifying the n-gram tree t is expected to
// emit its request's tokens faster than plain decoding, with n sequences
// in the pass: the request is charged the plain pass plus n times what
// its nodes add to it (the other streams wait for them too; see
// passCharge), over one plus the expected accepted nodes (the sum of their
// calibrated path probabilities). Without a cost curve a tree must expect
// a whole accepted token.
func (d *drafters) ngramBeatsPlain(t *spec.Tree, n int) bool {
	if t.Len() < 2 {
		return false
	}
	e := expectedNodes(t)
	if d.at == nil {
		return e >= 1
	}
	plain := d.at(n).Seconds()
	charged := plain + float64(n)*(d.at(n-1+t.Len()).Seconds()-plain)
	return charged/(1+e) < plain
}

// usedBy is the drafter that drafted the sequence's tree this iteration
// (its request's, unless the n-gram index stood in).
func (d *drafters) usedBy(s *spec.Seq, requested drafterKind) drafterKind {
	if k, ok := d.used[s]; ok {
		return k
	}
	return requested
}

func (d *drafters) Draft(seqs []*spec.Seq, shape spec.Shape, trees []*spec.Tree) error {
	for k := range d.seqs {
		d.seqs[k], d.trees[k] = d.seqs[k][:0], d.trees[k][:0]
	}
	if d.used == nil {
		d.used = map[*spec.Seq]drafterKind{}
	}
	clear(d.used)
	for i, s := range seqs {
		k := d.kind[s]
		trees[i].Reset(s.Tokens[len(s.Tokens)-1])
		d.seqs[k] = append(d.seqs[k], s)
		d.trees[k] = append(d.trees[k], trees[i])
	}
	d.ngramFirst(shape, len(seqs))
	for k, ss := range d.seqs {
		if len(ss) == 0 {
			continue
		}
		var dr spec.Drafter
		switch {
		case drafterKind(k) == draftNGram:
			dr = &d.ngram
		case drafterKind(k) == draftModel && d.model != nil:
			dr = d.model
		case drafterKind(k) == draftEarlyExit && d.early != nil:
			dr = d.early
		default:
			continue
		}
		// The stop rule judges nodes by the probabilities verification
		// has borne out: the Qwen2.5-Coder 0.5B draft model's were 2–19%
		// under what was accepted, so its spines stopped early.
		ks := shape
		if drafterKind(k) == draftNGram {
			ks = d.ngramShape(shape)
		}
		d.accept[k].Factors(d.calib[k][:])
		ks.Calib = d.calib[k][:]
		if err := dr.Draft(ss, ks, d.trees[k]); err != nil {
			// A drafter that fails costs its requests their speculation
			// this iteration, not their streams: verify the roots alone.
			for i, t := range d.trees[k] {
				t.Reset(ss[i].Tokens[len(ss[i].Tokens)-1])
			}
			d.errs++
			continue
		}
		for _, t := range d.trees[k] {
			d.accept[k].Scale(t)
		}
	}
	return nil
}

// Lag implements spec.CatchUpDrafter: what the draft model of the
// sequence's drafter (a separate model or the target's first layers)
// would feed its cache before drafting for it; the n-gram index feeds
// nothing.
func (d *drafters) Lag(s *spec.Seq) int {
	if m := d.modelOf(d.kind[s]); m != nil {
		return m.dm.lag(s)
	}
	return 0
}

// LagPrice implements spec.CatchUpDrafter: a pass of the draft model over
// n tokens (measured, else the prior: modelDrafter.passPrice). A draft
// model's, where there is one, else the early exit's.
func (d *drafters) LagPrice(n int) (time.Duration, bool) {
	if m := d.modelOf(draftModel); m != nil {
		return m.passPrice(n)
	}
	if m := d.modelOf(draftEarlyExit); m != nil {
		return m.passPrice(n)
	}
	return 0, false
}

// modelOf is the model drafter of kind k, nil for the n-gram index or a
// model not loaded.
func (d *drafters) modelOf(k drafterKind) *modelDrafter {
	switch k {
	case draftModel:
		return d.model
	case draftEarlyExit:
		return d.early
	}
	return nil
}
