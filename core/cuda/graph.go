package cuda

import (
	"github.com/lmstream/lmstream/core/cuda/cu"
)

// A pass is replayed from a CUDA graph captured once per shape: the token
// count rounded up to a power of two (the bucket), the logits rows likewise,
// and the layers run. The kernels read the live counts from the pass header
// and skip the rest of the bucket, so one graph serves every batch in it;
// its arguments are buffer addresses, which stay put until the buffers
// grow (ensure drops every graph then). Graphs turn ~13 launches a layer,
// each a few microseconds of driver work through purego, into one launch.
type graphKey struct {
	tok, rows, layers int
	argmax            bool // the head keeps each row's argmax alone
}

// bucket rounds n up to a power of two.
func bucket(n int) int {
	b := 1
	for b < n {
		b *= 2
	}
	return b
}

// runGraph queues the pass of n tokens and rows logits rows (their argmax
// alone when argmax is set) as a graph
// replay, capturing the graph first if this shape has none.
func (r *Runner) runGraph(n, rows, layers int, argmax bool) error {
	key := graphKey{bucket(n), 0, layers, argmax}
	if rows > 0 {
		key.rows = bucket(rows)
	}
	key.tok, key.rows = min(key.tok, r.bufs.capTok), min(key.rows, r.bufs.capRows)
	g := r.graphs[key]
	if g == nil {
		s := r.dev.stream
		if err := s.BeginCapture(); err != nil {
			return err
		}
		err := r.launchPass(key.tok, key.rows, layers, argmax)
		graph, endErr := s.EndCapture()
		if err == nil {
			err = endErr
		}
		if err != nil {
			return err
		}
		g, err = graph.Instantiate()
		graph.Destroy()
		if err != nil {
			return err
		}
		if r.graphs == nil {
			r.graphs = map[graphKey]*cu.GraphExec{}
		}
		r.graphs[key] = g
	}
	return g.Launch(r.dev.stream)
}

// dropGraphs destroys every captured graph (their buffer addresses are
// about to change, or the runner is closing).
func (r *Runner) dropGraphs() {
	for k, g := range r.graphs {
		g.Destroy()
		delete(r.graphs, k)
	}
}
