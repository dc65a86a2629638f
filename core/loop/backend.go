package loop

import (
	"github.com/lmstream/lmstream/streaming"
)

// Backend produces tokens. The runtime owns requests, slots, finishing rules
// and streaming; a backend only turns prompts into sequences and advances
// them one iteration at a time. The CPU engine and speculative decoding sit
// behind this interface, as does the replay backend used by the tests.
//
// All methods except Prepare and Vocabulary are called from the runtime's
// engine goroutine only.
type Backend interface {
	// Vocabulary maps token ids to piece bytes for streaming.
	Vocabulary() streaming.Vocabulary
	// EndOfGeneration reports whether id ends generation by itself (the
	// model's EOS and end-of-turn tokens). Its reason is EndId.
	EndOfGeneration(id int32) bool
	// Prepare checks a request against the backend (prompt length, model
	// capabilities, backend-specific fields, which it must take from
	// req.Extra) and tokenizes one prompt per batch item. Errors here are
	// returned by submit, before any stream exists. It may be called from
	// any goroutine.
	Prepare(req *Request) ([]Prepared, error)
	// Open gives a sequence a slot: allocate its cache, set s.State. An error
	// ends that item's stream with the error.
	Open(s *Slot) error
	// Step advances every given slot by one iteration (a prefill chunk, or a
	// decode that accepts one token, or several under speculation) and
	// writes results[i] for slots[i]. A slot still prefilling reports no
	// tokens. Step must commit per-slot state only once it cannot fail: if it
	// panics, the runtime retries slot by slot to find the culprit.
	Step(slots []*Slot, results []StepResult)
	// Release frees what Open allocated. Called once per opened slot.
	Release(s *Slot)
	// Close frees the backend. Called once, after every slot is released.
	Close() error
}

// FCFSAdmitter is implemented by a backend that can ask for first come,
// first served admission instead of the TTFT deadline's order (a serving
// policy that models a baseline system, see serving.AdmissionDeadline). The
// runtime asks once, when it starts.
type FCFSAdmitter interface {
	AdmitFCFS() bool
}

// KVReporter is implemented by a backend whose KV caches take memory as
// their sequences grow (the CPU engine's pages): Stats reports what they
// hold and the limit the memory budget puts on them.
type KVReporter interface {
	KVPages() (inUse, limit int64)
}

// QueueWatcher is implemented by a backend whose scheduling weighs the
// requests waiting for a slot: under AdaServe the CPU engine lets no
// decoding sequence sit an iteration out (holding its slot longer) while
// a waiting request's first token is at risk (spec.Queue). The runtime
// asks WatchesQueue once, when it starts; if it says yes, every Step is
// preceded by a WatchQueue call on the engine goroutine.
// IdleWorker is implemented by a backend with work of its own for the
// moments when no request is runnable (the CPU engine measuring its cost
// curve after a quick start). The runtime calls IdleWork on the engine
// goroutine instead of waiting, for as long as it reports more to do;
// each call should take no longer than one forward pass, which is what a
// request arriving meanwhile waits.
type IdleWorker interface {
	IdleWork() (more bool)
}

type QueueWatcher interface {
	WatchesQueue() bool
	// WatchQueue hands the backend the queued batch items with the
	// earliest admission deadlines, up to max_slots of them (those a slot
	// freeing soon would take), in no particular order. The slice is the
	// runtime's, valid during the call only.
	WatchQueue(waiting []Queued)
}

// Queued is a batch item waiting for a slot.
type Queued struct {
	Deadline int64 // unix nanoseconds: the key it is admitted by (serving.AdmissionDeadline)
	Prompt   int   // prompt tokens
}

// Prepared is one batch item after Prepare.
type Prepared struct {
	Prompt []int32 // the prompt's tokens (may be empty for scripted backends)
	Data   any     // backend-specific per-item data, handed back in Slot.Data
	// Reply parses the item's answer into content, reasoning and tool
	// calls (a chat with tools, or a model that thinks); nil: the answer
	// is text only.
	Reply streaming.ReplyParser
}

// StepResult is what one iteration did for one slot.
type StepResult struct {
	// Tokens accepted this iteration, in order. Valid until the next Step.
	Tokens []int32
	// Logprobs, when the request asked for them (Request.Logprobs), has
	// one entry per token; nil otherwise. Valid until the next Step.
	Logprobs []streaming.TokenLogprob
	// Err ends the slot's stream with reason Error. A *status.Error keeps
	// its code; anything else is reported as a backend error.
	Err error
	// ContextFull ends the stream with reason Length after these tokens:
	// the sequence's cache has no room for another token.
	ContextFull bool
	// Speculation statistics of this iteration.
	DraftProposed, DraftAccepted, VerifyPasses int
}

// Slot is one batch item while it runs. The runtime owns it; backends read
// its fields and keep their per-sequence state in State.
type Slot struct {
	Request *Request
	Index   int     // batch item index within the request
	Prompt  []int32 // from Prepared
	Data    any     // from Prepared
	State   any     // the backend's per-sequence state
	reply   streaming.ReplyParser

	// CachedTokens is how many prompt tokens Open found already in a
	// cache (prefix reuse), which the sequence does not prefill: its
	// usage's CachedTokens.
	CachedTokens int

	rt     *Runtime
	stream *streaming.Stream
	sink   *streaming.Sink
	done   chan streaming.Chunk // for Complete: receives the collected answer

	stopIDs   map[int32]bool
	cancelled bool // latched by the engine goroutine
	opened    bool

	submitted  int64 // unix nanoseconds
	firstToken int64
	lastToken  int64
	usage      streaming.Usage
}

// Generated is the number of tokens the slot has accepted so far.
func (s *Slot) Generated() int { return s.stream.Generated() }

// Submitted is when the slot's request was submitted (unix nanoseconds),
// the time its TTFT is counted from.
func (s *Slot) Submitted() int64 { return s.submitted }

// Interrupt is signalled when a cancellation or shutdown may need the engine
// goroutine's attention. A backend that waits inside Step (the replay
// backend's pacing, a long prefill) selects on it and returns early.
func (s *Slot) Interrupt() <-chan struct{} { return s.rt.wake }
