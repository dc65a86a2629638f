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

// payloadAlign is the alignment of a chunk's variable part: its logprob
// structs hold doubles and pointers.
const payloadAlign = 8

// Sizes of the logprob structs, laid out in the payload as C lays them out.
var (
	tokenLogprobSize = int(unsafe.Sizeof(C.lms_token_logprob{}))
	logprobSize      = int(unsafe.Sizeof(C.lms_logprob{}))
	toolCallSize     = int(unsafe.Sizeof(C.lms_tool_call_delta{}))
)

// A chunk's variable part, laid out after its struct (or in a caller's
// buffer), from the most to the least aligned: the token logprob structs,
// their alternatives' structs, the tool call structs, the token ids, the
// text and its NUL, the error message and its NUL, then every logprob's
// piece bytes, then the reply's strings (content, reasoning, and each
// call's id, name and arguments, each with its NUL); padded so the next
// chunk's part stays 8-byte aligned. The text follows the ids
// directly, as before logprobs existed: the Python binding reads both
// from one slice.
func payloadSize(c *streaming.Chunk) int {
	n := 4*len(c.TokenIDs) + len(c.Text) + 1 + len(c.ErrMessage) + 1
	for i := range c.Logprobs {
		lp := &c.Logprobs[i]
		n += tokenLogprobSize + len(lp.Bytes) + len(lp.Top)*logprobSize
		for _, t := range lp.Top {
			n += len(t.Bytes)
		}
	}
	if r := c.Reply; r != nil {
		n += len(r.Content) + 1 + len(r.Reasoning) + 1
		for _, d := range r.ToolCalls {
			n += toolCallSize + len(d.ID) + 1 + len(d.Name) + 1 + len(d.Arguments) + 1
		}
	}
	return (n + payloadAlign - 1) &^ (payloadAlign - 1)
}

// fillChunk writes c into dst, with its variable part at payload (C memory
// of at least payloadSize(c) bytes, 8-byte aligned).
func fillChunk(dst *C.lms_chunk, c *streaming.Chunk, payload unsafe.Pointer) {
	p := payload
	// Structs first, then the byte arrays they point into.
	var lps []C.lms_token_logprob
	if len(c.Logprobs) > 0 {
		lps = unsafe.Slice((*C.lms_token_logprob)(p), len(c.Logprobs))
		p = unsafe.Add(p, len(c.Logprobs)*tokenLogprobSize)
	}
	tops := make([][]C.lms_logprob, len(c.Logprobs))
	for i := range c.Logprobs {
		if n := len(c.Logprobs[i].Top); n > 0 {
			tops[i] = unsafe.Slice((*C.lms_logprob)(p), n)
			p = unsafe.Add(p, n*logprobSize)
		}
	}
	var calls []C.lms_tool_call_delta
	if c.Reply != nil && len(c.Reply.ToolCalls) > 0 {
		calls = unsafe.Slice((*C.lms_tool_call_delta)(p), len(c.Reply.ToolCalls))
		p = unsafe.Add(p, len(calls)*toolCallSize)
	}
	ids := unsafe.Slice((*int32)(p), len(c.TokenIDs))
	copy(ids, c.TokenIDs)
	idsAt := p
	text := unsafe.Add(p, 4*len(c.TokenIDs))
	tb := unsafe.Slice((*byte)(text), len(c.Text)+1)
	copy(tb, c.Text)
	tb[len(c.Text)] = 0
	msg := unsafe.Add(text, len(c.Text)+1)
	mb := unsafe.Slice((*byte)(msg), len(c.ErrMessage)+1)
	copy(mb, c.ErrMessage)
	mb[len(c.ErrMessage)] = 0
	p = unsafe.Add(msg, len(c.ErrMessage)+1)
	putBytes := func(b []byte) (*C.char, C.size_t) {
		at := p
		copy(unsafe.Slice((*byte)(at), len(b)), b)
		p = unsafe.Add(p, len(b))
		return (*C.char)(at), C.size_t(len(b))
	}
	for i := range c.Logprobs {
		lp := &c.Logprobs[i]
		d := &lps[i]
		d.token_id, d.logprob = C.int32_t(lp.ID), C.double(lp.Logprob)
		d.bytes, d.n_bytes = putBytes(lp.Bytes)
		d.top, d.n_top = nil, C.size_t(len(lp.Top))
		if len(lp.Top) > 0 {
			d.top = &tops[i][0]
		}
		for k, t := range lp.Top {
			e := &tops[i][k]
			e.token_id, e.logprob = C.int32_t(t.ID), C.double(t.Logprob)
			e.bytes, e.n_bytes = putBytes(t.Bytes)
		}
	}
	putString := func(s string) (*C.char, C.size_t) {
		at := p
		b := unsafe.Slice((*byte)(at), len(s)+1)
		copy(b, s)
		b[len(s)] = 0
		p = unsafe.Add(p, len(s)+1)
		return (*C.char)(at), C.size_t(len(s))
	}
	// Without a reply, content and reasoning are the text's NUL: "".
	empty := (*C.char)(unsafe.Add(text, len(c.Text)))
	dst.has_reply, dst.content, dst.content_len, dst.reasoning, dst.reasoning_len = 0, empty, 0, empty, 0
	dst.tool_calls, dst.n_tool_calls = nil, 0
	if r := c.Reply; r != nil {
		dst.has_reply = 1
		dst.content, dst.content_len = putString(r.Content)
		dst.reasoning, dst.reasoning_len = putString(r.Reasoning)
		for i, d := range r.ToolCalls {
			e := &calls[i]
			e.index = C.int32_t(d.Index)
			e.id, _ = putString(d.ID)
			e.name, _ = putString(d.Name)
			e.arguments, e.arguments_len = putString(d.Arguments)
		}
		if len(calls) > 0 {
			dst.tool_calls, dst.n_tool_calls = &calls[0], C.size_t(len(calls))
		}
	}
	dst.token_ids = (*C.int32_t)(idsAt)
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
		cached_tokens:         C.int64_t(u.CachedTokens),
	}
	dst.logprobs, dst.n_logprobs = nil, C.size_t(len(c.Logprobs))
	if len(lps) > 0 {
		dst.logprobs = &lps[0]
	}
}

// mallocChunk copies c into one malloc'd block (struct then payload), which
// lms_chunk_free releases with a single free().
func mallocChunk(c *streaming.Chunk) *C.lms_chunk {
	head := (C.size_t(unsafe.Sizeof(C.lms_chunk{})) + payloadAlign - 1) &^ (payloadAlign - 1)
	block := C.malloc(head + C.size_t(payloadSize(c)))
	if block == nil {
		panic("out of memory")
	}
	dst := (*C.lms_chunk)(block)
	fillChunk(dst, c, unsafe.Add(block, head))
	return dst
}
