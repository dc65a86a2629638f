package loop

import (
	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/status"
)

// Introspector is what a backend may answer about its model besides
// generating: how it tokenizes, what its metadata says, how it renders a
// chat. The cpu backend implements it; a backend without it makes the
// Runtime's introspection calls fail with status.State. Every method may
// be called from any goroutine, concurrently with generation.
type Introspector interface {
	// Tokenize is what a prompt becomes: with addSpecial the tokens the
	// model adds (a BOS), with parseSpecial control tokens written in
	// the text (<|im_start|>) become their ids.
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	// Detokenize concatenates the pieces of ids (raw bytes, possibly not
	// UTF-8); with skipSpecial it leaves out special tokens. An id outside
	// the vocabulary is an InvalidArgument error.
	Detokenize(ids []int32, skipSpecial bool) ([]byte, error)
	// ModelInfo is the model's metadata.
	ModelInfo() ModelInfo
	// RenderChat is the prompt text a request's "messages" become with
	// its chat options (nil: none, a chat without tools), failing as the
	// request would for the template's reasons (a template that ignores
	// the tools, one that raises).
	RenderChat(msgs []Message, addGenerationPrompt bool, opts *ChatOptions) (string, error)
}

// ModelInfo describes a loaded model, as lms_model_info writes it.
type ModelInfo struct {
	Architecture  string `json:"architecture"` // general.architecture ("llama", "qwen2")
	Name          string `json:"name"`         // general.name, "" when absent
	ContextLength int    `json:"context_length"`
	// RuntimeContext is the context each sequence has in this runtime
	// (the config's "context_length", at most the trained one).
	RuntimeContext int            `json:"runtime_context_length"`
	VocabSize      int            `json:"vocab_size"`
	BOS            *SpecialToken  `json:"bos"` // null when the model has none
	EOS            *SpecialToken  `json:"eos"`
	SpecialTokens  []SpecialToken `json:"special_tokens"`
	// ChatTemplate is the template text that renders "messages": the
	// config's "chat_template" when given, else the model's
	// tokenizer.chat_template ("" when it has none).
	ChatTemplate string `json:"chat_template"`
	// ChatRenderer says what renders it: "jinja", a fallback family
	// ("chatml", "llama2", "llama3", "zephyr"), or "" when nothing can.
	ChatRenderer string `json:"chat_renderer"`
}

// SpecialToken is one special token of the vocabulary.
type SpecialToken struct {
	ID   int32  `json:"id"`
	Text string `json:"text"`
	// EndOfGeneration: generating it ends the stream (reason end_id).
	EndOfGeneration bool `json:"end_of_generation"`
}

// Introspector returns the backend's Introspector, or a status.State
// error naming the backend when it has none.
func (r *Runtime) Introspector() (Introspector, error) {
	if in, ok := r.backend.(Introspector); ok {
		return in, nil
	}
	return nil, status.Errorf(status.State, "this runtime's backend cannot tokenize or describe its model")
}

// ChatRender is a render request: a conversation and the fields that
// shape its prompt as they shape a request's.
type ChatRender struct {
	Messages            []Message
	AddGenerationPrompt bool
	Chat                ChatOptions
}

// ParseChat reads a render request, {"messages": [...],
// "add_generation_prompt": bool (default true)} and a request's chat
// fields ("tools", "tool_choice", "chat_template_kwargs", ...), checking
// all of them as ParseRequest does.
func ParseChat(data []byte) (ChatRender, error) {
	c := ChatRender{AddGenerationPrompt: true}
	f, err := jsonstrict.ParseFields(data, "request")
	if err != nil {
		return c, err
	}
	has, err := f.Take("messages", &c.Messages)
	if err != nil {
		return c, err
	}
	if !has {
		return c, status.Errorf(status.InvalidRequest, `request: "messages" is required`)
	}
	if err := checkMessages(f, c.Messages); err != nil {
		return c, err
	}
	if _, err := f.Take("add_generation_prompt", &c.AddGenerationPrompt); err != nil {
		return c, err
	}
	if c.Chat, err = takeChatOptions(f, true); err != nil {
		return c, err
	}
	if err := f.Rest(); err != nil {
		return c, err
	}
	return c, nil
}
