package engine

import (
	"time"

	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
)

// setupSpec builds the scheduler, the drafters and the budget.
func (b *Backend) setupSpec(sc specConfig, path string, threads int, calibrating func(float64)) error {
	b.spec = sc
	b.sched.Config = sc.sched
	b.sched.Drafter = &b.drafts
	b.drafts.kind = map[*spec.Seq]drafterKind{}
	b.drafts.target = map[*spec.Seq]model.Cache{}
	b.drafts.ngramDeeper = !sc.depthGiven
	cfg := b.model.Config()
	if sc.draftModelPath != "" {
		dm, err := b.loadDraftModel(sc.draftModelPath, path, threads)
		if err != nil {
			return err
		}
		b.drafts.model = &modelDrafter{dm: dm, always: !sc.adaptive}
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
		early := &draftNet{m: b.model, layers: layers, catchUp: b.prefillChunk, owner: map[*spec.Seq]*draftState{},
			newCache: func() (model.Cache, error) { return pr.NewPrefixCache(ctx, layers) }}
		if _, onCPU := b.model.(model.CPU); onCPU {
			// The target's caches and the early exit's are kv.Caches of
			// one model: the draft's catch-ups copy (draftNet.borrow).
			early.borrow = func(s *spec.Seq, dst model.Cache, n int) bool {
				from, ok := b.drafts.target[s].(*kv.Cache)
				to, ok2 := dst.(*kv.Cache)
				return ok && ok2 && to.AppendFrom(from, n) == nil
			}
		}
		b.drafts.early = &modelDrafter{dm: early, always: !sc.adaptive}
		b.drafts.early.beam.Model = early
	}
	if sc.sched.Policy != spec.Incremental {
		// The forward pass's cost over 1 … 48 tokens prices speculation
		// (see plan). Its knee is the budget until the first plan: on a
		// CPU it comes early (two cores: compute-bound from about 3
		// tokens), so the budget is at least DefaultMinBudget there.
		n := curveTokens(b.device)
		// Batches no larger than the slots can run: at most their caches'
		// worth of transient caches beside them.
		roots := min(rootTokens(b.device), b.caches.size())
		// Measured once per model, machine, thread count and build, and
		// kept on disk (curvecache.go): a later start finds it there.
		// Idle-time passes run on the measurement's own goroutine: only
		// the CPU runner is free of a device context bound to the engine's
		// thread, so other devices measure at start.
		idle := sc.idleCalibration && b.device == "cpu"
		c, later := sc.curves.curve(b.device, b.file, path, threads, b.model, n, roots, calibrating, idle)
		b.installCurve(c)
		if later != nil {
			b.calibrating = startIdleCalibration(later)
		}
	}
	return nil
}

// DefaultMinBudget is the least verification budget B when it is
// calibrated rather than configured (see BenchmarkSpeculation).
const DefaultMinBudget = 12

// Budget is the verification budget B in use (configured or calibrated).
func (b *Backend) Budget() int { return b.sched.Config.Budget }

// specItem reads a request's speculation fields.
func (b *Backend) specItem(req *loop.Request, p sample.Params) (*item, error) {
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
