package grammar_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/grammar"
	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/internal/testmodel"
)

// vocabTrie is the default model's vocabulary as the CPU backend builds
// its trie (control tokens never allowed).
func vocabTrie(b testing.TB) *grammar.Trie {
	path := filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	testmodel.Need(b, path)
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	pieces := make([][]byte, tok.Size())
	eog := make([]bool, tok.Size())
	for id := range int32(tok.Size()) {
		eog[id] = tok.EOG(id)
		if !tok.IsSpecial(id) {
			pieces[id] = tok.Piece(id)
		}
	}
	return grammar.NewTrie(pieces, eog)
}

// BenchmarkMask times one mask over the default model's 49,152 token
// vocabulary at the states a JSON answer spends its time in: inside a
// bounded string (most tokens allowed, and each position a new state),
// inside a free string, and between members (few tokens allowed). "cold"
// starts from a new matcher; "warm" from one that has just computed the
// mask one byte earlier, as generation does (the mask of this very state
// is not cached).
func BenchmarkMask(b *testing.B) {
	tr := vocabTrie(b)
	g, err := grammar.FromSchema([]byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":24},"age":{"type":"integer"}},"required":["name","age"]}`))
	if err != nil {
		b.Fatal(err)
	}
	free := grammar.JSONObject()
	b.Logf("trie: %d nodes, %d tokens", tr.Nodes(), tr.Vocab())
	for _, c := range []struct {
		name   string
		g      *grammar.Grammar
		before string
		c      byte
	}{
		{"bounded-string", g, `{"name": "Al`, 'i'},
		{"free-string", free, `{"a": "Al`, 'i'},
		{"after-member", g, `{"name": "Alice`, '"'},
	} {
		prev := c.g.Start().Advance([]byte(c.before))
		s := prev.AdvanceByte(c.c)
		for _, warm := range []bool{false, true} {
			name := c.name + "/cold"
			if warm {
				name = c.name + "/warm"
			}
			b.Run(name, func(b *testing.B) {
				var allowed int
				for range b.N {
					b.StopTimer()
					m := grammar.NewMatcher(tr)
					if warm {
						m.Mask(prev)
					}
					b.StartTimer()
					mask := m.Mask(s)
					b.StopTimer()
					allowed = 0
					for id := range int32(tr.Vocab()) {
						if grammar.Allowed(mask, id) {
							allowed++
						}
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(allowed), "allowed")
			})
		}
	}
}

// BenchmarkToolCalls times compiling the grammar of calls to n tools (done
// once per request that forces a call), and one mask where a call's name
// begins: every tool is a way the output may go on there.
func BenchmarkToolCalls(b *testing.B) {
	shape := grammar.CallShape{Begin: "<tool_call>\n", End: "\n</tool_call>", Sep: "\n", NameKey: "name", ArgsKey: "arguments"}
	params := []byte(`{"type": "object", "properties": {"location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
		"days": {"type": "array", "items": {"type": "integer"}, "maxItems": 7}}, "required": ["location"]}`)
	for _, n := range []int{4, grammar.MaxTools} {
		tools := make([]grammar.Tool, n)
		for i := range tools {
			tools[i] = grammar.Tool{Name: fmt.Sprintf("get_weather_%d", i), Parameters: params}
		}
		b.Run(fmt.Sprintf("compile-%d", n), func(b *testing.B) {
			for range b.N {
				if _, err := grammar.ToolCalls(shape, tools); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("mask-at-name-%d", n), func(b *testing.B) {
			tr := vocabTrie(b)
			g, err := grammar.ToolCalls(shape, tools)
			if err != nil {
				b.Fatal(err)
			}
			s := g.Start().Advance([]byte("<tool_call>\n{\"name\": \""))
			for range b.N {
				grammar.NewMatcher(tr).Mask(s)
			}
		})
	}
}
