package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

// answer is one completion request being answered: its choices' chunks
// arrive from their channels and leave as SSE events, or are collected
// into one JSON response.
type answer struct {
	s       *Server
	c       *call
	w       http.ResponseWriter
	rc      *http.ResponseController
	id      string
	created int64

	buf bytes.Buffer // one event, reused
	enc *json.Encoder
}

// event is a chunk of choice idx, copied out of its channel.
type event struct {
	idx   int
	chunk streaming.Chunk
}

// run relays the choices' chunks until every choice has finished, the
// client has gone (ctx, or a write that failed or waited past
// WriteTimeout: its request is cancelled at once, freeing its slots) or
// the server's grace period ends.
func (a *answer) run(ctx context.Context, chans []*streaming.Channel) {
	events := make(chan event, 4*len(chans))
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for i, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Consume blocks for each chunk; returning false (the answer
			// has stopped reading) cancels the request.
			ch.Consume(func(c *streaming.Chunk) bool {
				ev := event{idx: i, chunk: *c}
				ev.chunk.TokenIDs = nil // only the text is served; the ids' memory is the channel's
				if len(c.Logprobs) > 0 && c.Finished && c.Reason == streaming.EndId {
					// The end token produces no content; OpenAI lists none for it.
					ev.chunk.Logprobs = c.Logprobs[:len(c.Logprobs)-1]
				}
				select {
				case events <- ev:
					return true
				case <-quit:
					return false
				}
			})
		}()
	}
	defer func() {
		close(quit)
		for _, ch := range chans {
			ch.Cancel()
		}
		wg.Wait()
	}()

	a.enc = json.NewEncoder(&a.buf)
	a.enc.SetEscapeHTML(false)
	n := len(chans)
	texts := make([]strings.Builder, n)
	replies := make([]*replyState, n) // per choice, when the runtime parsed the reply
	lps := make([][]any, n)           // per choice, when the request asked for logprobs
	reasons := make([]string, n)
	var usage streaming.Usage
	if a.c.stream {
		h := a.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		// Proxies (nginx) must pass events on as they come.
		h.Set("X-Accel-Buffering", "no")
		a.w.WriteHeader(http.StatusOK)
		if a.c.kind == chatEndpoint {
			for i := range n {
				a.send(a.chatChunk(i, map[string]string{"role": "assistant", "content": ""}, nil, nil))
			}
		}
		if !a.flushed() {
			return
		}
	}
	for left := n; left > 0; {
		var ev event
		select {
		case <-ctx.Done():
			a.s.metrics.finished("disconnected")
			return
		case <-a.s.ending:
			a.s.metrics.finished("shutdown")
			a.failed(int32(status.Shutdown), "the server shut down before the answer was complete")
			return
		case ev = <-events:
		}
		c := &ev.chunk
		content := logprobContent(c.Logprobs)
		if c.Reply != nil && a.c.kind == chatEndpoint {
			r := replies[ev.idx]
			if r == nil {
				r = &replyState{}
				replies[ev.idx] = r
			}
			if a.c.stream {
				for _, d := range r.deltas(c.Reply, content) {
					a.send(a.chatChunk(ev.idx, d.delta, nil, d.logprobs))
				}
			} else {
				r.add(c.Reply)
				lps[ev.idx] = append(lps[ev.idx], content...)
			}
		} else if c.Text != "" || len(content) > 0 {
			if a.c.stream {
				// Tokens whose text is still held back (part of a
				// character, a possible stop) bring their logprobs alone.
				a.send(a.delta(ev.idx, c.Text, nil, content))
			} else {
				texts[ev.idx].WriteString(c.Text)
				lps[ev.idx] = append(lps[ev.idx], content...)
			}
		}
		if c.Finished {
			left--
			a.s.metrics.observe(c)
			if c.Reason == streaming.Error || c.Reason == streaming.Cancelled {
				code, msg := c.ErrCode, c.ErrMessage
				if c.Reason == streaming.Cancelled {
					code, msg = int32(status.Interrupted), "the request was cancelled"
				}
				a.failed(code, msg)
				return
			}
			reasons[ev.idx] = finishReason(c.Reason)
			if r := replies[ev.idx]; r != nil && r.calls > 0 && reasons[ev.idx] == "stop" {
				reasons[ev.idx] = "tool_calls"
			}
			if ev.idx == 0 || usage.PromptTokens == 0 {
				usage.PromptTokens, usage.CachedTokens = c.Usage.PromptTokens, c.Usage.CachedTokens
			}
			usage.GeneratedTokens += c.Usage.GeneratedTokens
			if a.c.stream {
				a.send(a.delta(ev.idx, "", &reasons[ev.idx], nil))
			}
		}
		if a.c.stream && len(events) == 0 && !a.flushed() {
			return
		}
	}
	// prompt_tokens_details.cached_tokens: the prompt tokens found in a
	// KV cache and not prefilled (OpenAI's field for its prompt caching).
	u := map[string]any{
		"prompt_tokens": usage.PromptTokens, "completion_tokens": usage.GeneratedTokens,
		"total_tokens":          usage.PromptTokens + usage.GeneratedTokens,
		"prompt_tokens_details": map[string]int{"cached_tokens": usage.CachedTokens},
	}
	if a.c.stream {
		if a.c.includeUsage {
			a.send(map[string]any{"id": a.id, "object": a.object(), "created": a.created, "model": a.s.opts.ModelID, "choices": []any{}, "usage": u})
		}
		a.buf.WriteString("data: [DONE]\n\n")
		a.flush()
		return
	}
	choices := make([]any, n)
	for i := range choices {
		if a.c.kind == chatEndpoint {
			var msg any = map[string]string{"role": "assistant", "content": texts[i].String()}
			if r := replies[i]; r != nil {
				msg = r.message()
			}
			choices[i] = map[string]any{"index": i, "message": msg, "logprobs": logprobsField(lps[i], a.c.logprobs), "finish_reason": reasons[i]}
		} else {
			choices[i] = map[string]any{"index": i, "text": texts[i].String(), "logprobs": nil, "finish_reason": reasons[i]}
		}
	}
	object := "chat.completion"
	if a.c.kind == completionEndpoint {
		object = "text_completion"
	}
	a.writeDeadline()
	writeJSON(a.w, http.StatusOK, map[string]any{"id": a.id, "object": object, "created": a.created, "model": a.s.opts.ModelID, "choices": choices, "usage": u})
}

