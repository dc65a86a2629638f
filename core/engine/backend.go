// Package engine is the device-independent engine behind every runtime
// backend: over a device's runner (core/cpu, core/cuda: the forward pass,
// its caches and heads, registered with Register) it tokenizes prompts
// (rendering chat messages with the model's template), gives each sequence
// a KV cache reserved up front, and advances every active sequence in one
// batched forward pass per iteration: prompt chunks of new requests and the
// next token of running ones travel together, so a long prompt never
// starves the streams already running. Speculation, sampling and
// verification are the same on every device.
//
// Runtime config fields (besides the runtime's own):
//
//	"model_path":     the GGUF file, or a model's name (core/registry:
//	                  "smollm2-135m" is its file in the model cache) (required)
//	"context_length": tokens per sequence, in [2, the model's trained context]
//	                  and at most MaxContext (default: the model's, at most 2048)
//	"prefill_chunk":  prompt tokens a sequence may prefill per iteration
//	                  (128; at most MaxPrefillChunk, and the context)
//	"threads":        engine threads (default: GOMAXPROCS; at most MaxThreads)
//	"chat_template":  Jinja text that renders "messages" instead of the
//	                  model's tokenizer.chat_template (at most MaxChatTemplate bytes)
//	"drafter":        default drafter: "ngram" (default), "draft_model", "early_exit", "none"
//	                  (a model drafter's requests verify the n-gram index's tree
//	                  instead on steps where it is expected to be faster)
//	"draft_model_path": a GGUF (or a model's name) sharing the target's
//	                  vocabulary (checked at load)
//	"draft_vocab":    token ids the draft model proposes from, the lowest ones
//	                  (DefaultDraftVocab; 0: all): only those head rows are computed
//	"draft_window":   tokens of context a draft model starts a request from: the
//	                  first few and the latest draft_window (DefaultDraftWindow;
//	                  0: the whole prompt, a draft prefill before the first draft)
//	"early_exit_layers": layers of the early-exit self-draft (a third of the model's)
//	"spec_budget":    tokens per verify pass, roots included (default: from the
//	                  forward pass's cost measured at start-up, the largest pass
//	                  whose next token still costs less than a token is worth)
//	"spec_max_depth", "spec_max_width": candidate tree shape limits (8, 2; the
//	                  n-gram index drafts to depth 12 unless spec_max_depth is given)
//	"spec_min_prob":  least path probability worth verifying for one stream, scaled
//	                  for n streams (default: priced from the measured cost, the
//	                  marginal token's cost over a token's worth)
//	"spec_adaptive":  false: requests speculate even where it is measured not to pay
//	                  (default true: spec.Payoff decodes them plainly for a while;
//	                  a model-drafted request's n-gram stand-ins go on: Standby)
//	"spec_policy":    "adaserve" (default), "equal_greedy", "global_greedy",
//	                  "specinfer" (a fixed tree), or a baseline without
//	                  speculation: "incremental" (prompt chunks beside the
//	                  decoding streams, admission by TTFT deadline),
//	                  "sarathi" or "fcfs" (the same, admitted first come,
//	                  first served), "vllm" (first come, first served, and
//	                  an iteration with a prompt to prefill runs only prompt
//	                  chunks: decoding waits); spec/sim models the same ones
//	"spec_order":     AdaServe SLO-phase order, "descending" (default) or "ascending"
//
// # Memory
//
// New refuses, before allocating anything, a configuration that would
// reserve more than the runtime's memory budget (loop.Config.MemoryBudget:
// "memory_budget_bytes", or 75% of physical memory or of the cgroup limit).
// It counts the model file (mapped: every pass reads all of it), the packed
// weights, one KV cache per slot (layers × kv heads × context × head dim ×
// 2 × 2 bytes), the early-exit self-draft's caches, a draft model's file,
// weights and caches, and the scratch of the largest forward pass; the
// error is status.Capacity with the total, the budget and that breakdown.
// Close returns all of it: the KV caches, the models' worker goroutines
// and their packed weights (unmapped at once), and the file mappings.
//
// Prompts. Prepare tokenizes on the submitting goroutine, but first
// refuses a prompt whose byte count alone proves it cannot fit (more than
// (context-1) × tokenizer.MaxInputBytesPerToken bytes), so that submitting
// never tokenizes more than that, whatever the prompt's size.
//
// Request fields it adds:
//
//	"repetition_penalty": 0 or 1 (off), or in [0.01, 100]
//	"presence_penalty", "frequency_penalty": in [-100, 100] (0: off)
//	"repeat_last_n":      the penalty window, in [0, 1048576] (0: 64)
//	"drafter", "speculate": greedy requests speculate with the default
//	                      drafter unless they say "speculate": false;
//	                      sampling requests only when they ask
//
// Structured output ("response_format", "grammar"; see core/grammar): every
// sampled row is masked to the tokens that keep the output inside the
// grammar, end tokens only where it is complete; drafted tokens the grammar
// refuses are pruned before verification, and verification masks each node
// by its path's grammar state, so constrained speculation is exact too.
//
// Temperature: 0 is greedy, and so is any temperature below 1e-5
// (sample.MinTemperature): 1/T would overflow for subnormal values, and
// long before that sampling is greedy in all but cost. Such a request
// decodes and speculates exactly as a greedy one. Speculation is exact:
// greedy output is token-identical to plain decoding and sampling keeps the
// target distribution (spec.VerifySample).
package engine

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmstream/lmstream/core/chat"
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/streaming"
)

