package cu

import (
	"time"
	"unsafe"
)

// Stream is a CUDA stream (CUstream). A nil *Stream means the legacy default
// stream wherever a stream is taken.
type Stream struct {
	c *Context
	h uintptr
}

// NewStream creates a stream with default flags: a blocking stream, which
// the legacy default stream waits for, so a synchronous HtoD/DtoH issued
// after a launch on it sees the launch's results. (A non-blocking stream
// would be a silent race there; one stream per step costs nothing extra.)
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	if err := c.d.check("cuStreamCreate", c.d.StreamCreate(unsafe.Pointer(&s.h), streamDefault)); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Stream) handle() uintptr {
	if s == nil {
		return 0
	}
	return s.h
}

// Handle is the raw CUstream (0 for nil).
func (s *Stream) Handle() uintptr { return s.handle() }

// Sync waits until everything queued on s has finished.
func (s *Stream) Sync() error {
	return s.c.d.check("cuStreamSynchronize", s.c.d.StreamSynchronize(s.h))
}

// Destroy destroys the stream (work already queued still completes); a
// second Destroy does nothing.
func (s *Stream) Destroy() error {
	if s == nil || s.h == 0 {
		return nil
	}
	h := s.h
	s.h = 0
	return s.c.d.check("cuStreamDestroy_v2", s.c.d.StreamDestroy(h))
}

// Event is a CUDA event with timing enabled, for measuring GPU time and for
// waiting on part of a stream.
type Event struct {
	c *Context
	h uintptr
}

// NewEvent creates an event.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	if err := c.d.check("cuEventCreate", c.d.EventCreate(unsafe.Pointer(&e.h), eventDefault)); err != nil {
		return nil, err
	}
	return e, nil
}

// Record queues the event on s (nil: the legacy default stream).
func (e *Event) Record(s *Stream) error {
	return e.c.d.check("cuEventRecord", e.c.d.EventRecord(e.h, s.handle()))
}

// Sync waits until the work before the event's last Record has finished.
func (e *Event) Sync() error {
	return e.c.d.check("cuEventSynchronize", e.c.d.EventSynchronize(e.h))
}

// Destroy destroys the event; a second Destroy does nothing.
func (e *Event) Destroy() error {
	if e == nil || e.h == 0 {
		return nil
	}
	h := e.h
	e.h = 0
	return e.c.d.check("cuEventDestroy_v2", e.c.d.EventDestroy(h))
}

// Elapsed is the GPU time between two recorded, completed events
// (cuEventElapsedTime, about 0.5 µs resolution).
func Elapsed(start, end *Event) (time.Duration, error) {
	var ms float32
	if err := start.c.d.check("cuEventElapsedTime", start.c.d.EventElapsedTime(unsafe.Pointer(&ms), start.h, end.h)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}
