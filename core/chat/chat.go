// Package chat renders conversations into the prompt text a chat-tuned model
// was trained on.
//
// Models ship their format as a Jinja template (GGUF key
// tokenizer.chat_template). ForModel renders that text with core/jinja, an
// interpreter that renders as transformers' apply_chat_template does
// (jinja.go), and falls back to the few hand-written template families
// here when the text does not parse: it recognises which family a model's
// template belongs to by markers that only that family uses (Detect). Each
// family reproduces its reference
// template byte for byte, including whitespace, for the conversations it
// accepts; the tests check that against jinja2 where it is installed.
//
// Unlike the Jinja templates, which mostly render whatever they are given,
// every family here rejects an unknown role and a system message anywhere
// but first: such a prompt is almost certainly a caller bug, and the model
// would see text it was never trained on.
//
// Rendered prompts contain the special tokens as text (<|im_start|>, <s>,
// <|begin_of_text|>, ...). They must be tokenized with special-token parsing
// on, and for the families that include the BOS text (Llama-2, Llama-3) the
// tokenizer must not prepend another BOS.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/lmstream/lmstream/core/jinja"
)

// Roles accepted by every template.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one turn of a conversation. Beyond its role and text it may
// carry what chat APIs attach to turns; each is passed to the template
// only when set, since templates test whether a message has it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content" jsonstrict:"nullable"` // null: none (a turn of only tool calls)
	// ReasoningContent is an assistant turn's reasoning (its thinking
	// before the answer).
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool turn answers; Name the tool's name.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
}

// ToolCall is one call of a function by the assistant.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and its arguments: a JSON object,
// which templates get as a dict (as apply_chat_template callers pass
// them), or a JSON string (OpenAI's wire form), which they get as a
// string.
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// value is the message as the template sees it: a dict with the keys
// that are set, in a fixed order.
func (m Message) value() (jinja.Value, error) {
	d := jinja.NewDict()
	d.SetString("role", m.Role)
	d.SetString("content", m.Content)
	if m.ReasoningContent != "" {
		d.SetString("reasoning_content", m.ReasoningContent)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			call := jinja.NewDict()
			if c.ID != "" {
				call.SetString("id", c.ID)
			}
			if c.Type != "" {
				call.SetString("type", c.Type)
			}
			fn := jinja.NewDict()
			fn.SetString("name", c.Function.Name)
			if len(c.Function.Arguments) > 0 {
				args, err := jinja.FromJSON(c.Function.Arguments)
				if err != nil {
					return nil, fmt.Errorf("tool call %d: arguments: %w", i, err)
				}
				fn.SetString("arguments", args)
			}
			call.SetString("function", fn)
			calls[i] = call
		}
		d.SetString("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.SetString("tool_call_id", m.ToolCallID)
	}
	if m.Name != "" {
		d.SetString("name", m.Name)
	}
	return d, nil
}

// Template renders a conversation in one model family's format.
type Template interface {
	// Name is the family's name as ByName accepts it.
	Name() string
	// Render returns the prompt for msgs. With addGenerationPrompt the
	// text ends with the header that makes the model answer as the
	// assistant (for Llama-2, whose format has no such header, the text
	// after a user turn already ends in "[/INST]" and the flag changes
	// nothing).
	Render(msgs []Message, addGenerationPrompt bool) (string, error)
}

// ByName returns the template family called name: "chatml", "llama2",
// "llama3", "zephyr" or "gemma". The ChatML family returned here has no default
// system message; Detect finds one in a model's template when it has one.
func ByName(name string) (Template, error) {
	switch name {
	case "chatml":
		return ChatML{}, nil
	case "llama2":
		return Llama2{}, nil
	case "llama3":
		return Llama3{}, nil
	case "zephyr":
		return Zephyr{}, nil
	case "gemma":
		return Gemma{}, nil
	}
	return nil, fmt.Errorf("chat: unknown template %q (known: chatml, llama2, llama3, zephyr, gemma)", name)
}

