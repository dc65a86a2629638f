package loop

import (
	"context"
	"encoding/json"
	"errors"
	"math"

	"github.com/lmstream/lmstream/core/chat"
	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
)

// Message is one turn of a chat, rendered by the model's chat template:
// its role and text, and what chat APIs attach to turns (an assistant's
// tool calls and reasoning, the call a tool turn answers).
type Message = chat.Message

// Request is one submission: one prompt, or a batch of prompts that share
// every setting. Each prompt is a batch item with its own channel.
type Request struct {
	Prompts  []string  // one per batch item ("prompt" gives one)
	Messages []Message // a chat, instead of prompts

	// Chat is how "messages" are rendered and their answer returned:
	// the tools, the tool choice, the reasoning format and the
	// template's further variables.
	Chat ChatOptions

	MaxTokens    int // 0 (absent): until an end token or the context is full
	Stop         []string
	StopTokenIDs []int32
	IncludeStop  bool

	// Sampling is every sampling field of the request ("temperature",
	// "top_p", "top_k", "min_p", "seed", the penalties), parsed, defaulted,
	// range-checked and made canonical here (sample.Params.Canonical: a
	// temperature below sample.MinTemperature is 0, greedy), once.
	Sampling sample.Params

	// Logprobs asks for each generated token's log-probability, and
	// TopLogprobs for that many of the most likely alternatives too
	// (OpenAI's "logprobs" and "top_logprobs").
	Logprobs    bool
	TopLogprobs int

	TPOTSLOMs float64 // 0: best effort
	TTFTSLOMs float64 // 0: none; orders admission (serving.TTFTDeadline)

	// Grammar constrains the output ("response_format" or "grammar");
	// nil: unconstrained. Compiled here, so a schema or grammar the
	// engine cannot follow is refused at submit.
	Grammar *grammar.Grammar

	// Backend-specific fields (the replay script, for one) that the backend
	// takes in Prepare; anything it leaves is an unknown-field error.
	Extra *jsonstrict.Fields

	// ctx is the submitter's: work done for the request before it is
	// queued (compiling its grammars) stops when it is done.
	ctx context.Context
}

// Context is the context the request was submitted with (Background when
// none was): a backend's Prepare hands it to work that may take long,
// such as compiling the grammar of forced tool calls.
func (r *Request) Context() context.Context {
	if r.ctx == nil {
		return context.Background()
	}
	return r.ctx
}

// CompileStatus turns an error of a grammar compile done for a request
// into its status error: a compile its context stopped is Closed (the
// submitter left), anything else is what invalid(err) makes of it.
func CompileStatus(err error, invalid func(error) error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.Errorf(status.Closed, "request: cancelled while its grammar compiled: %v", err)
	}
	return invalid(err)
}

// Items is the number of batch items the request makes.
func (r *Request) Items() int {
	if len(r.Prompts) > 0 {
		return len(r.Prompts)
	}
	return 1
}

// Limits on request fields. Each bounds work or memory that would
// otherwise follow a number the caller chose: the batch items (one slot
// and channel each), the stop strings (the matcher's automaton has a state
// per stop byte and a transition table per state), the stop token ids.
const (
	MaxBatchItems   = 4096          // "prompts" entries
	MaxMessages     = 65536         // "messages" entries
	MaxStops        = 64            // "stop" strings
	MaxStopBytes    = 4096          // bytes of all "stop" strings together
	MaxStopTokenIDs = 1024          // "stop_token_ids" entries
	MaxMaxTokens    = math.MaxInt32 // "max_tokens"
	MaxTopK         = math.MaxInt32 // "top_k" (any value >= the vocabulary is off)
	MaxSLOMs        = 3_600_000     // "tpot_slo_ms", "ttft_slo_ms": one hour
	MaxTopLogprobs  = 20            // "top_logprobs", as OpenAI's API
	// MaxLogprobEntries bounds the log-probabilities one request may ask
	// for: 1 + top_logprobs per generated token of each batch item, some
	// 60 bytes of JSON each in an OpenAI answer. Without it a 300-byte
	// request (128 choices, top_logprobs 20, a 2,048-token context) asks
	// for 5.5 million of them, hundreds of MB of response.
	MaxLogprobEntries = 1 << 18
)