// failed ends the answer with an error: an SSE error event (OpenAI's error
// object; clients raise it) when streaming, else an error response.
func (a *answer) failed(code int32, msg string) {
	typ, httpCode := "server_error", http.StatusInternalServerError
	switch status.Code(code) {
	case status.Shutdown:
		httpCode = http.StatusServiceUnavailable
	case status.PromptTooLong, status.InvalidRequest:
		typ, httpCode = "invalid_request_error", http.StatusBadRequest
	}
	body := errorBody(typ, "", msg, errorCode(code))
	a.writeDeadline()
	if !a.c.stream {
		writeJSON(a.w, httpCode, body)
		return
	}
	a.send(body)
	a.flush()
}

func finishReason(r streaming.FinishReason) string {
	if r == streaming.Length {
		return "length"
	}
	return "stop" // an end token, a stop string or a stop token id
}

func (a *answer) object() string {
	if a.c.kind == chatEndpoint {
		return "chat.completion.chunk"
	}
	return "text_completion"
}

func (a *answer) chatChunk(idx int, delta any, reason *string, logprobs any) any {
	return a.usageNull(map[string]any{
		"id": a.id, "object": "chat.completion.chunk", "created": a.created, "model": a.s.opts.ModelID,
		"choices": []any{map[string]any{"index": idx, "delta": delta, "logprobs": logprobs, "finish_reason": reason}},
	})
}

// usageNull gives a chunk "usage": null when the client asked for the
// usage chunk: OpenAI's shape, in which clients that read chunk.usage
// find the field on every chunk and a value only on the last.
func (a *answer) usageNull(chunk map[string]any) map[string]any {
	if a.c.includeUsage {
		chunk["usage"] = nil
	}
	return chunk
}

// logprobContent is OpenAI's logprobs "content" entries of a chunk's
// tokens: token (the piece as text), logprob, bytes (the piece's bytes,
// which a token that splits a character needs) and top_logprobs.
func logprobContent(lps []streaming.TokenLogprob) []any {
	if len(lps) == 0 {
		return nil
	}
	out := make([]any, len(lps))
	for i, lp := range lps {
		top := make([]any, len(lp.Top))
		for k, t := range lp.Top {
			top[k] = logprobEntry(t.Bytes, t.Logprob)
		}
		e := logprobEntry(lp.Bytes, lp.Logprob)
		e["top_logprobs"] = top
		out[i] = e
	}
	return out
}

func logprobEntry(piece []byte, logprob float64) map[string]any {
	b := make([]int, len(piece))
	for i, x := range piece {
		b[i] = int(x)
	}
	return map[string]any{"token": strings.ToValidUTF8(string(piece), "\uFFFD"), "logprob": logprob, "bytes": b}
}

// logprobsField is a choice's "logprobs": null unless the request asked.
func logprobsField(content []any, asked bool) any {
	if !asked {
		return nil
	}
	if content == nil {
		content = []any{}
	}
	return map[string]any{"content": content}
}

// delta is one choice's streamed text, or its end when reason is set.
func (a *answer) delta(idx int, text string, reason *string, content []any) any {
	if a.c.kind == chatEndpoint {
		d := map[string]string{}
		if text != "" {
			d["content"] = text
		}
		var lp any
		if content != nil {
			lp = map[string]any{"content": content}
		}
		return a.chatChunk(idx, d, reason, lp)
	}
	return a.usageNull(map[string]any{
		"id": a.id, "object": "text_completion", "created": a.created, "model": a.s.opts.ModelID,
		"choices": []any{map[string]any{"index": idx, "text": text, "logprobs": nil, "finish_reason": reason}},
	})
}

// send appends one SSE event; flush writes what is pending.
func (a *answer) send(v any) {
	a.buf.WriteString("data: ")
	a.enc.Encode(v) // ends with '\n'
	a.buf.WriteString("\n")
}

// Each write has WriteTimeout to complete: one that cannot (the client
// stopped reading and the socket's buffers are full) fails, and the
// answer ends there.
func (a *answer) flush() error {
	if a.buf.Len() == 0 {
		return nil
	}
	a.writeDeadline()
	_, err := a.w.Write(a.buf.Bytes())
	a.buf.Reset()
	if err == nil {
		err = a.rc.Flush()
	}
	return err
}

// flushed flushes, and reports false (counting why) when the answer must
// end because the write failed.
func (a *answer) flushed() bool {
	err := a.flush()
	switch {
	case err == nil:
		return true
	case errors.Is(err, os.ErrDeadlineExceeded):
		a.s.metrics.finished("write_timeout")
	default:
		a.s.metrics.finished("disconnected")
	}
	return false
}

func (a *answer) writeDeadline() {
	_ = a.rc.SetWriteDeadline(time.Now().Add(a.s.opts.WriteTimeout)) // unsupported: no deadline
}
