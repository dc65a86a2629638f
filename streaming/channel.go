package streaming

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Policy decides what happens when a channel's queue is full.
type Policy int32

const (
	// Coalesce merges a new chunk into the last queued one. Chunks are
	// deltas, so the merge is lossless; a slow consumer simply sees fewer,
	// larger chunks and memory stays bounded by the text itself.
	Coalesce Policy = 0
	// Pause stops the request's decoding while the queue is full; the
	// engine skips the slot (it never blocks) until the consumer drains.
	Pause Policy = 1
)

// DefaultQueueLimit bounds a channel's queue unless the consumer sets another.
const DefaultQueueLimit = 256

// Pop outcomes besides a chunk.
var (
	ErrEmpty    = errors.New("streaming: no chunk pending")
	ErrDone     = errors.New("streaming: stream finished")
	ErrReleased = errors.New("streaming: channel released")
	ErrAttached = errors.New("streaming: channel is already attached to a request")
)

// Channel is the consumer's end of one stream. Every method is safe for
// concurrent use. The producer end is a Sink, obtained once through Attach by
// the runtime; consumers have no way to push.
type Channel struct {
	mu sync.Mutex

	// Settings, fixed once the channel is attached.
	interval    int
	skipSpecial bool
	limit       int
	policy      Policy

	queue    []queued // pending chunks, oldest first
	head     int      // queue[head:] are pending; the prefix is recycled
	attached bool
	finished bool // the terminal chunk was pushed
	drained  bool // the terminal chunk was popped
	released bool
	reason   FinishReason

	batchIndex int

	// wake is closed (and replaced) whenever a waiter may make progress;
	// only when someone waits, so an unwatched push allocates nothing.
	wake    chan struct{}
	waiters int

	// The readiness descriptor is made on first request, so streams that
	// nobody selects on cost no file descriptor.
	efd      int
	efdReady bool // the eventfd counter is nonzero

	// The mux this channel belongs to (nil: none), its key there, and the
	// readiness last reported to it.
	mux      *Mux
	muxKey   uint64
	muxReady bool

	cancelled atomic.Bool
	onCancel  func() // set by the runtime at attach: wakes the engine
	onDrain   func() // set by the runtime at attach: a paused slot may resume
	// watcher is told of a cancellation before the channel is attached
	// (NotifyCancel): a submission preparing its request.
	watcher func()
}

// queued is a pending chunk. Text merged into it by coalescing collects in
// more and joins Text once, when the chunk is popped: merging by string
// concatenation would copy the whole text on every merge, quadratic in
// exactly the slow-consumer case coalescing exists for.
type queued struct {
	Chunk
	more []byte
}

// NewChannel makes a channel with the default settings: interval 1,
// special tokens skipped, DefaultQueueLimit chunks, Coalesce.
func NewChannel() *Channel {
	return &Channel{
		interval:    1,
		skipSpecial: true,
		limit:       DefaultQueueLimit,
		policy:      Coalesce,
		wake:        make(chan struct{}),
		efd:         -1,
	}
}

func (c *Channel) configure(f func()) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return ErrReleased
	}
	if c.attached {
		return ErrAttached
	}
	f()
	return nil
}

// SetInterval sets the stream interval: a non-terminal chunk carries at least
// n new tokens. Values below 1 mean 1.
func (c *Channel) SetInterval(n int) error {
	return c.configure(func() { c.interval = max(n, 1) })
}

// SetSkipSpecial chooses whether special tokens' text is dropped (ids never are).
func (c *Channel) SetSkipSpecial(skip bool) error {
	return c.configure(func() { c.skipSpecial = skip })
}

// SetQueue bounds the queue at limit chunks (values below 1 mean 1) and
// chooses what happens when it is full.
func (c *Channel) SetQueue(limit int, p Policy) error {
	if p != Coalesce && p != Pause {
		return errors.New("streaming: unknown queue policy")
	}
	return c.configure(func() { c.limit, c.policy = max(limit, 1), p })
}

// Interval, SkipSpecial and BatchIndex report the channel's settings.
func (c *Channel) Interval() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interval
}

func (c *Channel) SkipSpecial() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skipSpecial
}

// BatchIndex is the index of the prompt this channel streams within its
// request's batch.
func (c *Channel) BatchIndex() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.batchIndex
}

// Finished reports whether the terminal chunk has been pushed, and its reason.
func (c *Channel) Finished() (bool, FinishReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finished, c.reason
}

// Pending is the number of queued chunks.
func (c *Channel) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue) - c.head
}

// Cancel asks the runtime to stop the request. It is fire-and-forget,
// idempotent and safe from any goroutine; the consumer keeps receiving until
// the runtime's terminal chunk (reason Cancelled, unless the stream had
// already finished for another reason).
func (c *Channel) Cancel() {
	if c.cancelled.Swap(true) {
		return
	}
	c.mu.Lock()
	f, w := c.onCancel, c.watcher
	c.mu.Unlock()
	if f != nil {
		f()
	}
	if w != nil {
		w()
	}
}

