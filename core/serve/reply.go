package serve

import (
	"strings"

	"github.com/lmstream/lmstream/streaming"
)

// replyState is one choice's answer as the runtime parsed it: content,
// reasoning and tool calls, which OpenAI's API returns apart.
type replyState struct {
	content, reasoning strings.Builder
	calls              int // calls begun
	toolCalls          []map[string]any
	args               []*strings.Builder
}

// add collects a delta, for a whole (non-streamed) answer.
func (r *replyState) add(d *streaming.Reply) {
	r.content.WriteString(d.Content)
	r.reasoning.WriteString(d.Reasoning)
	for _, c := range d.ToolCalls {
		i := int(c.Index)
		if c.ID != "" && i == len(r.toolCalls) {
			r.calls++
			r.args = append(r.args, &strings.Builder{})
			r.toolCalls = append(r.toolCalls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name}})
		}
		if i < len(r.args) { // calls are numbered in order; a delta of no call begun is dropped
			r.args[i].WriteString(c.Arguments)
		}
	}
}

// message is the choice's "message": content null when the answer is
// only calls, as OpenAI sends it; reasoning_content when there is any.
func (r *replyState) message() map[string]any {
	m := map[string]any{"role": "assistant", "content": r.content.String()}
	if r.reasoning.Len() > 0 {
		m["reasoning_content"] = r.reasoning.String()
	}
	if len(r.toolCalls) > 0 {
		for i, c := range r.toolCalls {
			c["function"].(map[string]any)["arguments"] = r.args[i].String()
		}
		m["tool_calls"] = r.toolCalls
		if r.content.Len() == 0 {
			m["content"] = nil
		}
	}
	return m
}

// streamDelta is one SSE chunk's delta and logprobs.
type streamDelta struct {
	delta    map[string]any
	logprobs any
}

// deltas turns a chunk's parsed reply into OpenAI's streamed deltas:
// reasoning and content as they come; a call's first delta with its index,
// id, type, name and empty arguments, then its arguments, as OpenAI
// streams them (clients concatenate the arguments by index).
func (r *replyState) deltas(d *streaming.Reply, logprobs []any) []streamDelta {
	var out []streamDelta
	text := map[string]any{}
	if d.Reasoning != "" {
		text["reasoning_content"] = d.Reasoning
	}
	if d.Content != "" {
		text["content"] = d.Content
	}
	var lp any
	if logprobs != nil {
		lp = map[string]any{"content": logprobs}
	}
	if len(text) > 0 || lp != nil {
		out = append(out, streamDelta{delta: text, logprobs: lp})
	}
	for _, c := range d.ToolCalls {
		if c.ID != "" {
			r.calls++
			out = append(out, streamDelta{delta: map[string]any{"tool_calls": []any{map[string]any{
				"index": c.Index, "id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": ""},
			}}}})
		}
		if c.Arguments != "" {
			out = append(out, streamDelta{delta: map[string]any{"tool_calls": []any{map[string]any{
				"index": c.Index, "function": map[string]any{"arguments": c.Arguments},
			}}}})
		}
	}
	return out
}
