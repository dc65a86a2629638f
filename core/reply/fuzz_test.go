package reply

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/lmstream/lmstream/streaming"
)

var fuzzFormats = []Format{None, Hermes, Qwen3Coder, SeedOSS, Llama3, Mistral, Harmony, Granite, DeepSeek}

var fuzzPrompts = []string{"", "<|im_start|>assistant\n<think>\n", "<think>\n\n</think>\n\n", "<|start|>assistant", "<|start|>assistant<|channel|>final<|message|>"}

// FuzzReply feeds hostile answers to every parser: none may panic, every
// call's arguments must be a JSON object, and how the answer is cut into
// writes must not change the result.
func FuzzReply(f *testing.F) {
	for i, c := range replyCases {
		f.Add(uint8(i), uint8(3), c.in, uint64(i))
	}
	f.Add(uint8(0), uint8(0), "", uint64(0))
	f.Fuzz(func(t *testing.T, which, flags uint8, text string, seed uint64) {
		format := fuzzFormats[int(which)%len(fuzzFormats)]
		o := Options{Tools: flags&1 != 0, Reasoning: flags&2 != 0, Prompt: fuzzPrompts[int(flags>>5)%len(fuzzPrompts)]}
		if flags&4 != 0 {
			o.MaxCalls = 1
		}
		if flags&8 != 0 {
			o.ToolNames = tools
		}
		if ops := format.CallOpeners(); flags&16 != 0 && len(ops) > 0 {
			o.ForcedPrefix = ops[0]
		}
		var results []streaming.Reply
		for _, chunks := range splits(text, 2, seed) {
			r := feed(format, o, chunks)
			for i, c := range r.ToolCalls {
				var obj map[string]json.RawMessage
				if c.Index != int32(i) || json.Unmarshal([]byte(c.Arguments), &obj) != nil || c.Name == "" || c.ID == "" {
					t.Fatalf("bad call %d: %+v", i, c)
				}
				r.ToolCalls[i].ID = ""
			}
			results = append(results, r)
		}
		for i := 1; i < len(results); i++ {
			if !reflect.DeepEqual(results[0], results[i]) {
				t.Fatalf("split %d differs:\n%+v\n%+v", i, results[0], results[i])
			}
		}
		if !o.Tools && !o.Reasoning && format != Harmony && results[0].Content != o.ForcedPrefix+text {
			t.Fatalf("plain content changed: %q", results[0].Content)
		}
	})
}
