package tokenizer_test

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/tokenizer"
	"github.com/lmstream/lmstream/streaming"
)

// The streaming layer consumes a Tokenizer through this interface.
var _ streaming.Vocabulary = (*tokenizer.Tokenizer)(nil)

// byteLevel maps text to GPT-2's byte-level alphabet, the form in which BPE
// vocabularies store tokens (" " is "Ġ").
func byteLevel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '!' && c <= '~', c >= 0xA1 && c <= 0xAC, c >= 0xAE:
			b.WriteRune(rune(c))
		default:
			n := 0
			for d := 0; d < int(c); d++ {
				if !(d >= '!' && d <= '~' || d >= 0xA1 && d <= 0xAC || d >= 0xAE) {
					n++
				}
			}
			b.WriteRune(rune(256 + n))
		}
	}
	return b.String()
}

// bpeConfig builds a byte-level BPE vocabulary: four specials, the 256 byte
// symbols, then one token per merge. Merges are given as plain text pairs
// ("h e", " w") and stored byte-level mapped like a real GGUF.
func bpeConfig(pre string, merges ...string) tokenizer.Config {
	cfg := tokenizer.Config{
		Model: "gpt2", Pre: pre, BOS: 1, EOS: 2, UNK: -1, PAD: -1,
		Tokens: [][]byte{[]byte("<|endoftext|>"), []byte("<|im_start|>"), []byte("<|im_end|>"), []byte("<tool>")},
		Types:  []int32{3, 3, 3, 4},
	}
	for b := 0; b < 256; b++ {
		cfg.Tokens = append(cfg.Tokens, []byte(byteLevel(string([]byte{byte(b)}))))
		cfg.Types = append(cfg.Types, 1)
	}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, "|")
		cfg.Merges = append(cfg.Merges, byteLevel(a)+" "+byteLevel(b))
		cfg.Tokens = append(cfg.Tokens, []byte(byteLevel(a+b)))
		cfg.Types = append(cfg.Types, 1)
	}
	return cfg
}

func newTok(t *testing.T, cfg tokenizer.Config) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.New(cfg)
	require.NoError(t, err)
	return tok
}

// pieces renders ids as their output strings, for readable assertions.
func pieces(tok *tokenizer.Tokenizer, ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(tok.Piece(id))
	}
	return out
}

var plain = tokenizer.EncodeOptions{}

func TestBPEMergesApplyInRankOrder(t *testing.T) {
	// "abc" with a|b ranked first merges "ab"; ranked second, "bc" wins.
	tok := newTok(t, bpeConfig("gpt-2", "a|b", "b|c"))
	require.Equal(t, []string{"ab", "c"}, pieces(tok, tok.Encode("abc", plain)))
	tok = newTok(t, bpeConfig("gpt-2", "b|c", "a|b"))
	require.Equal(t, []string{"a", "bc"}, pieces(tok, tok.Encode("abc", plain)))

	// Repeated pairs merge leftmost first, and merged symbols merge again.
	tok = newTok(t, bpeConfig("gpt-2", "a|a", "aa|aa"))
	require.Equal(t, []string{"aaaa"}, pieces(tok, tok.Encode("aaaa", plain)))
	require.Equal(t, []string{"aaaa", "a"}, pieces(tok, tok.Encode("aaaaa", plain)))
	require.Equal(t, []string{"aaaa", "aa"}, pieces(tok, tok.Encode("aaaaaa", plain)))
	require.Equal(t, []string{"aaaa", "aa", "a"}, pieces(tok, tok.Encode("aaaaaaa", plain)))
}

