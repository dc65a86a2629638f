package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reference templates of each family, as shipped in the models'
// tokenizer_config.json (JSON-decoded). SmolLM2's is read from the GGUF.
const (
	qwen2Template   = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
	llama2Template  = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
	llama3Template  = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
	zephyrTemplate  = "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
	phi3Template    = "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
	mistralTemplate = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}"
)

// qwen25Template is Qwen2.5-Coder-0.5B-Instruct's, as its GGUF ships it
// (tokenizer.chat_template; the 1.5B's differs only in the tools branch).
// It opens the system turn three times; only the last is the default text.
// gemmaTemplate is Gemma 3's template (google/gemma-3-*-it), its text
// parts: a list content's image items are beyond what Message carries.
const gemmaTemplate = `{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
`

const qwen25Template = `{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
`

const qwen25System = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

const modelPath = "../../models/SmolLM2-135M-Instruct.Q4_1.gguf"

const smolSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

// modelTemplate returns the chat template of the default model, skipping
// the test when the model file is absent (it is not in git).
func modelTemplate(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(modelPath); errors.Is(err, os.ErrNotExist) {
		t.Skipf("model %s not present (git-ignored; see models/models.sha256)", modelPath)
	}
	f, err := gguf.Open(modelPath)
	require.NoError(t, err)
	defer f.Close()
	s, err := f.String("tokenizer.chat_template")
	require.NoError(t, err)
	return s
}

func sys(c string) Message  { return Message{Role: RoleSystem, Content: c} }
func user(c string) Message { return Message{Role: RoleUser, Content: c} }
func asst(c string) Message { return Message{Role: RoleAssistant, Content: c} }

func render(t *testing.T, tm Template, msgs []Message, gen bool) string {
	t.Helper()
	s, err := tm.Render(msgs, gen)
	require.NoError(t, err)
	return s
}

func TestChatML(t *testing.T) {
	plain := ChatML{}
	assert.Equal(t, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
		render(t, plain, []Message{user("Hi")}, true))
	assert.Equal(t, "<|im_start|>user\nHi<|im_end|>\n",
		render(t, plain, []Message{user("Hi")}, false))

	smol := ChatML{DefaultSystem: smolSystem}
	assert.Equal(t,
		"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"+
			"<|im_start|>user\nWhat is 2+2?<|im_end|>\n"+
			"<|im_start|>assistant\n4<|im_end|>\n"+
			"<|im_start|>user\nAnd 3+3?<|im_end|>\n"+
			"<|im_start|>assistant\n",
		render(t, smol, []Message{user("What is 2+2?"), asst("4"), user("And 3+3?")}, true))
	// An explicit system message replaces the default; content is verbatim.
	assert.Equal(t,
		"<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\n  spaced \n<|im_end|>\n",
		render(t, smol, []Message{sys("Be terse."), user("  spaced \n")}, false))
	// Empty conversation: the default system message is injected inside
	// the reference template's loop, so none.
	assert.Equal(t, "<|im_start|>assistant\n", render(t, smol, nil, true))
	assert.Equal(t, "", render(t, smol, nil, false))
}

func TestLlama2(t *testing.T) {
	tm := Llama2{}
	assert.Equal(t, "<s>[INST] Hi [/INST]", render(t, tm, []Message{user("Hi")}, true))
	assert.Equal(t,
		"<s>[INST] <<SYS>>\nBe nice.\n<</SYS>>\n\n Hello [/INST] Hi there! </s><s>[INST] How are you? [/INST]",
		// The reference strips the whole first turn, system block included, so
		// the user's leading space survives after the block.
		render(t, tm, []Message{sys("Be nice."), user(" Hello\n"), asst("Hi there!"), user("How are you?")}, true))
	assert.Equal(t,
		"<s>[INST] Q [/INST] A </s>",
		render(t, tm, []Message{user("Q"), asst("A")}, false))

	_, err := tm.Render([]Message{user("a"), user("b")}, true)
	assert.ErrorContains(t, err, "alternate")
	_, err = tm.Render([]Message{asst("a")}, true)
	assert.ErrorContains(t, err, "alternate")
}

func TestLlama3(t *testing.T) {
	tm := Llama3{}
	assert.Equal(t,
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe nice.<|eot_id|>"+
			"<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"+
			"<|start_header_id|>assistant<|end_header_id|>\n\nHi!<|eot_id|>"+
			"<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"+
			"<|start_header_id|>assistant<|end_header_id|>\n\n",
		render(t, tm, []Message{sys("Be nice."), user("Hello\n"), asst(" Hi!"), user("Bye")}, true))
	assert.Equal(t,
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>",
		render(t, tm, []Message{user("Hello")}, false))
}