// ParseRequest reads and checks a request's JSON. Fields it does not know
// are left in Extra for the backend.
func ParseRequest(data []byte) (*Request, error) {
	return ParseRequestContext(context.Background(), data)
}

// ParseRequestContext is ParseRequest for a submitter whose ctx, once
// done, stops the compile of the request's grammar (a Closed error).
func ParseRequestContext(ctx context.Context, data []byte) (*Request, error) {
	f, err := jsonstrict.ParseFields(data, "request")
	if err != nil {
		return nil, err
	}
	r := &Request{ctx: ctx}
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
		return nil, f.Errorf("prompts", "must hold at least one prompt")
	case hasPrompts && len(r.Prompts) > MaxBatchItems:
		return nil, f.Errorf("prompts", "holds %d prompts; at most %d are allowed", len(r.Prompts), MaxBatchItems)
	case hasMessages:
		if err := checkMessages(f, r.Messages); err != nil {
			return nil, err
		}
	}
	if r.Chat, err = takeChatOptions(f, hasMessages); err != nil {
		return nil, err
	}

	if _, err := jsonstrict.TakeIn(f, "max_tokens", &r.MaxTokens, 1, MaxMaxTokens); err != nil {
		return nil, err
	}
	switch f.Kind("stop") {
	case "":
	case "string":
		var one string
		if _, err := f.Take("stop", &one); err != nil {
			return nil, err
		}
		r.Stop = []string{one}
	case "array":
		if _, err := f.Take("stop", &r.Stop); err != nil {
			return nil, err
		}
	default:
		return nil, f.Errorf("stop", "must be a string or an array of strings, got %s", f.Kind("stop"))
	}
	if len(r.Stop) > MaxStops {
		return nil, f.Errorf("stop", "holds %d strings; at most %d are allowed", len(r.Stop), MaxStops)
	}
	stopBytes := 0
	for _, st := range r.Stop {
		stopBytes += len(st)
	}
	if stopBytes > MaxStopBytes {
		return nil, f.Errorf("stop", "holds %d bytes of stop strings; at most %d are allowed", stopBytes, MaxStopBytes)
	}
	if _, err := f.Take("stop_token_ids", &r.StopTokenIDs); err != nil {
		return nil, err
	}
	if len(r.StopTokenIDs) > MaxStopTokenIDs {
		return nil, f.Errorf("stop_token_ids", "holds %d ids; at most %d are allowed", len(r.StopTokenIDs), MaxStopTokenIDs)
	}
	if _, err := f.Take("include_stop", &r.IncludeStop); err != nil {
		return nil, err
	}
	if r.Sampling, err = takeSampling(f); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		key    string
		dst    *float64
		lo, hi float64
	}{
		{"tpot_slo_ms", &r.TPOTSLOMs, 0, MaxSLOMs},
		{"ttft_slo_ms", &r.TTFTSLOMs, 0, MaxSLOMs},
	} {
		if _, err := jsonstrict.TakeIn(f, p.key, p.dst, p.lo, p.hi); err != nil {
			return nil, err
		}
	}
	if _, err := f.Take("logprobs", &r.Logprobs); err != nil {
		return nil, err
	}
	topGiven, err := jsonstrict.TakeIn(f, "top_logprobs", &r.TopLogprobs, 0, MaxTopLogprobs)
	if err != nil {
		return nil, err
	}
	if topGiven && r.TopLogprobs > 0 && !r.Logprobs {
		return nil, f.Errorf("top_logprobs", `needs "logprobs": true`)
	}
	if r.MaxTokens > 0 {
		// Known now, before the backend does any work; without
		// max_tokens the context bounds it (CheckLogprobBudget again,
		// once the prompts are tokenized).
		if err := CheckLogprobBudget(r, func(int) int { return r.MaxTokens }); err != nil {
			return nil, err
		}
	}
	if r.Grammar, err = takeGrammar(ctx, f); err != nil {
		return nil, err
	}
	r.Extra = f
	return r, nil
}

