package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model/synth"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/streaming"
)

// A template per call syntax, as small as a template can be and still
// show the tools and name the syntax's markers (reply.Detect reads them).
func syntaxTemplate(marker string) string {
	return `{%- if tools %}<|im_start|>system
Call tools with ` + marker + `: {% for t in tools %}{{ t.function.name }} {% endfor %}<|im_end|>
{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}<|im_start|>assistant
`
}

// The synthetic model's weights are random: strings it writes end only
// where the schema bounds them.
const boundedWeatherTool = `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
"properties":{"city":{"type":"string","maxLength":12},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},
"required":["city","unit"],"additionalProperties":false}}}`

const addTool = `{"type":"function","function":{"name":"add","parameters":{"type":"object",
"properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}}}`

// TestForcedCallsInEverySyntax runs a synthetic model (random weights,
// SmolLM2's vocabulary) with tool_choice "required" and a named function
// under each call syntax that can be forced: whatever the weights would
// say, the grammar makes the answer a call that parses, name a tool and
// follow its schema, and the parser returns exactly them. Greedy answers
// are the same with speculation and without (the constraint keeps it
// lossless).
func TestForcedCallsInEverySyntax(t *testing.T) {
	if race.Enabled {
		t.Skip("model runs are too slow under -race")
	}
	testmodel.Need(t, modelPath)
	vocab, err := gguf.Open(modelPath)
	require.NoError(t, err)
	defer vocab.Close()
	var spec synth.Spec
	for _, s := range synth.Set() {
		if s.Name == "qwen3" {
			spec = s
		}
	}
	spec.Context = 1024
	data, err := synth.Write(spec, vocab)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "qwen3-synth.gguf")
	require.NoError(t, os.WriteFile(path, data, 0o644))

	for _, syntax := range []struct{ name, marker, raw string }{
		{"hermes", "<tool_call></tool_call>", "<tool_call>"},
		{"llama3", "<|python_tag|>", `"parameters"`},
		{"mistral", "[TOOL_CALLS]", `[{"name"`},
		{"granite", "<|tool_call|>", `[{"name"`},
	} {
		t.Run(syntax.name, func(t *testing.T) {
			tmpl, _ := json.Marshal(syntaxTemplate(syntax.marker))
			rt, err := loop.New([]byte(`{"model_path":"` + path + `","max_slots":1,"context_length":1024,"spec_budget":12,"chat_template":` + string(tmpl) + `}`))
			require.NoError(t, err)
			defer rt.Close()
			for _, choice := range []string{`"required"`, `{"type":"function","function":{"name":"add"}}`} {
				req := `{"messages":[{"role":"user","content":"What is 2 plus 3?"}],"tools":[` + boundedWeatherTool + `,` + addTool + `],
"tool_choice":` + choice + `,"parallel_tool_calls":false,"max_tokens":400`
				out, err := rt.Complete([]byte(req + `}`))
				require.NoError(t, err, choice)
				require.Equal(t, streaming.EndId, out[0].Reason, "%s: the grammar ends the answer: %q", choice, out[0].Text)
				require.Contains(t, out[0].Text, syntax.raw)
				r := out[0].Reply
				require.NotNil(t, r)
				require.Empty(t, r.Content, "%s: %q", choice, out[0].Text)
				got := calls(t, r)
				require.Len(t, got, 1, "%s: one call (parallel_tool_calls false): %q", choice, out[0].Text)
				for _, c := range got {
					args := c["arguments"].(map[string]any)
					switch c["name"] {
					case "add":
						require.Len(t, args, 2)
						for _, k := range []string{"a", "b"} {
							v, ok := args[k].(float64)
							require.True(t, ok && v == float64(int64(v)), "%s: %v", k, args)
						}
					case "get_weather":
						require.Contains(t, []any{"celsius", "fahrenheit"}, args["unit"])
						require.IsType(t, "", args["city"])
					default:
						t.Fatalf("%s: a call of %v", choice, c["name"])
					}
					if strings.Contains(choice, `"add"`) {
						require.Equal(t, "add", c["name"])
					}
				}
				if choice == `"required"` {
					plain, err := rt.Complete([]byte(req + `,"speculate":false}`))
					require.NoError(t, err)
					require.Equal(t, out[0].Text, plain[0].Text, "speculation changed a constrained greedy answer")
					// Streamed, the chunks' replies merge into the same calls.
					ch := streaming.NewChannel()
					require.NoError(t, rt.Submit([]byte(req+`}`), []*streaming.Channel{ch}))
					merged := &streaming.Reply{}
					for {
						c, err := ch.WaitPop(60 * time.Second)
						require.NoError(t, err)
						require.NotNil(t, c.Reply)
						merged.Content += c.Reply.Content
						merged.ToolCalls = append(merged.ToolCalls, c.Reply.ToolCalls...)
						if c.Finished {
							break
						}
					}
					ch.Release()
					streamed := calls(t, merged)
					require.Equal(t, got, streamed)
				}
			}
		})
	}
}

// TestReasoningIsReturnedApart: a template with thinking markers makes
// the answer's <think> block the reply's reasoning, the rest its content
// ("reasoning_format": "none" leaves it inline, unparsed). A grammar makes
// the synthetic model think, since its random weights would not.
func TestReasoningIsReturnedApart(t *testing.T) {
	if race.Enabled {
		t.Skip("model runs are too slow under -race")
	}
	testmodel.Need(t, modelPath)
	vocab, err := gguf.Open(modelPath)
	require.NoError(t, err)
	defer vocab.Close()
	spec := synth.Set()[0]
	data, err := synth.Write(spec, vocab)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "synth.gguf")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	tmpl, _ := json.Marshal(`{% for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}<|im_end|>
{% endfor %}<|im_start|>assistant
`)
	rt, err := loop.New([]byte(`{"model_path":"` + path + `","max_slots":1,"context_length":256,"spec_budget":12,"chat_template":` + string(tmpl) + `}`))
	require.NoError(t, err)
	defer rt.Close()
	grammar, _ := json.Marshal(`root ::= "<think>" [a-z]{2,8} " " [a-z]{2,8} "</think>\n\n" [a-z]{2,8} " " [a-z]{2,8}`)
	req := `{"messages":[{"role":"user","content":"Hi"}],"grammar":` + string(grammar) + `,"max_tokens":60`
	out, err := rt.Complete([]byte(req + `}`))
	require.NoError(t, err)
	text := out[0].Text
	require.Equal(t, streaming.EndId, out[0].Reason, text)
	r := out[0].Reply
	require.NotNil(t, r, text)
	think, answer, ok := strings.Cut(strings.TrimPrefix(text, "<think>"), "</think>\n\n")
	require.True(t, ok, text)
	require.Equal(t, think, r.Reasoning)
	require.Equal(t, answer, r.Content)
	require.Empty(t, r.ToolCalls)

	inline, err := rt.Complete([]byte(req + `,"reasoning_format":"none"}`))
	require.NoError(t, err)
	require.Equal(t, text, inline[0].Text)
	require.Nil(t, inline[0].Reply, "nothing to parse: the text is the answer")
}
