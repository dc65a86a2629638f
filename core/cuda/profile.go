package cuda

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lmstream/lmstream/core/cuda/cu"
)

// profiler times each kernel of eager passes with an event recorded
// before every launch: the GPU time between two events belongs to the
// kernel launched between them. It tells which kernel a pass waits on.
type profiler struct {
	events []*cu.Event
	names  []string
	total  map[string]time.Duration
	count  map[string]int
}

// Profile turns per-kernel timing on (graphs off) or off; KernelTimes
// reports what it measured.
func (r *Runner) Profile(on bool) {
	if !on {
		r.dev.prof = nil
		return
	}
	r.eager = true
	r.dev.prof = &profiler{total: map[string]time.Duration{}, count: map[string]int{}}
}

func (p *profiler) mark(d *device, name string) error {
	if len(p.names) == len(p.events) {
		ev, err := d.ctx.NewEvent()
		if err != nil {
			return err
		}
		p.events = append(p.events, ev)
	}
	p.names = append(p.names, name)
	return p.events[len(p.names)-1].Record(d.stream)
}

// collect closes the pass's last kernel with a final event and adds the
// intervals to the totals, once the stream has finished.
func (p *profiler) collect(d *device) error {
	if len(p.names) == 0 {
		return nil
	}
	if err := p.mark(d, ""); err != nil {
		return err
	}
	if err := d.stream.Sync(); err != nil {
		return err
	}
	for i := 0; i+1 < len(p.names); i++ {
		dt, err := cu.Elapsed(p.events[i], p.events[i+1])
		if err != nil {
			return err
		}
		p.total[p.names[i]] += dt
		p.count[p.names[i]]++
	}
	p.names = p.names[:0]
	return nil
}

// KernelTimes is a table of GPU time per kernel over the profiled passes.
func (r *Runner) KernelTimes() string {
	p := r.dev.prof
	if p == nil {
		return ""
	}
	var names []string
	var sum time.Duration
	for n, t := range p.total {
		names = append(names, n)
		sum += t
	}
	sort.Slice(names, func(i, j int) bool { return p.total[names[i]] > p.total[names[j]] })
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "  %-14s %8.1f µs total  %6d launches  %6.2f µs each  %5.1f%%\n", n,
			float64(p.total[n].Nanoseconds())/1e3, p.count[n], float64(p.total[n].Nanoseconds())/1e3/float64(p.count[n]),
			100*float64(p.total[n])/float64(sum))
	}
	return b.String()
}
