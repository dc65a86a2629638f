package quant

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a small persistent worker pool for splitting a kernel's rows across
// threads. A decode step makes ~200 matmul calls of a few microseconds each,
// so a dispatch has to cost far less than that: no goroutine is started per
// call. Workers spin on a generation counter for a short while after each job
// (the next matmul usually follows within microseconds) and only then park on
// a channel; the caller takes a share of the work itself and then spins until
// every worker has checked in.
//
// Work is handed out in chunks from an atomic counter, so a worker that gets
// descheduled on a shared machine does not hold up the others beyond its
// current chunk. A Pool serves one Run at a time (Run serializes callers).
type Pool struct {
	mu      sync.Mutex // one Run or SetThreads at a time
	threads int
	workers []*poolWorker
	wg      sync.WaitGroup
	cur     atomic.Pointer[poolJob] // the latest job; a new pointer per Run
	closing atomic.Bool
}

// poolJob is immutable once published except for its counters, so a worker
// that wakes late (even after Run returned) can only find no chunk left.
type poolJob struct {
	fn       func(lo, hi int)
	n, grain int
	chunks   int64
	next     atomic.Int64 // next chunk to hand out
	done     atomic.Int64 // chunks finished
}

type poolWorker struct {
	parked atomic.Bool
	wake   chan struct{}
}

// spinFor is how long an idle worker polls before parking, longer than
// the gaps between the matmuls of a forward pass (norms, attention, the
// activations' quantization: tens of microseconds at N = 8). Waking a
// parked worker costs a futex and a scheduler hand-off, tens of
// microseconds on a VM, once per matmul: polling 16K times (a few
// microseconds) had a 2-thread Qwen2.5-Coder-1.5B pass wake its worker
// about 200 times and take 47-48 ms at N = 1 and 76-81 at N = 8, against
// 40-41 and 64-66 with 100 µs (a 2-core KVM Xeon; 20 µs gave 41 and 70,
// 400 µs no better than 100). The clock is read every spinCheck polls.
const (
	spinFor   = 100 * time.Microsecond
	spinCheck = 256
)

// NewPool starts a pool running jobs on `threads` threads (the caller's
// goroutine counts as one, so threads-1 workers are started). threads < 1
// means runtime.GOMAXPROCS(0).
func NewPool(threads int) *Pool {
	p := &Pool{}
	p.start(threads)
	return p
}

func (p *Pool) start(threads int) {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	p.threads = threads
	p.closing.Store(false)
	p.workers = make([]*poolWorker, threads-1)
	for i := range p.workers {
		w := &poolWorker{wake: make(chan struct{}, 1)}
		p.workers[i] = w
		p.wg.Add(1)
		go p.loop(w, p.cur.Load())
	}
}

func (p *Pool) wakeAll(onlyParked bool) {
	for _, w := range p.workers {
		if !onlyParked || w.parked.Load() {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

func (p *Pool) stop() {
	p.closing.Store(true)
	p.cur.Store(&poolJob{})
	p.wakeAll(false)
	p.wg.Wait()
	p.workers = nil
}

// Threads reports the pool's thread count (1 for a nil pool).
func (p *Pool) Threads() int {
	if p == nil {
		return 1
	}
	return p.threads
}

// SetThreads changes the thread count (restarting the workers).
func (p *Pool) SetThreads(threads int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop()
	p.start(threads)
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stop()
}

func (p *Pool) loop(w *poolWorker, last *poolJob) {
	defer p.wg.Done()
	for {
		j := p.cur.Load()
		var since time.Time
		for spins := 0; j == last; spins++ {
			if spins%spinCheck == 0 {
				if spins == 0 {
					since = time.Now()
				} else if time.Since(since) >= spinFor {
					spins = -1
				}
			}
			if spins < 0 {
				// Dekker handshake with Run: we publish parked, then
				// re-check cur; Run publishes cur, then checks parked.
				// Sequentially consistent atomics guarantee one of us
				// sees the other. A stale wake token costs one loop.
				w.parked.Store(true)
				if p.cur.Load() == last {
					<-w.wake
				}
				w.parked.Store(false)
			}
			j = p.cur.Load()
		}
		last = j
		if p.closing.Load() {
			return
		}
		j.work()
	}
}

func (j *poolJob) work() {
	for {
		c := j.next.Add(1) - 1
		if c >= j.chunks {
			return
		}
		lo := int(c) * j.grain
		j.fn(lo, min(lo+j.grain, j.n))
		j.done.Add(1)
	}
}

// Run calls fn over [0,n) split into chunks of `grain` (the last one
// shorter), spread over the pool's threads, and returns when all are done.
// A nil pool, a single thread or a single chunk runs fn(0, n) on the caller.
func (p *Pool) Run(n, grain int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	grain = max(grain, 1)
	if p == nil || p.threads == 1 || n <= grain {
		fn(0, n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	j := &poolJob{fn: fn, n: n, grain: grain, chunks: int64((n + grain - 1) / grain)}
	p.cur.Store(j)
	p.wakeAll(true)
	j.work()
	for spins := 0; j.done.Load() != j.chunks; spins++ {
		if spins > 1<<10 {
			runtime.Gosched()
		}
	}
}