// Backend runs one model for every slot of a runtime.
type Backend struct {
	file      *gguf.File
	draftFile *gguf.File   // a separate draft model's file
	device    string       // the runner's device, "cpu" or another backend's name
	open      OpenRunner   // loads a model (the target, and a draft model) on the device
	model     model.Runner // the target
	tok       *tokenizer.Tokenizer
	template  *chat.Model // nil when the model has none or nothing can render it
	tmplErr   error       // why template is nil, for requests with messages
	info      loop.ModelInfo

	context      int
	prefillChunk int
	caches       []model.Cache // free caches, reserved at start
	reserved     int64         // bytes the memory budget was checked for

	// maxTokenBytes bounds the prompt bytes one token can stand for
	// (tokenizer.MaxInputBytesPerToken; 0: no bound), so that a prompt too
	// long for the context is refused without tokenizing it.
	maxTokenBytes int
	// tokenized counts the prompt bytes handed to the tokenizer (tests
	// check that a hopeless prompt costs none).
	tokenized atomic.Int64

	spec    specConfig
	sched   spec.Scheduler
	drafts  drafters
	seqs    []*spec.Seq // decoding sequences of this iteration
	idle    []*spec.Seq // decoding sequences sitting this iteration out (sitOut)
	sat     []bool      // spec.SitOut's marks, by b.seqs before sitOut
	queue   spec.Queue  // what waits for a slot (WatchQueue) and how long slots are held
	floor   int         // the least prompt chunk of this iteration (promptFloor)
	prompts []spec.Prompt
	// prefilling are this iteration's prefilling slots, by TTFT deadline
	// (allotPrefill).
	prefilling []*loop.Slot
	trees      []*spec.Tree
	root       []spec.Tree // root-only trees when nothing speculates
	rootP      []*spec.Tree
	dist       spec.Dist // the target distribution handed to verification
	timings    Timings
	curve      *costCurve    // the forward pass's measured cost for 1 … curveTokens tokens (nil: none)
	cost       spec.PassCost // the passes priced from curve (setCurve)
	// plainPass[n] is the recent forward pass over n decoding roots alone
	// (passCharge's base when it has one).
	plainPass []time.Duration
	floors    []float64 // the scheduler's per-position floors (spec.Floors)

	trieOnce sync.Once
	trie     *grammar.Trie // the vocabulary's token trie, for constrained requests

	// Reused across iterations.
	batch  model.Batch
	logits []float32
	ids    []int32 // each logits row's argmax, when the runner hands back only those
	argID  [1]int32
	argP   [1]float32 // with argID, a node's point-mass target in verifyArgmax
	rows   []int      // per slot: its first logits row in this iteration, or -1
	ident  []int      // 0, 1, 2, ...: commit every scratch entry of a chain, in order
}

// Hard limits of the engine's config fields (see the package doc).
// Within them, the memory budget decides what fits.
const (
	// MaxContext bounds "context_length" whatever the model's metadata
	// claims: a GGUF's context_length is untrusted, and positions beyond a
	// million are far past anything this engine serves.
	MaxContext      = 1 << 20
	MaxPrefillChunk = 1 << 16
	MaxThreads      = 1024
	// MaxChatTemplate bounds a "chat_template" override; real templates
	// are a few kilobytes.
	MaxChatTemplate = 1 << 20
)

// The shares of creation's progress where the weights and the speculation
// stages start.
const (
	weightsStart = 0.05
	specStart    = 0.3
)

