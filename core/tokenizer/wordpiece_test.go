package tokenizer_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// wpmVocab is a WordPiece vocabulary in llama.cpp's converted form: "▁"
// starts a word, continuation pieces have lost their "##".
var wpmVocab = []string{
	"[PAD]", "[UNK]", "[CLS]", "[SEP]",
	"▁un", "▁una", "aff", "able", "▁the", "▁a", "a", "▁e", "e", "▁,", "▁!", "▁$", "▁日", "▁本", "▁€", "▁x", "x", "▁ab", "b", "ff",
}

func wpmConfig() tokenizer.Config {
	cfg := tokenizer.Config{Model: "bert", BOS: 2, EOS: 3, UNK: 1, PAD: 0, AddBOS: true, AddEOS: true, Lowercase: true, StripAccents: true}
	for i, s := range wpmVocab {
		cfg.Tokens = append(cfg.Tokens, []byte(s))
		ty := int32(tokenizer.TypeNormal)
		if i < 4 {
			ty = int32(tokenizer.TypeControl)
		}
		cfg.Types = append(cfg.Types, ty)
	}
	return cfg
}

func wpmTexts(tok *tokenizer.Tokenizer, ids []int32) []string {
	var out []string
	for _, id := range ids {
		out = append(out, tok.Text(id))
	}
	return out
}

func TestWordPieceEncode(t *testing.T) {
	tok := newTok(t, wpmConfig())
	for _, c := range []struct {
		in   string
		want []string
	}{
		// Longest first: "▁una" beats "▁un", then "ff" and "able"; the
		// "▁un" "aff" "able" cover is never looked for.
		{"Unaffable", []string{"▁una", "ff", "able"}},
		// Whitespace of any kind separates words and is dropped.
		{" the\tA\u3000 the\n", []string{"▁the", "▁a", "▁the"}},
		// Punctuation and ASCII symbols are words of their own; "€" is a
		// symbol but not ASCII, so it stays in its word.
		{"the,a!$", []string{"▁the", "▁,", "▁a", "▁!", "▁$"}},
		{"€ x€", []string{"▁€", "[UNK]"}},
		// CJK ideographs stand alone even inside a word.
		{"a日本", []string{"▁a", "▁日", "▁本"}},
		// A word with any position no token starts at is one UNK, and the
		// pieces already found for it are taken back.
		{"the unaffz a", []string{"▁the", "[UNK]", "▁a"}},
		// Accents: precomposed letters lose theirs by decomposition,
		// combining marks are dropped; controls and NUL vanish.
		{"É\u0301E\u200d\x00X", []string{"▁e", "e", "x"}},
		// Control tokens' text is plain text here: its brackets split.
		{"[CLS]", []string{"[UNK]", "[UNK]", "[UNK]"}},
		{"", nil},
		{" \t\u00ad", nil},
	} {
		require.Equal(t, c.want, wpmTexts(tok, tok.Encode(c.in, tokenizer.EncodeOptions{})), "%q", c.in)
	}
	// With specials: [CLS] ... [SEP], as llama.cpp frames a BERT input.
	require.Equal(t, []string{"[CLS]", "▁a", "[SEP]"}, wpmTexts(tok, tok.Encode("A", tokenizer.EncodeOptions{AddSpecial: true})))
	// Control tokens are recognised only when asked to.
	require.Equal(t, []string{"▁a", "[SEP]", "▁a"}, wpmTexts(tok, tok.Encode("a[SEP]a", tokenizer.EncodeOptions{ParseSpecial: true})))
}

func TestWordPieceNormaliserOptions(t *testing.T) {
	cfg := wpmConfig()
	cfg.Lowercase, cfg.StripAccents = false, false
	tok := newTok(t, cfg)
	require.Equal(t, []string{"[UNK]", "[UNK]", "▁a", "[UNK]"}, wpmTexts(tok, tok.Encode("A é a e\u0301", tokenizer.EncodeOptions{})))
	cfg.Lowercase = true
	tok = newTok(t, cfg)
	require.Equal(t, []string{"▁a", "[UNK]"}, wpmTexts(tok, tok.Encode("A É", tokenizer.EncodeOptions{})))
}

