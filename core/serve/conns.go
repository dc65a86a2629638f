package serve

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimit is a listener that keeps at most max connections open, so
// that a flood of connections cannot exhaust the process's file
// descriptors. Where a plain limit would make new clients wait behind the
// flood (health probes time out), this one makes room: a connection that
// arrives while all are taken closes the one that has waited on its
// client longest. A connection waits on its client while it has no
// request in progress (new, or kept alive between requests: the
// connection states http.Server reports) and while its handler reads a
// request body (waitingBody). Only when every connection is busy
// answering does a new one wait, until one is closed.
type connLimit struct {
	net.Listener
	slots chan struct{} // one token per open connection

	mu      sync.Mutex
	waiting map[*limitedConn]time.Time // since when each has waited on its client
	turned  chan struct{}              // a connection began to wait (capacity 1)
	closed  chan struct{}
	once    sync.Once
}

func newConnLimit(ln net.Listener, max int) *connLimit {
	return &connLimit{
		Listener: ln,
		slots:    make(chan struct{}, max),
		waiting:  map[*limitedConn]time.Time{},
		turned:   make(chan struct{}, 1),
		closed:   make(chan struct{}),
	}
}

// limitedConn is an accepted connection holding one of the slots until it
// is closed (by whichever side, once).
type limitedConn struct {
	net.Conn
	l    *connLimit
	once sync.Once
	gone bool // closed: never marked waiting again (under l.mu)
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.gone = true
		delete(c.l.waiting, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}

// Accept takes the next connection, then a slot for it: at once when one
// is free, else by closing the connection that has waited on its client
// longest, else as soon as one is closed or starts to wait.
func (l *connLimit) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.slots <- struct{}{}:
			lc := &limitedConn{Conn: c, l: l}
			return lc, nil
		default:
		}
		if l.shedOldest() {
			continue
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, l: l}, nil
		case <-l.turned:
		case <-l.closed:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Open is the number of connections holding a slot.
func (l *connLimit) Open() int { return len(l.slots) }

// shedOldest closes the connection that has waited on its client
// longest; false when none is waiting.
func (l *connLimit) shedOldest() bool {
	l.mu.Lock()
	var oldest *limitedConn
	var since time.Time
	for c, t := range l.waiting {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	delete(l.waiting, oldest)
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.Close()
	return true
}

func (l *connLimit) setWaiting(c *limitedConn, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !on || c.gone {
		delete(l.waiting, c)
		return
	}
	if _, already := l.waiting[c]; !already {
		l.waiting[c] = time.Now()
	}
	select {
	case l.turned <- struct{}{}:
	default:
	}
}

// connState is the http.Server's ConnState hook: a connection waits on
// its client until a request's headers are in, and again between
// requests.
func (l *connLimit) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateNew, http.StateIdle:
		l.setWaiting(lc, true)
	default:
		l.setWaiting(lc, false)
	}
}

// connKey finds a request's connection in its context (http.Server's
// ConnContext hook puts it there).
type connKey struct{}

// waitingBody marks the request's connection as waiting on its client
// while the handler reads the body (on), and no longer (off). Requests
// not served through a connLimit are left alone.
func waitingBody(ctx context.Context, on bool) {
	if c, ok := ctx.Value(connKey{}).(*limitedConn); ok {
		c.l.setWaiting(c, on)
	}
}
