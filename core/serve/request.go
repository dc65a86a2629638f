package serve

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
)

// endpoint is which OpenAI API a request came through; it decides the
// response's object names and whether "messages" or "prompt" is expected.
type endpoint int

const (
	chatEndpoint endpoint = iota
	completionEndpoint
)

// MaxN bounds "n": each choice is a batch item with its own slot and stream.
const MaxN = 128

// call is an OpenAI request translated for the runtime.
type call struct {
	kind         endpoint
	stream       bool
	includeUsage bool
	n            int
	// logprobs: the request asked for them ("logprobs": true; the
	// runtime checks the field), so choices carry OpenAI's logprobs.
	logprobs bool
	// runtimeJSON is the request the runtime parses: OpenAI's own fields
	// renamed where lmstream names them differently, "n" turned into batch
	// items, and every other field passed through so that the runtime (and
	// its backend) accepts or rejects it; nothing is dropped silently.
	runtimeJSON []byte
}

// requestError is a 400 about one field, in OpenAI's error shape.
type requestError struct {
	param string
	msg   string
}

func (e *requestError) Error() string { return e.msg }

func badField(param, format string, args ...any) error {
	return &requestError{param: param, msg: fmt.Sprintf(format, args...)}
}

// parseCall translates an OpenAI request body. render turns chat messages
// into prompt text when the request asks for several choices (the runtime
// takes "messages" for one batch item only); nil when the backend cannot.
//
// drafter, when not "", is the "drafter" of a request that names none.
func parseCall(kind endpoint, body []byte, render func([]loop.Message) (string, error), drafter string) (*call, error) {
	// The strict scanner first: malformed JSON, duplicate keys, invalid
	// UTF-8 and trailing data are errors before any field is looked at.
	if _, err := jsonstrict.ParseFields(body, "request"); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, badField("", "request: %v", err)
	}
	c := &call{kind: kind, n: 1}
	take := func(key string, dst any, want string) (bool, error) {
		raw, ok := m[key]
		if !ok {
			return false, nil
		}
		delete(m, key)
		if err := json.Unmarshal(raw, dst); err != nil || string(raw) == "null" {
			return true, badField(key, "request field %q must be %s, got %s", key, want, kindOf(raw))
		}
		return true, nil
	}
	// "model": one model per process, so any name is served by it (clients
	// must send one); the response names the model that answered.
	var model string
	if _, err := take("model", &model, "a string"); err != nil {
		return nil, err
	}
	if _, err := take("stream", &c.stream, "a boolean"); err != nil {
		return nil, err
	}
	if raw, ok := m["stream_options"]; ok {
		delete(m, "stream_options")
		var so map[string]json.RawMessage
		if err := json.Unmarshal(raw, &so); err != nil || so == nil {
			return nil, badField("stream_options", `request field "stream_options" must be an object, got %s`, kindOf(raw))
		}
		for k, v := range so {
			if k != "include_usage" {
				return nil, badField("stream_options", `request field "stream_options": unknown field %q`, k)
			}
			if err := json.Unmarshal(v, &c.includeUsage); err != nil || string(v) == "null" {
				return nil, badField("stream_options", `request field "stream_options.include_usage" must be a boolean, got %s`, kindOf(v))
			}
		}
		if !c.stream {
			return nil, badField("stream_options", `request field "stream_options" is only allowed with "stream": true`)
		}
	}
	// "user" identifies the caller to OpenAI; lmstream keeps no per-user
	// state, but clients send it, so it is accepted when it is a string.
	var user string
	if _, err := take("user", &user, "a string"); err != nil {
		return nil, err
	}
	if given, err := take("n", &c.n, "an integer"); err != nil {
		return nil, err
	} else if given && (c.n < 1 || c.n > MaxN) {
		return nil, badField("n", `request field "n" must be in [1, %d], got %d`, MaxN, c.n)
	}
	if raw, ok := m["max_completion_tokens"]; ok {
		if _, both := m["max_tokens"]; both {
			return nil, badField("max_completion_tokens", `request: give "max_tokens" or "max_completion_tokens", not both`)
		}
		delete(m, "max_completion_tokens")
		m["max_tokens"] = raw
	}
	// Batch items come from "n" in the OpenAI API, so lmstream's own
	// "prompts" would be a second way to say it.
	if _, ok := m["prompts"]; ok {
		return nil, badField("prompts", `request field "prompts" is not part of the OpenAI API: send "prompt" (and "n" for several choices)`)
	}

	if raw, ok := m["logprobs"]; ok {
		_ = json.Unmarshal(raw, &c.logprobs) // left in m: a bad value is the runtime's error to report
	}
	switch kind {
	case chatEndpoint:
		if _, ok := m["prompt"]; ok {
			return nil, badField("prompt", `/v1/chat/completions takes "messages", not "prompt" (use /v1/completions)`)
		}
		raw, ok := m["messages"]
		if !ok {
			return nil, badField("messages", `request field "messages" is required`)
		}
		msgs, err := parseMessages(raw)
		if err != nil {
			return nil, err
		}
		norm, _ := json.Marshal(msgs)
		m["messages"] = norm
		if _, tools := m["tools"]; tools && c.n > 1 {
			return nil, badField("n", `request field "n" above 1 cannot be combined with "tools"`)
		}
		if c.n > 1 {
			if render == nil {
				return nil, badField("n", `request field "n" above 1 with "messages" needs a backend that renders chats`)
			}
			text, err := render(msgs)
			if err != nil {
				return nil, err
			}
			delete(m, "messages")
			m["prompts"] = repeat(text, c.n)
		}
	case completionEndpoint:
		// The legacy endpoint's "logprobs" is a number with another
		// answer shape (tokens, token_logprobs, text_offset); the runtime's
		// is the chat endpoint's boolean, served there.
		if _, ok := m["logprobs"]; ok {
			return nil, badField("logprobs", `/v1/completions does not serve "logprobs": use /v1/chat/completions with "logprobs": true (and "top_logprobs")`)
		}
		if _, ok := m["messages"]; ok {
			return nil, badField("messages", `/v1/completions takes "prompt", not "messages" (use /v1/chat/completions)`)
		}
		raw, ok := m["prompt"]
		if !ok {
			return nil, badField("prompt", `request field "prompt" is required`)
		}
		var one string
		if err := json.Unmarshal(raw, &one); err != nil || string(raw) == "null" {
			// OpenAI also takes a list of prompts or token ids; lmstream
			// takes text, one prompt per request ("n" for several choices).
			return nil, badField("prompt", `request field "prompt" must be a string, got %s`, kindOf(raw))
		}
		if c.n > 1 {
			delete(m, "prompt")
			m["prompts"] = repeat(one, c.n)
		}
	}
	if _, named := m["drafter"]; !named && drafter != "" {
		// The server's draft model drafts for every request that names
		// no drafter, sampling ones too (the runtime's default drafter
		// serves greedy ones only); "speculate": false still turns it off.
		m["drafter"], _ = json.Marshal(drafter)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, badField("", "request: %v", err)
	}
	c.runtimeJSON = out
	return c, nil
}