func TestWordPieceDecode(t *testing.T) {
	tok := newTok(t, wpmConfig())
	ids := tok.Encode("Unaffable, the X", tokenizer.EncodeOptions{AddSpecial: true})
	require.Equal(t, "[CLS] unaffable , the x[SEP]", string(tok.Decode(ids, false)))
	require.Equal(t, " unaffable , the x", string(tok.Decode(ids, true)))
	var joined []byte
	for _, id := range ids {
		joined = append(joined, tok.Piece(id)...)
	}
	require.Equal(t, tok.Decode(ids, false), joined)
	// Nothing bounds the text per token: whitespace makes none at all.
	require.Equal(t, 0, tok.MaxInputBytesPerToken())
}

// TestWordPieceLongWord: a word far longer than any token is covered in one
// pass (each step looks at most one token's length ahead); a long word no
// token covers is one UNK.
func TestWordPieceLongWord(t *testing.T) {
	tok := newTok(t, wpmConfig())
	ids := tok.Encode(strings.Repeat("a", 1<<20), tokenizer.EncodeOptions{})
	require.Len(t, ids, 1<<20)
	require.Equal(t, "▁a", tok.Text(ids[0]))
	require.Equal(t, []string{"[UNK]"}, wpmTexts(tok, tok.Encode(strings.Repeat("a", 1<<20)+"q", tokenizer.EncodeOptions{})))
}

func TestWordPieceRefusesHugeTokens(t *testing.T) {
	cfg := wpmConfig()
	cfg.Tokens = append(cfg.Tokens, bytes.Repeat([]byte("a"), 257))
	cfg.Types = append(cfg.Types, int32(tokenizer.TypeNormal))
	_, err := tokenizer.New(cfg)
	require.ErrorContains(t, err, "WordPiece token 24 is 257 bytes long")
}

// bertGGUF is a small "bert" vocabulary file with the metadata in kv.
func bertGGUF(t *testing.T, kv map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	require.NoError(t, w.AddKV("tokenizer.ggml.model", "bert"))
	require.NoError(t, w.AddKV("tokenizer.ggml.pre", "bert-bge"))
	require.NoError(t, w.AddKV("tokenizer.ggml.tokens", wpmVocab))
	for k, v := range kv {
		require.NoError(t, w.AddKV(k, v))
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}

// TestBertConfigFromGGUF: llama.cpp's defaults for a BERT file (CLS and SEP
// framing from the BOS and separator keys, lower-casing with accents
// stripped unless the normaliser keys say otherwise).
func TestBertConfigFromGGUF(t *testing.T) {
	cfg, err := tokenizer.ConfigFromGGUF(bertGGUF(t, map[string]any{
		"tokenizer.ggml.bos_token_id": uint32(2), "tokenizer.ggml.seperator_token_id": uint32(3),
		"tokenizer.ggml.unknown_token_id": uint32(1),
	}))
	require.NoError(t, err)
	require.Equal(t, [4]int32{2, 3, 1, 0}, [4]int32{cfg.BOS, cfg.EOS, cfg.UNK, cfg.PAD})
	require.True(t, cfg.AddBOS && cfg.AddEOS && cfg.Lowercase && cfg.StripAccents)

	cfg, err = tokenizer.ConfigFromGGUF(bertGGUF(t, map[string]any{"tokenizer.ggml.normalizer.lowercase": false}))
	require.NoError(t, err)
	require.False(t, cfg.Lowercase || cfg.StripAccents, "strip_accents follows lowercase")
	// Defaults past a 24-token vocabulary's end are absent, not out of range.
	require.Equal(t, [4]int32{-1, -1, -1, 0}, [4]int32{cfg.BOS, cfg.EOS, cfg.UNK, cfg.PAD})
	require.False(t, cfg.AddBOS || cfg.AddEOS)

	cfg, err = tokenizer.ConfigFromGGUF(bertGGUF(t, map[string]any{"tokenizer.ggml.normalizer.strip_accents": true, "tokenizer.ggml.normalizer.lowercase": false}))
	require.NoError(t, err)
	require.True(t, !cfg.Lowercase && cfg.StripAccents)

	_, err = tokenizer.ConfigFromGGUF(bertGGUF(t, map[string]any{"tokenizer.ggml.normalizer.lowercase": "yes"}))
	require.ErrorContains(t, err, "tokenizer.ggml.normalizer.lowercase")
}
