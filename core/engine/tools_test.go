package engine_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/streaming"
)

var qwenPath = filepath.Join("..", "..", "models", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")

const weatherTool = `{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a city.",
"parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},
"required":["city","unit"],"additionalProperties":false}}}`

func qwenRuntime(t *testing.T) *loop.Runtime {
	t.Helper()
	if race.Enabled {
		t.Skip("real-model runtime tests are too slow under -race; go test ./core/engine runs them")
	}
	testmodel.Need(t, qwenPath)
	rt, err := loop.New([]byte(`{"model_path":"` + qwenPath + `","max_slots":2,"context_length":1024,"spec_budget":12}`))
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	return rt
}

// calls collects a reply's tool calls as name and parsed arguments.
func calls(t *testing.T, r *streaming.Reply) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range r.ToolCalls {
		if d.ID != "" {
			// OpenAI's form, or Mistral's nine characters (its
			// template refuses others when the call is sent back).
			require.True(t, strings.HasPrefix(d.ID, "call_") || len(d.ID) == 9, d.ID)
			out = append(out, map[string]any{"name": d.Name, "arguments": ""})
		}
		out[len(out)-1]["arguments"] = out[len(out)-1]["arguments"].(string) + d.Arguments
	}
	for _, c := range out {
		var args map[string]any
		require.NoError(t, json.Unmarshal([]byte(c["arguments"].(string)), &args), c)
		c["arguments"] = args
	}
	return out
}

// TestToolCallsOfARealModel: Qwen2.5-Coder's template shows the tools in
// its system turn and the model answers with a Hermes <tool_call>; the
// answer arrives parsed, the call's text never in the content.
func TestToolCallsOfARealModel(t *testing.T) {
	rt := qwenRuntime(t)
	req := `{"messages":[{"role":"user","content":"What is the weather like in Paris? Use celsius."}],
"tools":[` + weatherTool + `],"max_tokens":80}`
	for _, choice := range []string{`"auto"`, `"required"`, `{"type":"function","function":{"name":"get_weather"}}`} {
		out, err := rt.Complete([]byte(strings.Replace(req, `"max_tokens"`, `"tool_choice":`+choice+`,"max_tokens"`, 1)))
		require.NoError(t, err, choice)
		r := out[0].Reply
		require.NotNil(t, r, choice)
		require.Equal(t, streaming.EndId, out[0].Reason, choice)
		got := calls(t, r)
		require.Len(t, got, 1, "%s: %q", choice, out[0].Text)
		require.Equal(t, "get_weather", got[0]["name"])
		require.Equal(t, map[string]any{"city": "Paris", "unit": "celsius"}, got[0]["arguments"])
		require.Empty(t, strings.TrimSpace(r.Content), choice)
		if choice != `"auto"` {
			// The constraint writes the template's own syntax (auto:
			// this model often leaves the markers out).
			require.Contains(t, out[0].Text, "<tool_call>", "the raw text keeps the markers")
		}
	}

	// "none" shows no tools, and the answer is text.
	out, err := rt.Complete([]byte(strings.Replace(req, `"max_tokens":80`, `"tool_choice":"none","max_tokens":12`, 1)))
	require.NoError(t, err)
	require.Nil(t, out[0].Reply, "no tools shown and no thinking: nothing to parse")

	// The exchange goes on: the call and its result render, and the model
	// answers from the result.
	follow := `{"messages":[{"role":"user","content":"What is the weather like in Paris? Use celsius."},
{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
{"role":"tool","tool_call_id":"call_1","content":"{\"temperature\": 18, \"sky\": \"sunny\"}"}],
"tools":[` + weatherTool + `],"max_tokens":40}`
	out, err = rt.Complete([]byte(follow))
	require.NoError(t, err)
	require.Empty(t, out[0].Reply.ToolCalls, out[0].Text)
	require.Contains(t, out[0].Reply.Content, "18")
}

func TestToolRequestsRefusedAtSubmit(t *testing.T) {
	rt := qwenRuntime(t)
	for req, want := range map[string]string{
		`{"prompt":"x","tools":[` + weatherTool + `]}`:                                                                                                 `needs "messages"`,
		`{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`:                                                                        `no "tools"`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[` + weatherTool + `],"tool_choice":"maybe"}`:                                             `"maybe"`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[` + weatherTool + `,` + weatherTool + `]}`:                                               `again`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":7}}]}`:                            `JSON schema object`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[` + weatherTool + `],"tool_choice":"required","response_format":{"type":"json_object"}}`: `cannot be combined`,
	} {
		err := rt.Submit([]byte(req), []*streaming.Channel{streaming.NewChannel()})
		require.Error(t, err, req)
		require.Contains(t, err.Error(), want, req)
	}
}
