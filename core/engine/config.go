package engine

import (
	"strings"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
)

// drafterKind names how a request's candidate trees are drafted.
type drafterKind int

const (
	draftNone drafterKind = iota
	draftNGram
	draftModel
	draftEarlyExit
)

var drafterNames = map[string]drafterKind{
	"none": draftNone, "ngram": draftNGram, "draft_model": draftModel, "early_exit": draftEarlyExit,
}

func (k drafterKind) String() string {
	for n, v := range drafterNames {
		if v == k {
			return n
		}
	}
	return "unknown"
}

func parseDrafter(where, name string) (drafterKind, error) {
	k, ok := drafterNames[name]
	if !ok {
		return 0, status.Errorf(status.InvalidRequest, `%s field "drafter": unknown drafter %q (want "ngram", "draft_model", "early_exit" or "none")`, where, name)
	}
	return k, nil
}

// specConfig is the speculation part of the runtime config.
type specConfig struct {
	drafter        drafterKind // the default for requests that name none
	draftModelPath string
	earlyExit      int  // layers of the early-exit self-draft (0: a third of the model's)
	draftVocab     int  // token ids the draft model proposes from (0: all; see DefaultDraftVocab)
	draftWindow    int  // a new draft cache's window (0: the whole context; see DefaultDraftWindow)
	adaptive       bool // requests speculate only while it pays (spec.Payoff)
	sched          spec.Config
	// prefill is how an iteration treats prompts: chunked beside the
	// decoding streams, or (serving.Preempt, "vllm") first, decoding waiting
	// until no prompt is left to prefill.
	prefill serving.Prefill
	// fcfsAdmit admits requests first come, first served, whatever their
	// TTFT SLOs (serving.AdmissionDeadline).
	fcfsAdmit bool
	// sloChunk sizes each iteration's prompt tokens to keep the decoding
	// streams on their TPOT SLOs (spec.PrefillChunk) instead of giving
	// every prefilling sequence a whole prefill_chunk.
	sloChunk bool
	// sloBatch lets decoding streams far ahead of their TPOT SLOs sit out
	// an iteration that would leave another short of its own
	// (spec.SitOut).
	sloBatch     bool
	budgetGiven  bool
	minProbGiven bool
	depthGiven   bool // "spec_max_depth" bounds every drafter (see ngramShape)
	// curves is where the forward pass's cost curve is kept between
	// processes ("curve_cache_dir"; curvecache.go).
	curves curveStore
	// idleCalibration measures a curve found neither in this process nor
	// on disk in the engine's idle moments, serving meanwhile with a quick
	// one ("calibration": "idle"; calibrate.go).
	idleCalibration bool
}

// DefaultDraftVocab is how many of the lowest token ids a draft model
// proposes from when the config's "draft_vocab" does not say: only those
// rows of its output head are computed. Byte-pair vocabularies number
// their tokens in merge order, so the low ids are the common ones: on the
// Qwen2.5 vocabulary (151,936 ids) the first 65,536 cover 98% of the
// tokens of this repository's Go, Python and Markdown, and computing only
// them cuts the head, a third of the 0.5B model's bytes per token, by 57%.
// A token above it is never drafted, only verified as the bonus.
const DefaultDraftVocab = 65536

// DefaultDraftWindow is how many of a sequence's latest tokens (besides
// its first DraftSink) a draft model's new cache starts from, when the
// config's "draft_window" does not say (see draftNet.window): long enough
// to keep an edit prompt's snippet, short enough that a long prompt's draft
// prefill does not eat the draft's gain (NOTES.md, "draft_window").
const DefaultDraftWindow = 128

// DefaultDrafter is the drafter of requests that do not name one, when the
// runtime config does not set "drafter" either. See the package doc for why.
const DefaultDrafter = "ngram"

// MaxSpecBudget bounds "spec_budget": tokens of one verify pass, each
// needing a logits row of the vocabulary's size.
const MaxSpecBudget = 1024

// takeSpecConfig reads the speculation fields of the runtime config.
func takeSpecConfig(cfg *loop.Config) (specConfig, error) {
	var sc specConfig
	drafter, policy, order := DefaultDrafter, "adaserve", "descending"
	budget, depth, width := 0, spec.DefaultMaxDepth, spec.DefaultMaxWidth
	minProb := 0.25
	sc.draftVocab = DefaultDraftVocab
	sc.draftWindow = DefaultDraftWindow
	sc.adaptive = true
	for _, f := range []struct {
		key string
		dst any
	}{
		{"drafter", &drafter}, {"draft_model_path", &sc.draftModelPath}, {"early_exit_layers", &sc.earlyExit},
		{"spec_budget", &budget}, {"spec_max_depth", &depth}, {"spec_max_width", &width},
		{"spec_policy", &policy}, {"spec_order", &order}, {"spec_min_prob", &minProb},
		{"draft_vocab", &sc.draftVocab}, {"draft_window", &sc.draftWindow}, {"spec_adaptive", &sc.adaptive},
	} {
		given, err := cfg.Extra.Take(f.key, f.dst)
		if err != nil {
			return sc, err
		}
		switch f.key {
		case "spec_min_prob":
			sc.minProbGiven = given
		case "spec_max_depth":
			sc.depthGiven = given
		}
	}
	var err error
	if sc.curves, err = takeCurveStore(cfg); err != nil {
		return sc, err
	}
	if sc.idleCalibration, err = takeCalibration(cfg); err != nil {
		return sc, err
	}
	if sc.drafter, err = parseDrafter("config", drafter); err != nil {
		return sc, err
	}
	p, err := serving.ByConfigName(policy)
	if err != nil {
		return sc, err
	}
	sc.sched.Policy, sc.prefill, sc.fcfsAdmit, sc.sloChunk, sc.sloBatch = p.Spec, p.Prefill, p.FCFSAdmit, p.SLOChunk, p.SLOBatch
	switch strings.ToLower(order) {
	case "descending", "desc":
		sc.sched.Order = spec.Descending
	case "ascending", "asc":
		sc.sched.Order = spec.Ascending
	default:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_order": want "descending" or "ascending", got %q`, order)
	}
	switch {
	case budget < 0 || budget > MaxSpecBudget:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_budget" must be in [1, %d] (or 0: calibrate), got %d`, MaxSpecBudget, budget)
	case depth < 1 || depth > 64:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_max_depth" must be in [1, 64], got %d`, depth)
	case width < 1 || width > 64:
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_max_width" must be in [1, 64], got %d`, width)
	case sc.draftVocab < 0:
		return sc, status.Errorf(status.InvalidRequest, `config field "draft_vocab" must be 0 (every token) or positive, got %d`, sc.draftVocab)
	case sc.draftWindow < 0:
		return sc, status.Errorf(status.InvalidRequest, `config field "draft_window" must be 0 (the whole context) or positive, got %d`, sc.draftWindow)
	case sc.earlyExit < 0:
		return sc, status.Errorf(status.InvalidRequest, `config field "early_exit_layers" must be positive, got %d`, sc.earlyExit)
	}
	if !(minProb >= 0 && minProb <= 1) { // NaN fails both
		return sc, status.Errorf(status.InvalidRequest, `config field "spec_min_prob" must be in [0, 1], got %g`, minProb)
	}
	sc.sched.MinProb = minProb
	sc.sched.Budget, sc.budgetGiven = budget, budget > 0
	sc.sched.MaxDepth, sc.sched.MaxWidth = depth, width
	return sc, nil
}
