package tokenizer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expectations below were checked against the reference regexes run by
// Python's regex module (tests/tokenizer/test_pretokenizer_regex.py checks
// the same scanners on thousands of random strings).
func TestPreTokenizers(t *testing.T) {
	cases := []struct {
		name, text                  string
		gpt2, smollm, llama3, qwen2 []string
	}{
		{
			name: "plain words", text: "Hello world",
			gpt2:   []string{"Hello", " world"},
			smollm: []string{"Hello", " world"},
			llama3: []string{"Hello", " world"},
			qwen2:  []string{"Hello", " world"},
		},
		{
			name: "contractions: GPT-2 is case-sensitive, Llama-3/Qwen2 fold case", text: "I'm can't we'LL THEY'RE",
			gpt2:   []string{"I", "'m", " can", "'t", " we", "'", "LL", " THEY", "'", "RE"},
			smollm: []string{"I", "'m", " can", "'t", " we", "'", "LL", " THEY", "'", "RE"},
			llama3: []string{"I", "'m", " can", "'t", " we", "'LL", " THEY", "'RE"},
			qwen2:  []string{"I", "'m", " can", "'t", " we", "'LL", " THEY", "'RE"},
		},
		{
			name: "whitespace run gives its last space to the next word", text: "a   b",
			gpt2:   []string{"a", "  ", " b"},
			smollm: []string{"a", "  ", " b"},
			llama3: []string{"a", "  ", " b"},
			qwen2:  []string{"a", "  ", " b"},
		},
		{
			name: "newlines", text: "a\n\nb",
			gpt2:   []string{"a", "\n", "\n", "b"},
			smollm: []string{"a", "\n", "\n", "b"},
			llama3: []string{"a", "\n\n", "b"},
			qwen2:  []string{"a", "\n\n", "b"},
		},
		{
			name: "space before newline", text: "a \n b",
			gpt2:   []string{"a", " \n", " b"},
			smollm: []string{"a", " \n", " b"},
			llama3: []string{"a", " \n", " b"},
			qwen2:  []string{"a", " \n", " b"},
		},
		{
			name: "mixed whitespace run", text: "x  \n\n  y",
			gpt2:   []string{"x", "  \n\n ", " y"},
			smollm: []string{"x", "  \n\n ", " y"},
			llama3: []string{"x", "  \n\n", " ", " y"},
			qwen2:  []string{"x", "  \n\n", " ", " y"},
		},
		{
			name: "digit runs: whole, single, groups of three", text: "1234567 apples",
			gpt2:   []string{"1234567", " apples"},
			smollm: []string{"1", "2", "3", "4", "5", "6", "7", " apples"},
			llama3: []string{"123", "456", "7", " apples"},
			qwen2:  []string{"1", "2", "3", "4", "5", "6", "7", " apples"},
		},
		{
			name: "digits inside a word", text: "abc123def",
			gpt2:   []string{"abc", "123", "def"},
			smollm: []string{"abc", "1", "2", "3", "def"},
			llama3: []string{"abc", "123", "def"},
			qwen2:  []string{"abc", "1", "2", "3", "def"},
		},
		{
			name: "leading spaces", text: "  leading",
			gpt2:   []string{" ", " leading"},
			smollm: []string{" ", " leading"},
			llama3: []string{" ", " leading"},
			qwen2:  []string{" ", " leading"},
		},
		{
			name: "trailing spaces stay one piece", text: "trailing  ",
			gpt2:   []string{"trailing", "  "},
			smollm: []string{"trailing", "  "},
			llama3: []string{"trailing", "  "},
			qwen2:  []string{"trailing", "  "},
		},
		{
			name: "a tab leads a Llama-3 word", text: "\tindent",
			gpt2:   []string{"\t", "indent"},
			smollm: []string{"\t", "indent"},
			llama3: []string{"\tindent"},
			qwen2:  []string{"\tindent"},
		},
		{
			name: "punctuation runs", text: "hi!!! ok?",
			gpt2:   []string{"hi", "!!!", " ok", "?"},
			smollm: []string{"hi", "!!!", " ok", "?"},
			llama3: []string{"hi", "!!!", " ok", "?"},
			qwen2:  []string{"hi", "!!!", " ok", "?"},
		},
		{
			name: "space joins punctuation", text: "  ...",
			gpt2:   []string{" ", " ..."},
			smollm: []string{" ", " ..."},
			llama3: []string{" ", " ..."},
			qwen2:  []string{" ", " ..."},
		},
		{
			name: "emoji are symbols, not letters", text: "😀😀 emoji 👍🏽",
			gpt2:   []string{"😀😀", " emoji", " 👍🏽"},
			smollm: []string{"😀😀", " emoji", " 👍🏽"},
			llama3: []string{"😀😀", " emoji", " 👍🏽"},
			qwen2:  []string{"😀😀", " emoji", " 👍🏽"},
		},
		{
			name: "CJK letters and full-width punctuation", text: "你好，世界",
			gpt2:   []string{"你好", "，", "世界"},
			smollm: []string{"你好", "，", "世界"},
			llama3: []string{"你好", "，世界"},
			qwen2:  []string{"你好", "，世界"},
		},
		{
			name: "a combining mark is not a letter", text: "e\u0301",
			gpt2:   []string{"e", "\u0301"},
			smollm: []string{"e", "\u0301"},
			llama3: []string{"e", "\u0301"},
			qwen2:  []string{"e", "\u0301"},
		},
		{
			name: "CRLF", text: "line\r\nnext",
			gpt2:   []string{"line", "\r", "\n", "next"},
			smollm: []string{"line", "\r", "\n", "next"},
			llama3: []string{"line", "\r\n", "next"},
			qwen2:  []string{"line", "\r\n", "next"},
		},
		{
			name: "prices", text: "price: $12.50",
			gpt2:   []string{"price", ":", " $", "12", ".", "50"},
			smollm: []string{"price", ":", " $", "1", "2", ".", "5", "0"},
			llama3: []string{"price", ":", " $", "12", ".", "50"},
			qwen2:  []string{"price", ":", " $", "1", "2", ".", "5", "0"},
		},
		{
			name: "contraction then apostrophe", text: "'s'",
			gpt2:   []string{"'s", "'"},
			smollm: []string{"'s", "'"},
			llama3: []string{"'s", "'"},
			qwen2:  []string{"'s", "'"},
		},
		{
			name: "upper-case contraction", text: "'S",
			gpt2:   []string{"'", "S"},
			smollm: []string{"'", "S"},
			llama3: []string{"'S"},
			qwen2:  []string{"'S"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for pre, want := range map[string][]string{"gpt-2": c.gpt2, "smollm": c.smollm, "llama-bpe": c.llama3, "qwen2": c.qwen2} {
				got, err := PreTokenize(pre, c.text)
				require.NoError(t, err)
				require.Equal(t, want, got, "pre-tokenizer %s on %q", pre, c.text)
				require.Equal(t, c.text, strings.Join(got, ""), "pieces must cover the text")
			}
		})
	}
}

