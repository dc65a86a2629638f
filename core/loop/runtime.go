// Package loop is the engine loop: it queues requests, gives them slots,
// drives the backend one iteration at a time for all active slots together,
// applies the finishing rules and pushes each slot's chunk into its stream.
package loop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec/serving"
	"github.com/lmstream/lmstream/streaming"
)

// Runtime runs one backend on its own goroutine.
type Runtime struct {
	backend  Backend
	vocab    streaming.Vocabulary
	maxSlots int
	maxQueue int
	fcfs     bool // admit by submission alone (FCFSAdmitter)
	watcher  QueueWatcher
	idle     IdleWorker // nil once it has nothing more to do

	mu     sync.Mutex
	queue  []*Slot // submitted, waiting for a slot
	closed bool

	// wake (capacity 1) tells the engine goroutine that something changed:
	// a submission, a cancellation, a drained queue, shutdown.
	wake    chan struct{}
	closing atomic.Bool
	done    chan struct{}

	// Engine goroutine only.
	active  []*Slot
	results []StepResult
	runBuf  []*Slot  // runnable slots of this iteration, reused
	waiting []Queued // the queue's earliest deadlines, for watcher

	stats struct {
		submitted, finished, tokens, iterations atomic.Int64
		queued, active                          atomic.Int64
	}
}

// New creates a runtime from its config JSON and starts its engine goroutine.
func New(configJSON []byte) (*Runtime, error) {
	return NewWithProgress(configJSON, nil)
}

// NewWithProgress is New, telling progress (when not nil) how loading
// advances: the backend's stages (Config.Report), then StageReady with
// fraction 1 once the runtime is created. progress is called on the
// goroutines that load, so it must be safe for that and must not block.
func NewWithProgress(configJSON []byte, progress func(stage string, fraction float64)) (*Runtime, error) {
	cfg, err := ParseConfig(configJSON)
	if err != nil {
		return nil, err
	}
	cfg.Progress = progress
	b, err := newBackend(cfg)
	if err != nil {
		return nil, err
	}
	r := Start(b, cfg.MaxSlots, cfg.MaxQueue)
	cfg.Report(StageReady, 1)
	return r, nil
}

