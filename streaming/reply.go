package streaming

// A ReplyParser splits a chat model's answer into what chat APIs return
// apart: the content, the reasoning (the model's thinking before it
// answers) and the tool calls, each in the syntax of the model's family
// (core/reply implements them). The stream feeds it the text it releases
// to the consumer, after stop strings, and attaches what the parser makes
// of it to every chunk as Chunk.Reply; Chunk.Text stays the raw text, so
// the contract's invariants hold whether or not a request parses replies.
//
// A parser belongs to the engine goroutine, as its Stream does.
type ReplyParser interface {
	// Wants reports whether a special token's piece is part of the reply
	// syntax (a tool-call or channel marker): the stream writes it to the
	// parser even when special tokens are skipped from the text.
	Wants(piece []byte) bool
	// Write gives the parser the next text of the answer.
	Write(text []byte)
	// Take returns what the text written since the last Take completed.
	// With final set the answer has ended: whatever the parser held back
	// (a possible marker, an unfinished call) is settled and returned.
	Take(final bool) Reply
}

// Reply is one delta of a parsed answer. Contents and reasonings of
// consecutive deltas concatenate; tool-call deltas follow OpenAI's
// streaming shape: a call's first delta carries its index, id and name,
// later ones more of its arguments' JSON text.
type Reply struct {
	Content   string          `json:"content,omitempty"`
	Reasoning string          `json:"reasoning,omitempty"`
	ToolCalls []ToolCallDelta `json:"tool_calls,omitempty"`
}

// ToolCallDelta is part of one tool call.
type ToolCallDelta struct {
	Index     int32  `json:"index"`          // the call's position among the answer's calls
	ID        string `json:"id,omitempty"`   // on the call's first delta
	Name      string `json:"name,omitempty"` // on the call's first delta
	Arguments string `json:"arguments"`      // more of the arguments' JSON text
}

// Empty reports whether the delta says nothing.
func (r *Reply) Empty() bool {
	return r.Content == "" && r.Reasoning == "" && len(r.ToolCalls) == 0
}

// Merge appends a later delta, as a client assembling a streamed answer
// does. A later call delta that continues the last call (no id: only more
// arguments) is folded into it.
func (r *Reply) Merge(later *Reply) {
	r.Content += later.Content
	r.Reasoning += later.Reasoning
	for _, d := range later.ToolCalls {
		if n := len(r.ToolCalls); n > 0 && d.ID == "" && r.ToolCalls[n-1].Index == d.Index {
			r.ToolCalls[n-1].Arguments += d.Arguments
			continue
		}
		r.ToolCalls = append(r.ToolCalls, d)
	}
}
