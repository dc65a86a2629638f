package engine_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
)

func introspector(t *testing.T, rt *loop.Runtime) loop.Introspector {
	t.Helper()
	in, err := rt.Introspector()
	require.NoError(t, err)
	return in
}

func TestTokenizeRoundTrip(t *testing.T) {
	in := introspector(t, newRuntime(t, ""))
	for _, text := range []string{"Hello, world!", "  café naïve 中文 😀\n\tend", "<|im_start|>user\nHi<|im_end|>"} {
		ids, err := in.Tokenize(text, false, true)
		require.NoError(t, err)
		require.NotEmpty(t, ids)
		back, err := in.Detokenize(ids, false)
		require.NoError(t, err)
		require.Equal(t, text, string(back))
	}
	// Special-token parsing: <|im_start|> is one id (1) only when asked.
	parsed, _ := in.Tokenize("<|im_start|>", false, true)
	require.Equal(t, []int32{1}, parsed)
	literal, _ := in.Tokenize("<|im_start|>", false, false)
	require.Greater(t, len(literal), 1)
	// Skipping special tokens drops their text, not the others'.
	text, err := in.Detokenize([]int32{1, parsed[0]}, true)
	require.NoError(t, err)
	require.Equal(t, "", string(text))

	_, err = in.Detokenize([]int32{5, 49152}, false)
	require.Equal(t, status.InvalidArgument, status.CodeOf(err))
	require.ErrorContains(t, err, "token 49152 (at index 1)")
	empty, err := in.Tokenize("", false, false)
	require.NoError(t, err)
	require.Empty(t, empty)
}

func TestModelInfoSmolLM2(t *testing.T) {
	info := introspector(t, newRuntime(t, "")).ModelInfo()
	require.Equal(t, "llama", info.Architecture)
	require.Equal(t, 8192, info.ContextLength)
	require.Equal(t, 512, info.RuntimeContext)
	require.Equal(t, 49152, info.VocabSize)
	require.Equal(t, &loop.SpecialToken{ID: 1, Text: "<|im_start|>"}, info.BOS)
	require.Equal(t, &loop.SpecialToken{ID: 2, Text: "<|im_end|>", EndOfGeneration: true}, info.EOS)
	require.Contains(t, info.SpecialTokens, loop.SpecialToken{ID: 0, Text: "<|endoftext|>", EndOfGeneration: true})
	require.Contains(t, info.ChatTemplate, "<|im_start|>")
	require.Equal(t, "jinja", info.ChatRenderer)
	// The JSON the C ABI hands out has every field, nulls included.
	js, err := json.Marshal(info)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(js, &m))
	for _, k := range []string{"architecture", "name", "context_length", "runtime_context_length", "vocab_size", "bos", "eos", "special_tokens", "chat_template", "chat_renderer"} {
		require.Contains(t, m, k)
	}
}

func TestModelInfoQwen(t *testing.T) {
	path := filepath.Join("..", "..", "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
	if race.Enabled {
		t.Skip("too slow under -race")
	}
	testmodel.Need(t, path)
	rt, err := loop.New([]byte(`{"model_path":"` + path + `","max_slots":1,"context_length":256,"spec_budget":12}`))
	require.NoError(t, err)
	defer rt.Close()
	in := introspector(t, rt)
	info := in.ModelInfo()
	require.Equal(t, "qwen2", info.Architecture)
	require.Equal(t, 32768, info.ContextLength)
	require.Equal(t, 151936, info.VocabSize)
	require.Equal(t, "<|endoftext|>", info.BOS.Text)
	require.Equal(t, int32(151645), info.EOS.ID)
	require.Equal(t, "<|im_end|>", info.EOS.Text)
	require.Equal(t, "jinja", info.ChatRenderer)
	text, err := in.RenderChat([]loop.Message{{Role: "user", Content: "Hi"}}, true, nil)
	require.NoError(t, err)
	require.Equal(t, "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"+
		"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", text)
}

// promptTokens submits req and returns the prompt's token count.
func promptTokens(t *testing.T, rt *loop.Runtime, req string) int {
	t.Helper()
	chunks, _ := stream(t, rt, req)
	last := chunks[len(chunks)-1]
	require.Zero(t, last.ErrCode, last.ErrMessage)
	return last.Usage.PromptTokens
}

func TestMessagesUseRenderChat(t *testing.T) {
	rt := newRuntime(t, "")
	in := introspector(t, rt)
	msgs := []loop.Message{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "Hi there"}}
	text, err := in.RenderChat(msgs, true, nil)
	require.NoError(t, err)
	require.Equal(t, "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", text)
	ids, err := in.Tokenize(text, true, true)
	require.NoError(t, err)
	js, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 1})
	require.EqualValues(t, len(ids), promptTokens(t, rt, string(js)))
	// A raw prompt is not templated: it is exactly its own tokens.
	raw, _ := in.Tokenize("Hi there", true, true)
	require.EqualValues(t, len(raw), promptTokens(t, rt, `{"prompt":"Hi there","max_tokens":1}`))
}

func TestChatTemplateOverride(t *testing.T) {
	const tmpl = "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
	js, _ := json.Marshal(tmpl)
	rt := newRuntime(t, `,"chat_template":`+string(js))
	in := introspector(t, rt)
	require.Equal(t, tmpl, in.ModelInfo().ChatTemplate)
	text, err := in.RenderChat([]loop.Message{{Role: "user", Content: "Hi"}}, true, nil)
	require.NoError(t, err)
	require.Equal(t, "[USER] Hi\n[ASSISTANT]", text)
	ids, _ := in.Tokenize(text, true, true)
	require.EqualValues(t, len(ids), promptTokens(t, rt, `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":1}`))
}

func TestChatTemplateOverrideRejected(t *testing.T) {
	testmodel.Need(t, modelPath)
	for _, bad := range []string{`"{% for %}"`, `""`, `3`} {
		_, err := loop.New([]byte(`{"model_path":"` + modelPath + `","chat_template":` + bad + `}`))
		require.Equal(t, status.InvalidRequest, status.CodeOf(err), bad)
		require.ErrorContains(t, err, "chat_template")
	}
}
