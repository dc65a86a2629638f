package cpu

import (
	"bytes"
	"fmt"
	"time"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/runtime"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/spec"
)

// Timings splits the time of the iterations that decoded something.
type Timings struct {
	Iterations int
	// Plan is drafting plus selection, Forward the target's pass (prefill
	// chunks and trees together), Verify the walk over each tree, the KV
	// commit and the penalty bookkeeping.
	Plan, Forward, Verify time.Duration
}

func (t *Timings) add(plan, fwd, ver time.Duration) {
	t.Iterations++
	t.Plan += plan
	t.Forward += fwd
	t.Verify += ver
}

// setupSpec builds the scheduler, the drafters and the budget.
func (b *Backend) setupSpec(sc specConfig, path string, threads int, calibrating func(float64)) error {
	b.spec = sc
	b.sched.Config = sc.sched
	b.sched.Drafter = &b.drafts
	b.drafts.kind = map[*spec.Seq]drafterKind{}
	cfg := b.model.Config()
	if sc.draftModelPath != "" {
		dm, err := b.loadDraftModel(sc.draftModelPath, path, threads)
		if err != nil {
			return err
		}
		b.drafts.model = &modelDrafter{dm: dm}
		b.drafts.model.beam.Model = dm
	}
	layers := sc.earlyExit
	if layers == 0 {
		layers = max(1, cfg.Layers/3)
	}
	if layers > cfg.Layers {
		return status.Errorf(status.InvalidRequest, `config field "early_exit_layers" is %d but the model has %d layers`, layers, cfg.Layers)
	}
	// The early exit runs the target's first layers: only runners that can
	// stop there offer it (requests asking for it elsewhere are refused).
	if pr, ok := b.model.(model.PrefixRunner); ok {
		ctx := b.context
		early := &draftNet{m: b.model, layers: layers, owner: map[*spec.Seq]*draftState{},
			newCache: func() (model.Cache, error) { return pr.NewPrefixCache(ctx, layers) }}
		b.drafts.early = &modelDrafter{dm: early}
		b.drafts.early.beam.Model = early
	}
	if !sc.budgetGiven && sc.sched.Policy != spec.Incremental {
		// The knee of the forward pass's cost. On a CPU it comes early
		// (two cores: compute-bound from about 3 tokens, so the knee is 2),
		// which would leave one draft node per pass; the MinProb cut, not
		// the budget, is what keeps unprofitable nodes out there, so the
		// budget is at least DefaultMinBudget.
		b.knee = calibrate(fmt.Sprintf("%s/%s/%d", b.device, path, threads), b.model, 48, calibrating)
		b.sched.Config.Budget = max(DefaultMinBudget, b.knee)
	}
	if sc.sched.Policy != spec.Incremental {
		b.curve = measureCurve(fmt.Sprintf("%s/%s/%d", b.device, path, threads), b.model, curveTokens)
	}
	return nil
}

// curveTokens is how far the cost model's curve is measured (T(1) …
// T(curveTokens), about 20 forward passes at start-up); beyond, it is
// extrapolated.
const curveTokens = 8

// DefaultMinBudget is the least verification budget B when it is
// calibrated rather than configured (see BenchmarkSpeculation).
const DefaultMinBudget = 12

// Budget is the verification budget B in use (configured or calibrated).
func (b *Backend) Budget() int { return b.sched.Config.Budget }

// loadDraftModel opens the draft model and checks that it shares the
// target's vocabulary, piece for piece. The target's own file is shared,
// not loaded twice.
func (b *Backend) loadDraftModel(path, targetPath string, threads int) (*draftNet, error) {
	m, tok := b.model, b.tok
	if path != targetPath {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, status.Errorf(status.Model, "draft model %s: %v", path, err)
		}
		var dm model.Runner
		if tok, err = tokenizer.FromGGUF(f); err == nil {
			dm, err = b.open(f, threads)
		}
		if err != nil {
			f.Close()
			return nil, status.Errorf(status.Model, "draft model %s: %v", path, err)
		}
		m = dm
		if err := sameVocabulary(b.tok, tok, m.Config().Vocab); err != nil {
			m.Close()
			f.Close()
			return nil, status.Errorf(status.Model, "draft model %s cannot draft for %s: %v", path, targetPath, err)
		}
		b.draftFile = f
	}
	ctx := b.context
	d := &draftNet{m: m, owner: map[*spec.Seq]*draftState{},
		newCache: func() (model.Cache, error) { return m.NewCache(ctx) }}
	if _, ok := m.(model.HeadRunner); ok && b.spec.draftVocab > 0 && b.spec.draftVocab < m.Config().Vocab {
		d.headRows = max(16, b.spec.draftVocab/16*16)
	}
	return d, nil
}

// sameVocabulary checks that a draft model's tokens are the target's.
func sameVocabulary(target, draft *tokenizer.Tokenizer, draftOutputs int) error {
	if draft.Size() != target.Size() || draftOutputs != target.Size() {
		return fmt.Errorf("its vocabulary has %d tokens (%d outputs), the target's %d", draft.Size(), draftOutputs, target.Size())
	}
	for id := int32(0); int(id) < target.Size(); id++ {
		if !bytes.Equal(target.Piece(id), draft.Piece(id)) {
			return fmt.Errorf("token %d is %q in the draft model but %q in the target", id, draft.Piece(id), target.Piece(id))
		}
	}
	return nil
}