// Start runs an already built backend.
func Start(b Backend, maxSlots, maxQueue int) *Runtime {
	r := &Runtime{
		backend:  b,
		vocab:    b.Vocabulary(),
		maxSlots: maxSlots,
		maxQueue: maxQueue,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if a, ok := b.(FCFSAdmitter); ok {
		r.fcfs = a.AdmitFCFS()
	}
	if w, ok := b.(QueueWatcher); ok && w.WatchesQueue() {
		r.watcher = w
	}
	if w, ok := b.(IdleWorker); ok {
		r.idle = w
	}
	go r.run()
	return r
}

// Vocabulary is the backend's vocabulary.
func (r *Runtime) Vocabulary() streaming.Vocabulary { return r.vocab }

func (r *Runtime) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Submit parses and checks a request and queues its batch items, one per
// channel. It returns at once; generation happens on the engine goroutine.
// Errors known before the first token (bad JSON, bad fields, a prompt that
// does not fit, a full queue, a channel count that does not match) are
// returned here and nothing is queued. An empty channel list submits a
// request nobody streams: use Complete to get its answer.
func (r *Runtime) Submit(requestJSON []byte, channels []*streaming.Channel) error {
	return r.SubmitContext(context.Background(), requestJSON, channels)
}

// SubmitContext is Submit for a caller that may leave while the request
// is being prepared (a server's client): once ctx is done, compiling the
// request's grammar stops and Submit returns a Closed error. ctx does not
// reach past the queue: a queued request is cancelled through its
// channels.
func (r *Runtime) SubmitContext(ctx context.Context, requestJSON []byte, channels []*streaming.Channel) error {
	slots, err := r.prepare(ctx, requestJSON)
	if err != nil {
		return err
	}
	if len(channels) != len(slots) {
		return status.Errorf(status.InvalidArgument, "request has %d batch item(s) but %d channel(s) were given", len(slots), len(channels))
	}
	for i, ch := range channels {
		if ch == nil {
			return status.Errorf(status.InvalidArgument, "channel %d is nil", i)
		}
	}
	for i, ch := range channels {
		sink, err := ch.Attach(i, r.signal, r.signal)
		if err != nil {
			for _, s := range slots[:i] {
				s.sink.Detach()
			}
			if err == streaming.ErrAttached {
				return status.Errorf(status.State, "channel %d is already attached to a request", i)
			}
			return status.Errorf(status.InvalidHandle, "channel %d: %v", i, err)
		}
		slots[i].sink = sink
	}
	for _, s := range slots {
		s.stream = streaming.NewStream(s.sink, r.vocab, s.Request.Stop, s.Request.IncludeStop)
		if s.reply != nil {
			s.stream.ParseReply(s.reply)
		}
	}
	if err := r.enqueue(slots); err != nil {
		for _, s := range slots {
			s.sink.Detach()
		}
		return err
	}
	return nil
}

// Complete runs a request with no channel attached and returns one
// collected chunk per batch item (the whole text, all token ids, the reason
// and usage). It blocks until every item has finished.
func (r *Runtime) Complete(requestJSON []byte) ([]streaming.Chunk, error) {
	slots, err := r.prepare(context.Background(), requestJSON)
	if err != nil {
		return nil, err
	}
	for _, s := range slots {
		s.stream = streaming.NewStream(nil, r.vocab, s.Request.Stop, s.Request.IncludeStop)
		if s.reply != nil {
			s.stream.ParseReply(s.reply)
		}
		s.done = make(chan streaming.Chunk, 1)
	}
	if err := r.enqueue(slots); err != nil {
		return nil, err
	}
	out := make([]streaming.Chunk, len(slots))
	for i, s := range slots {
		out[i] = <-s.done
	}
	return out, nil
}

func (r *Runtime) prepare(ctx context.Context, requestJSON []byte) ([]*Slot, error) {
	req, err := ParseRequestContext(ctx, requestJSON)
	if err != nil {
		return nil, err
	}
	items, err := r.safePrepare(req)
	if err != nil {
		return nil, err
	}
	if err := req.Extra.Rest(); err != nil {
		return nil, err
	}
	if len(items) != req.Items() {
		return nil, status.Errorf(status.Internal, "backend prepared %d items for %d prompts", len(items), req.Items())
	}
	if req.Logprobs && req.MaxTokens == 0 {
		ctx := r.contextLength()
		room := func(i int) int { return max(ctx-len(items[i].Prompt), 0) }
		if ctx <= 0 {
			room = func(int) int { return -1 } // unknown: the backend's own limits hold
		}
		if err := CheckLogprobBudget(req, room); err != nil {
			return nil, err
		}
	}
	var stopIDs map[int32]bool
	for _, id := range req.StopTokenIDs {
		if id < 0 || int(id) >= r.vocab.Size() {
			return nil, status.Errorf(status.InvalidRequest, `request field "stop_token_ids": %d is not a token id (vocabulary size %d)`, id, r.vocab.Size())
		}
		if stopIDs == nil {
			stopIDs = map[int32]bool{}
		}
		stopIDs[id] = true
	}
	now := time.Now().UnixNano()
	slots := make([]*Slot, len(items))
	for i, it := range items {
		slots[i] = &Slot{
			Request: req, Index: i, Prompt: it.Prompt, Data: it.Data, reply: it.Reply,
			rt: r, stopIDs: stopIDs, submitted: now,
			usage: streaming.Usage{PromptTokens: len(it.Prompt)},
		}
	}
	return slots, nil
}

// contextLength is the context of each sequence, or 0 when the backend
// does not say.
func (r *Runtime) contextLength() int {
	if in, ok := r.backend.(Introspector); ok {
		return in.ModelInfo().RuntimeContext
	}
	return 0
}

func (r *Runtime) safePrepare(req *Request) (items []Prepared, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(status.Internal, "backend panicked preparing the request: %v", p)
		}
	}()
	return r.backend.Prepare(req)
}

func (r *Runtime) enqueue(slots []*Slot) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return status.Errorf(status.Shutdown, "runtime is shut down")
	}
	if len(r.queue)+len(slots) > r.maxQueue {
		return status.Errorf(status.Capacity, "request queue is full (%d batch items waiting, max_queue %d)", len(r.queue), r.maxQueue)
	}
	r.queue = append(r.queue, slots...)
	r.stats.submitted.Add(int64(len(slots)))
	r.stats.queued.Store(int64(len(r.queue)))
	r.signal()
	return nil
}

