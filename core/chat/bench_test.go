package chat

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

var benchConversation = []Message{
	sys("You are a helpful assistant."),
	user("What is the capital of France?"),
	asst("Paris."),
	user("And of Italy?"),
}

// A typical chat request's render: Qwen2.5's template, four turns.
func BenchmarkRenderQwen25(b *testing.B) {
	m, err := ForModel(qwen25Template, "", "<|im_end|>")
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Render(benchConversation, true); err != nil {
			b.Fatal(err)
		}
	}
}

// A heavier one: Llama 3.1's template with two tools, a tool call and its
// result (the template formats every tool's JSON schema).
func BenchmarkRenderLlama31Tools(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "templates", "meta-llama-Llama-3.1-8B-Instruct.jinja"))
	require.NoError(b, err)
	data, err := os.ReadFile(filepath.Join("testdata", "scenarios.json"))
	require.NoError(b, err)
	var spec corpusSpec
	require.NoError(b, json.Unmarshal(data, &spec))
	var c Conversation
	for _, sc := range spec.Scenarios {
		if sc.Name == "tool_call" {
			c = Conversation{Messages: sc.Messages, Tools: spec.Tools, AddGenerationPrompt: true}
		}
	}
	m, err := ForModel(string(src), "<|begin_of_text|>", "<|eot_id|>")
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.RenderConversation(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}

// Parsing happens once per model: the largest template of the corpus.
func BenchmarkParseLargest(b *testing.B) {
	paths, err := filepath.Glob(filepath.Join("testdata", "templates", "*.jinja"))
	require.NoError(b, err)
	var largest []byte
	for _, p := range paths {
		src, err := os.ReadFile(p)
		require.NoError(b, err)
		if len(src) > len(largest) {
			largest = src
		}
	}
	b.SetBytes(int64(len(largest)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewJinja(string(largest), "", ""); err != nil {
			b.Fatal(err)
		}
	}
}
