package main

/*
#cgo CFLAGS: -I${SRCDIR}/../include
#include <stdlib.h>
#include <string.h>
#include "lmstream.h"
int lms_call_handler(lms_chunk_handler h, const lms_chunk *c, void *user);
*/
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"time"
	"unicode/utf8"
	"unsafe"

	_ "github.com/lmstream/lmstream/core/cpu"
	_ "github.com/lmstream/lmstream/core/cuda"
	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/loop"
	_ "github.com/lmstream/lmstream/core/replay"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

var (
	runtimes table[*loop.Runtime]
	channels table[*streaming.Channel]
	muxes    table[*streaming.Mux]
)

// Every export recovers: a Go panic that unwound into C would abort the host.
func recovered(rc *C.int) {
	if p := recover(); p != nil {
		*rc = C.int(status.Internal)
	}
}

// recoveredMsg is recovered for calls with a message buffer.
func recoveredMsg(rc *C.int, buf *C.char, size C.size_t) {
	if p := recover(); p != nil {
		*rc = C.int(status.Internal)
		writeMsg(buf, size, fmt.Sprintf("internal error: %v", p))
	}
}

// writeMsg copies msg into a caller buffer, NUL-terminated and truncated at
// a character boundary. A NULL buffer or zero size is fine.
func writeMsg(buf *C.char, size C.size_t, msg string) {
	if buf == nil || size == 0 {
		return
	}
	n := len(msg)
	if n > int(size)-1 {
		n = int(size) - 1
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), n+1)
	copy(dst, msg[:n])
	dst[n] = 0
}

// fail reports err through the status code and the message buffer.
func fail(err error, buf *C.char, size C.size_t) C.int {
	writeMsg(buf, size, err.Error())
	return C.int(status.CodeOf(err))
}

func channelErr(err error) C.int {
	switch err {
	case nil:
		return C.LMS_OK
	case streaming.ErrEmpty:
		return C.LMS_EMPTY
	case streaming.ErrDone:
		return C.LMS_DONE
	case streaming.ErrReleased:
		return C.LMS_ERR_CLOSED
	case streaming.ErrAttached:
		return C.LMS_ERR_STATE
	case streaming.ErrInterrupted:
		return C.LMS_INTERRUPTED
	}
	return C.LMS_ERR_INTERNAL
}

func goBytes(s *C.char) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(s)), C.strlen(s))
}

//export lmsgo_configure_process
func lmsgo_configure_process(settings *C.char, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	if settings == nil {
		return fail(status.Errorf(status.InvalidArgument, "settings_json is NULL"), errBuf, errSize)
	}
	f, err := jsonstrict.ParseFields(goBytes(settings), "settings")
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	// Every setting is bounded: SetGCPercent truncates to 32 bits (2^32
	// would silently mean "collect continuously"), and GOMAXPROCS beyond
	// the machine only costs.
	var threads, gcPercent int
	var memLimit int64
	hasThreads, err := jsonstrict.TakeIn(f, "threads", &threads, 1, 1024)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	hasGC, err := jsonstrict.TakeIn(f, "gc_percent", &gcPercent, -1, 1_000_000)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	hasLimit, err := jsonstrict.TakeIn(f, "memory_limit_bytes", &memLimit, 1, math.MaxInt64)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	if err := f.Rest(); err != nil {
		return fail(err, errBuf, errSize)
	}
	if hasThreads {
		runtime.GOMAXPROCS(threads)
	}
	if hasGC {
		debug.SetGCPercent(gcPercent)
	}
	if hasLimit {
		debug.SetMemoryLimit(memLimit)
	}
	return C.LMS_OK
}

//export lmsgo_runtime_create
func lmsgo_runtime_create(config *C.char, out *C.lms_runtime, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	if config == nil || out == nil {
		return fail(status.Errorf(status.InvalidArgument, "config_json and out must not be NULL"), errBuf, errSize)
	}
	rt, err := loop.New(goBytes(config))
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	*out = C.lms_runtime(runtimes.add(rt))
	return C.LMS_OK
}

