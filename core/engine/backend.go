// Package engine is the device-independent engine behind every runtime
// backend: over a device's runner (core/cpu, core/cuda: the forward pass,
// its caches and heads, registered with Register) it tokenizes prompts
// (rendering chat messages with the model's template), gives each sequence
// a KV cache (on the CPU, pages taken as it grows), and advances every active sequence in one
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
//	                  and at most MaxContext (default: the model's trained context
//	                  where the memory budget holds one sequence of it, halved
//	                  until it does, not below 2048; at most 2048 on a device
//	                  that reserves its caches whole)
//	"prefill_chunk":  prompt tokens a sequence may prefill per iteration
//	                  (128; at most MaxPrefillChunk, and the context)
//	"threads":        engine threads (default: GOMAXPROCS; at most MaxThreads)
//	"kv_type":        how KV caches store entries: "f16" (default) or "q8_0"
//	                  (blocks of 32 int8s and a float16 scale, 17/32 of the
//	                  memory; llama.cpp's -ctk/-ctv q8_0; head dims that are
//	                  multiples of 32; the CPU backend only)
//	"prefix_cache":   false: every request prefills its whole prompt (default
//	                  true: a request starts from the longest prefix of its
//	                  prompt a slot's cache still holds; prefixpool.go)
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
//	"curve_cache_dir": where the forward pass's measured cost is kept between
//	                  processes, keyed by model header, CPU, threads and build
//	                  (default DefaultCurveCacheDir: $XDG_CACHE_HOME/lmstream/curves;
//	                  "": measure at every start)
//	"calibration":    "start" (default): a curve not kept is measured before
//	                  the runtime serves; "idle": a quick one is, and the
//	                  whole curve is measured when no request is runnable
//	                  (calibrate.go; the cpu device only)
//
// # Memory
//
// New refuses, before allocating anything, a configuration that would
// reserve more than the runtime's memory budget (loop.Config.MemoryBudget:
// "memory_budget_bytes", or 75% of physical memory or of the cgroup limit).
// It counts the model file (mapped: every pass reads all of it), the packed
// weights, a draft model's file and weights, the scratch of the largest
// forward pass, and the KV caches (layers × kv heads × context × head dim
// × 2 × 2 bytes a sequence, the early-exit self-draft's and a draft
// model's caches beside); the error is status.Capacity with the total, the
// budget and that breakdown. On the CPU the caches take pages as their
// sequences grow from one pool (kv.Pool), limited to what the budget
// leaves after the rest; only one sequence at the whole context must fit
// (budget.go). A slot that finds no page waits while others run (step.go).
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
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmstream/lmstream/core/chat"
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/reply"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/spec"
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
	// replyFormat is the template's call syntax and thinks whether it
	// has thinking markers (reply.Detect): how answers are parsed.
	replyFormat reply.Format
	thinks      bool
	info        loop.ModelInfo

	context      int
	prefillChunk int
	caches       cachePool // every slot's cache, reserved at start, and what each holds (prefixpool.go)
	// pages is the pool every cache of the runtime takes its pages from,
	// bounded by the memory budget (nil: a device that reserves caches
	// whole).
	pages    *kv.Pool
	kvType   kv.Type // how the caches store entries ("kv_type")
	reserved int64   // bytes the memory budget was checked for
	memory   memoryPlan

	// maxTokenBytes bounds the prompt bytes one token can stand for
	// (tokenizer.MaxInputBytesPerToken; 0: no bound), so that a prompt too
	// long for the context is refused without tokenizing it.
	maxTokenBytes int
	// tokenized counts the prompt bytes handed to the tokenizer (tests
	// check that a hopeless prompt costs none).
	tokenized atomic.Int64

	spec   specConfig
	sched  spec.Scheduler
	drafts drafters
	seqs   []*spec.Seq // decoding sequences of this iteration
	iter   iteration   // how this iteration shares its tokens (prefill.go)
	price  pricing     // what the forward pass costs (cost.go)
	root   []spec.Tree // root-only trees when nothing speculates
	rootP  []*spec.Tree
	dist   spec.Dist // the target distribution handed to verification
	floors []float64 // the scheduler's per-position floors (spec.Floors)

	timings Timings

	// calibrating is the cost measurement under way in idle moments, if
	// any (calibrate.go).
	calibrating *idleCalibration

	trieOnce sync.Once
	trie     *grammar.Trie // the vocabulary's token trie, for constrained requests

	buf scratch // reused across iterations
}