func TestZephyr(t *testing.T) {
	tm := Zephyr{}
	assert.Equal(t,
		"<|system|>\nBe nice.</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi!</s>\n<|user|>\nBye</s>\n<|assistant|>\n",
		render(t, tm, []Message{sys("Be nice."), user("Hello"), asst("Hi!"), user("Bye")}, true))
	assert.Equal(t, "<|user|>\nHello</s>\n", render(t, tm, []Message{user("Hello")}, false))
}

func TestGemma(t *testing.T) {
	tm := Gemma{}
	assert.Equal(t,
		"<bos><start_of_turn>user\nBe nice.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi!<end_of_turn>\n"+
			"<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n",
		render(t, tm, []Message{sys("Be nice."), user(" Hello\n"), asst("Hi!"), user("Bye")}, true))
	assert.Equal(t, "<bos><start_of_turn>user\nHello<end_of_turn>\n", render(t, tm, []Message{user("Hello")}, false))
	_, err := tm.Render([]Message{asst("first"), user("second")}, true)
	assert.ErrorContains(t, err, "roles must alternate")
	_, err = tm.Render([]Message{user("a"), user("b")}, true)
	assert.ErrorContains(t, err, "roles must alternate")
	fam, err := Detect(gemmaTemplate)
	require.NoError(t, err)
	assert.Equal(t, "gemma", fam.Name())
	assert.Equal(t, Gemma{}, ForArch("gemma3"))
	assert.Nil(t, ForArch("llama"))
	m := ForFamily(Gemma{})
	assert.Equal(t, "gemma", m.Name())
	got, err := m.Render([]Message{user("Hello")}, true)
	require.NoError(t, err)
	assert.Equal(t, "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", got)
}

func TestRoleErrors(t *testing.T) {
	for _, name := range []string{"chatml", "llama2", "llama3", "zephyr"} {
		tm, err := ByName(name)
		require.NoError(t, err)
		assert.Equal(t, name, tm.Name())
		_, err = tm.Render([]Message{user("a"), {Role: "tool", Content: "b"}}, true)
		assert.ErrorContains(t, err, `unknown role "tool"`, name)
		_, err = tm.Render([]Message{user("a"), sys("late")}, true)
		assert.ErrorContains(t, err, "system message must come first", name)
	}
	_, err := ByName("alpaca")
	assert.ErrorContains(t, err, `unknown template "alpaca"`)
}

func TestDetect(t *testing.T) {
	for _, c := range []struct{ tmpl, want string }{
		{qwen2Template, "chatml"},
		{qwen25Template, "chatml"},
		{llama2Template, "llama2"},
		{llama3Template, "llama3"},
		{zephyrTemplate, "zephyr"},
	} {
		tm, err := Detect(c.tmpl)
		require.NoError(t, err, c.want)
		assert.Equal(t, c.want, tm.Name())
	}
	tm, err := Detect(qwen2Template)
	require.NoError(t, err)
	assert.Equal(t, ChatML{DefaultSystem: "You are a helpful assistant."}, tm)
	tm, err = Detect(qwen25Template)
	require.NoError(t, err)
	assert.Equal(t, ChatML{DefaultSystem: qwen25System}, tm)
	// Escaped newlines in the Jinja literal are understood too.
	tm, err = Detect(`{{ '<|im_start|>system\nHello\nthere<|im_end|>\n' }}`)
	require.NoError(t, err)
	assert.Equal(t, ChatML{DefaultSystem: "Hello\nthere"}, tm)
	// A ChatML template that only renders the messages has no default.
	tm, err = Detect("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}")
	require.NoError(t, err)
	assert.Equal(t, ChatML{}, tm)

	for _, bad := range []string{phi3Template, mistralTemplate, "{{ messages }}" + strings.Repeat("x", 200)} {
		_, err := Detect(bad)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "unrecognised chat template")
		// The first 80 characters, quoted; not the rest.
		assert.Contains(t, err.Error(), fmt.Sprintf("%q", head(bad, 80)))
		assert.NotContains(t, err.Error(), bad[80:])
	}
	_, err = Detect("  ")
	assert.ErrorContains(t, err, "no chat template")
}

func TestDetectModel(t *testing.T) {
	tmpl := modelTemplate(t)
	tm, err := Detect(tmpl)
	require.NoError(t, err)
	assert.Equal(t, ChatML{DefaultSystem: smolSystem}, tm)
}