// New loads the model named by the config's "model_path" with open,
// once the memory that the configuration reserves is known to fit its
// budget, and runs it through this package's engine: batching, speculation,
// sampling and verification are the same on every device. device names the
// backend in messages and calibration keys.
func New(cfg *loop.Config, device string, open OpenRunner) (loop.Backend, error) {
	var path string
	var override *string
	ctx, chunk, threads := 0, 128, runtime.GOMAXPROCS(0)
	for _, f := range []struct {
		key string
		dst any
	}{{"model_path", &path}, {"context_length", &ctx}, {"prefill_chunk", &chunk}, {"threads", &threads}, {"chat_template", &override}} {
		if _, err := cfg.Extra.Take(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if override != nil {
		// Checked before the model loads: a broken override should not
		// cost a model load to report.
		if len(*override) > MaxChatTemplate {
			return nil, cfg.Extra.Errorf("chat_template", "has %d bytes; at most %d are allowed", len(*override), MaxChatTemplate)
		}
		if _, err := chat.ForModel(*override, "", ""); err != nil {
			return nil, cfg.Extra.Errorf("chat_template", "cannot be rendered: %v", err)
		}
	}
	switch {
	case path == "":
		return nil, status.Errorf(status.InvalidRequest, `config: the %s backend needs "model_path" (a GGUF file, or a model's name: %s)`, device, strings.Join(registry.Names(), ", "))
	case chunk < 1 || chunk > MaxPrefillChunk:
		return nil, status.Errorf(status.InvalidRequest, `config field "prefill_chunk" must be in [1, %d], got %d`, MaxPrefillChunk, chunk)
	case threads < 1 || threads > MaxThreads:
		return nil, status.Errorf(status.InvalidRequest, `config field "threads" must be in [1, %d], got %d`, MaxThreads, threads)
	case ctx < 0 || ctx == 1 || ctx > MaxContext:
		return nil, status.Errorf(status.InvalidRequest, `config field "context_length" must be in [2, %d] (or 0: the model's, at most 2048), got %d`, MaxContext, ctx)
	}
	sc, err := takeSpecConfig(cfg)
	if err != nil {
		return nil, err
	}
	// A model's name stands for its file in the model cache.
	if path, err = registry.Resolve(path); err != nil {
		return nil, err
	}
	if sc.draftModelPath != "" {
		if sc.draftModelPath, err = registry.Resolve(sc.draftModelPath); err != nil {
			return nil, err
		}
	}
	// The fractions are rough shares of the time creation takes: packing
	// the weights, then measuring the forward pass (calibration).
	cfg.Report(loop.StageOpen, 0)
	st, err := os.Stat(path)
	if err != nil {
		return nil, status.Errorf(status.Model, "model %s: %v (a model's name works too: %s; `lmstream pull NAME` fetches it)", path, errors.Unwrap(err), strings.Join(registry.Names(), ", "))
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, status.Errorf(status.Model, "%v", err)
	}
	plan, err := planMemory(f, st.Size(), path, ctx, chunk, cfg.MaxSlots, sc)
	if err == nil {
		err = plan.res.Check(cfg.MemoryBudget())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	cfg.Report(loop.StageWeights, weightsStart)
	b, err := load(f, device, open, plan.context, min(chunk, plan.context), plan.pass, threads, cfg.MaxSlots, override)
	if err != nil {
		f.Close()
		return nil, err
	}
	b.reserved = plan.res.Total()
	cfg.Report(loop.StageSpec, specStart)
	// Measuring the forward pass's cost (once per model and thread count
	// in a process) takes most of the rest.
	calibrating := func(f float64) { cfg.Report(loop.StageCalibrate, specStart+0.69*f) }
	if err := b.setupSpec(sc, path, threads, calibrating); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// load builds the backend over an open file; on error the caller closes f,
// and everything load allocated is already freed. pass is the most tokens
// a slot's pass takes (its caches' local layers are sized for it).
func load(f *gguf.File, device string, open OpenRunner, ctx, chunk, pass, threads, slots int, override *string) (*Backend, error) {
	m, err := open(f, threads)
	if err != nil {
		if status.CodeOf(err) != status.Internal {
			return nil, err // the device said what failed (LMS_ERR_BACKEND: no driver, ...)
		}
		return nil, status.Errorf(status.Model, "%v", err)
	}
	// LongRoPE models rotate by other factors past their original context.
	if cs, ok := m.(interface{ SetContext(int) }); ok {
		cs.SetContext(ctx)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		m.Close()
		return nil, status.Errorf(status.Model, "%v", err)
	}
	if tok.Size() != m.Config().Vocab {
		m.Close()
		return nil, status.Errorf(status.Model, "tokenizer has %d tokens but the model's output has %d", tok.Size(), m.Config().Vocab)
	}
	b := &Backend{file: f, device: device, open: open, model: m, tok: tok, context: ctx, prefillChunk: chunk,
		maxTokenBytes: tok.MaxInputBytesPerToken()}
	b.info = modelInfo(f, m.Config(), tok, ctx)
	text, err := f.String("tokenizer.chat_template")
	if override != nil {
		text, err = *override, nil
	}
	b.info.ChatTemplate = text
	if fam := chat.ForArch(m.Config().Arch); err != nil && fam != nil {
		b.template = chat.ForFamily(fam) // no template in the file, but a known family (Gemma 3)
		b.info.ChatRenderer = fam.Name()
	} else if err != nil {
		b.tmplErr = fmt.Errorf("the model has no chat template; send a raw \"prompt\" instead, or set \"chat_template\" in the runtime config")
	} else if b.template, err = chat.ForModel(text, tokenText(tok, tok.BOS()), tokenText(tok, tok.EOS())); err != nil {
		b.tmplErr = err
	} else {
		b.info.ChatRenderer = b.template.Name()
	}
	for range slots {
		c, err := newSlotCache(m, ctx, pass)
		if err != nil {
			m.Close()
			return nil, status.Errorf(status.Capacity, "kv cache: %v", err)
		}
		b.caches = append(b.caches, c)
	}
	return b, nil
}

func (b *Backend) Vocabulary() streaming.Vocabulary { return b.tok }

func (b *Backend) EndOfGeneration(id int32) bool { return b.tok.EOG(id) }

// AdmitFCFS asks the runtime to admit requests first come, first served
// under the policies that model such a baseline ("sarathi", "vllm").
func (b *Backend) AdmitFCFS() bool { return b.spec.fcfsAdmit }

// preempting reports whether decoding waits this iteration: under
// serving.Preempt ("vllm") a prompt still to prefill runs first, alone.
func (b *Backend) preempting(slots []*loop.Slot) bool {
	if b.spec.prefill != serving.Preempt {
		return false
	}
	for _, s := range slots {
		if !s.State.(*sequence).decoding {
			return true
		}
	}
	return false
}

// sitOut takes out of b.seqs, into b.idle, the decoding sequences that
// sit this iteration out under AdaServe (specConfig.sloBatch,
// spec.SitOut): they get no tokens from it, so that the requests short of
// their TPOT SLO get theirs sooner. b.seqs must hold every decoding
// sequence of slots, in order.
func (b *Backend) sitOut(slots []*loop.Slot, now time.Time) {
	b.idle = b.idle[:0]
	if !b.spec.sloBatch || b.curve == nil || len(b.seqs) < 2 {
		return
	}
	b.queue.Holds = b.queue.Holds[:0]
	if len(b.queue.Waiting) > 0 {
		for _, s := range slots {
			b.queue.Holds = append(b.queue.Holds, b.holds(s, s.State.(*sequence)))
		}
	}
	b.queue.Chunk = b.prefillChunk
	var k int
	b.sat, k = spec.SitOut(b.cost, b.seqs, b.floor, now, b.sched.Timing.Estimate(), &b.queue, b.sat)
	if k == 0 {
		return
	}
	j := 0
	for _, s := range slots {
		if q := s.State.(*sequence); q.decoding {
			q.idle = b.sat[j]
			j++
		}
	}
	kept := b.seqs[:0]
	for i, s := range b.seqs {
		if b.sat[i] {
			b.idle = append(b.idle, s)
		} else {
			kept = append(kept, s)
		}
	}
	b.seqs = kept
}

// holds is how many iterations at most slot s keeps its sequence q if it
// runs every iteration and emits a token each (spec.Queue.Holds): its
// prompt's chunks left, then its tokens to max_tokens, or to a full cache
// without one.
func (b *Backend) holds(s *loop.Slot, q *sequence) int {
	n := 0
	if !q.decoding {
		n = (len(s.Prompt) - q.prefill + b.prefillChunk - 1) / b.prefillChunk
	}
	out := q.seq.Generated()
	left := b.context - len(s.Prompt) - out
	if m := s.Request.MaxTokens; m > 0 {
		left = min(left, m-out)
	}
	return n + max(0, left)
}

// WatchesQueue implements loop.QueueWatcher: only sitting out
// (AdaServe) weighs the queue.
func (b *Backend) WatchesQueue() bool { return b.spec.sloBatch }

// WatchQueue implements loop.QueueWatcher, keeping the waiting
// requests for sitOut.
func (b *Backend) WatchQueue(waiting []loop.Queued) {
	b.queue.Waiting = b.queue.Waiting[:0]
	for _, w := range waiting {
		b.queue.Waiting = append(b.queue.Waiting, spec.Waiting{Deadline: time.Unix(0, w.Deadline), Prompt: w.Prompt})
	}
}

// prefillWhole is the prompt tokens of an iteration that gives every
// prefilling slot a whole prefill_chunk.
func (b *Backend) prefillWhole(slots []*loop.Slot) int {
	n := 0
	for _, s := range slots {
		if !s.State.(*sequence).decoding {
			n++
		}
	}
	return n * b.prefillChunk
}

// prefillBudget is how many prompt tokens this iteration may take over all
// prefilling slots: a whole prefill_chunk each, or under AdaServe
// (specConfig.sloChunk) what keeps the decoding streams on their TPOT SLOs,
// those sitting out included (spec.PrefillChunkBeside, priced from the
// forward pass's measured curve; at least spec.ChunkFloor of the whole).
// b.seqs and b.idle must hold this iteration's decoding sequences.
func (b *Backend) prefillBudget(slots []*loop.Slot, now time.Time) int {
	whole := b.prefillWhole(slots)
	if !b.spec.sloChunk || b.curve == nil || whole == 0 {
		return whole
	}
	return spec.PrefillChunkBeside(b.cost, b.seqs, b.idle, b.sched.Timing.Estimate(), now, whole, b.floor)
}

// promptFloor sets b.floor, the least prompt chunk of this iteration
// (spec.ChunkFloor; under AdaServe spec.PromptFloor: what the prompts
// being prefilled need for their TTFT deadlines). b.seqs must hold this
// iteration's decoding sequences.
func (b *Backend) promptFloor(slots []*loop.Slot, now time.Time) {
	whole := b.prefillWhole(slots)
	b.floor = spec.ChunkFloor(whole)
	if !b.spec.sloChunk || b.curve == nil || whole == 0 {
		return
	}
	b.prompts = b.prompts[:0]
	for _, s := range slots {
		q := s.State.(*sequence)
		if q.decoding {
			continue
		}
		var deadline time.Time
		if slo := s.Request.TTFTSLOMs; slo > 0 {
			deadline = time.Unix(0, serving.TTFTDeadline(s.Submitted(), slo))
		}
		b.prompts = append(b.prompts, spec.Prompt{Left: len(s.Prompt) - q.prefill, Deadline: deadline})
	}
	t := max(b.cost.Pass(len(b.seqs), b.cost.BeyondAll(b.seqs), 0, 1), b.sched.Timing.Estimate())
	b.floor = spec.PromptFloor(whole, b.prompts, t, now)
}

// allotPrefill shares this iteration's budget of prompt tokens among the
// prefilling slots, earliest TTFT deadline first, as the runtime admits
// them, at most prefill_chunk each (sequence.chunk). Under AdaServe the
// budget can be a few tokens (spec.PromptFloor), and those belong to the
// prompt whose first token is due soonest.
func (b *Backend) allotPrefill(slots []*loop.Slot, budget int) {
	b.prefilling = b.prefilling[:0]
	for _, s := range slots {
		if q := s.State.(*sequence); !q.decoding {
			b.prefilling = append(b.prefilling, s)
		}
	}
	deadline := func(s *loop.Slot) int64 { return serving.TTFTDeadline(s.Submitted(), s.Request.TTFTSLOMs) }
	slices.SortStableFunc(b.prefilling, func(x, y *loop.Slot) int { return cmp.Compare(deadline(x), deadline(y)) })
	for _, s := range b.prefilling {
		q := s.State.(*sequence)
		q.chunk = min(b.prefillChunk, budget, len(s.Prompt)-q.prefill)
		budget -= q.chunk
	}
}

// Close frees everything the backend allocated: the KV caches (its own and
// the drafters'), the models' worker pools and packed weights, and the
// mappings of the model files. The runtime calls it from its engine
// goroutine once every slot is released, so no forward pass can be running.
func (b *Backend) Close() error {
	b.caches = nil
	if d := b.drafts.model; d != nil {
		d.dm.free = nil
		clear(d.dm.owner)
		if d.dm.m != b.model {
			d.dm.m.Close() // its own model, loaded from draftFile
		}
	}
	if d := b.drafts.early; d != nil {
		d.dm.free = nil
		clear(d.dm.owner)
	}
	b.model.Close()
	b.logits, b.batch = nil, model.Batch{}
	err := b.file.Close()
	if b.draftFile != nil {
		b.draftFile.Close()
	}
	return err
}

// item is one prepared batch item.
type item struct {
	grammar *grammar.Grammar // nil: unconstrained
	params  sample.Params
	drafter drafterKind // draftNone: no speculation
	slo     time.Duration
	// logprobs: report each token's logprob and top alternatives
	// (logprobs.go); topLogprobs of them.
	logprobs    bool
	topLogprobs int
}

// sequence is a slot's state.
type sequence struct {
	cache    model.Cache
	sampler  *sample.Sampler
	greedy   bool
	kind     drafterKind
	prefill  int   // prompt tokens already in the cache
	chunk    int   // prompt tokens this iteration prefills (allotPrefill)
	next     int32 // the token to feed next, once the prompt is in
	decoding bool
	idle     bool        // sitting this iteration out (Backend.sitOut)
	batched  int         // tokens this sequence has in the current batch
	tree     *spec.Tree  // the tree verified this iteration (decoding)
	planned  int         // its index among the scheduler's sequences (spec.Scheduler.ObserveEmitted)
	seq      spec.Seq    // prompt and output, for the drafters and the scheduler
	con      *constraint // the request's grammar; nil: unconstrained
	res      spec.Result
	out      []int32 // this iteration's tokens, handed to the runtime

	// For a request with logprobs: its top-k, each tree node's row
	// statistics and penalised-row copies (by node), and this iteration's
	// entries, handed to the runtime.
	logprobs bool
	topK     int
	stats    []rowStats
	owns     [][]float32
	lp       []streaming.TokenLogprob
}

// measure records the distribution at tree node (or the prefill's last
// position, node 0) for the logprobs of the token chosen there: row is
// what the sampler draws from (masked when constrained), raw the logits
// buffer's row. Call it with the sampler's penalty window as that
// position's token will be sampled under.
func (q *sequence) measure(node int, row, raw []float32) {
	for len(q.stats) <= node {
		q.stats = append(q.stats, rowStats{})
		q.owns = append(q.owns, nil)
	}
	q.stats[node].measure(q.sampler.Penalised(row), raw, &q.owns[node], q.topK)
}

// logprobsOf builds the entries of the tokens emitted along path (token k
// chosen at node path[k]), or nil for a request without logprobs.
func (q *sequence) logprobsOf(path []int, tokens []int32) []streaming.TokenLogprob {
	if !q.logprobs {
		return nil
	}
	q.lp = q.lp[:0]
	for k, node := range path {
		q.lp = append(q.lp, q.stats[node].entry(tokens[k]))
	}
	return q.lp
}

// Prepare renders and tokenizes each prompt, and checks it fits.
func (b *Backend) Prepare(req *loop.Request) ([]loop.Prepared, error) {
	p := sample.Params{
		Temperature: req.Temperature, TopK: req.TopK, TopP: req.TopP, MinP: req.MinP,
		Seed: req.Seed, HasSeed: req.HasSeed,
		RepetitionPenalty: 1, RepeatLastN: 64,
	}
	// The ranges are sample's (see its constants); checking them here
	// names the request field and its offset. The penalty window's memory
	// grows with the tokens generated, never with repeat_last_n itself.
	for _, f := range []struct {
		key    string
		dst    *float64
		lo, hi float64
	}{
		{"repetition_penalty", &p.RepetitionPenalty, 0, sample.MaxRepetitionPenalty},
		{"presence_penalty", &p.PresencePenalty, -sample.MaxAdditivePenalty, sample.MaxAdditivePenalty},
		{"frequency_penalty", &p.FrequencyPenalty, -sample.MaxAdditivePenalty, sample.MaxAdditivePenalty},
	} {
		if _, err := jsonstrict.TakeIn(req.Extra, f.key, f.dst, f.lo, f.hi); err != nil {
			return nil, err
		}
	}
	if r := p.RepetitionPenalty; r != 0 && r < sample.MinRepetitionPenalty {
		return nil, req.Extra.Errorf("repetition_penalty", "must be 0 or 1 (off) or in [%g, %g], got %g", sample.MinRepetitionPenalty, float64(sample.MaxRepetitionPenalty), r)
	}
	if _, err := jsonstrict.TakeIn(req.Extra, "repeat_last_n", &p.RepeatLastN, 0, sample.MaxRepeatLastN); err != nil {
		return nil, err
	}
	smp, err := sample.New(p, b.tok.Size())
	if err != nil {
		return nil, status.Errorf(status.InvalidRequest, "request: %v", err)
	}
	// The canonical parameters: a temperature below sample.MinTemperature
	// is 0 here, so the slot decodes and speculates as the greedy request
	// it is.
	p = smp.Params()
	it, err := b.specItem(req, p)
	if err != nil {
		return nil, err
	}
	it.logprobs, it.topLogprobs = req.Logprobs, req.TopLogprobs
	if req.Grammar != nil {
		it.grammar = req.Grammar
		b.vocabTrie() // built once, on the first constrained request
	}
	var texts []string
	if len(req.Messages) > 0 {
		text, err := b.RenderChat(req.Messages, true)
		if err != nil {
			return nil, err
		}
		texts = []string{text}
	} else {
		texts = req.Prompts
	}
	out := make([]loop.Prepared, len(texts))
	for i, text := range texts {
		if err := b.cannotFit(i, text); err != nil {
			return nil, err
		}
		// Control tokens written in a prompt (<|im_start|>) are honoured,
		// as raw prompts are how callers bypass the chat template.
		b.tokenized.Add(int64(len(text)))
		ids := b.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
		switch {
		case len(ids) == 0:
			return nil, status.Errorf(status.InvalidRequest, "request: prompt %d is empty", i)
		case len(ids) >= b.context:
			return nil, status.Errorf(status.PromptTooLong, "request: prompt %d has %d tokens; the context holds %d (with room for at least one generated token)", i, len(ids), b.context)
		}
		out[i] = loop.Prepared{Prompt: ids, Data: seeded(it, i)}
	}
	return out, nil
}

// seeded is batch item i's settings: with a seed, item i samples with
// seed+i (modulo 2^64), so a request with one prompt repeated (OpenAI's
// "n") gets distinct choices that are still reproducible, and item 0 is
// the same as that prompt sent alone with the same seed.
func seeded(it *item, i int) *item {
	if i == 0 || !it.params.HasSeed {
		return it
	}
	c := *it
	c.params.Seed += uint64(i)
	return &c
}

// cannotFit refuses, before tokenizing it, a prompt whose bytes alone prove
// it has too many tokens for the context: no token stands for more than
// maxTokenBytes of them. Prepare runs on the submitting thread, and
// tokenizing costs ~0.3 µs a byte (a 10 MB prompt blocked lms_submit for
// 2.8 s), so this bounds submit's tokenizing to context × maxTokenBytes
// bytes whatever the prompt's size.
func (b *Backend) cannotFit(i int, text string) error {
	if b.maxTokenBytes <= 0 || int64(len(text)) <= int64(b.context-1)*int64(b.maxTokenBytes) {
		return nil
	}
	least := (int64(len(text)) + int64(b.maxTokenBytes) - 1) / int64(b.maxTokenBytes)
	return status.Errorf(status.PromptTooLong, "request: prompt %d has %d bytes, so at least %d tokens (a token covers at most %d bytes); the context holds %d (with room for at least one generated token)",
		i, len(text), least, b.maxTokenBytes, b.context)
}

// Open gives the slot a reserved cache.
func (b *Backend) Open(s *loop.Slot) error {
	if len(b.caches) == 0 {
		return status.Errorf(status.Capacity, "no free KV cache (more slots than caches)")
	}
	it := s.Data.(*item)
	smp, err := sample.New(it.params, b.model.Config().Vocab)
	if err != nil {
		return status.Errorf(status.InvalidRequest, "%v", err)
	}
	c := b.caches[len(b.caches)-1]
	b.caches = b.caches[:len(b.caches)-1]
	c.Truncate(0)
	q := &sequence{cache: c, sampler: smp, greedy: it.params.Temperature == 0, kind: it.drafter,
		logprobs: it.logprobs, topK: it.topLogprobs}
	if it.grammar != nil {
		q.con = newConstraint(it.grammar, b.vocabTrie())
	}
	q.seq = spec.Seq{Tokens: append(make([]int32, 0, len(s.Prompt)+256), s.Prompt...), Prompt: len(s.Prompt),
		SLO: it.slo, NoSpec: it.drafter == draftNone, Payoff: spec.Payoff{Always: !b.spec.adaptive}}
	b.drafts.kind[&q.seq] = it.drafter
	b.drafts.target[&q.seq] = c
	s.State = q
	return nil
}

func (b *Backend) Release(s *loop.Slot) {
	if q, ok := s.State.(*sequence); ok && q.cache != nil {
		b.caches = append(b.caches, q.cache)
		q.cache = nil
		b.drafts.forget(&q.seq)
		for _, d := range []*modelDrafter{b.drafts.model, b.drafts.early} {
			if d != nil {
				d.dm.release(&q.seq)
			}
		}
	}
	s.State = nil
}

// allRawArgmax reports whether every slot that gets logits this step picks
// its tokens as the plain argmax of them (sample.Sampler.RawArgmax, and no
// grammar constraining it) and needs nothing else from them (no logprobs).
func (b *Backend) allRawArgmax(slots []*loop.Slot) bool {
	for i, s := range slots {
		q := s.State.(*sequence)
		if b.rows[i] >= 0 && (q.con != nil || q.logprobs || !q.sampler.RawArgmax()) {
			return false // a constrained row is masked before its argmax; logprobs need the row
		}
	}
	return true
}

// Step builds one batch from every slot — the next prompt chunk of those
// still prefilling, the token tree of those decoding (the newest token as
// its root, and what the drafter proposed and the scheduler selected below
// it; the root alone without speculation) — runs one forward pass, verifies
// each tree against the target's logits, commits the accepted path in the
// KV cache and hands back the accepted burst. Under "vllm" (serving.Preempt)
// an iteration with a prompt to prefill runs only prompt chunks: the
// decoding sequences get no tokens until every prompt is in.
func (b *Backend) Step(slots []*loop.Slot, res []loop.StepResult) {
	t0 := time.Now()
	bt := &b.batch
	bt.Tokens, bt.Cache, bt.Pos, bt.Parent, bt.Logits = bt.Tokens[:0], bt.Cache[:0], bt.Pos[:0], bt.Parent[:0], bt.Logits[:0]
	b.rows = b.rows[:0]

	// Draft and select for the decoding sequences.
	preempt := b.preempting(slots)
	b.seqs = b.seqs[:0]
	for _, s := range slots {
		q := s.State.(*sequence)
		q.idle = false
		if q.decoding && !preempt {
			b.limit(s, q)
			b.seqs = append(b.seqs, &q.seq)
		}
	}
	b.promptFloor(slots, t0)
	b.sitOut(slots, t0)
	trees := b.plan(t0)
	b.pruneTrees(slots, trees)
	t1 := time.Now()

	b.allotPrefill(slots, b.prefillBudget(slots, t0))
	nLogits, di := 0, 0
	for _, s := range slots {
		q := s.State.(*sequence)
		q.batched = 0
		row := -1
		if !q.decoding {
			end := q.prefill + q.chunk
			for i := q.prefill; i < end; i++ {
				parent := -1
				if i > q.prefill {
					parent = len(bt.Tokens) - 1 // a chain: each prompt token follows the previous one
				}
				bt.Tokens = append(bt.Tokens, s.Prompt[i])
				bt.Cache = append(bt.Cache, q.cache)
				bt.Pos = append(bt.Pos, i)
				bt.Parent = append(bt.Parent, parent)
				bt.Logits = append(bt.Logits, i == len(s.Prompt)-1)
				q.batched++
			}
			if end == len(s.Prompt) {
				row = nLogits
				nLogits++
			}
		} else if !preempt && !q.idle {
			// Every node of the tree, root included, gets logits: the
			// root's give the first token, each node's the one after it.
			q.tree, q.planned = trees[di], di
			di++
			off := len(bt.Tokens)
			bt.Tokens, bt.Parent, bt.Pos = q.tree.AppendBatch(bt.Tokens, bt.Parent, bt.Pos, off, q.cache.Len())
			for range q.tree.Len() {
				bt.Cache = append(bt.Cache, q.cache)
				bt.Logits = append(bt.Logits, true)
			}
			q.batched = q.tree.Len()
			row = nLogits
			nLogits += q.tree.Len()
		}
		b.rows = append(b.rows, row)
	}
	vocab := b.model.Config().Vocab
	// A pass whose every row is decoded greedily needs each row's argmax
	// alone, which a device runner can hand back instead of the rows.
	var logits []float32
	var ids []int32
	var err error
	if ar, ok := b.model.(model.ArgmaxRunner); ok && nLogits > 0 && b.allRawArgmax(slots) {
		if cap(b.ids) < nLogits {
			b.ids = make([]int32, nLogits)
		}
		ids = b.ids[:nLogits]
		err = ar.ForwardArgmax(bt, ids)
	} else {
		if cap(b.logits) < nLogits*vocab {
			b.logits = make([]float32, nLogits*vocab)
		}
		logits = b.logits[:nLogits*vocab]
		err = b.model.Forward(bt, logits)
	}
	if err != nil {
		for i := range slots {
			res[i].Err = status.Errorf(status.Backend, "forward pass: %v", err)
		}
		return
	}
	t2 := time.Now()
	charge := b.speculationCharge(slots, len(bt.Tokens), t0, t1, t2)
	// Nothing above changed a sequence: the forward pass wrote only cache
	// scratch, the drafters only their own state. From here on, state
	// moves (a panic above is retry-safe).
	for i, s := range slots {
		q := s.State.(*sequence)
		if q.decoding && b.rows[i] < 0 {
			continue // preempted by a prefill, or sitting out: nothing ran
		}
		if !q.decoding {
			for len(b.ident) < q.batched {
				b.ident = append(b.ident, len(b.ident))
			}
			if err := q.cache.Commit(b.ident[:q.batched]); err != nil {
				res[i].Err = status.Errorf(status.Internal, "kv cache: %v", err)
				continue
			}
			q.prefill = q.cache.Len()
			if q.prefill < len(s.Prompt) {
				continue // more prompt next iteration; no token yet
			}
			q.decoding = true
			var tok int32
			if ids != nil {
				tok = ids[b.rows[i]]
			} else {
				raw := logits[b.rows[i]*vocab : (b.rows[i]+1)*vocab]
				ok := true
				switch {
				case q.con != nil && q.logprobs:
					// The logprobs are of the masked row, so it is made whole.
					var row []float32
					if row, ok = q.con.logits(q.con.state, raw); ok {
						q.measure(0, row, raw)
						tok = q.sampler.Sample(row)
					}
				case q.con != nil:
					tok, ok = q.con.sample(q.con.state, raw, q.sampler)
				default:
					if q.logprobs {
						q.measure(0, raw, raw)
					}
					tok = q.sampler.Sample(raw)
				}
				if !ok {
					res[i].Err = errStuck
					continue
				}
			}
			q.sampler.Accept(tok)
			q.con.accept(b.tok, tok)
			q.next = tok
			q.seq.Tokens = append(q.seq.Tokens, tok)
			q.seq.Start = t2
			q.out = append(q.out[:0], tok)
			res[i].Tokens = q.out
			res[i].Logprobs = q.logprobsOf([]int{0}, q.out)
			res[i].ContextFull = q.cache.Len()+1 >= q.cache.Cap()
			continue
		}
		if ids != nil {
			b.verifyArgmax(q, ids[b.rows[i]:b.rows[i]+q.tree.Len()])
		} else if !b.verify(q, logits[b.rows[i]*vocab:(b.rows[i]+q.tree.Len())*vocab]) {
			res[i].Err = errStuck
			continue
		}
		for _, tok := range q.res.Tokens {
			q.con.accept(b.tok, tok)
		}
		if err := q.cache.Commit(q.res.Path); err != nil {
			res[i].Err = status.Errorf(status.Internal, "kv cache: %v", err)
			continue
		}
		q.out = append(q.out[:0], q.res.Tokens...)
		q.next = q.out[len(q.out)-1]
		q.seq.Tokens = append(q.seq.Tokens, q.out...)
		res[i].Tokens = q.out
		res[i].Logprobs = q.logprobsOf(q.res.Path, q.out)
		if !q.seq.NoSpec && b.sched.Drafter != nil && b.spec.sched.Policy != spec.Incremental {
			took := charge.of(q, time.Since(t0))
			if used := b.drafts.usedBy(&q.seq, q.kind); used == q.kind || q.tree.Len() < 2 {
				// A tree the n-gram index drafted in the place of the
				// request's model (drafters.ngramFirst, Standby) stood in
				// because it beat the model, or plain decoding: the
				// request's gate judges the model's own iterations.
				q.seq.Payoff.Observe(took, len(q.res.Tokens), q.tree.Len() > 1)
			}
			if q.tree.Len() > 1 {
				b.drafts.observe(&q.seq, q.kind, took, len(q.res.Tokens))
			}
			b.drafts.accept[b.drafts.usedBy(&q.seq, q.kind)].Observe(q.tree, q.res.Path)
			b.sched.ObserveEmitted(q.planned, q.res.Tokens)
			res[i].DraftProposed = q.tree.Len() - 1
			res[i].DraftAccepted = q.res.Accepted()
			res[i].VerifyPasses = 1
		}
		// The sequence (prompt and generated tokens) never outgrows the
		// context: the bonus token would take the last entry when fed back.
		res[i].ContextFull = q.cache.Len()+1 >= q.cache.Cap()
	}
	t3 := time.Now()
	if len(b.seqs) > 0 {
		b.sched.Observe(t3.Sub(t0))
		b.timings.add(t1.Sub(t0), t2.Sub(t1), t3.Sub(t2))
		b.timings.Decoding += len(b.seqs) + len(b.idle)
		b.timings.SatOut += len(b.idle)
		if n := len(b.seqs); len(bt.Tokens) == n && n <= MaxRootBatch {
			b.timings.Roots[n] = b.timings.Roots[n].Add(RootPasses{1, t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)})
		}
	}
}

// Timings is what the iterations so far took and how many decoding
// sequences sat them out. The engine's goroutine writes them at every
// Step: read them once the runtime driving b is closed.
func (b *Backend) Timings() Timings {
	t := b.timings
	t.Drafts, t.Held = b.sched.Stats, b.sched.Held
	return t
}

// newSlotCache reserves a slot's cache, its local layers sized for passes
// of up to pass tokens when the runner can (model.CPU.NewCachePass), so
// that serving never grows it.
func newSlotCache(m model.Runner, ctx, pass int) (model.Cache, error) {
	if pr, ok := m.(interface {
		NewCachePass(ctx, pass int) (model.Cache, error)
	}); ok {
		return pr.NewCachePass(ctx, pass)
	}
	return m.NewCache(ctx)
}