func TestBPEWordsAndSpaces(t *testing.T) {
	tok := newTok(t, bpeConfig("gpt-2", "h|e", "l|l", "he|ll", "hell|o", " |w", "o|r", " w|or", " wor|l", " worl|d", " | "))
	ids := tok.Encode("hello world", plain)
	require.Equal(t, []string{"hello", " world"}, pieces(tok, ids))
	hello, ok := tok.TokenID("hello")
	require.True(t, ok)
	world, ok := tok.TokenID("Ġworld") // stored byte-level form
	require.True(t, ok)
	require.Equal(t, []int32{hello, world}, ids)

	// "a   b": the run keeps two spaces, the last one leads the word.
	require.Equal(t, []string{"hello", "  ", " world"}, pieces(tok, tok.Encode("hello   world", plain)))
	require.Equal(t, []string{"\n", "hello", "\n", "\n"}, pieces(tok, tok.Encode("\nhello\n\n", plain)))
}

func TestBPEBytesAndRoundTrip(t *testing.T) {
	tok := newTok(t, bpeConfig("smollm", "h|e", " |w"))
	for _, s := range []string{
		"", "hello", "日本語のテキスト 中文 한국어", "emoji 😀👨‍👩‍👧 👍🏽 🇫🇷",
		"func main() {\n\tfmt.Println(\"hi\")\n}\n", "a   b\t\tc \n\n  d   ", "1234567 + 0.5",
		"invalid \xff\xfe utf-8 \xc3", "\x00\x01 control \x7f",
	} {
		ids := tok.Encode(s, plain)
		require.Equal(t, s, string(tok.Decode(ids, false)), "round trip %q", s)
	}
	// Multi-byte characters without merges are one token per byte, each
	// piece a fragment of the UTF-8 sequence.
	ids := tok.Encode("é", plain)
	require.Len(t, ids, 2)
	require.Equal(t, []byte{0xC3}, tok.Piece(ids[0]))
	require.Equal(t, []byte{0xA9}, tok.Piece(ids[1]))
}

func TestSmolLMDigitsAreSingleTokens(t *testing.T) {
	tok := newTok(t, bpeConfig("smollm", " |1", " 1|2", "1|2"))
	// The merges exist but digits are pre-tokenized one by one, and the space
	// before a number is its own pre-token.
	require.Equal(t, []string{"x", " ", "1", "2", "3"}, pieces(tok, tok.Encode("x 123", plain)))
	tok = newTok(t, bpeConfig("gpt-2", " |1", " 1|2", "1|2"))
	require.Equal(t, []string{"x", " 12", "3"}, pieces(tok, tok.Encode("x 123", plain)))
}

func TestLlama3WholeWordLookup(t *testing.T) {
	// Llama-3 vocabularies contain words unreachable by their merges and
	// expect them used whole (ignore_merges); GPT-2 style does not.
	cfg := bpeConfig("llama-bpe", "a|b")
	cfg.Tokens = append(cfg.Tokens, []byte(byteLevel("abc")))
	cfg.Types = append(cfg.Types, 1)
	tok := newTok(t, cfg)
	require.Equal(t, []string{"abc"}, pieces(tok, tok.Encode("abc", plain)))
	cfg.Pre = "qwen2"
	tok = newTok(t, cfg)
	require.Equal(t, []string{"ab", "c"}, pieces(tok, tok.Encode("abc", plain)))
}

