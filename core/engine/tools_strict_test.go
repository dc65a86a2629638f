package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/streaming"
)

// qwenToolsTemplate is Qwen2.5's tool prompt with each tool written as
// its name, description and parameters only, so that a tool's "strict"
// flag leaves the prompt as it was (Qwen's own template writes the whole
// tool, flag and all) and an answer with the flag and one without can be
// compared token for token.
const qwenToolsTemplate = `{%- if tools %}<|im_start|>system
You are Qwen, created by Alibaba Cloud. You are a helpful assistant.

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for t in tools %}{"type": "function", "function": {"name": {{ t.function.name|tojson }}, "description": {{ t.function.description|tojson }}, "parameters": {{ t.function.parameters|tojson }}}}
{% endfor %}</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}<|im_start|>assistant
`

// unitTool's unit is "metric" or "imperial": asked for fahrenheit, the
// model writes "fahrenheit" unless held to the schema.
func unitTool(strict bool) string {
	s, _ := json.Marshal(strict)
	return `{"type":"function","function":{"name":"get_weather","description":"Get the current weather in a city.","strict":` + string(s) + `,
"parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["metric","imperial"]}},
"required":["city","unit"],"additionalProperties":false}}}`
}

// TestStrictToolsUnderAuto: with tool_choice "auto" and a strict tool,
// Qwen2.5-Coder-0.5B's calls validate against the tool's schema where
// the same model unconstrained writes calls that do not, its text answers
// are left as they are, and greedy answers are the same with speculation
// and without.
func TestStrictToolsUnderAuto(t *testing.T) {
	if race.Enabled {
		t.Skip("real-model runtime tests are too slow under -race; go test ./core/engine runs them")
	}
	testmodel.Need(t, qwenPath)
	tmpl, _ := json.Marshal(qwenToolsTemplate)
	rt, err := loop.New([]byte(`{"model_path":"` + qwenPath + `","max_slots":1,"context_length":1024,"spec_budget":12,"chat_template":` + string(tmpl) + `}`))
	require.NoError(t, err)
	defer rt.Close()
	complete := func(messages string, strict bool, extra string) streaming.Chunk {
		out, err := rt.Complete([]byte(`{"messages":[` + messages + `],"tools":[` + unitTool(strict) + `],"max_tokens":60` + extra + `}`))
		require.NoError(t, err)
		return out[0]
	}
	user := func(s string) string { return `{"role":"user","content":` + jsonString(s) + `}` }

	for _, c := range []struct {
		name, messages string
		loose          func(t *testing.T, o streaming.Chunk) // the unconstrained answer
	}{{
		// A call in a ```json fence, with a unit the schema has not.
		"fenced", user("<tool_call> tags please: what is the weather in Oslo, in fahrenheit?"),
		func(t *testing.T, o streaming.Chunk) {
			require.Contains(t, o.Text, "```json")
			got := calls(t, o.Reply)
			require.Len(t, got, 1)
			require.Equal(t, "fahrenheit", got[0]["arguments"].(map[string]any)["unit"])
		},
	}, {
		// A bare call object naming a function the request has not (so
		// no call at all: the parser leaves it as content).
		"bare", user("Write a haiku about the sea."),
		func(t *testing.T, o streaming.Chunk) {
			require.True(t, strings.HasPrefix(o.Text, `{"name": "sea"`), o.Text)
			require.Empty(t, o.Reply.ToolCalls)
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			c.loose(t, complete(c.messages, false, ""))
			o := complete(c.messages, true, "")
			require.Equal(t, streaming.EndId, o.Reason, o.Text)
			require.Empty(t, strings.TrimSpace(o.Reply.Content), o.Text)
			got := calls(t, o.Reply)
			require.Len(t, got, 1, o.Text)
			require.Equal(t, "get_weather", got[0]["name"])
			args := got[0]["arguments"].(map[string]any)
			require.Len(t, args, 2, o.Text)
			require.IsType(t, "", args["city"])
			require.Contains(t, []any{"metric", "imperial"}, args["unit"])
			plain := complete(c.messages, true, `,"speculate":false`)
			require.Equal(t, o.Text, plain.Text, "speculation changed a greedy answer under the lazy constraint")
		})
	}

	// A text answer: nothing triggers, nothing is constrained.
	history := user("What is the weather in Paris?") + `,{"role":"assistant","content":"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"metric\"}}\n</tool_call>"},` +
		`{"role":"tool","content":"18 degrees, sunny"},{"role":"assistant","content":"It is 18 degrees and sunny in Paris."},` + user("Thanks! Tell me a joke about the weather.")
	loose, strict := complete(history, false, ""), complete(history, true, "")
	require.Empty(t, strict.Reply.ToolCalls, strict.Text)
	require.NotEmpty(t, strings.TrimSpace(strict.Text))
	require.Equal(t, loose.Text, strict.Text)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestStrictToolsRefused: a strict schema under "auto" is enforced or the
// request refused, never quietly served unconstrained.
func TestStrictToolsRefused(t *testing.T) {
	rt := qwenRuntime(t)
	msg := `{"messages":[{"role":"user","content":"x"}],"tools":[` + unitTool(true) + `]`
	err := rt.Submit([]byte(msg+`,"response_format":{"type":"json_object"}}`), []*streaming.Channel{streaming.NewChannel()})
	require.ErrorContains(t, err, "cannot be combined")
	// tool_choice "none" shows no tools: the flag has nothing to hold.
	out, err := rt.Complete([]byte(msg + `,"tool_choice":"none","max_tokens":2}`))
	require.NoError(t, err)
	require.Len(t, out, 1)

	// Qwen3-Coder's XML calls have no grammar here.
	tmpl, _ := json.Marshal(syntaxTemplate("<tool_call><function=NAME>"))
	xml, err := loop.New([]byte(`{"model_path":"` + qwenPath + `","max_slots":1,"context_length":512,"chat_template":` + string(tmpl) + `}`))
	require.NoError(t, err)
	defer xml.Close()
	err = xml.Submit([]byte(msg+`}`), []*streaming.Channel{streaming.NewChannel()})
	require.ErrorContains(t, err, `"strict" schema cannot be enforced in this model's tool-call syntax (qwen3_coder)`)
	out, err = xml.Complete([]byte(strings.Replace(msg, `"strict":true`, `"strict":false`, 1) + `,"max_tokens":2}`))
	require.NoError(t, err)
	require.Len(t, out, 1)
}