func TestPreTokenizerUnknownName(t *testing.T) {
	_, err := PreTokenize("made-up", "x")
	require.ErrorContains(t, err, `unsupported pre-tokenizer "made-up" (tokenizer.ggml.pre)`)
	_, err = PreTokenize("gemma4", "x")
	require.ErrorContains(t, err, `"gemma4" (tokenizer.ggml.pre) is for a vocabulary that is not byte-level`)
	// "default", and a file with no pre-tokenizer, get llama.cpp's default
	// list: punctuation runs, GPT-2's regex, digit runs, then groups of
	// three digits.
	for _, pre := range []string{"default", ""} {
		got, err := PreTokenize(pre, "a + b x 123456")
		require.NoError(t, err)
		require.Equal(t, []string{"a", " ", "+", " b", " x", " ", "123", "456"}, got)
	}
	got, err := PreTokenize("gpt-2", "a + b x 123456")
	require.NoError(t, err)
	require.Equal(t, []string{"a", " +", " b", " x", " 123456"}, got)
}

func TestPreTokenizersEmptyAndInvalidUTF8(t *testing.T) {
	for _, pre := range []string{"gpt-2", "smollm", "llama-bpe", "qwen2"} {
		got, err := PreTokenize(pre, "")
		require.NoError(t, err)
		require.Empty(t, got)
		// Invalid bytes are classed like U+FFFD (a symbol) and kept.
		text := "ab\xff\xfe cd\xc3"
		got, err = PreTokenize(pre, text)
		require.NoError(t, err)
		require.Equal(t, text, strings.Join(got, ""), pre)
	}
}