func TestSpecialTokens(t *testing.T) {
	tok := newTok(t, bpeConfig("gpt-2", "h|i"))
	text := "<|im_start|>hi<|im_end|>"

	// Without ParseSpecial control-token text is ordinary characters.
	ids := tok.Encode(text, plain)
	require.NotContains(t, ids, int32(1))
	require.Equal(t, text, string(tok.Decode(ids, false)))

	ids = tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: true})
	require.Equal(t, []string{"<|im_start|>", "hi", "<|im_end|>"}, pieces(tok, ids))
	require.Equal(t, []int32{1, ids[1], 2}, ids)
	require.Equal(t, "hi", string(tok.Decode(ids, true)))
	require.Equal(t, text, string(tok.Decode(ids, false)))

	// Adjacent, partial and nested look-alikes.
	ids = tok.Encode("<|im_end|><|im_end|> <|im_end| <<|endoftext|>>", tokenizer.EncodeOptions{ParseSpecial: true})
	require.Equal(t, []int32{2, 2}, ids[:2])
	require.Contains(t, ids, int32(0))
	require.Equal(t, "<|im_end|><|im_end|> <|im_end| <<|endoftext|>>", string(tok.Decode(ids, false)))

	// User-defined tokens are recognised either way and are not special.
	ids = tok.Encode("a<tool>b", plain)
	require.Equal(t, []string{"a", "<tool>", "b"}, pieces(tok, ids))
	require.Equal(t, int32(3), ids[1])
	require.False(t, tok.IsSpecial(3))
	require.Equal(t, "a<tool>b", string(tok.Decode(ids, true)))

	require.True(t, tok.IsSpecial(0))
	require.True(t, tok.IsSpecial(1))
	require.False(t, tok.IsSpecial(100))
	require.False(t, tok.IsSpecial(-1))
	require.False(t, tok.IsSpecial(int32(tok.Size())))
}

func TestAddSpecialAndEOG(t *testing.T) {
	cfg := bpeConfig("gpt-2")
	cfg.AddBOS, cfg.AddEOS = true, true
	tok := newTok(t, cfg)
	ids := tok.Encode("x", tokenizer.EncodeOptions{AddSpecial: true})
	require.Equal(t, int32(1), ids[0])
	require.Equal(t, int32(2), ids[len(ids)-1])
	require.Len(t, tok.Encode("x", plain), 1)
	require.Equal(t, []int32{1, 2}, tok.Encode("", tokenizer.EncodeOptions{AddSpecial: true}))

	require.Equal(t, int32(1), tok.BOS())
	require.Equal(t, int32(2), tok.EOS())
	require.True(t, tok.EOG(2), "EOS")
	require.True(t, tok.EOG(0), "<|endoftext|> ends generation even when it is not EOS")
	require.False(t, tok.EOG(1))
	require.False(t, tok.EOG(-5))
}