// Close stops the engine: every stream still queued or running ends with an
// Error terminal chunk (code Shutdown), the backend is closed, and Close
// returns once all of that has happened. Calling it twice is harmless.
func (r *Runtime) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.closing.Store(true)
	r.signal()
	<-r.done
}

// Stats is a snapshot of the runtime's counters.
type Stats struct {
	MaxSlots        int   `json:"max_slots"`
	ActiveSlots     int64 `json:"active_slots"`
	Queued          int64 `json:"queued"`
	Submitted       int64 `json:"submitted"`
	Finished        int64 `json:"finished"`
	TokensGenerated int64 `json:"tokens_generated"`
	Iterations      int64 `json:"iterations"`
	// KVBytesInUse is the memory the KV caches hold now, KVBytesLimit
	// what they may take (0 and 0 for a backend that reserves its caches
	// whole: KVReporter).
	KVBytesInUse int64 `json:"kv_bytes_in_use"`
	KVBytesLimit int64 `json:"kv_bytes_limit"`
}

// Stats reads the counters; safe from any goroutine. Queued is read
// before ActiveSlots: admission raises the active count before it lowers
// the queued one, so a live request is counted in at least one of them.
func (r *Runtime) Stats() Stats {
	queued := r.stats.queued.Load()
	st := Stats{
		MaxSlots:        r.maxSlots,
		ActiveSlots:     r.stats.active.Load(),
		Queued:          queued,
		Submitted:       r.stats.submitted.Load(),
		Finished:        r.stats.finished.Load(),
		TokensGenerated: r.stats.tokens.Load(),
		Iterations:      r.stats.iterations.Load(),
	}
	if kr, ok := r.backend.(KVReporter); ok {
		st.KVBytesInUse, st.KVBytesLimit = kr.KVPages()
	}
	return st
}

// run is the engine goroutine.
func (r *Runtime) run() {
	defer close(r.done)
	for r.iterate() {
	}
}

// iterate runs one engine iteration and reports whether to go on. A panic
// anywhere in it (outside the backend step, which is isolated per slot) ends
// every active stream with an Internal error; the runtime keeps serving.
func (r *Runtime) iterate() (goOn bool) {
	defer func() {
		if p := recover(); p != nil {
			msg := fmt.Sprintf("internal error: %v", p)
			for _, s := range r.active {
				s.stream.Finish(streaming.Error, int32(status.Internal), msg)
			}
			r.evict()
			goOn = !r.closing.Load()
			if !goOn {
				r.shutdown()
			}
		}
	}()

	if !r.admit() {
		r.shutdown()
		return false
	}
	// Cancellations are observed here, at the top of the iteration.
	for _, s := range r.active {
		if s.stream.Cancelled() && !s.stream.Finished() {
			s.cancelled = true
			s.stream.Finish(streaming.Cancelled, 0, "")
		}
	}

	runnable := r.runnable()
	if len(runnable) > 0 {
		if r.watcher != nil {
			r.watchQueue()
		}
		r.step(runnable)
		r.stats.iterations.Add(1)
	}
	for _, s := range r.active {
		if !s.stream.Emit() {
			s.cancelled = true // the consumer released its channel
			s.stream.Finish(streaming.Cancelled, 0, "")
		}
	}
	evicted := r.evict()
	if len(runnable) == 0 && evicted == 0 {
		if r.idle != nil && len(r.wake) == 0 {
			if r.idle.IdleWork() {
				return true // then look for requests again
			}
			r.idle = nil
		}
		<-r.wake // idle: nothing can change until someone signals
	}
	return true
}