// iteration is how one iteration shares its tokens between the prompts
// being prefilled and the decoding streams (prefill.go).
type iteration struct {
	idle    []*spec.Seq // decoding sequences sitting this iteration out (sitOut)
	sat     []bool      // spec.SitOut's marks, by Backend.seqs before sitOut
	queue   spec.Queue  // what waits for a slot (WatchQueue) and how long slots are held
	floor   int         // the least prompt chunk of this iteration (promptFloor)
	prompts []spec.Prompt
	// prefilling are this iteration's prefilling slots, by TTFT deadline
	// (allotPrefill).
	prefilling []*loop.Slot
}

// pricing is what the engine knows of the target's forward pass's cost
// (cost.go, charge.go).
type pricing struct {
	curve *costCurve    // the forward pass's measured cost for 1 … curveTokens tokens (nil: none)
	cost  spec.PassCost // the passes priced from curve (setCurve)
	// plainPass[n] is the recent forward pass over n decoding roots alone
	// (passCharge's base when it has one).
	plainPass []time.Duration
}

// scratch holds the buffers Step reuses across iterations.
type scratch struct {
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
	ctx, chunk, threads, prefixCache, kvTypeName := 0, 128, runtime.GOMAXPROCS(0), true, "f16"
	for _, f := range []struct {
		key string
		dst any
	}{{"model_path", &path}, {"context_length", &ctx}, {"prefill_chunk", &chunk}, {"threads", &threads}, {"chat_template", &override},
		{"prefix_cache", &prefixCache}, {"kv_type", &kvTypeName}} {
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
		return nil, status.Errorf(status.InvalidRequest, `config field "context_length" must be in [2, %d] (or 0: the model's), got %d`, MaxContext, ctx)
	}
	kvType, err := kv.ParseType(kvTypeName)
	if err != nil {
		return nil, cfg.Extra.Errorf("kv_type", "must be one of %s, got %q", strings.Join(kv.Types, ", "), kvTypeName)
	}
	if kvType != kv.F16 && !pagedDevice(device) {
		return nil, cfg.Extra.Errorf("kv_type", "%q: the %s backend keeps its KV caches in f16", kvTypeName, device)
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
	budget := cfg.MemoryBudget()
	plan, err := planMemory(f, st.Size(), path, ctx, chunk, cfg.MaxSlots, sc, kvType, pagedDevice(device), budget.Bytes)
	if err == nil {
		err = plan.res.Check(budget)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	cfg.Report(loop.StageWeights, weightsStart)
	var pages *kv.Pool
	if plan.kvLimit > 0 {
		pages = kv.NewPool(plan.kvLimit)
	}
	b, err := load(f, device, open, pages, kvType, plan.context, min(chunk, plan.context), plan.pass, threads, cfg.MaxSlots, override)
	if err != nil {
		f.Close()
		return nil, err
	}
	b.caches.reuse, b.caches.chunk = prefixCache, b.prefillChunk
	b.reserved, b.memory = plan.res.Total(), *plan
	cfg.Report(loop.StageSpec, specStart)
	// Measuring the forward pass's cost takes most of the rest, where it
	// is not kept from an earlier start (curvecache.go).
	calibrating := func(f float64) { cfg.Report(loop.StageCalibrate, specStart+0.69*f) }
	if err := b.setupSpec(sc, path, threads, calibrating); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// load builds the backend over an open file; on error the caller closes f,
// and everything load allocated is already freed. pass is the most tokens
// a slot's pass takes (its caches' local layers are sized for it); the
// caches take their pages from pages (nil: the device reserves them) and
// store entries as kvType.
func load(f *gguf.File, device string, open OpenRunner, pages *kv.Pool, kvType kv.Type, ctx, chunk, pass, threads, slots int, override *string) (*Backend, error) {
	m, err := open(f, threads)
	if err != nil {
		if status.CodeOf(err) != status.Internal {
			return nil, err // the device said what failed (LMS_ERR_BACKEND: no driver, ...)
		}
		return nil, status.Errorf(status.Model, "%v", err)
	}
	if m, err = withPages(m, pages, kvType); err != nil {
		m.Close()
		return nil, err
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
		maxTokenBytes: tok.MaxInputBytesPerToken(), pages: pages, kvType: kvType}
	if pages != nil {
		pages.SetReclaim(b.caches.reclaim)
	}
	b.info = modelInfo(f, m.Config(), tok, ctx)
	text, err := f.String("tokenizer.chat_template")
	if override != nil {
		text, err = *override, nil
	}
	b.info.ChatTemplate = text
	b.replyFormat, b.thinks = reply.Detect(text)
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
		b.caches.add(c)
	}
	return b, nil
}

func (b *Backend) Vocabulary() streaming.Vocabulary { return b.tok }

func (b *Backend) EndOfGeneration(id int32) bool { return b.tok.EOG(id) }

// AdmitFCFS asks the runtime to admit requests first come, first served
// under the policies that model such a baseline ("sarathi", "vllm").
func (b *Backend) AdmitFCFS() bool { return b.spec.fcfsAdmit }

// Close frees everything the backend allocated: the KV caches (its own and
// the drafters'), the models' worker pools and packed weights, and the
// mappings of the model files. The runtime calls it from its engine
// goroutine once every slot is released, so no forward pass can be running.
func (b *Backend) Close() error {
	if b.calibrating != nil {
		b.calibrating.stop()
		b.calibrating = nil
	}
	b.caches.all = nil
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
	b.buf.logits, b.buf.batch = nil, model.Batch{}
	err := b.file.Close()
	if b.draftFile != nil {
		b.draftFile.Close()
	}
	return err
}

// Open gives the slot a reserved cache: the free one that holds the
// longest prefix of its prompt, whose prefill then starts after that
// prefix (prefixpool.go).
func (b *Backend) Open(s *loop.Slot) error {
	if b.caches.free() == 0 {
		return status.Errorf(status.Capacity, "no free KV cache (more slots than caches)")
	}
	it := s.Data.(*item)
	smp, err := sample.New(it.params, b.model.Config().Vocab)
	if err != nil {
		return status.Errorf(status.InvalidRequest, "%v", err)
	}
	q := &sequence{sampler: smp, greedy: it.params.Temperature == 0, kind: it.drafter,
		logprobs: it.logprobs, topK: it.topLogprobs}
	switch {
	case it.grammar != nil:
		q.con = newConstraint(it.grammar, b.vocabTrie(), b.tok)
	case it.lazy != nil:
		q.con = newLazyConstraint(it.lazy, b.vocabTrie(), b.tok)
	}
	q.seq = spec.Seq{Tokens: append(make([]int32, 0, len(s.Prompt)+256), s.Prompt...), Prompt: len(s.Prompt),
		SLO: it.slo, NoSpec: it.drafter == draftNone, Payoff: spec.Payoff{Always: !b.spec.adaptive}}
	c, cached := b.caches.take(&q.seq, s.Prompt)
	q.cache, q.prefill = c, cached
	s.CachedTokens = cached
	b.drafts.kind[&q.seq] = it.drafter
	b.drafts.target[&q.seq] = c
	s.State = q
	return nil
}

func (b *Backend) Release(s *loop.Slot) {
	if q, ok := s.State.(*sequence); ok && q.cache != nil {
		b.caches.put(q.cache, &q.seq)
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

// Timings is what the iterations so far took and how many decoding
// sequences sat them out. The engine's goroutine writes them at every
// Step: read them once the runtime driving b is closed.
func (b *Backend) Timings() Timings {
	t := b.timings
	t.Drafts, t.Held = b.sched.Stats, b.sched.Held
	return t
}

// pagedDevice reports whether a device's runners take their caches' pages
// from a pool as sequences grow (model.PagedRunner: the CPU) rather than
// reserving every cache whole (the CUDA runner's caches live in device
// memory, reserved at start).
func pagedDevice(name string) bool { return name == "cpu" }

// withPages is m with its caches' pages from pages, where m can take them,
// and their entries stored as t (a device that cannot was refused before
// anything loaded: New).
func withPages(m model.Runner, pages *kv.Pool, t kv.Type) (model.Runner, error) {
	if t != kv.F16 {
		kt, ok := m.(interface{ SetKVType(kv.Type) error })
		if !ok {
			return m, status.Errorf(status.InvalidRequest, `config field "kv_type": the runner stores its KV caches in f16 only`)
		}
		if err := kt.SetKVType(t); err != nil {
			return m, status.Errorf(status.InvalidRequest, `config field "kv_type": %v`, err)
		}
	}
	if pr, ok := m.(model.PagedRunner); ok && pages != nil {
		return pr.WithPages(pages), nil
	}
	return m, nil
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
