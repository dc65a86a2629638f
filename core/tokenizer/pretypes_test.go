package tokenizer_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/tokenizer"
)

// llamaCppSplits is testdata/llamacpp_pretokenize.json: how llama.cpp
// splits 114 texts with each of its pre-tokenizer types, and which type
// each tokenizer.ggml.pre name stands for there. It was made once with
// llama.cpp's own splitter, outside this repository.
type llamaCppSplits struct {
	Names map[string]string `json:"names"`
	Tests []struct {
		Text   string `json:"text"`
		Splits []struct {
			Types   []string `json:"types"`
			Lengths []int    `json:"lengths"`
		} `json:"splits"`
	} `json:"tests"`
}

// notByteLevelTypes are llama.cpp's types for vocabularies stored as raw
// UTF-8, which this package refuses by name.
var notByteLevelTypes = map[string]bool{"GEMMA4": true, "SARVAM_MOE": true, "WHITESPACE": true}

// TestPreTokenizersMatchLlamaCpp checks every pre-tokenizer name llama.cpp
// accepts: byte-level ones split every text exactly as llama.cpp does, the
// others are refused by name, and no name is accepted that llama.cpp does
// not know. The texts include llama.cpp's tokenizer test strings, so this
// also covers, at the split level, the test sets whose vocabulary files are
// absent (llama-bpe, command-r, qwen35).
func TestPreTokenizersMatchLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("testdata/llamacpp_pretokenize.json")
	require.NoError(t, err)
	var golden llamaCppSplits
	require.NoError(t, json.Unmarshal(raw, &golden))
	require.Greater(t, len(golden.Names), 80)

	accepted := map[string]bool{}
	for _, n := range tokenizer.PreTokenizerNames() {
		accepted[n] = true
		_, known := golden.Names[n]
		require.True(t, known, "%q is accepted but llama.cpp does not know it", n)
	}
	var names []string
	for n := range golden.Names {
		names = append(names, n)
	}
	sort.Strings(names)
	checked := map[string]int{}
	for _, name := range names {
		typ := golden.Names[name]
		if notByteLevelTypes[typ] {
			_, err := tokenizer.PreTokenize(name, "x")
			require.ErrorContains(t, err, "not byte-level", name)
			continue
		}
		require.True(t, accepted[name] || name == "", "llama.cpp's %q (%s) is not accepted", name, typ)
		for _, tc := range golden.Tests {
			var want []int
			found := false
			for _, g := range tc.Splits {
				for _, gt := range g.Types {
					if gt == typ {
						want, found = g.Lengths, true
					}
				}
			}
			require.True(t, found, "no split of type %s", typ)
			pieces, err := tokenizer.PreTokenize(name, tc.Text)
			require.NoError(t, err)
			got := make([]int, len(pieces))
			for i, p := range pieces {
				got[i] = len(p)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s (%s) %q:\n want piece lengths %v\n got  %v (%q)", name, typ, tc.Text, want, got, pieces)
			}
		}
		checked[typ]++
	}
	t.Logf("%d names of %d llama.cpp pre-tokenizer types match llama.cpp's splits on %d texts; refused (not byte-level): %v",
		len(names)-countNotByteLevel(golden.Names), len(checked), len(golden.Tests), refusedNames(golden.Names))
}

func countNotByteLevel(names map[string]string) int {
	n := 0
	for _, typ := range names {
		if notByteLevelTypes[typ] {
			n++
		}
	}
	return n
}

func refusedNames(names map[string]string) []string {
	var out []string
	for n, typ := range names {
		if notByteLevelTypes[typ] {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
