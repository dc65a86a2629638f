package reply

import (
	"os"
	"testing"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/streaming"
)

// TestStreamQwenTokens runs a Hermes answer, tokenized by Qwen2.5's real
// vocabulary, through a real Stream token by token: the parser must see
// the markers however the vocabulary classes them, and the stream's
// collected Reply must be the parse.
func TestStreamQwenTokens(t *testing.T) {
	path := "../../models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
	if _, err := os.Stat(path); err != nil {
		t.Skipf("model not found at %s: %v", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	answer := "<think>\nThe user wants the weather.\n</think>\n\nChecking.\n" + hermesParis + "\n" + hermesTime
	ids := tok.Encode(answer, tokenizer.EncodeOptions{ParseSpecial: true})
	s := streaming.NewStream(nil, tok, nil, false)
	s.ParseReply(New(Hermes, opts(nil)))
	for _, id := range ids {
		s.Accept([]int32{id}, false)
		s.Emit()
	}
	s.Finish(streaming.EndId, 0, "")
	s.Close(streaming.Usage{})
	got := s.Result().Reply
	if got == nil {
		t.Fatal("no Reply on the result")
	}
	r := checkCalls(t, Hermes, *got, nil)
	want := streaming.Reply{Reasoning: "\nThe user wants the weather.\n", Content: "Checking.", ToolCalls: []streaming.ToolCallDelta{
		{Index: 0, Name: paris[0], Arguments: paris[1]}, {Index: 1, Name: time_[0], Arguments: time_[1]},
	}}
	if r.Content != want.Content || r.Reasoning != want.Reasoning || len(r.ToolCalls) != 2 ||
		r.ToolCalls[0] != want.ToolCalls[0] || r.ToolCalls[1] != want.ToolCalls[1] {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
}