// Detect chooses the family of a model's tokenizer.chat_template by markers
// distinctive to each (special tokens no other family uses), checked from
// the most specific to the least. An unrecognised template is an error that
// quotes its beginning, so the user can tell what the model ships.
func Detect(chatTemplate string) (Template, error) {
	has := func(s string) bool { return strings.Contains(chatTemplate, s) }
	switch {
	case strings.TrimSpace(chatTemplate) == "":
		return nil, errors.New("chat: the model has no chat template")
	case has("<|start_header_id|>") && has("<|eot_id|>"):
		return Llama3{}, nil
	case has("<|im_start|>") && has("<|im_end|>"):
		return ChatML{DefaultSystem: chatMLDefaultSystem(chatTemplate)}, nil
	case has("[INST]") && has("<<SYS>>"):
		return Llama2{}, nil
	case has("<start_of_turn>") && has("<end_of_turn>"):
		return Gemma{}, nil
	case has("<|user|>") && has("<|assistant|>") && !has("<|end|>"):
		// Phi-3 uses the same role tags but ends turns with <|end|>
		// rather than the EOS token.
		return Zephyr{}, nil
	}
	return nil, fmt.Errorf("chat: unrecognised chat template %q", head(chatTemplate, 80))
}

// head returns the first n runes of s.
func head(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i] + "..."
		}
		n--
	}
	return s
}

// chatMLDefaultSystem extracts the system message a ChatML template injects
// when the conversation does not start with one, as SmolLM2's ("You are a
// helpful AI assistant named SmolLM, trained by Hugging Face"), Qwen2's
// ("You are a helpful assistant.") and Qwen2.5's ("You are Qwen, created by
// Alibaba Cloud. You are a helpful assistant.") do: a literal
// '<|im_start|>system\n...<|im_end|>' inside the template. Templates differ
// in whether the newline is a real one or a Jinja "\n" escape; both are
// accepted. Every occurrence is tried in order: Qwen2.5's template first
// opens a system turn that it fills from the messages or the tools, and
// only its last one is the literal default.
func chatMLDefaultSystem(tmpl string) string {
	for _, open := range []string{"<|im_start|>system\n", `<|im_start|>system\n`} {
		for rest := tmpl; ; {
			i := strings.Index(rest, open)
			if i < 0 {
				break
			}
			rest = rest[i+len(open):]
			j := strings.Index(rest, "<|im_end|>")
			if j < 0 {
				break
			}
			msg := rest[:j]
			// Only a literal counts: a template that builds the system
			// turn from the messages has Jinja syntax or quotes here.
			if strings.ContainsAny(msg, "'\"{}") {
				continue
			}
			return strings.ReplaceAll(msg, `\n`, "\n")
		}
	}
	return ""
}

// check enforces the roles every family supports: system (first only),
// user and assistant.
func check(msgs []Message) error {
	for i, m := range msgs {
		switch m.Role {
		case RoleUser, RoleAssistant:
		case RoleSystem:
			if i != 0 {
				return fmt.Errorf("chat: message %d: a system message must come first", i)
			}
		default:
			return fmt.Errorf("chat: message %d: unknown role %q (want system, user or assistant)", i, m.Role)
		}
	}
	return nil
}

// ChatML is the <|im_start|>role\ncontent<|im_end|>\n format (SmolLM2,
// Qwen2 and others).
type ChatML struct {
	// DefaultSystem, when not empty, is inserted as a system message
	// before a conversation whose first message is not one, as the model's
	// template does.
	DefaultSystem string
}

func (ChatML) Name() string { return "chatml" }

