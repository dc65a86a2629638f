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
// Work is handed out in chunks. Each thread owns a contiguous home range of
// them and takes its chunks in order from the front, so its weight reads
// stay one stream that the prefetchers follow across chunk boundaries;
// a thread whose range is empty steals chunks from the back of the
// others', so a worker that gets descheduled on a shared machine does not
// hold up the others beyond its current chunk. (One shared counter, as
// before, handed neighbouring chunks to alternate threads: every chunk
// started a cold stream, and 48 chunks a thread instead of 16 made a
// 1.5B verify pass of 8 tokens 10% slower.) A Pool serves one Run at a
// time (Run serializes callers).
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
	ranges   []homeRange  // thread t's chunks, t = 0 the caller
	done     atomic.Int64 // chunks finished
}

// homeRange is a thread's chunks [lo, hi), packed as lo<<32 | hi so that
// the owner (taking lo) and a thief (taking hi−1) agree through one CAS.
// Padded to a cache line: the owners' CASes must not contend.
type homeRange struct {
	state atomic.Uint64
	_     [56]byte
}

// maxChunks bounds a job's chunks so that homeRange's halves hold them.
const maxChunks = 1 << 31

// take removes a chunk from the front (owner) or the back (thief), or
// reports false when the range is empty.
func (r *homeRange) take(front bool) (int64, bool) {
	for {
		s := r.state.Load()
		lo, hi := s>>32, s&(1<<32-1)
		if lo >= hi {
			return 0, false
		}
		var next uint64
		var c uint64
		if front {
			next, c = (lo+1)<<32|hi, lo
		} else {
			next, c = lo<<32|(hi-1), hi-1
		}
		if r.state.CompareAndSwap(s, next) {
			return int64(c), true
		}
	}
}

type poolWorker struct {
	id     int // its home range (0 is the caller's)
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
//
// Both polls, the idle worker's and the caller's wait for the last
// chunks, give their core away (sched_yield) every few microseconds
// (the worker every yieldEvery·spinCheck polls, the caller every
// yieldEvery-th poll past its first 1024, which call runtime.Gosched): on a machine where other work keeps a core
// busy, the OS often runs both of the pool's threads on the one core left,
// and a poll there keeps the thread it waits for off that core until its
// time slice ends (milliseconds, hundreds of times a decode step). Where a
// core is free the yield returns at once (about 0.7 µs on a KVM EPYC).
const (
	spinFor    = 100 * time.Microsecond
	spinCheck  = 256
	yieldEvery = 8
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
		w := &poolWorker{id: i + 1, wake: make(chan struct{}, 1)}
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
				if spins > 0 && spins%(yieldEvery*spinCheck) == 0 {
					osYield()
				}
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
		j.work(w.id)
	}
}

// work runs thread t's home range, then steals from the others' until
// every range is empty.
func (j *poolJob) work(t int) {
	if t >= len(j.ranges) { // a job from before SetThreads changed the count
		return
	}
	run := func(c int64) {
		lo := int(c) * j.grain
		j.fn(lo, min(lo+j.grain, j.n))
		j.done.Add(1)
	}
	for {
		c, ok := j.ranges[t].take(true)
		if !ok {
			break
		}
		run(c)
	}
	for k := 1; k < len(j.ranges); k++ {
		r := &j.ranges[(t+k)%len(j.ranges)]
		for {
			c, ok := r.take(false)
			if !ok {
				break
			}
			run(c)
		}
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
	// A range packs its chunk bounds in 32 bits each: coarser chunks for
	// a job (n) that would count more.
	grain = max(grain, (n+maxChunks-1)/maxChunks)
	chunks := (n + grain - 1) / grain
	j := &poolJob{fn: fn, n: n, grain: grain, chunks: int64(chunks), ranges: make([]homeRange, p.threads)}
	for t := range j.ranges {
		lo, hi := chunks*t/p.threads, chunks*(t+1)/p.threads
		j.ranges[t].state.Store(uint64(lo)<<32 | uint64(hi))
	}
	p.cur.Store(j)
	p.wakeAll(true)
	j.work(0)
	j.wait()
}

// wait returns when every chunk of j is done. The other threads' last
// chunks take microseconds unless the OS has given one's core to another
// process meanwhile, or to this one's caller: on a machine where other
// work takes a core, the pool's threads share the one left, and polling
// would keep the thread that holds the last chunk off it for the rest of a
// time slice (milliseconds) every time. So the polls give the core away
// (osYield) to any thread waiting for it.
func (j *poolJob) wait() {
	for spins := 0; j.done.Load() != j.chunks; spins++ {
		switch {
		case spins < 1<<10:
		case spins%yieldEvery == 0:
			osYield()
		default: // a pool with more threads than GOMAXPROCS
			runtime.Gosched()
		}
	}
}