// checkMessages applies the limits every "messages" list has.
func checkMessages(f *jsonstrict.Fields, msgs []Message) error {
	if len(msgs) == 0 {
		return f.Errorf("messages", "must hold at least one message")
	}
	if len(msgs) > MaxMessages {
		return f.Errorf("messages", "holds %d messages; at most %d are allowed", len(msgs), MaxMessages)
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Role == "" {
			return status.Errorf(status.InvalidRequest, `request: messages[%d] has no "role" (the messages are at byte %d)`, i, f.Offset("messages"))
		}
		if len(m.ToolCalls) > MaxToolCalls {
			return f.Errorf("messages", "[%d] has %d tool calls; at most %d are allowed", i, len(m.ToolCalls), MaxToolCalls)
		}
		for j := range m.ToolCalls {
			if err := normalizeCall(&m.ToolCalls[j]); err != nil {
				return f.Errorf("messages", "[%d].tool_calls[%d] %v", i, j, err)
			}
		}
	}
	return nil
}

// responseFormat is the OpenAI "response_format" field.
type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *jsonSchemaSpec `json:"json_schema"`
}

type jsonSchemaSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Strict      bool            `json:"strict"`
	Schema      json.RawMessage `json:"schema"`
}

// takeGrammar reads "response_format" ({"type": "text"}, {"type":
// "json_object"}, {"type": "json_schema", "json_schema": {"schema":
// ...}}) and "grammar" (GBNF text), at most one of them, and compiles
// the constraint.
func takeGrammar(ctx context.Context, f *jsonstrict.Fields) (*grammar.Grammar, error) {
	var rf *responseFormat
	if _, err := f.Take("response_format", &rf); err != nil {
		return nil, err
	}
	var text *string
	if _, err := f.Take("grammar", &text); err != nil {
		return nil, err
	}
	if rf != nil && text != nil && rf.Type != "text" {
		return nil, status.Errorf(status.InvalidRequest, `request: give only one of "response_format" and "grammar"`)
	}
	if text != nil {
		if len(*text) > grammar.MaxGrammarBytes {
			return nil, f.Errorf("grammar", "has %d bytes; at most %d are allowed", len(*text), grammar.MaxGrammarBytes)
		}
		g, err := grammar.ParseContext(ctx, *text)
		if err != nil {
			return nil, CompileStatus(err, func(err error) error { return f.Errorf("grammar", "does not parse: %v", err) })
		}
		return g, nil
	}
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case "text":
		if rf.JSONSchema != nil {
			return nil, f.Errorf("response_format", `has "json_schema" but type "text"`)
		}
		return nil, nil
	case "json_object":
		if rf.JSONSchema != nil {
			return nil, f.Errorf("response_format", `has "json_schema" but type "json_object"`)
		}
		return grammar.JSONObject(), nil
	case "json_schema":
		if rf.JSONSchema == nil || rf.JSONSchema.Schema == nil {
			return nil, f.Errorf("response_format", `of type "json_schema" needs "json_schema": {"name": ..., "schema": {...}}`)
		}
		g, err := grammar.FromSchemaContext(ctx, rf.JSONSchema.Schema)
		if err != nil {
			return nil, CompileStatus(err, func(err error) error {
				return f.Errorf("response_format", "json_schema.schema cannot be followed: %v", err)
			})
		}
		return g, nil
	}
	return nil, f.Errorf("response_format", `type must be "text", "json_object" or "json_schema", got %q`, rf.Type)
}

// CheckLogprobBudget refuses a request whose logprobs could number more
// than MaxLogprobEntries, when batch item i may generate up to tokens(i)
// tokens (negative: nothing bounds it that is known here, so nothing is
// refused).
func CheckLogprobBudget(r *Request, tokens func(i int) int) error {
	if !r.Logprobs {
		return nil
	}
	per := int64(1 + r.TopLogprobs)
	total, most := int64(0), 0
	for i := range r.Items() {
		n := tokens(i)
		if n < 0 {
			return nil
		}
		if r.MaxTokens > 0 {
			n = min(n, r.MaxTokens)
		}
		most = max(most, n)
		if total += per * int64(n); total > MaxLogprobEntries {
			return status.Errorf(status.InvalidRequest, `request fields "max_tokens", "top_logprobs" and the batch size ask for too many log-probabilities: `+
				`%d batch item(s) of up to %d tokens with %d each is more than %d; ask for fewer tokens, items or top_logprobs`,
				r.Items(), most, per, MaxLogprobEntries)
		}
	}
	return nil
}