// admit moves queued items into free slots, earliest TTFT deadline first
// (serving.TTFTDeadline), or first come, first served for a backend that asks
// (FCFSAdmitter); it returns false on shutdown.
func (r *Runtime) admit() bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	var admitted, dropped []*Slot
	for len(r.queue) > 0 && len(r.active)+len(admitted) < r.maxSlots {
		i := serving.NextToAdmit(r.queue, func(s *Slot) int64 { return serving.AdmissionDeadline(s.submitted, s.Request.TTFTSLOMs, r.fcfs) })
		s := r.queue[i]
		last := len(r.queue) - 1
		copy(r.queue[i:], r.queue[i+1:])
		r.queue[last] = nil
		r.queue = r.queue[:last]
		if s.stream.Cancelled() {
			dropped = append(dropped, s) // never opened: nothing to release
		} else {
			admitted = append(admitted, s)
		}
	}
	// Items cancelled while queued need not wait for a slot.
	kept := r.queue[:0]
	for _, s := range r.queue {
		if s.stream.Cancelled() {
			dropped = append(dropped, s)
		} else {
			kept = append(kept, s)
		}
	}
	clear(r.queue[len(kept):])
	r.queue = kept
	if r.watcher != nil {
		r.waiting = earliestQueued(r.waiting[:0], r.queue, r.maxSlots, r.fcfs)
	}
	// The admitted count as active before they leave the queue's count, so
	// that a request is never in neither (Stats reads them in the other
	// order): a pool routing by load saw a just-admitted request nowhere.
	r.stats.active.Store(int64(len(r.active) + len(admitted)))
	r.stats.queued.Store(int64(len(r.queue)))
	r.mu.Unlock()

	for _, s := range dropped {
		s.stream.Finish(streaming.Cancelled, 0, "")
		r.finishSlot(s)
	}
	for _, s := range admitted {
		if err := r.open(s); err != nil {
			s.stream.Finish(streaming.Error, int32(codeOf(err, status.Backend)), err.Error())
		}
		r.active = append(r.active, s)
	}
	return true
}

// earliestQueued appends to dst the k queued items with the earliest
// admission deadlines. The queue is in submission order, so deadlines
// mostly rise along it and most items are turned away at a glance once
// k are held: linear in the queue but for mixed TTFT SLOs.
func earliestQueued(dst []Queued, queue []*Slot, k int, fcfs bool) []Queued {
	if k < 1 {
		return dst
	}
	for _, s := range queue {
		q := Queued{Deadline: serving.AdmissionDeadline(s.submitted, s.Request.TTFTSLOMs, fcfs), Prompt: len(s.Prompt)}
		if len(dst) == k {
			if q.Deadline >= dst[k-1].Deadline {
				continue
			}
			dst = dst[:k-1]
		}
		// Insert in deadline order, later ones last.
		i := len(dst)
		dst = append(dst, q)
		for i > 0 && dst[i-1].Deadline > q.Deadline {
			dst[i] = dst[i-1]
			i--
		}
		dst[i] = q
	}
	return dst
}

// watchQueue shows the backend the queue (QueueWatcher). A panic there
// costs the backend the view, not the runtime its engine goroutine.
func (r *Runtime) watchQueue() {
	defer func() {
		if p := recover(); p != nil {
			r.watcher = nil
		}
	}()
	r.watcher.WatchQueue(r.waiting)
}

func (r *Runtime) open(s *Slot) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(status.Internal, "backend panicked opening a sequence: %v", p)
		}
	}()
	if err := r.backend.Open(s); err != nil {
		return err
	}
	s.opened = true
	return nil
}

// runnable lists the active slots the backend should advance this
// iteration: not finished, and not paused by a consumer that asked for it.
func (r *Runtime) runnable() []*Slot {
	out := r.runBuf[:0]
	defer func() { r.runBuf = out[:0] }()
	for _, s := range r.active {
		if !s.stream.Finished() && !s.stream.Paused() {
			out = append(out, s)
		}
	}
	return out
}

// step runs the backend over the runnable slots and applies its results.
func (r *Runtime) step(slots []*Slot) {
	if cap(r.results) < len(slots) {
		r.results = make([]StepResult, len(slots))
	}
	res := r.results[:len(slots)]
	clear(res)
	if err := r.tryStep(slots, res); err != nil {
		// Find the slot that panics by retrying each alone; the others go on.
		for i := range slots {
			res[i] = StepResult{}
			if len(slots) == 1 {
				res[i].Err = err
			} else if err := r.tryStep(slots[i:i+1], res[i:i+1]); err != nil {
				res[i] = StepResult{Err: err}
			}
		}
	}
	now := time.Now().UnixNano()
	for i, s := range slots {
		r.apply(s, &res[i], now)
	}
}

func (r *Runtime) tryStep(slots []*Slot, res []StepResult) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(status.Internal, "internal error: backend panicked: %v", p)
		}
	}()
	r.backend.Step(slots, res)
	return nil
}

