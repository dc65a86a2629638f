package main

/*
#include <stdlib.h>
#include "lmstream.h"
int lms_call_pull_progress(lms_pull_progress_fn f, const lms_pull_progress *p, void *user);
*/
import "C"

import (
	"context"
	"unsafe"

	"github.com/lmstream/lmstream/core/pull"
	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/status"
)

// The progress callback runs on the caller's thread: Pull reports from the
// goroutine that called it, and a goroutine entered from C stays on that
// C thread. So a binding may call back into its interpreter without any of
// the cross-thread hazards of the stream callbacks.

//export lmsgo_model_pull
func lmsgo_model_pull(name *C.char, progress C.lms_pull_progress_fn, user unsafe.Pointer, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	if name == nil {
		return fail(status.Errorf(status.InvalidArgument, "name is NULL"), errBuf, errSize)
	}
	p, err := pull.New()
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if progress != nil {
		p.Progress = func(pr pull.Progress) {
			if ctx.Err() != nil {
				return // the callback asked to stop: it is not called again
			}
			file := C.CString(pr.File)
			defer C.free(unsafe.Pointer(file))
			info := C.lms_pull_progress{
				model: name, phase: C.int32_t(pr.Phase), file: file,
				part: C.int32_t(pr.Part), parts: C.int32_t(pr.Parts),
				done_bytes: C.int64_t(pr.Done), total_bytes: C.int64_t(pr.Total),
			}
			if C.lms_call_pull_progress(progress, &info, user) != 0 {
				cancel()
			}
		}
	}
	if _, err := p.Name(ctx, C.GoString(name)); err != nil {
		return fail(err, errBuf, errSize)
	}
	return C.LMS_OK
}

//export lmsgo_model_path
func lmsgo_model_path(name *C.char, buf *C.char, size C.size_t, length *C.size_t) (rc C.int) {
	defer recovered(&rc)
	if name == nil {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	n := C.GoString(name)
	path, err := registry.Path(n)
	if err != nil {
		return C.int(status.CodeOf(err))
	}
	if length != nil {
		*length = C.size_t(len(path))
	}
	if buf == nil || int(size) < len(path)+1 {
		return C.LMS_ERR_BUFFER_TOO_SMALL
	}
	writeMsg(buf, size, path)
	if _, err := registry.Resolve(n); err != nil {
		return C.LMS_EMPTY
	}
	return C.LMS_OK
}