//export lmsgo_runtime_destroy
func lmsgo_runtime_destroy(h C.lms_runtime) (rc C.int) {
	defer recovered(&rc)
	rt, ok := runtimes.remove(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	rt.Close()
	return C.LMS_OK
}

//export lmsgo_runtime_stats
func lmsgo_runtime_stats(h C.lms_runtime, buf *C.char, size C.size_t, length *C.size_t) (rc C.int) {
	defer recovered(&rc)
	rt, ok := runtimes.get(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	js, _ := json.Marshal(rt.Stats())
	if length != nil {
		*length = C.size_t(len(js))
	}
	if buf == nil || int(size) < len(js)+1 {
		return C.LMS_ERR_BUFFER_TOO_SMALL
	}
	writeMsg(buf, size, string(js))
	return C.LMS_OK
}

//export lmsgo_channel_create
func lmsgo_channel_create(out *C.lms_channel) (rc C.int) {
	defer recovered(&rc)
	if out == nil {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	*out = C.lms_channel(channels.add(streaming.NewChannel()))
	return C.LMS_OK
}

func withChannel(h C.lms_channel, f func(*streaming.Channel) error) C.int {
	ch, ok := channels.get(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	return channelErr(f(ch))
}

//export lmsgo_channel_set_interval
func lmsgo_channel_set_interval(h C.lms_channel, n C.int32_t) (rc C.int) {
	defer recovered(&rc)
	return withChannel(h, func(ch *streaming.Channel) error { return ch.SetInterval(int(n)) })
}

//export lmsgo_channel_set_skip_special
func lmsgo_channel_set_skip_special(h C.lms_channel, skip C.int) (rc C.int) {
	defer recovered(&rc)
	return withChannel(h, func(ch *streaming.Channel) error { return ch.SetSkipSpecial(skip != 0) })
}

//export lmsgo_channel_set_queue
func lmsgo_channel_set_queue(h C.lms_channel, limit C.int32_t, policy C.int) (rc C.int) {
	defer recovered(&rc)
	if policy != C.LMS_QUEUE_COALESCE && policy != C.LMS_QUEUE_PAUSE {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	return withChannel(h, func(ch *streaming.Channel) error {
		return ch.SetQueue(int(limit), streaming.Policy(policy))
	})
}

//export lmsgo_submit
func lmsgo_submit(h C.lms_runtime, request *C.char, chans *C.lms_channel, n C.size_t, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	rt, ok := runtimes.get(uint64(h))
	if !ok {
		return fail(status.Errorf(status.InvalidHandle, "invalid runtime handle"), errBuf, errSize)
	}
	if request == nil || (chans == nil && n > 0) {
		return fail(status.Errorf(status.InvalidArgument, "request_json is NULL, or channels is NULL with n > 0"), errBuf, errSize)
	}
	if n == 0 {
		return fail(status.Errorf(status.InvalidArgument, "lms_submit needs one channel per prompt; use lms_complete to run a request without a channel"), errBuf, errSize)
	}
	if n > 1<<16 {
		return fail(status.Errorf(status.InvalidArgument, "%d channels is more than one request may attach", n), errBuf, errSize)
	}
	handles := unsafe.Slice(chans, n)
	list := make([]*streaming.Channel, n)
	for i, ch := range handles {
		c, ok := channels.get(uint64(ch))
		if !ok {
			return fail(status.Errorf(status.InvalidHandle, "channel %d is not a valid channel handle", i), errBuf, errSize)
		}
		list[i] = c
	}
	// Cancelling (or releasing) a channel while the request is prepared
	// stops its preparation: a grammar compile polls the context.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range list {
		defer c.NotifyCancel(cancel)()
	}
	if err := rt.SubmitContext(ctx, goBytes(request), list); err != nil {
		return fail(err, errBuf, errSize)
	}
	return C.LMS_OK
}

//export lmsgo_complete
func lmsgo_complete(h C.lms_runtime, request *C.char, out **C.lms_chunk, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	rt, ok := runtimes.get(uint64(h))
	if !ok {
		return fail(status.Errorf(status.InvalidHandle, "invalid runtime handle"), errBuf, errSize)
	}
	if request == nil || out == nil {
		return fail(status.Errorf(status.InvalidArgument, "request_json and out must not be NULL"), errBuf, errSize)
	}
	req, err := loop.ParseRequest(goBytes(request))
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	if req.Items() != 1 {
		return fail(status.Errorf(status.InvalidArgument, "lms_complete takes one prompt, got %d", req.Items()), errBuf, errSize)
	}
	res, err := rt.Complete(goBytes(request))
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	*out = mallocChunk(&res[0])
	return C.LMS_OK
}

//export lmsgo_channel_wait_pop
func lmsgo_channel_wait_pop(h C.lms_channel, timeoutMs C.int32_t, out **C.lms_chunk) (rc C.int) {
	defer recovered(&rc)
	if out == nil {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	*out = nil
	ch, ok := channels.get(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	if timeoutMs != 0 {
		if err := ch.Wait(timeout(timeoutMs)); err != nil {
			return channelErr(err)
		}
	}
	var got *C.lms_chunk
	_, err := ch.PopEach(1, func(c *streaming.Chunk) bool {
		got = mallocChunk(c)
		return true
	})
	if err != nil {
		return channelErr(err)
	}
	*out = got
	return C.LMS_OK
}

func timeout(ms C.int32_t) time.Duration {
	if ms < 0 {
		return -1
	}
	return time.Duration(ms) * time.Millisecond
}

//export lmsgo_channel_pop_batch
func lmsgo_channel_pop_batch(h C.lms_channel, chunks *C.lms_chunk, maxChunks C.size_t, buf unsafe.Pointer, bufSize C.size_t, timeoutMs C.int32_t, nOut *C.size_t) (rc C.int) {
	defer recovered(&rc)
	if nOut == nil || chunks == nil || maxChunks == 0 || (buf == nil && bufSize > 0) {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	*nOut = 0
	ch, ok := channels.get(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	if timeoutMs != 0 {
		if err := ch.Wait(timeout(timeoutMs)); err != nil {
			return channelErr(err)
		}
	}
	structs := unsafe.Slice(chunks, int(min(maxChunks, math.MaxInt32)))
	// Align the start for the payload's structs whatever buf is.
	off := int((-uintptr(buf)) & (payloadAlign - 1))
	size := int(bufSize)
	needed := 0
	n, err := ch.PopEach(len(structs), func(c *streaming.Chunk) bool {
		need := payloadSize(c)
		if off+need > size {
			needed = need + payloadAlign - 1
			return false
		}
		fillChunk(&structs[0], c, unsafe.Add(buf, off))
		structs = structs[1:]
		off += need
		return true
	})
	if err != nil {
		return channelErr(err)
	}
	if n == 0 {
		*nOut = C.size_t(needed)
		return C.LMS_ERR_BUFFER_TOO_SMALL
	}
	*nOut = C.size_t(n)
	return C.LMS_OK
}

//export lmsgo_channel_consume
func lmsgo_channel_consume(h C.lms_channel, handler C.lms_chunk_handler, user unsafe.Pointer) (rc C.int) {
	defer recovered(&rc)
	if handler == nil {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	ch, ok := channels.get(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	if _, err := ch.PopEach(1, func(*streaming.Chunk) bool { return false }); err == streaming.ErrDone {
		return C.LMS_DONE
	}
	var scratch unsafe.Pointer
	var scratchSize int
	defer func() { C.free(scratch) }()
	var view C.lms_chunk
	err := ch.Consume(func(c *streaming.Chunk) bool {
		if need := payloadSize(c); need > scratchSize {
			C.free(scratch)
			scratchSize = max(need, 2*scratchSize, 4096)
			scratch = C.malloc(C.size_t(scratchSize))
		}
		fillChunk(&view, c, scratch)
		return C.lms_call_handler(handler, &view, user) == 0
	})
	return channelErr(err)
}

//export lmsgo_channel_cancel
func lmsgo_channel_cancel(h C.lms_channel) (rc C.int) {
	defer recovered(&rc)
	return withChannel(h, func(ch *streaming.Channel) error { ch.Cancel(); return nil })
}

//export lmsgo_channel_fd
func lmsgo_channel_fd(h C.lms_channel, fd *C.int) (rc C.int) {
	defer recovered(&rc)
	if fd == nil {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	ch, ok := channels.get(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	f, err := ch.Fd()
	if err == streaming.ErrReleased {
		return C.LMS_ERR_CLOSED
	}
	if err != nil {
		return C.LMS_ERR_INTERNAL
	}
	*fd = C.int(f)
	return C.LMS_OK
}

//export lmsgo_channel_state
func lmsgo_channel_state(h C.lms_channel, finished *C.int, reason *C.int, pending *C.size_t) (rc C.int) {
	defer recovered(&rc)
	ch, ok := channels.get(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	fin, r := ch.Finished()
	if finished != nil {
		*finished = 0
		if fin {
			*finished = 1
		}
	}
	if reason != nil {
		*reason = C.int(r)
	}
	if pending != nil {
		*pending = C.size_t(ch.Pending())
	}
	return C.LMS_OK
}

//export lmsgo_channel_release
func lmsgo_channel_release(h C.lms_channel) (rc C.int) {
	defer recovered(&rc)
	ch, ok := channels.remove(uint64(h))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	ch.Release()
	return C.LMS_OK
}

func muxErr(err error) C.int {
	switch err {
	case nil:
		return C.LMS_OK
	case streaming.ErrInMux, streaming.ErrNotMember, streaming.ErrDupKey:
		return C.LMS_ERR_STATE
	case streaming.ErrMuxClosed, streaming.ErrReleased:
		return C.LMS_ERR_CLOSED
	case streaming.ErrEmpty:
		return C.LMS_EMPTY
	}
	return C.LMS_ERR_INTERNAL
}

//export lmsgo_mux_create
func lmsgo_mux_create(out *C.lms_mux) (rc C.int) {
	defer recovered(&rc)
	if out == nil {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	*out = 0
	m, err := streaming.NewMux()
	if err != nil {
		return C.LMS_ERR_INTERNAL
	}
	*out = C.lms_mux(muxes.add(m))
	return C.LMS_OK
}

// muxAndChannel resolves both handles of a membership call.
func muxAndChannel(mh C.lms_mux, ch C.lms_channel) (*streaming.Mux, *streaming.Channel, C.int) {
	m, ok := muxes.get(uint64(mh))
	if !ok {
		return nil, nil, C.LMS_ERR_INVALID_HANDLE
	}
	c, ok := channels.get(uint64(ch))
	if !ok {
		return nil, nil, C.LMS_ERR_INVALID_HANDLE
	}
	return m, c, C.LMS_OK
}

//export lmsgo_mux_add
func lmsgo_mux_add(mh C.lms_mux, ch C.lms_channel) (rc C.int) {
	defer recovered(&rc)
	m, c, rc := muxAndChannel(mh, ch)
	if rc != C.LMS_OK {
		return rc
	}
	// The channel's handle is its key: lms_mux_ready hands it back.
	return muxErr(m.Add(c, uint64(ch)))
}

//export lmsgo_mux_remove
func lmsgo_mux_remove(mh C.lms_mux, ch C.lms_channel) (rc C.int) {
	defer recovered(&rc)
	m, c, rc := muxAndChannel(mh, ch)
	if rc != C.LMS_OK {
		return rc
	}
	return muxErr(m.Remove(c))
}

//export lmsgo_mux_fd
func lmsgo_mux_fd(mh C.lms_mux, fd *C.int) (rc C.int) {
	defer recovered(&rc)
	if fd == nil {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	m, ok := muxes.get(uint64(mh))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	f, err := m.Fd()
	if err != nil {
		return muxErr(err)
	}
	*fd = C.int(f)
	return C.LMS_OK
}

//export lmsgo_mux_ready
func lmsgo_mux_ready(mh C.lms_mux, timeoutMs C.int32_t, out *C.lms_channel, maxN C.size_t, n *C.size_t) (rc C.int) {
	defer recovered(&rc)
	if n == nil || out == nil || maxN == 0 {
		return C.LMS_ERR_INVALID_ARGUMENT
	}
	*n = 0
	m, ok := muxes.get(uint64(mh))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	if timeoutMs != 0 {
		if err := m.Wait(timeout(timeoutMs)); err != nil {
			return muxErr(err)
		}
	}
	dst := unsafe.Slice((*uint64)(unsafe.Pointer(out)), int(min(maxN, math.MaxInt32)))
	k := m.Ready(dst)
	*n = C.size_t(k)
	if k == 0 {
		return C.LMS_EMPTY
	}
	return C.LMS_OK
}

//export lmsgo_mux_destroy
func lmsgo_mux_destroy(mh C.lms_mux) (rc C.int) {
	defer recovered(&rc)
	m, ok := muxes.remove(uint64(mh))
	if !ok {
		return C.LMS_ERR_INVALID_HANDLE
	}
	m.Close()
	return C.LMS_OK
}