// apply runs the finishing rules over one slot's burst: an end token or stop
// token id ends the stream with that token (its id kept, its text dropped),
// max_tokens cuts the burst, and a stop string found while decoding cuts it
// earlier still. Whatever a burst carries after its end is discarded.
func (r *Runtime) apply(s *Slot, res *StepResult, now int64) {
	if res.Err != nil {
		s.stream.Finish(streaming.Error, int32(codeOf(res.Err, status.Backend)), res.Err.Error())
		return
	}
	s.usage.DraftProposed += res.DraftProposed
	s.usage.DraftAccepted += res.DraftAccepted
	s.usage.VerifyPasses += res.VerifyPasses
	tokens := res.Tokens
	if res.Logprobs != nil && len(res.Logprobs) != len(tokens) {
		// A backend bug, reported on the stream rather than indexing past
		// the shorter slice below.
		s.stream.Finish(streaming.Error, int32(status.Internal), fmt.Sprintf("backend returned %d logprobs for %d tokens", len(res.Logprobs), len(tokens)))
		return
	}
	if len(tokens) == 0 {
		return
	}
	end, reason, endsWithStop := len(tokens), streaming.NotFinished, false
	maxTokens := s.Request.MaxTokens
	for i, id := range tokens {
		if r.backend.EndOfGeneration(id) {
			end, reason, endsWithStop = i+1, streaming.EndId, true
			break
		}
		if s.stopIDs[id] {
			end, reason, endsWithStop = i+1, streaming.StopWords, true
			break
		}
		if maxTokens > 0 && s.stream.Generated()+i+1 >= maxTokens {
			end, reason = i+1, streaming.Length
			break
		}
	}
	lps := res.Logprobs
	if lps != nil {
		lps = lps[:end]
	}
	n := s.stream.AcceptLogprobs(tokens[:end], lps, endsWithStop)
	if reason == streaming.NotFinished && res.ContextFull {
		reason = streaming.Length
	}
	if reason != streaming.NotFinished {
		s.stream.Finish(reason, 0, "") // ignored when a stop string matched first
	}
	if n > 0 {
		if s.firstToken == 0 {
			s.firstToken = now
		}
		s.lastToken = now
		r.stats.tokens.Add(int64(n))
	}
}

// evict releases the slots that finished this iteration and pushes their
// terminal chunks (after the release, so a consumer that sees the terminal
// chunk finds the slot already free), compacting the active list in place.
func (r *Runtime) evict() int {
	kept := r.active[:0]
	n := 0
	for _, s := range r.active {
		if s.stream.Finished() {
			r.finishSlot(s)
			n++
		} else {
			kept = append(kept, s)
		}
	}
	clear(r.active[len(kept):])
	r.active = kept
	r.stats.active.Store(int64(len(r.active)))
	return n
}

// finishSlot releases a finished slot and pushes its terminal chunk.
func (r *Runtime) finishSlot(s *Slot) {
	if s.opened {
		s.opened = false
		func() {
			defer func() { recover() }() // a release that panics must not cost the terminal chunk
			r.backend.Release(s)
		}()
	}
	u := s.usage
	u.CachedTokens = s.CachedTokens
	if s.firstToken != 0 {
		u.TTFTMs = float64(s.firstToken-s.submitted) / 1e6
		if g := s.stream.Generated(); g > 1 {
			u.TPOTMs = float64(s.lastToken-s.firstToken) / 1e6 / float64(g-1)
		}
	}
	s.stream.Close(u)
	r.stats.finished.Add(1)
	if s.done != nil {
		s.done <- s.stream.Result()
	}
}

// shutdown ends everything still queued or running. It runs on the engine
// goroutine, once, as its last act.
func (r *Runtime) shutdown() {
	r.mu.Lock()
	queued := r.queue
	r.queue = nil
	r.mu.Unlock()
	const msg = "runtime shut down with the request in flight"
	for _, s := range append(r.active, queued...) {
		s.stream.Finish(streaming.Error, int32(status.Shutdown), msg)
		r.finishSlot(s)
	}
	r.active = nil
	r.stats.active.Store(0)
	r.stats.queued.Store(0)
	func() {
		defer func() { recover() }()
		r.backend.Close()
	}()
}

func codeOf(err error, fallback status.Code) status.Code {
	if c := status.CodeOf(err); c != status.Internal || isStatus(err) {
		return c
	}
	return fallback
}

func isStatus(err error) bool {
	_, ok := err.(*status.Error)
	return ok
}
