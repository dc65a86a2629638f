package main

/*
#include <stdlib.h>
#include <string.h>
#include "lmstream.h"
*/
import "C"

import (
	"encoding/json"
	"unsafe"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
)

// The introspection exports (header section "Introspection"). Each copies
// its answer into caller memory; none hands out Go memory.

// introspector resolves a runtime handle to its backend's Introspector.
func introspector(h C.lms_runtime) (loop.Introspector, error) {
	rt, ok := runtimes.get(uint64(h))
	if !ok {
		return nil, status.Errorf(status.InvalidHandle, "invalid runtime handle")
	}
	return rt.Introspector()
}

// putBytes writes b and a NUL into buf the way lms_runtime_stats does:
// *length (when not NULL) gets len(b), and a buffer that cannot hold b and
// its NUL gets nothing.
func putBytes(b []byte, buf *C.char, size C.size_t, length *C.size_t, errBuf *C.char, errSize C.size_t) C.int {
	if length != nil {
		*length = C.size_t(len(b))
	}
	if buf == nil || uint64(size) < uint64(len(b))+1 {
		writeMsg(errBuf, errSize, "the buffer is too small: the answer needs "+itoa(len(b)+1)+" bytes with its NUL")
		return C.LMS_ERR_BUFFER_TOO_SMALL
	}
	dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(b)+1)
	copy(dst, b)
	dst[len(b)] = 0
	return C.LMS_OK
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// textArg is the bytes of a (pointer, length) argument; NULL is only fine
// with length 0.
func textArg(text *C.char, n C.size_t) ([]byte, bool) {
	if n == 0 {
		return nil, true
	}
	if text == nil {
		return nil, false
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(text)), int(n)), true
}

func tokenize(h C.lms_runtime, text *C.char, n C.size_t, flags C.int) ([]int32, error) {
	if flags&^(C.LMS_TOKENIZE_ADD_SPECIAL|C.LMS_TOKENIZE_PARSE_SPECIAL) != 0 {
		return nil, status.Errorf(status.InvalidArgument, "unknown tokenize flags 0x%x", int(flags))
	}
	b, ok := textArg(text, n)
	if !ok {
		return nil, status.Errorf(status.InvalidArgument, "text is NULL with text_len > 0")
	}
	in, err := introspector(h)
	if err != nil {
		return nil, err
	}
	return in.Tokenize(string(b), flags&C.LMS_TOKENIZE_ADD_SPECIAL != 0, flags&C.LMS_TOKENIZE_PARSE_SPECIAL != 0)
}

//export lmsgo_tokenize
func lmsgo_tokenize(h C.lms_runtime, text *C.char, n C.size_t, flags C.int, ids *C.int32_t, maxIDs C.size_t, nIDs *C.size_t, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	if ids == nil && maxIDs > 0 {
		return fail(status.Errorf(status.InvalidArgument, "ids is NULL with max_ids > 0"), errBuf, errSize)
	}
	toks, err := tokenize(h, text, n, flags)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	if nIDs != nil {
		*nIDs = C.size_t(len(toks))
	}
	if uint64(maxIDs) < uint64(len(toks)) {
		writeMsg(errBuf, errSize, "ids holds "+itoa(int(maxIDs))+" ids; the text has "+itoa(len(toks))+" tokens")
		return C.LMS_ERR_BUFFER_TOO_SMALL
	}
	if len(toks) > 0 {
		copy(unsafe.Slice((*int32)(unsafe.Pointer(ids)), len(toks)), toks)
	}
	return C.LMS_OK
}

//export lmsgo_count_tokens
func lmsgo_count_tokens(h C.lms_runtime, text *C.char, n C.size_t, flags C.int, nTokens *C.size_t, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	if nTokens == nil {
		return fail(status.Errorf(status.InvalidArgument, "n_tokens is NULL"), errBuf, errSize)
	}
	toks, err := tokenize(h, text, n, flags)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	*nTokens = C.size_t(len(toks))
	return C.LMS_OK
}

//export lmsgo_detokenize
func lmsgo_detokenize(h C.lms_runtime, ids *C.int32_t, nIDs C.size_t, flags C.int, buf *C.char, size C.size_t, length *C.size_t, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	if flags&^C.LMS_DETOKENIZE_SKIP_SPECIAL != 0 {
		return fail(status.Errorf(status.InvalidArgument, "unknown detokenize flags 0x%x", int(flags)), errBuf, errSize)
	}
	if ids == nil && nIDs > 0 {
		return fail(status.Errorf(status.InvalidArgument, "ids is NULL with n_ids > 0"), errBuf, errSize)
	}
	in, err := introspector(h)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	var list []int32
	if nIDs > 0 {
		list = unsafe.Slice((*int32)(unsafe.Pointer(ids)), int(nIDs))
	}
	text, err := in.Detokenize(list, flags&C.LMS_DETOKENIZE_SKIP_SPECIAL != 0)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	return putBytes(text, buf, size, length, errBuf, errSize)
}

//export lmsgo_model_info
func lmsgo_model_info(h C.lms_runtime, buf *C.char, size C.size_t, length *C.size_t) (rc C.int) {
	defer recovered(&rc)
	in, err := introspector(h)
	if err != nil {
		return C.int(status.CodeOf(err))
	}
	js, err := json.Marshal(in.ModelInfo())
	if err != nil {
		return C.LMS_ERR_INTERNAL
	}
	return putBytes(js, buf, size, length, nil, 0)
}

//export lmsgo_render_chat
func lmsgo_render_chat(h C.lms_runtime, request *C.char, buf *C.char, size C.size_t, length *C.size_t, errBuf *C.char, errSize C.size_t) (rc C.int) {
	defer recoveredMsg(&rc, errBuf, errSize)
	if request == nil {
		return fail(status.Errorf(status.InvalidArgument, "request_json is NULL"), errBuf, errSize)
	}
	in, err := introspector(h)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	c, err := loop.ParseChat(goBytes(request))
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	text, err := in.RenderChat(c.Messages, c.AddGenerationPrompt, &c.Chat)
	if err != nil {
		return fail(err, errBuf, errSize)
	}
	return putBytes([]byte(text), buf, size, length, errBuf, errSize)
}