// conversations used for the jinja2 cross-check; all valid for every
// family (alternating, system first if present).
var conversations = [][]Message{
	nil,
	{user("Hi")},
	{user("What is 2+2?"), asst("4"), user("And 3+3?")},
	{sys("You are a pirate."), user("Hello"), asst("Arr!"), user("Where's the treasure?")},
	{sys("multi\nline\n"), user("  padded  \n"), asst("\tanswer\n\n")},
	{user("unicode: héllo 世界 🚀 \u00a0"), asst("<b>tags</b> & {{braces}} {% raw %}")},
	{user("Q"), asst("A")},
}

// jinjaRender renders tmpl with Python's jinja2 the way transformers'
// apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks, a
// raise_exception helper), once per conversation and generation flag.
const jinjaScript = `
import json, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment
def raise_exception(msg):
    raise ValueError(msg)
req = json.load(sys.stdin)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
env.globals["raise_exception"] = raise_exception
tmpl = env.from_string(req["template"])
out = []
for c in req["cases"]:
    out.append(tmpl.render(messages=c["messages"], add_generation_prompt=c["gen"], bos_token=req["bos"], eos_token=req["eos"]))
json.dump(out, sys.stdout)
`

type jinjaCase struct {
	Messages []map[string]string `json:"messages"`
	Gen      bool                `json:"gen"`
}

func jinjaRender(t *testing.T, tmpl, bos, eos string, cases []jinjaCase) []string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not available for the jinja2 cross-check")
	}
	if err := exec.Command(py, "-c", "import jinja2").Run(); err != nil {
		t.Skip("python3 jinja2 not installed (pip install jinja2) for the cross-check")
	}
	script := filepath.Join(t.TempDir(), "render.py")
	require.NoError(t, os.WriteFile(script, []byte(jinjaScript), 0o600))
	in, err := json.Marshal(map[string]any{"template": tmpl, "bos": bos, "eos": eos, "cases": cases})
	require.NoError(t, err)
	cmd := exec.Command(py, script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "jinja2: %s", stderr.String())
	var res []string
	require.NoError(t, json.Unmarshal(out, &res))
	require.Len(t, res, len(cases))
	return res
}

func crossCheck(t *testing.T, tmpl, bos, eos string, tm Template, skipEmpty bool) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("cross-check not set up on windows")
	}
	var cases []jinjaCase
	var convs [][]Message
	for _, conv := range conversations {
		if skipEmpty && len(conv) == 0 {
			continue
		}
		for _, gen := range []bool{false, true} {
			ms := []map[string]string{}
			for _, m := range conv {
				ms = append(ms, map[string]string{"role": m.Role, "content": m.Content})
			}
			cases = append(cases, jinjaCase{ms, gen})
			convs = append(convs, conv)
		}
	}
	want := jinjaRender(t, tmpl, bos, eos, cases)
	for i, c := range cases {
		got, err := tm.Render(convs[i], c.Gen)
		require.NoError(t, err)
		require.Equal(t, want[i], got, "conversation %d, generation prompt %v", i/2, c.Gen)
	}
	t.Logf("%s: %d renderings identical to jinja2", tm.Name(), len(cases))
}

func TestJinjaCrossCheckModel(t *testing.T) {
	tmpl := modelTemplate(t)
	tm, err := Detect(tmpl)
	require.NoError(t, err)
	crossCheck(t, tmpl, "<|im_start|>", "<|im_end|>", tm, false)
}

func TestJinjaCrossCheckFamilies(t *testing.T) {
	for _, c := range []struct {
		tmpl, bos, eos string
		// Llama-2's reference template indexes messages[0] and fails on
		// an empty conversation.
		skipEmpty bool
	}{
		{qwen2Template, "", "<|im_end|>", false},
		// Qwen2.5's indexes messages[0] outside its loop.
		{qwen25Template, "", "<|im_end|>", true},
		{llama2Template, "<s>", "</s>", true},
		{llama3Template, "<|begin_of_text|>", "<|eot_id|>", false},
		{zephyrTemplate, "<s>", "</s>", false},
	} {
		tm, err := Detect(c.tmpl)
		require.NoError(t, err)
		crossCheck(t, c.tmpl, c.bos, c.eos, tm, c.skipEmpty)
	}
}

func TestPyStrip(t *testing.T) {
	assert.Equal(t, "a b", pyStrip("\x1c\x1f \t\n\u00a0\u3000a b\u2029\x1d"))
	assert.Equal(t, "", pyStrip(" \n "))
}
