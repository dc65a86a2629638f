package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
)

// renderRequest renders a lms_render_chat request as the C door does:
// parsed by loop.ParseChat, rendered by the backend.
func renderRequest(t *testing.T, in loop.Introspector, req string) (string, error) {
	t.Helper()
	c, err := loop.ParseChat([]byte(req))
	if err != nil {
		return "", err
	}
	return in.RenderChat(c.Messages, c.AddGenerationPrompt, &c.Chat)
}

// TestRenderChatWithTools: a render request with "tools" shows the prompt
// a tool request is given — Qwen2.5-Coder's template lists the tools in
// its system turn — token for token what the request itself feeds the
// model; "tool_choice": "none" hides them, as it does in a request.
func TestRenderChatWithTools(t *testing.T) {
	rt := qwenRuntime(t)
	in := introspector(t, rt)
	const msgs = `"messages":[{"role":"user","content":"What is the weather like in Paris?"}]`
	plain, err := renderRequest(t, in, `{`+msgs+`}`)
	require.NoError(t, err)
	withTools, err := renderRequest(t, in, `{`+msgs+`,"tools":[`+weatherTool+`]}`)
	require.NoError(t, err)
	require.NotEqual(t, plain, withTools)
	require.NotContains(t, plain, "<tools>")
	require.Contains(t, withTools, "<tools>")
	require.Contains(t, withTools, `"get_weather"`)

	hidden, err := renderRequest(t, in, `{`+msgs+`,"tools":[`+weatherTool+`],"tool_choice":"none"}`)
	require.NoError(t, err)
	require.Equal(t, plain, hidden)
	// Hermes opens a forced call with plain text, so "required" renders
	// what "auto" does; the fields that do not shape the prompt are taken.
	forced, err := renderRequest(t, in, `{`+msgs+`,"tools":[`+weatherTool+`],"tool_choice":"required",
"parallel_tool_calls":false,"reasoning_format":"none"}`)
	require.NoError(t, err)
	require.Equal(t, withTools, forced)

	ids, err := in.Tokenize(withTools, true, true)
	require.NoError(t, err)
	require.EqualValues(t, len(ids), promptTokens(t, rt, `{`+msgs+`,"tools":[`+weatherTool+`],"max_tokens":1}`))
}

// TestRenderChatTemplateVars: "chat_template_kwargs" reaches the template
// of a render as it reaches a request's.
func TestRenderChatTemplateVars(t *testing.T) {
	const tmpl = "{% for m in messages %}{{ m.content }}{% endfor %}|{{ greeting | default('none') }}"
	js, _ := json.Marshal(tmpl)
	rt := newRuntime(t, `,"chat_template":`+string(js))
	in := introspector(t, rt)
	const msgs = `"messages":[{"role":"user","content":"Hi"}]`
	text, err := renderRequest(t, in, `{`+msgs+`}`)
	require.NoError(t, err)
	require.Equal(t, "Hi|none", text)
	text, err = renderRequest(t, in, `{`+msgs+`,"chat_template_kwargs":{"greeting":"hello"}}`)
	require.NoError(t, err)
	require.Equal(t, "Hi|hello", text)
}

// TestRenderChatRefusesAsRequestsDo: the chat fields of a render request
// are checked by the request's parser, and a template that ignores tools
// fails the render as it fails the request.
func TestRenderChatRefusesAsRequestsDo(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	for req, want := range map[string]string{
		`{` + msgs + `,"tools":{"type":"function"}}`:                                          `"tools"`,
		`{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":7}}]}`: `JSON schema object`,
		`{` + msgs + `,"tool_choice":"required"}`:                                             `no "tools"`,
		`{` + msgs + `,"chat_template_kwargs":[1]}`:                                           `"chat_template_kwargs"`,
		`{` + msgs + `,"tools":[` + weatherTool + `],"tool_choice":"maybe"}`:                  `"maybe"`,
		`{` + msgs + `,"tools":[` + weatherTool + `],"reasoning_format":"hidden"}`:            `"reasoning_format"`,
		`{` + msgs + `,"tools":[` + weatherTool + `],"max_tokens":3}`:                         `"max_tokens"`,
	} {
		_, err := loop.ParseChat([]byte(req))
		require.Equal(t, status.InvalidRequest, status.CodeOf(err), "%s: %v", req, err)
		require.ErrorContains(t, err, want, req)
	}
	// SmolLM2's template has no place for tools.
	rt := newRuntime(t, "")
	_, err := renderRequest(t, introspector(t, rt), `{`+msgs+`,"tools":[`+weatherTool+`]}`)
	require.Equal(t, status.InvalidRequest, status.CodeOf(err), err)
	require.ErrorContains(t, err, "does not show tools")
}
