package cu

import "unsafe"

// Graphs are built by stream capture: BeginCapture, queue the step's
// launches and async copies on the stream as usual, EndCapture, Instantiate
// once, then Launch the executable graph each step. Kernel arguments are
// copied into the graph at capture, so the launch arena's reuse is safe and
// everything that changes between replays must be read by the kernels from
// device memory (the step header), not passed as arguments.

// Graph is a captured, not yet instantiated CUDA graph (CUgraph).
type Graph struct {
	c *Context
	h uintptr
}

// GraphExec is an instantiated graph (CUgraphExec), ready to launch.
type GraphExec struct {
	c *Context
	h uintptr
}

// BeginCapture starts capturing s into a graph, in thread-local mode.
//
// Why thread-local: in global mode a capture makes every thread's
// potentially unsafe calls (cuMemAlloc, synchronous copies) fail, which would
// break an unrelated runtime or context elsewhere in the process; in relaxed
// mode our own mistakes (a synchronous copy in the middle of the step) would
// pass silently instead of failing the capture. Thread-local checks only the
// capturing thread, so hold runtime.LockOSThread from BeginCapture to
// EndCapture (Context.Enter does).
func (s *Stream) BeginCapture() error {
	return s.c.d.check("cuStreamBeginCapture_v2", s.c.d.StreamBeginCapture(s.h, captureModeThreadLocal))
}

// EndCapture ends the capture begun on s and returns the graph. If anything
// queued during the capture was invalid, the error is reported here (as
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) and the capture is over.
func (s *Stream) EndCapture() (*Graph, error) {
	g := &Graph{c: s.c}
	if err := s.c.d.check("cuStreamEndCapture", s.c.d.StreamEndCapture(s.h, unsafe.Pointer(&g.h))); err != nil {
		return nil, err
	}
	return g, nil
}

// Instantiate makes an executable graph (cuGraphInstantiateWithFlags, no
// flags). The Graph may be destroyed afterwards.
func (g *Graph) Instantiate() (*GraphExec, error) {
	e := &GraphExec{c: g.c}
	if err := g.c.d.check("cuGraphInstantiateWithFlags", g.c.d.GraphInstantiate(unsafe.Pointer(&e.h), g.h, 0)); err != nil {
		return nil, err
	}
	return e, nil
}

// Destroy destroys the graph; a second Destroy does nothing.
func (g *Graph) Destroy() error {
	if g == nil || g.h == 0 {
		return nil
	}
	h := g.h
	g.h = 0
	return g.c.d.check("cuGraphDestroy", g.c.d.GraphDestroy(h))
}

// Launch queues one replay of the graph on s (nil: the legacy default
// stream).
func (e *GraphExec) Launch(s *Stream) error {
	return e.c.d.check("cuGraphLaunch", e.c.d.GraphLaunch(e.h, s.handle()))
}

// Destroy destroys the executable graph; a second Destroy does nothing.
func (e *GraphExec) Destroy() error {
	if e == nil || e.h == 0 {
		return nil
	}
	h := e.h
	e.h = 0
	return e.c.d.check("cuGraphExecDestroy", e.c.d.GraphExecDestroy(h))
}
