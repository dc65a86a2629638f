package main

/*
#include <stdlib.h>
#include "lmstream.h"
*/
import "C"

import (
	"unsafe"

	"github.com/lmstream/lmstream/streaming"
)

// A chunk's variable part, laid out after its struct (or in a caller's
// buffer): the token ids, the text and its NUL, the error message and its
// NUL, padded so the next chunk's ids stay 4-byte aligned.
func payloadSize(c *streaming.Chunk) int {
	n := 4*len(c.TokenIDs) + len(c.Text) + 1 + len(c.ErrMessage) + 1
	return (n + 3) &^ 3
}

// fillChunk writes c into dst, with its variable part at payload (C memory
// of at least payloadSize(c) bytes, 4-byte aligned).
func fillChunk(dst *C.lms_chunk, c *streaming.Chunk, payload unsafe.Pointer) {
	ids := unsafe.Slice((*int32)(payload), len(c.TokenIDs))
	copy(ids, c.TokenIDs)
	text := unsafe.Add(payload, 4*len(c.TokenIDs))
	tb := unsafe.Slice((*byte)(text), len(c.Text)+1)
	copy(tb, c.Text)
	tb[len(c.Text)] = 0
	msg := unsafe.Add(text, len(c.Text)+1)
	mb := unsafe.Slice((*byte)(msg), len(c.ErrMessage)+1)
	copy(mb, c.ErrMessage)
	mb[len(c.ErrMessage)] = 0

	dst.token_ids = (*C.int32_t)(payload)
	dst.n_token_ids = C.size_t(len(c.TokenIDs))
	dst.text = (*C.char)(text)
	dst.text_len = C.size_t(len(c.Text))
	dst.finished = 0
	if c.Finished {
		dst.finished = 1
	}
	dst.reason = C.int32_t(c.Reason)
	dst.error_code = C.int32_t(c.ErrCode)
	dst.batch_index = C.int32_t(c.BatchIndex)
	dst.error_message = (*C.char)(msg)
	u := &c.Usage
	dst.usage = C.lms_usage{
		prompt_tokens:         C.int64_t(u.PromptTokens),
		generated_tokens:      C.int64_t(u.GeneratedTokens),
		ttft_ms:               C.double(u.TTFTMs),
		tpot_ms:               C.double(u.TPOTMs),
		draft_tokens_proposed: C.int64_t(u.DraftProposed),
		draft_tokens_accepted: C.int64_t(u.DraftAccepted),
		verify_passes:         C.int64_t(u.VerifyPasses),
	}
}

// mallocChunk copies c into one malloc'd block (struct then payload), which
// lms_chunk_free releases with a single free().
func mallocChunk(c *streaming.Chunk) *C.lms_chunk {
	head := C.size_t(unsafe.Sizeof(C.lms_chunk{}))
	block := C.malloc(head + C.size_t(payloadSize(c)))
	if block == nil {
		panic("out of memory")
	}
	dst := (*C.lms_chunk)(block)
	fillChunk(dst, c, unsafe.Add(block, head))
	return dst
}