// spmConfig is a small SentencePiece vocabulary: unk, bos, eos, the 256
// byte tokens, then scored pieces.
func spmConfig(pieces map[string]float32) tokenizer.Config {
	cfg := tokenizer.Config{
		Model: "llama", BOS: 1, EOS: 2, UNK: 0, PAD: -1, AddBOS: true, AddSpacePrefix: true,
		Tokens: [][]byte{[]byte("<unk>"), []byte("<s>"), []byte("</s>")},
		Types:  []int32{2, 3, 3},
		Scores: []float32{0, 0, 0},
	}
	for b := 0; b < 256; b++ {
		cfg.Tokens = append(cfg.Tokens, []byte("<0x"+strings.ToUpper(string("0123456789abcdef"[b>>4])+string("0123456789abcdef"[b&15]))+">"))
		cfg.Types = append(cfg.Types, 6)
		cfg.Scores = append(cfg.Scores, 0)
	}
	// Deterministic order for stable ids.
	keys := make([]string, 0, len(pieces))
	for k := range pieces {
		keys = append(keys, k)
	}
	sortStrings(keys)
	for _, k := range keys {
		cfg.Tokens = append(cfg.Tokens, []byte(k))
		cfg.Types = append(cfg.Types, 1)
		cfg.Scores = append(cfg.Scores, pieces[k])
	}
	return cfg
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

var spmPieces = map[string]float32{
	"▁": -1, "h": -2, "e": -2, "l": -2, "o": -2, "w": -2, "r": -2, "d": -2, "a": -2, "b": -2, "c": -2,
	"he": -3, "ll": -4, "hell": -5, "hello": -6, "▁hello": -7,
	"or": -3, "wor": -5, "world": -6, "▁world": -8, "ld": -9,
	"ab": -10, "bc": -10,
}

func TestSPMEncode(t *testing.T) {
	tok := newTok(t, spmConfig(spmPieces))
	ids := tok.Encode("hello world", tokenizer.EncodeOptions{AddSpecial: true})
	require.Equal(t, int32(1), ids[0])
	require.Equal(t, []string{"<s>", " hello", " world"}, pieces(tok, ids))
	// Decode is the concatenation of pieces, so the space prefix shows.
	require.Equal(t, " hello world", string(tok.Decode(ids, true)))

	// Equal scores: the leftmost pair merges first.
	require.Equal(t, []string{" ", "ab", "c"}, pieces(tok, tok.Encode("abc", plain)))

	// Characters outside the vocabulary fall back to their UTF-8 bytes.
	ids = tok.Encode("hé😀", plain)
	require.Equal(t, []string{" ", "h", "\xc3", "\xa9", "\xf0", "\x9f", "\x98", "\x80"}, pieces(tok, ids))
	require.Equal(t, " hé😀", string(tok.Decode(ids, false)))
	id, ok := tok.TokenID("<0xC3>")
	require.True(t, ok)
	require.Equal(t, id, ids[2])

	// Control-token text is not merged out of plain text (it falls back to
	// bytes here), but is recognised with ParseSpecial; the space prefix
	// follows each special token.
	ids = tok.Encode("<s>", plain)
	require.NotContains(t, ids, int32(1))
	ids = tok.Encode("<s>hello</s>", tokenizer.EncodeOptions{ParseSpecial: true})
	require.Equal(t, []string{"<s>", " hello", "</s>"}, pieces(tok, ids))

	// Without the space prefix.
	cfg := spmConfig(spmPieces)
	cfg.AddSpacePrefix = false
	tok = newTok(t, cfg)
	require.Equal(t, []string{"hello", " world"}, pieces(tok, tok.Encode("hello world", plain)))
	require.Empty(t, tok.Encode("", plain))
}

func TestSPMUnknownWithoutByteTokens(t *testing.T) {
	cfg := tokenizer.Config{
		Model: "llama", BOS: -1, EOS: -1, UNK: 0, PAD: -1,
		Tokens: [][]byte{[]byte("<unk>"), []byte("a"), []byte("▁")},
		Types:  []int32{2, 1, 1},
		Scores: []float32{0, -1, -1},
	}
	tok := newTok(t, cfg)
	require.Equal(t, []int32{1, 0, 1}, tok.Encode("aéa", plain))
	require.True(t, tok.IsSpecial(0), "unknown tokens are special")
	require.Equal(t, "aa", string(tok.Decode([]int32{1, 0, 1}, true)))
}

func TestPieceDecodeContract(t *testing.T) {
	for name, tok := range map[string]*tokenizer.Tokenizer{
		"bpe": newTok(t, bpeConfig("gpt-2", "h|e", " |w")),
		"spm": newTok(t, spmConfig(spmPieces)),
	} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for range 200 {
				ids := make([]int32, rng.IntN(20))
				for i := range ids {
					ids[i] = int32(rng.IntN(tok.Size()+2)) - 1 // include out-of-range ids
				}
				var cat, catNoSpecial []byte
				for _, id := range ids {
					cat = append(cat, tok.Piece(id)...)
					if !tok.IsSpecial(id) {
						catNoSpecial = tok.AppendPiece(catNoSpecial, id)
					}
				}
				require.Equal(t, cat, nonNil(tok.Decode(ids, false)))
				require.Equal(t, catNoSpecial, nonNil(tok.Decode(ids, true)))
			}
			require.Nil(t, tok.Piece(-1))
			require.Nil(t, tok.Piece(int32(tok.Size())))
		})
	}
}

func nonNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func TestPieceIsNotClobberedByAppend(t *testing.T) {
	tok := newTok(t, bpeConfig("gpt-2", "h|e"))
	id, _ := tok.TokenID("he")
	next := tok.Piece(id + 1)
	want := bytes.Clone(next)
	_ = append(tok.Piece(id), "XXXX"...)
	require.Equal(t, want, tok.Piece(id+1))
}

