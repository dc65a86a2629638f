package streaming

import (
	"errors"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Errors of Mux.
var (
	ErrInMux     = errors.New("streaming: channel already belongs to a mux")
	ErrNotMember = errors.New("streaming: channel is not a member of this mux")
	ErrDupKey    = errors.New("streaming: key already names another member")
	ErrMuxClosed = errors.New("streaming: mux is closed")
)

// Mux gathers many channels behind one readiness descriptor, for a consumer
// that serves thousands of streams from one event loop: it polls one
// descriptor instead of one per channel, and Ready names exactly the members
// that have chunks to pop, so a wake-up costs work proportional to the
// streams that moved, not to all of them.
//
// A member is ready while it has pending chunks (its terminal chunk
// included). Popping keeps that current, so a member whose terminal chunk
// was popped drops out of Ready by itself; removing it is not required. A
// channel belongs to at most one mux at a time; releasing it removes it.
// Every method is safe for concurrent use.
type Mux struct {
	mu     sync.Mutex
	keys   map[uint64]*Channel // the members, by key
	ready  []uint64            // the ready members' keys, unordered
	slot   map[uint64]int      // key → index in ready
	closed bool

	efd      int
	efdReady bool

	wake    chan struct{} // closed when the ready set becomes non-empty, if someone waits
	waiters int
}

// NewMux makes an empty mux with its readiness descriptor.
func NewMux() (*Mux, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &Mux{keys: map[uint64]*Channel{},
		slot: map[uint64]int{}, efd: fd, wake: make(chan struct{})}, nil
}

// Fd returns a descriptor that is readable while some member is ready. It
// stays valid until Close. Readers must not read from it.
func (m *Mux) Fd() (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return -1, ErrMuxClosed
	}
	return m.efd, nil
}

// Add makes c a member named key (the C API uses the channel's handle), and
// ready at once if it already has chunks pending.
func (m *Mux) Add(c *Channel, key uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return ErrReleased
	}
	if c.mux != nil {
		return ErrInMux
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrMuxClosed
	}
	if _, taken := m.keys[key]; taken {
		return ErrDupKey
	}
	m.keys[key] = c
	c.mux, c.muxKey, c.muxReady = m, key, c.head < len(c.queue)
	if c.muxReady {
		m.setReadyLocked(key, true)
	}
	return nil
}

// Remove takes c out of the mux.
func (m *Mux) Remove(c *Channel) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mux != m {
		return ErrNotMember
	}
	c.leaveMuxLocked()
	return nil
}

// Ready copies the keys of up to len(dst) ready members into dst and returns
// how many it copied. Members stay ready until their chunks are popped.
func (m *Mux) Ready(dst []uint64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(dst, m.ready)
}

// Wait blocks until some member is ready or the timeout passes (ErrEmpty; a
// negative timeout waits without limit), or the mux is closed.
func (m *Mux) Wait(timeout time.Duration) error {
	var deadline <-chan time.Time
	if timeout >= 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		switch {
		case m.closed:
			return ErrMuxClosed
		case len(m.ready) > 0:
			return nil
		}
		wake := m.wake
		m.waiters++
		m.mu.Unlock()
		select {
		case <-wake:
			m.mu.Lock()
			m.waiters--
		case <-deadline:
			m.mu.Lock()
			m.waiters--
			if m.closed {
				return ErrMuxClosed
			}
			if len(m.ready) > 0 {
				return nil
			}
			return ErrEmpty
		}
	}
}

// Close takes every member out, wakes waiters and closes the descriptor.
// Calling it twice is harmless.
func (m *Mux) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	members := make([]*Channel, 0, len(m.keys))
	for _, c := range m.keys {
		members = append(members, c)
	}
	unix.Close(m.efd)
	m.efd = -1
	m.broadcastLocked()
	m.mu.Unlock()
	// Channels are locked before the mux everywhere else, so they are
	// detached after the mux lock is dropped; a push in between finds the
	// mux closed and changes nothing.
	for _, c := range members {
		c.mu.Lock()
		if c.mux == m {
			c.leaveMuxLocked()
		}
		c.mu.Unlock()
	}
}

// setReadyLocked records a member's readiness (m.mu held) and keeps the
// descriptor readable exactly while the ready set is non-empty.
func (m *Mux) setReadyLocked(key uint64, ready bool) {
	if m.closed {
		return
	}
	i, in := m.slot[key]
	switch {
	case ready && !in:
		m.slot[key] = len(m.ready)
		m.ready = append(m.ready, key)
	case !ready && in:
		last := len(m.ready) - 1
		m.ready[i] = m.ready[last]
		m.slot[m.ready[i]] = i
		m.ready = m.ready[:last]
		delete(m.slot, key)
	}
	wasReady := m.efdReady
	setLevel(m.efd, &m.efdReady, len(m.ready) > 0)
	if m.efdReady && !wasReady {
		m.broadcastLocked()
	}
}

func (m *Mux) broadcastLocked() {
	if m.waiters == 0 {
		return
	}
	close(m.wake)
	m.wake = make(chan struct{})
}

// syncMuxLocked reports c's readiness to its mux when it changed (c.mu held;
// the channel's lock is always taken before its mux's).
func (c *Channel) syncMuxLocked() {
	if c.mux == nil {
		return
	}
	ready := c.head < len(c.queue)
	if ready == c.muxReady {
		return
	}
	c.muxReady = ready
	c.mux.mu.Lock()
	c.mux.setReadyLocked(c.muxKey, ready)
	c.mux.mu.Unlock()
}

// leaveMuxLocked takes c out of its mux (c.mu held).
func (c *Channel) leaveMuxLocked() {
	m := c.mux
	m.mu.Lock()
	m.setReadyLocked(c.muxKey, false)
	delete(m.keys, c.muxKey)
	m.mu.Unlock()
	c.mux, c.muxKey, c.muxReady = nil, 0, false
}