// parseMessages reads OpenAI chat messages: content is a string, or a list
// of text parts (joined), as clients send either. Other part types (images,
// audio) cannot be served by a text model and are refused.
func parseMessages(raw json.RawMessage) ([]loop.Message, error) {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		return nil, badField("messages", `request field "messages" must be an array of objects, got %s`, kindOf(raw))
	}
	if len(list) == 0 {
		return nil, badField("messages", `request field "messages" must hold at least one message`)
	}
	if len(list) > loop.MaxMessages {
		return nil, badField("messages", `request field "messages" holds %d messages; at most %d are allowed`, len(list), loop.MaxMessages)
	}
	out := make([]loop.Message, len(list))
	for i, msg := range list {
		for k, v := range msg {
			switch k {
			case "role":
				if err := json.Unmarshal(v, &out[i].Role); err != nil || out[i].Role == "" {
					return nil, badField("messages", `messages[%d].role must be a non-empty string, got %s`, i, kindOf(v))
				}
			case "content":
				if string(v) == "null" {
					continue // an assistant turn with only tool calls
				}
				text, err := content(v)
				if err != nil {
					return nil, badField("messages", "messages[%d].content %v", i, err)
				}
				out[i].Content = text
			case "name", "tool_call_id", "reasoning_content":
				// A participant's or tool's name, the call a tool turn
				// answers, an earlier answer's reasoning: the template
				// decides what to show.
				var s string
				if err := json.Unmarshal(v, &s); err != nil && string(v) != "null" {
					return nil, badField("messages", `messages[%d].%s must be a string, got %s`, i, k, kindOf(v))
				}
				switch k {
				case "name":
					out[i].Name = s
				case "tool_call_id":
					out[i].ToolCallID = s
				default:
					out[i].ReasoningContent = s
				}
			case "tool_calls":
				if string(v) == "null" {
					continue
				}
				if err := json.Unmarshal(v, &out[i].ToolCalls); err != nil {
					return nil, badField("messages", `messages[%d].tool_calls must be a list of {"id", "type": "function", "function": {"name", "arguments"}}: %v`, i, err)
				}
			case "refusal", "audio", "function_call", "annotations":
				// What the openai client sends back of an answer it got
				// (the assistant message as returned): accepted when
				// empty, as nothing of it can be rendered.
				if string(v) != "null" {
					return nil, badField("messages", `messages[%d].%s cannot be served (only null is accepted)`, i, k)
				}
			default:
				return nil, badField("messages", `messages[%d]: unknown field %q`, i, k)
			}
		}
		if out[i].Role == "" {
			return nil, badField("messages", `messages[%d] has no "role"`, i)
		}
	}
	return out, nil
}

func content(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil && string(v) != "null" {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(v, &parts); err != nil || parts == nil {
		return "", fmt.Errorf("must be a string or an array of text parts, got %s", kindOf(v))
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("part %d has type %q; only \"text\" parts can be served", j, p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

func repeat(s string, n int) json.RawMessage {
	list := make([]string, n)
	for i := range list {
		list[i] = s
	}
	b, _ := json.Marshal(list)
	return b
}

// kindOf names a JSON value's type for error messages.
func kindOf(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "nothing"
	}
	switch s[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// httpStatus maps a runtime error to the HTTP status and OpenAI error type
// a client should see.
func httpStatus(err error) (int, string) {
	if _, ok := err.(*requestError); ok {
		return 400, "invalid_request_error"
	}
	switch status.CodeOf(err) {
	case status.BadJSON, status.InvalidRequest, status.InvalidArgument, status.PromptTooLong:
		return 400, "invalid_request_error"
	case status.Capacity:
		return 429, "rate_limit_error"
	case status.Shutdown:
		return 503, "server_error"
	}
	return 500, "server_error"
}