// NotifyCancel has f run (on the cancelling goroutine) when the channel is
// cancelled or released from now until stop is called (not for a
// cancellation before: such a channel's request is submitted and ends at
// once with its terminal chunk, as ever). One watcher at a time:
// lms_submit uses it while it prepares a request (compiling its grammar
// can take a while), before the channel is attached, so that the caller
// cancelling the channel meanwhile stops that work.
func (c *Channel) NotifyCancel(f func()) (stop func()) {
	c.mu.Lock()
	c.watcher = f
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.watcher = nil
		c.mu.Unlock()
	}
}

// Cancelled reports whether Cancel or Release was called.
func (c *Channel) Cancelled() bool { return c.cancelled.Load() }

// Release gives the channel up: the request is cancelled, queued chunks are
// dropped, waiters wake with ErrReleased and the readiness descriptor is
// closed. Calling it twice is harmless.
func (c *Channel) Release() {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return
	}
	c.released = true
	c.queue, c.head = nil, 0
	if c.mux != nil {
		c.leaveMuxLocked()
	}
	if c.efd >= 0 {
		unix.Close(c.efd)
		c.efd = -1
	}
	c.broadcastLocked()
	c.mu.Unlock()
	c.Cancel()
}

// Fd returns a file descriptor that is readable while chunks are pending or
// the stream is finished, for poll/epoll/asyncio/enif_select. It stays valid
// until Release. Readers must not read from it; popping keeps it current.
func (c *Channel) Fd() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return -1, ErrReleased
	}
	if c.efd < 0 {
		fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return -1, err
		}
		c.efd = fd
		c.syncFdLocked()
	}
	return c.efd, nil
}

// syncFdLocked makes the descriptor's readability (and the mux's view of
// the channel) match the queue state.
func (c *Channel) syncFdLocked() {
	c.syncMuxLocked()
	if c.efd < 0 {
		return
	}
	setLevel(c.efd, &c.efdReady, c.head < len(c.queue) || c.finished)
}

// setLevel makes the eventfd fd readable exactly when want; *readable is its
// current state, so the counter is written or drained only on a change.
func setLevel(fd int, readable *bool, want bool) {
	switch {
	case want && !*readable:
		var one = [8]byte{1}
		unix.Write(fd, one[:])
	case !want && *readable:
		var buf [8]byte
		unix.Read(fd, buf[:])
	}
	*readable = want
}

func (c *Channel) broadcastLocked() {
	if c.waiters == 0 {
		return
	}
	close(c.wake)
	c.wake = make(chan struct{})
}

// popLocked pops pending chunks in order while take accepts them, at most
// max (all when max < 1). A refused chunk stays queued.
func (c *Channel) popLocked(max int, take func(*Chunk) bool) (int, error) {
	if c.released {
		return 0, ErrReleased
	}
	pending := len(c.queue) - c.head
	if pending == 0 {
		if c.drained {
			return 0, ErrDone
		}
		return 0, ErrEmpty
	}
	wasFull := c.policy == Pause && pending >= c.limit
	n := 0
	for c.head < len(c.queue) && (max < 1 || n < max) {
		q := &c.queue[c.head]
		if len(q.more) > 0 {
			q.Text += string(q.more)
			q.more = nil
		}
		ch := &q.Chunk
		if !take(ch) {
			break
		}
		if ch.Finished {
			c.drained = true
		}
		*q = queued{}
		c.head++
		n++
	}
	if c.head == len(c.queue) {
		c.queue, c.head = c.queue[:0], 0
	}
	c.syncFdLocked()
	if wasFull && n > 0 && c.onDrain != nil {
		// The engine skipped this slot while the queue was full.
		go c.onDrain()
	}
	return n, nil
}

// PopEach pops pending chunks in order while take accepts them, at most max
// (all when max < 1), without waiting. A chunk take refuses stays queued, so
// a caller copying into a fixed buffer never splits or loses one. The error
// is ErrEmpty, ErrDone or ErrReleased when nothing was pending.
func (c *Channel) PopEach(max int, take func(*Chunk) bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.popLocked(max, take)
}

// TryPop returns the oldest pending chunk without waiting. The error is
// ErrEmpty when nothing is pending yet, ErrDone after the terminal chunk was
// popped, ErrReleased after Release.
func (c *Channel) TryPop() (Chunk, error) {
	var out Chunk
	_, err := c.PopEach(1, func(ch *Chunk) bool { out = *ch; return true })
	return out, err
}

// PopBatch appends up to max pending chunks (all of them when max < 1) to dst
// without waiting.
func (c *Channel) PopBatch(dst []Chunk, max int) ([]Chunk, error) {
	_, err := c.PopEach(max, func(ch *Chunk) bool { dst = append(dst, *ch); return true })
	return dst, err
}

