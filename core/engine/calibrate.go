package engine

import (
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
)

// Measuring the cost curve on a model's first start on a machine takes
// seconds (SmolLM2-135M on two cores) to a minute and more (the Qwen2.5
// 1.5B with its 0.5B draft): every start after reads it from disk
// (curvecache.go). With "calibration": "idle" a first start measures a
// coarse curve (quickSizes, one run each, no batches: a fraction of the
// work), serves with it, and measures the whole curve in the moments when
// no request is runnable, one step at a time on the engine goroutine
// (IdleWork), so that a pass of the measurement never runs beside a
// request's pass nor is timed under its load; a request that arrives waits
// for at most the step under way. The whole curve then replaces the coarse
// one and is kept as a start-up measurement is.

// passGate runs the measurement's steps (each a pass or a cache
// operation): at once, or when the engine goroutine hands a turn over
// (background). A nil gate runs at once.
type passGate struct {
	turn chan struct{} // engine → measurement: run one step
	done chan struct{} // measurement → engine: the step is over
	quit chan struct{} // closed: the backend is closing, run nothing more
}

// run runs f in its turn and reports whether it ran to its end: false
// when the backend closed first, or f panicked (a pass in the background
// must not take the process down; the measurement is then dropped).
func (g *passGate) run(f func()) (ok bool) {
	if g == nil {
		f()
		return true
	}
	select {
	case <-g.turn:
	case <-g.quit:
		return false
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
		g.done <- struct{}{}
	}()
	f()
	return true
}

// idleCalibration is a cost measurement running in the engine's idle
// moments.
type idleCalibration struct {
	gate   passGate
	result chan *costCurve // the measured curve, nil if it failed
	exited chan struct{}
}

// startIdleCalibration starts measure on a goroutine of its own whose every
// model step waits for IdleWork's turn.
func startIdleCalibration(measure func(g *passGate) *costCurve) *idleCalibration {
	ic := &idleCalibration{
		gate:   passGate{turn: make(chan struct{}), done: make(chan struct{}), quit: make(chan struct{})},
		result: make(chan *costCurve, 1),
		exited: make(chan struct{}),
	}
	go func() {
		defer close(ic.exited)
		ic.result <- measure(&ic.gate)
	}()
	return ic
}

// stop ends the measurement (the backend is closing) and waits for its
// goroutine: called on the engine goroutine, so no step is under way.
func (ic *idleCalibration) stop() {
	close(ic.gate.quit)
	<-ic.exited
}

// IdleWork runs one step of an idle-time calibration, or installs its
// curve once measured; false when there is nothing (more) to do. The
// runtime calls it on the engine goroutine when no request is runnable.
func (b *Backend) IdleWork() bool {
	ic := b.calibrating
	if ic == nil {
		return false
	}
	select {
	case ic.gate.turn <- struct{}{}:
		<-ic.gate.done
		return true
	case c := <-ic.result:
		<-ic.exited
		b.calibrating = nil
		if c != nil {
			b.installCurve(c)
		}
		return false
	}
}

// installCurve makes c the curve the scheduler prices with, and its knee
// the budget unless the config set one.
func (b *Backend) installCurve(c *costCurve) {
	b.setCurve(c)
	if c != nil && !b.spec.budgetGiven {
		b.sched.Config.Budget = max(DefaultMinBudget, spec.Calibrate(c.at, curveTokens(b.device)))
	}
}

// quickSizes are the sizes of a coarse curve up to maxN: enough points to
// price a verified token (T(2) − T(1)) and find the knee roughly.
func quickSizes(maxN int) []int {
	var s []int
	for _, n := range []int{1, 2, 4, 8, 16} {
		if n < maxN {
			s = append(s, n)
		}
	}
	return append(s, maxN)
}

// takeCalibration reads "calibration": "start" (default) or "idle".
func takeCalibration(cfg *loop.Config) (idle bool, err error) {
	var when string
	given, err := cfg.Extra.Take("calibration", &when)
	if err != nil || !given {
		return false, err
	}
	switch when {
	case "start":
		return false, nil
	case "idle":
		return true, nil
	}
	return false, status.Errorf(status.InvalidRequest, `config field "calibration" must be "start" or "idle", got %q`, when)
}
