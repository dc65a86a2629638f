package tokenizer_test

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/tokenizer"
)

// boundTexts are inputs that stress the bound: long merges (runs of
// spaces, repeated words), special tokens, CJK, invalid UTF-8, random
// bytes.
func boundTexts(r *rand.Rand) []string {
	texts := []string{
		strings.Repeat(" ", 5000), strings.Repeat("\n", 300), strings.Repeat("the ", 400),
		strings.Repeat("<|im_start|>user\n", 50), strings.Repeat("漢字仮名交じり文", 200),
		strings.Repeat("=", 1000), strings.Repeat("\xff\xfe", 100), "x",
	}
	if b, err := os.ReadFile("../../tests/tokenizer/corpus.txt"); err == nil {
		texts = append(texts, string(b))
	}
	for range 200 {
		b := make([]byte, r.IntN(400))
		for i := range b {
			switch r.IntN(4) {
			case 0:
				b[i] = byte(r.IntN(256))
			case 1:
				b[i] = ' '
			default:
				b[i] = byte('a' + r.IntN(26))
			}
		}
		texts = append(texts, string(b))
	}
	return texts
}

// TestMaxInputBytesPerTokenIsALowerBound: Encode never returns fewer than
// ceil(len(text) / MaxInputBytesPerToken()) tokens, the promise the cpu
// backend relies on to refuse a prompt without tokenizing it.
func TestMaxInputBytesPerTokenIsALowerBound(t *testing.T) {
	tok := loadSmolLM(t)
	bound := tok.MaxInputBytesPerToken()
	require.Positive(t, bound)
	r := rand.New(rand.NewPCG(10, 5))
	for _, text := range boundTexts(r) {
		for _, opts := range []tokenizer.EncodeOptions{{}, {AddSpecial: true, ParseSpecial: true}} {
			n := len(tok.Encode(text, opts))
			require.GreaterOrEqual(t, n*bound, len(text), "%d tokens for %d bytes (%.40q)", n, len(text), text)
		}
	}
}

// TestMaxInputBytesPerTokenSPM checks the SentencePiece cases: a full set
// of byte tokens, none with an UNK (one UNK per character), and none
// without an UNK, where Encode drops input and no bound holds.
func TestMaxInputBytesPerTokenSPM(t *testing.T) {
	build := func(byteTokens, unk bool) *tokenizer.Tokenizer {
		toks := [][]byte{[]byte("<unk>"), []byte("<s>"), []byte("</s>"), []byte("▁the"), []byte("▁"), []byte("t"), []byte("h"), []byte("e"),
			[]byte("▁▁▁▁▁▁▁▁")}
		types := []int32{2, 3, 3, 1, 1, 1, 1, 1, 1}
		if byteTokens {
			for b := range 256 {
				toks = append(toks, []byte("<0x"+strings.ToUpper(string("0123456789abcdef"[b>>4]))+strings.ToUpper(string("0123456789abcdef"[b&15]))+">"))
				types = append(types, 6)
			}
		}
		scores := make([]float32, len(toks))
		for i := range scores {
			scores[i] = -float32(i)
		}
		cfg := tokenizer.Config{Model: "llama", Tokens: toks, Types: types, Scores: scores, BOS: 1, EOS: 2, UNK: -1, PAD: -1, AddSpacePrefix: true}
		if unk {
			cfg.UNK = 0
		}
		tk, err := tokenizer.New(cfg)
		require.NoError(t, err)
		return tk
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ byteTokens, unk bool }{{true, false}, {true, true}, {false, true}} {
		tk := build(c.byteTokens, c.unk)
		bound := tk.MaxInputBytesPerToken()
		require.GreaterOrEqual(t, bound, 8, "%+v", c) // "▁▁▁▁▁▁▁▁" decodes to 8 spaces
		if !c.byteTokens {
			require.GreaterOrEqual(t, bound, utf8.UTFMax, "an UNK stands for a whole character")
		}
		for _, text := range boundTexts(r) {
			n := len(tk.Encode(text, tokenizer.EncodeOptions{AddSpecial: true}))
			require.GreaterOrEqual(t, n*bound, len(text), "%+v: %d tokens for %d bytes (%.40q)", c, n, len(text), text)
		}
	}
	require.Zero(t, build(false, false).MaxInputBytesPerToken(), "a vocabulary that drops input has no bound")
}