// Wait blocks until a chunk is pending, the stream is drained, the channel
// is released, or the timeout passes (timeout < 0 waits forever). It returns
// nil when a pop would return something other than ErrEmpty.
func (c *Channel) Wait(timeout time.Duration) error {
	var timer <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	for {
		c.mu.Lock()
		switch {
		case c.released:
			c.mu.Unlock()
			return ErrReleased
		case c.head < len(c.queue) || c.drained:
			c.mu.Unlock()
			return nil
		}
		wake := c.wake
		c.waiters++
		c.mu.Unlock()
		var timedOut bool
		select {
		case <-wake:
		case <-timer:
			timedOut = true
		}
		c.mu.Lock()
		c.waiters--
		c.mu.Unlock()
		if timedOut {
			return ErrEmpty
		}
	}
}

// WaitPop is TryPop after waiting up to timeout (forever when negative).
func (c *Channel) WaitPop(timeout time.Duration) (Chunk, error) {
	if err := c.Wait(timeout); err != nil {
		return Chunk{}, err
	}
	return c.TryPop()
}

// Consume calls handle for every chunk until the terminal one. If handle
// returns false the request is cancelled and Consume returns ErrInterrupted;
// chunks not yet handled stay queued for a later pop. (Chunks are popped one
// at a time for that reason: a popped batch would lose its rest.)
func (c *Channel) Consume(handle func(*Chunk) bool) error {
	for {
		if err := c.Wait(-1); err != nil {
			return err
		}
		ch, err := c.TryPop()
		switch err {
		case nil:
		case ErrDone:
			return nil
		case ErrEmpty:
			continue
		default:
			return err
		}
		if !handle(&ch) {
			c.Cancel()
			return ErrInterrupted
		}
		if ch.Finished {
			return nil
		}
	}
}

// ErrInterrupted is returned by Consume when the handler stopped early.
var ErrInterrupted = errors.New("streaming: consumer interrupted the stream")

// Sink is the producer's end of a Channel, held by the runtime.
type Sink struct {
	c *Channel
}

// Attach binds the channel to a request and returns its producer end. A
// channel can be attached once. onCancel runs (on the cancelling goroutine)
// when the consumer cancels; onDrain runs when a paused queue gets room.
func (c *Channel) Attach(batchIndex int, onCancel, onDrain func()) (*Sink, error) {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return nil, ErrReleased
	}
	if c.attached {
		c.mu.Unlock()
		return nil, ErrAttached
	}
	c.attached = true
	c.batchIndex = batchIndex
	c.onCancel, c.onDrain = onCancel, onDrain
	c.mu.Unlock()
	if c.cancelled.Load() && onCancel != nil {
		onCancel() // cancelled before submission: let the runtime see it
	}
	return &Sink{c: c}, nil
}

// Detach undoes Attach when the submission that attached it fails, so the
// consumer may reuse the channel.
func (s *Sink) Detach() {
	c := s.c
	c.mu.Lock()
	c.attached = false
	c.onCancel, c.onDrain = nil, nil
	c.mu.Unlock()
}

// Settings returns what the stream stages need from the consumer's choices.
func (s *Sink) Settings() (interval int, skipSpecial bool) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interval, c.skipSpecial
}

// Cancelled reports whether the consumer cancelled or released the channel.
func (s *Sink) Cancelled() bool { return s.c.cancelled.Load() }

// Paused reports whether the request should not decode this iteration: the
// consumer chose Pause and has not drained a full queue.
func (s *Sink) Paused() bool {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.policy == Pause && !c.released && len(c.queue)-c.head >= c.limit
}

// Push queues a chunk. It never blocks: when the queue is full the chunk is
// merged into the last queued one (under Pause that happens only to the
// terminal chunk, since the engine stops producing). It reports false when
// the consumer has released the channel and the chunk was dropped. Pushing
// after the terminal chunk is a bug in the caller and is ignored.
func (s *Sink) Push(ch Chunk) bool {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return false
	}
	if c.finished {
		return true
	}
	ch.BatchIndex = int32(c.batchIndex)
	if n := len(c.queue) - c.head; n >= c.limit && n > 0 {
		last := &c.queue[len(c.queue)-1]
		last.more = append(last.more, ch.Text...)
		ch.Text = ""
		last.merge(&ch)
	} else {
		if c.head > 0 && len(c.queue) == cap(c.queue) {
			// Slide the live tail down instead of growing the array.
			k := copy(c.queue, c.queue[c.head:])
			clear(c.queue[k:])
			c.queue, c.head = c.queue[:k], 0
		}
		c.queue = append(c.queue, queued{Chunk: ch})
	}
	if ch.Finished {
		c.finished = true
		c.reason = ch.Reason
	}
	c.syncFdLocked()
	c.broadcastLocked()
	return true
}
