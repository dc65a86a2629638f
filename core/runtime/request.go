package runtime

import (
	"encoding/json"
	"math"

	"github.com/lmstream/lmstream/core/status"
)

// Message is one turn of a chat, rendered by the model's chat template.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one submission: one prompt, or a batch of prompts that share
// every setting. Each prompt is a batch item with its own channel.
type Request struct {
	Prompts  []string  // one per batch item ("prompt" gives one)
	Messages []Message // a chat, instead of prompts

	MaxTokens    int // 0: until an end token or the context is full
	Stop         []string
	StopTokenIDs []int32
	IncludeStop  bool

	Temperature float64 // 0: greedy
	TopP        float64 // 1: off
	TopK        int     // 0: off
	MinP        float64 // 0: off
	Seed        uint64
	HasSeed     bool

	TPOTSLOMs float64 // 0: best effort
	TTFTSLOMs float64

	// Backend-specific fields (the replay script, for one) that the backend
	// takes in Prepare; anything it leaves is an unknown-field error.
	Extra *Fields
}

// Items is the number of batch items the request makes.
func (r *Request) Items() int {
	if len(r.Prompts) > 0 {
		return len(r.Prompts)
	}
	return 1
}

// ParseRequest reads and checks a request's JSON. Fields it does not know
// are left in Extra for the backend.
func ParseRequest(data []byte) (*Request, error) {
	f, err := ParseFields(data, "request")
	if err != nil {
		return nil, err
	}
	r := &Request{TopP: 1, Temperature: 0}
	var prompt *string
	if _, err := f.Take("prompt", &prompt); err != nil {
		return nil, err
	}
	hasPrompts, err := f.Take("prompts", &r.Prompts)
	if err != nil {
		return nil, err
	}
	hasMessages, err := f.Take("messages", &r.Messages)
	if err != nil {
		return nil, err
	}
	given := 0
	for _, b := range []bool{prompt != nil, hasPrompts, hasMessages} {
		if b {
			given++
		}
	}
	switch {
	case given == 0:
		return nil, status.Errorf(status.InvalidRequest, `request: one of "prompt", "prompts" or "messages" is required`)
	case given > 1:
		return nil, status.Errorf(status.InvalidRequest, `request: give only one of "prompt", "prompts" and "messages"`)
	case prompt != nil:
		r.Prompts = []string{*prompt}
	case hasPrompts && len(r.Prompts) == 0:
		return nil, status.Errorf(status.InvalidRequest, `request field "prompts" must hold at least one prompt`)
	case hasMessages:
		if len(r.Messages) == 0 {
			return nil, status.Errorf(status.InvalidRequest, `request field "messages" must hold at least one message`)
		}
		for i, m := range r.Messages {
			if m.Role == "" {
				return nil, status.Errorf(status.InvalidRequest, `request: messages[%d] has no "role"`, i)
			}
		}
	}

	if _, err := f.Take("max_tokens", &r.MaxTokens); err != nil {
		return nil, err
	}
	if r.MaxTokens < 0 {
		return nil, status.Errorf(status.InvalidRequest, `request field "max_tokens" must be at least 1 (or absent), got %d`, r.MaxTokens)
	}
	if f.Has("stop") {
		// A single string or an array of strings, as OpenAI-style APIs take it.
		var raw json.RawMessage
		f.Take("stop", &raw)
		var one string
		if json.Unmarshal(raw, &one) == nil {
			r.Stop = []string{one}
		} else if err := json.Unmarshal(raw, &r.Stop); err != nil {
			return nil, status.Errorf(status.InvalidRequest, `request field "stop" must be a string or an array of strings`)
		}
	}
	if _, err := f.Take("stop_token_ids", &r.StopTokenIDs); err != nil {
		return nil, err
	}
	if _, err := f.Take("include_stop", &r.IncludeStop); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		key      string
		dst      *float64
		lo, hi   float64
		loIsOpen bool
	}{
		{"temperature", &r.Temperature, 0, 100, false},
		{"top_p", &r.TopP, 0, 1, true},
		{"min_p", &r.MinP, 0, 1, false},
		{"tpot_slo_ms", &r.TPOTSLOMs, 0, math.Inf(1), false},
		{"ttft_slo_ms", &r.TTFTSLOMs, 0, math.Inf(1), false},
	} {
		if _, err := f.Take(p.key, p.dst); err != nil {
			return nil, err
		}
		v := *p.dst
		if v < p.lo || v > p.hi || (p.loIsOpen && v == p.lo) || math.IsNaN(v) {
			open := "["
			if p.loIsOpen {
				open = "("
			}
			return nil, status.Errorf(status.InvalidRequest, "request field %q must be in %s%g, %g], got %g", p.key, open, p.lo, p.hi, v)
		}
	}
	if _, err := f.Take("top_k", &r.TopK); err != nil {
		return nil, err
	}
	if r.TopK < 0 {
		return nil, status.Errorf(status.InvalidRequest, `request field "top_k" must be 0 (off) or positive, got %d`, r.TopK)
	}
	if r.HasSeed, err = f.Take("seed", &r.Seed); err != nil {
		return nil, err
	}
	r.Extra = f
	return r, nil
}