func TestNewValidates(t *testing.T) {
	good := func() tokenizer.Config { return bpeConfig("gpt-2", "h|e") }
	cases := []struct {
		name   string
		mutate func(*tokenizer.Config)
		want   string
	}{
		{"model", func(c *tokenizer.Config) { c.Model = "wordpiece" }, `unsupported tokenizer model "wordpiece"`},
		{"pre", func(c *tokenizer.Config) { c.Pre = "no-such-pre" }, `unsupported pre-tokenizer "no-such-pre"`},
		{"pre not byte-level", func(c *tokenizer.Config) { c.Pre = "gemma4" }, `pre-tokenizer "gemma4" (tokenizer.ggml.pre) is for a vocabulary that is not byte-level`},
		{"empty", func(c *tokenizer.Config) { c.Tokens, c.Types = nil, nil }, "empty vocabulary"},
		{"types length", func(c *tokenizer.Config) { c.Types = c.Types[:3] }, "3 token types for"},
		{"scores length", func(c *tokenizer.Config) { c.Scores = []float32{1} }, "1 scores for"},
		{"bad type", func(c *tokenizer.Config) { c.Types[5] = 9 }, "unknown type 9"},
		{"eos range", func(c *tokenizer.Config) { c.EOS = 100000 }, "EOS id 100000 out of range"},
		{"bos negative", func(c *tokenizer.Config) { c.BOS = -2 }, "BOS id -2 out of range"},
		{"add bos", func(c *tokenizer.Config) { c.BOS, c.AddBOS = -1, true }, "AddBOS set but no BOS"},
		{"merge shape", func(c *tokenizer.Config) { c.Merges = []string{"he"} }, `tokenizer.ggml.merges[0] "he" is not two tokens`},
		{"merge left", func(c *tokenizer.Config) { c.Merges = []string{"zz e"} }, `left token "zz"`},
		{"merge right", func(c *tokenizer.Config) { c.Merges = []string{"h zz"} }, `right token "zz"`},
		{"merge result", func(c *tokenizer.Config) { c.Merges = []string{"e h"} }, `merged token "eh"`},
		{"spm scores", func(c *tokenizer.Config) { c.Model = "llama" }, "needs tokenizer.ggml.scores"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good()
			c.mutate(&cfg)
			_, err := tokenizer.New(cfg)
			require.ErrorContains(t, err, c.want)
		})
	}
	_, err := tokenizer.New(good())
	require.NoError(t, err)
}

func TestLongWordIsNotQuadratic(t *testing.T) {
	// One 256 KB pre-token: a merge loop that rescans the word after every
	// merge would do ~10^10 steps here.
	tok := newTok(t, bpeConfig("gpt-2", "a|a", "aa|aa", "aaaa|aaaa"))
	s := strings.Repeat("a", 1<<18)
	ids := tok.Encode(s, plain)
	require.Len(t, ids, 1<<15)
	spm := newTok(t, spmConfig(spmPieces))
	s = strings.Repeat("ab", 1<<16)
	require.Equal(t, " "+s, string(spm.Decode(spm.Encode(s, plain), false)))
}

func TestConcurrentEncode(t *testing.T) {
	tok := newTok(t, bpeConfig("gpt-2", "h|e", "l|l", "he|ll", " |w", "o|r"))
	texts := []string{"hello world", "hell or high water", "日本語 hello", "well well well"}
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tok.Encode(s, plain)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := (g + i) % len(texts)
				if got := tok.Encode(texts[k], plain); !slicesEqual(got, want[k]) {
					t.Errorf("concurrent encode of %q = %v, want %v", texts[k], got, want[k])
					return
				}
			}
		}()
	}
	wg.Wait()
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