func (t ChatML) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	if err := check(msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	turn := func(role, content string) {
		b.WriteString("<|im_start|>")
		b.WriteString(role)
		b.WriteString("\n")
		b.WriteString(content)
		b.WriteString("<|im_end|>\n")
	}
	// The reference templates test this inside the message loop, so an
	// empty conversation gets no default system message.
	if t.DefaultSystem != "" && len(msgs) > 0 && msgs[0].Role != RoleSystem {
		turn(RoleSystem, t.DefaultSystem)
	}
	for _, m := range msgs {
		turn(m.Role, m.Content)
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String(), nil
}

// Llama2 is Meta's Llama-2-chat format:
//
//	<s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]
//
// The system prompt is folded into the first user turn, every user turn
// opens a new <s>, and contents are stripped of surrounding whitespace, as
// in the reference template. The format can only express strictly
// alternating turns starting with the user, so anything else is an error.
type Llama2 struct{}

func (Llama2) Name() string { return "llama2" }

func (Llama2) Render(msgs []Message, _ bool) (string, error) {
	if err := check(msgs); err != nil {
		return "", err
	}
	system, hasSystem := "", false
	if len(msgs) > 0 && msgs[0].Role == RoleSystem {
		system, hasSystem = msgs[0].Content, true
		msgs = msgs[1:]
	}
	var b strings.Builder
	for i, m := range msgs {
		want := RoleUser
		if i%2 == 1 {
			want = RoleAssistant
		}
		if m.Role != want {
			return "", fmt.Errorf("chat: llama2: turn %d is %q; roles must alternate user/assistant starting with user", i, m.Role)
		}
		content := m.Content
		if i == 0 && hasSystem {
			content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
		}
		if m.Role == RoleUser {
			b.WriteString("<s>[INST] ")
			b.WriteString(pyStrip(content))
			b.WriteString(" [/INST]")
		} else {
			b.WriteString(" ")
			b.WriteString(pyStrip(content))
			b.WriteString(" </s>")
		}
	}
	return b.String(), nil
}

// Llama3 is Meta's Llama-3 instruct format:
//
//	<|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>...
//
// Contents are stripped of surrounding whitespace, as in the reference
// template, which attaches <|begin_of_text|> to the first message (so an
// empty conversation renders without it).
type Llama3 struct{}

func (Llama3) Name() string { return "llama3" }

func (Llama3) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	if err := check(msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	for i, m := range msgs {
		if i == 0 {
			b.WriteString("<|begin_of_text|>")
		}
		b.WriteString("<|start_header_id|>")
		b.WriteString(m.Role)
		b.WriteString("<|end_header_id|>\n\n")
		b.WriteString(pyStrip(m.Content))
		b.WriteString("<|eot_id|>")
	}
	if addGenerationPrompt {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return b.String(), nil
}

// Zephyr is HuggingFace's Zephyr format: <|role|>\n{content}</s>\n per
// turn and <|assistant|>\n as the generation prompt.
type Zephyr struct{}

func (Zephyr) Name() string { return "zephyr" }

func (Zephyr) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	if err := check(msgs); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|")
		b.WriteString(m.Role)
		b.WriteString("|>\n")
		b.WriteString(m.Content)
		b.WriteString("</s>\n")
	}
	// The reference template emits the prompt inside its message loop
	// ("if loop.last"), so an empty conversation gets none.
	if addGenerationPrompt && len(msgs) > 0 {
		b.WriteString("<|assistant|>\n")
	}
	return b.String(), nil
}

// Gemma is Gemma's format (Gemma 2 and 3):
//
//	<bos><start_of_turn>user\n{content}<end_of_turn>\n<start_of_turn>model\n...
//
// The assistant's role is called "model". Gemma has no system role: a
// leading system message becomes the start of the first user turn,
// followed by a blank line. Contents are stripped of surrounding
// whitespace (the system message is not), and turns must alternate user,
// assistant, user, ... as the reference template insists.
type Gemma struct{}

func (Gemma) Name() string { return "gemma" }

func (Gemma) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	if err := check(msgs); err != nil {
		return "", err
	}
	prefix := ""
	if len(msgs) > 0 && msgs[0].Role == RoleSystem {
		prefix, msgs = msgs[0].Content+"\n\n", msgs[1:]
	}
	var b strings.Builder
	b.WriteString("<bos>")
	for i, m := range msgs {
		if (m.Role == RoleUser) != (i%2 == 0) {
			return "", fmt.Errorf("chat: gemma: message %d is %q; roles must alternate, user first (user, assistant, user, and so on)", i, m.Role)
		}
		role := m.Role
		if role == RoleAssistant {
			role = "model"
		}
		b.WriteString("<start_of_turn>")
		b.WriteString(role)
		b.WriteString("\n")
		if i == 0 {
			b.WriteString(prefix)
		}
		b.WriteString(pyStrip(m.Content))
		b.WriteString("<end_of_turn>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<start_of_turn>model\n")
	}
	return b.String(), nil
}

// ForArch is the family a model of GGUF architecture arch speaks when its
// file ships no chat template (Gemma 3 GGUFs often do not), or nil.
func ForArch(arch string) Template {
	switch arch {
	case "gemma", "gemma2", "gemma3":
		return Gemma{}
	}
	return nil
}

// pyStrip is Python's str.strip(), which the reference templates call
// (directly or through Jinja's trim filter). Its notion of whitespace is
// Go's unicode.IsSpace plus the ASCII separators U+001C..U+001F.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
	})
}
