package serve

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/streaming"
)

// The parsed reply becomes OpenAI's shapes: reasoning_content and content
// deltas as they come, a call's first delta with index, id, type, name and
// empty arguments, then its arguments; the whole message with content null
// when the answer is only calls.
func TestReplyShapes(t *testing.T) {
	chunks := []streaming.Reply{
		{Reasoning: "The user wants "},
		{Reasoning: "weather.", Content: ""},
		{ToolCalls: []streaming.ToolCallDelta{{Index: 0, ID: "call_a", Name: "get_weather", Arguments: `{"city":`}}},
		{ToolCalls: []streaming.ToolCallDelta{{Index: 0, Arguments: ` "Paris"}`}, {Index: 1, ID: "call_b", Name: "add", Arguments: `{}`}}},
	}
	var streamed replyState
	var deltas []string
	for i := range chunks {
		for _, d := range streamed.deltas(&chunks[i], nil) {
			b, err := json.Marshal(d.delta)
			require.NoError(t, err)
			deltas = append(deltas, string(b))
		}
	}
	require.Equal(t, []string{
		`{"reasoning_content":"The user wants "}`,
		`{"reasoning_content":"weather."}`,
		`{"tool_calls":[{"function":{"arguments":"","name":"get_weather"},"id":"call_a","index":0,"type":"function"}]}`,
		`{"tool_calls":[{"function":{"arguments":"{\"city\":"},"index":0}]}`,
		`{"tool_calls":[{"function":{"arguments":" \"Paris\"}"},"index":0}]}`,
		`{"tool_calls":[{"function":{"arguments":"","name":"add"},"id":"call_b","index":1,"type":"function"}]}`,
		`{"tool_calls":[{"function":{"arguments":"{}"},"index":1}]}`,
	}, deltas)
	require.Equal(t, 2, streamed.calls)

	var whole replyState
	for i := range chunks {
		whole.add(&chunks[i])
	}
	b, err := json.Marshal(whole.message())
	require.NoError(t, err)
	require.JSONEq(t, `{"role":"assistant","content":null,"reasoning_content":"The user wants weather.",
		"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
		{"id":"call_b","type":"function","function":{"name":"add","arguments":"{}"}}]}`, string(b))

	var text replyState
	text.add(&streaming.Reply{Content: "Hello"})
	b, _ = json.Marshal(text.message())
	require.JSONEq(t, `{"role":"assistant","content":"Hello"}`, string(b))
}