// specItem reads a request's speculation fields.
func (b *Backend) specItem(req *runtime.Request, p sample.Params) (*item, error) {
	it := &item{params: p, drafter: b.spec.drafter, slo: time.Duration(req.TPOTSLOMs * float64(time.Millisecond))}
	var name string
	named, err := req.Extra.Take("drafter", &name)
	if err != nil {
		return nil, err
	}
	if named {
		if it.drafter, err = parseDrafter("request", name); err != nil {
			return nil, req.Extra.Errorf("drafter", `must be "ngram", "draft_model", "early_exit" or "none", got %q`, name)
		}
	}
	var on bool
	given, err := req.Extra.Take("speculate", &on)
	if err != nil {
		return nil, err
	}
	switch {
	case given && !on:
		it.drafter = draftNone
	case given && on && it.drafter == draftNone && !named:
		it.drafter = draftNGram
	case !given && !named && p.Temperature > 0:
		// The default drafter is measured to pay for greedy requests;
		// sampling ones speculate when they ask to.
		it.drafter = draftNone
	}
	if it.drafter == draftModel && b.drafts.model == nil {
		return nil, status.Errorf(status.InvalidRequest, `request field "drafter": "draft_model" needs a draft model: set "draft_model_path" in the runtime config`)
	}
	if it.drafter == draftEarlyExit && b.drafts.early == nil {
		return nil, status.Errorf(status.InvalidRequest, `request field "drafter": "early_exit" is not available on the %s backend`, b.device)
	}
	return it, nil
}

// limit caps a decoding sequence's tree to what its cache and max_tokens
// leave: d accepted nodes emit d+1 tokens and leave the cache d+1 entries
// longer, with the bonus token still to feed.
func (b *Backend) limit(s *runtime.Slot, q *sequence) {
	room := q.cache.Cap() - q.cache.Len()
	d := room - 2
	if mt := s.Request.MaxTokens; mt > 0 {
		d = min(d, mt-q.seq.Generated()-1)
	}
	q.seq.MaxNodes, q.seq.MaxDepth = room, 0
	if d <= 0 {
		q.seq.MaxNodes = 1
	} else {
		q.seq.MaxDepth = d
	}
}

// plan drafts and selects the trees of this iteration's decoding
// sequences; root-only trees when nothing speculates.
func (b *Backend) plan(now time.Time) []*spec.Tree {
	if len(b.seqs) == 0 {
		return nil
	}
	speculating := false
	for _, s := range b.seqs {
		speculating = speculating || !s.NoSpec
	}
	if speculating && b.spec.sched.Policy != spec.Incremental {
		// A verified token costs about the same compute whoever it serves,
		// while the time per emitted token shrinks as more sequences share
		// the pass: with n decoding sequences a node must be n times as
		// likely to pay off, roughly. Scale the cut so its complement
		// shrinks as 1/n.
		if !b.spec.budgetGiven && b.knee > 0 {
			// Past the knee every token costs its full compute, so extra
			// budget only pays while few sequences share the pass:
			// DefaultMinBudget for one, shrinking as 1/n to the knee (at
			// which n >= B leaves no draft node at all).
			b.sched.Config.Budget = max(b.knee, DefaultMinBudget/len(b.seqs))
		}
		if m := b.spec.sched.MinProb; m > 0 {
			b.sched.Config.MinProb = 1 - (1-m)/float64(len(b.seqs))
		}
		// The cost model's prices at this load: a plain pass over one
		// token per sequence, and what each extra verified token adds.
		n := len(b.seqs)
		plain, marginal := b.curve.at(n), (b.curve.at(2*n)-b.curve.at(n))/time.Duration(n)
		for _, s := range b.seqs {
			s.Payoff.PlainPrior = plain
		}
		for _, d := range []*modelDrafter{b.drafts.model, b.drafts.early} {
			if d != nil {
				d.plain, d.marginal = plain, marginal
			}
		}
		if trees, err := b.sched.Plan(b.seqs, now); err == nil {
			return trees
		}
		b.drafts.errs++
	}
	for len(b.root) < len(b.seqs) {
		b.root = append(b.root, spec.Tree{})
	}
	b.rootP = b.rootP[:0]
	for i, s := range b.seqs {
		b.root[i].Reset(s.Tokens[len(s.Tokens)-1])
		b.rootP = append(b.rootP, &b.root[i])
	}
	return b.rootP
}

// verify walks a decoding sequence's tree against the target's logits (one
// row per node) and leaves the accepted path and tokens in q.res. The
// sampler's penalty window follows the walk: a node's distribution is
// computed after accepting the tokens of its path, exactly as plain
// decoding would have, and the bonus token is accepted last.
func (b *Backend) verify(q *sequence, rows []float32) {
	vocab := b.model.Config().Vocab
	if q.tree.Len() == 1 {
		// Plain decoding: the sampler's own fast path and random stream.
		tok := q.sampler.Sample(rows[:vocab])
		q.sampler.Accept(tok)
		q.res.Path = append(q.res.Path[:0], 0)
		q.res.Tokens = append(q.res.Tokens[:0], tok)
		return
	}
	target := func(node int) spec.Dist {
		if node > 0 {
			q.sampler.Accept(q.tree.Nodes[node].Token)
		}
		d := q.sampler.Distribution(rows[node*vocab : (node+1)*vocab])
		b.dist.IDs = d.IDs
		b.dist.P = b.dist.P[:0]
		for _, p := range d.Probs {
			b.dist.P = append(b.dist.P, float32(p))
		}
		return b.dist
	}
	if q.greedy {
		spec.VerifyGreedy(q.tree, target, &q.res)
	} else {
		spec.VerifySample(q.tree, target, q.sampler, &q.res)
	}
	q.sampler.Accept(q.res.Bonus())
}
