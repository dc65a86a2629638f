package main

/*
#include "lmstream.h"
int lms_call_progress(lms_progress_handler h, const char *stage, double fraction, void *user);
*/
import "C"

import (
	"unsafe"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
)

// progressEvent is one report of a loading runtime.
type progressEvent struct {
	stage    string
	fraction float64
}

// stageNames are the C strings handed to progress handlers: static, so a
// handler may keep the pointer, and never allocated per call.
var stageNames = map[string]*C.char{}

func init() {
	for _, s := range []string{loop.StageOpen, loop.StageWeights, loop.StageSpec, loop.StageCalibrate, loop.StageReady} {
		stageNames[s] = C.CString(s)
	}
}

// The loader reports from its own goroutines, but the handler must run on
// the thread that called lms_runtime_create_with_progress: a Python or BEAM
// caller can only be re-entered there, and the header promises it. So the
// runtime is created on another goroutine and this one, which cgo keeps on
// the caller's thread, calls the handler with what it hears. Reports never
// block the loader: when the caller is slow, in-between fractions are
// dropped (the buffer holds far more than a load's stage changes).
//
//export lmsgo_runtime_create_with_progress
func lmsgo_runtime_create_with_progress(config *C.char, handler C.lms_progress_handler, user unsafe.Pointer,
	out *C.lms_runtime, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	if config == nil || out == nil {
		return fail(status.Errorf(status.InvalidArgument, "config_json and out must not be NULL"), errBuf, errSize)
	}
	*out = 0 // never a valid handle: a caller that misreads the status gets errors, not a crash
	if handler == nil {
		return lmsgo_runtime_create(config, out, errBuf, errSize)
	}
	cfg := append([]byte(nil), goBytes(config)...) // the caller's buffer is only borrowed for this call
	events := make(chan progressEvent, 64)
	type result struct {
		rt  *loop.Runtime
		err error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		defer func() {
			// A panic here would take the host down: no export is above it.
			if p := recover(); p != nil {
				res = result{err: status.Errorf(status.Internal, "internal error: %v", p)}
			}
			done <- res
		}()
		res.rt, res.err = loop.NewWithProgress(cfg, func(stage string, fraction float64) {
			select {
			case events <- progressEvent{stage, fraction}:
			default:
			}
		})
	}()

	stopped := false // the handler asked to stop: it hears nothing more
	call := func(e progressEvent) {
		if stopped {
			return
		}
		name, ok := stageNames[e.stage]
		if !ok {
			return // a stage the header does not name is not reported
		}
		if C.lms_call_progress(handler, name, C.double(e.fraction), user) != 0 {
			stopped = true
		}
	}
	var res result
	for waiting := true; waiting; {
		select {
		case e := <-events:
			if e.stage != loop.StageReady { // said below, once
				call(e)
			}
		case res = <-done:
			waiting = false
		}
	}
	// Everything reported before the end is delivered, in order, ready last.
	for len(events) > 0 {
		if e := <-events; e.stage != loop.StageReady {
			call(e)
		}
	}
	if res.err != nil {
		return fail(res.err, errBuf, errSize)
	}
	if stopped {
		// Loading cannot be cut short from here, so the finished runtime
		// is freed: the caller asked for none.
		res.rt.Close()
		return fail(status.Errorf(status.Interrupted, "runtime creation was stopped by the progress handler"), errBuf, errSize)
	}
	// Said here, not through the buffer, so it cannot be a dropped report;
	// there is nothing left to stop, so its return is ignored.
	call(progressEvent{loop.StageReady, 1})
	*out = C.lms_runtime(runtimes.add(res.rt))
	return C.LMS_OK
}
