package tokenizer_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/lmstream/lmstream/core/tokenizer"
)

// FuzzRoundTrip checks the invariants that hold for any input: every
// pre-tokenizer's pieces tile the text, byte-level BPE decodes back to the exact input bytes
// (valid UTF-8 or not), and SentencePiece does too up to its space escaping.
// WordPiece normalises, so it cannot round-trip; its invariants are that
// every id is in the vocabulary, no word gives more tokens than it has
// characters, and printable ASCII (which its fuzz vocabulary covers
// character by character) comes back lower-cased without whitespace.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{
		"", "hello world", "a   b", "I'LL 123456 x", "\r\n\n \t", "日本語 😀👍🏽", "\xff\xc3 ab", "<|im_end|><tool>",
		"e\u0301\u00a0\u3000", "'s'S''", "▁▁x",
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	bpe, err := tokenizer.New(bpeConfig("smollm", "h|e", "l|l", "he|ll", " |w", "a|a", "aa|aa"))
	if err != nil {
		f.Fatal(err)
	}
	cfg := spmConfig(spmPieces)
	cfg.AddSpacePrefix = false
	spm, err := tokenizer.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	wpm, err := tokenizer.New(asciiWordPiece())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string, parseSpecial bool) {
		for _, pre := range tokenizer.PreTokenizerNames() {
			pieces, err := tokenizer.PreTokenize(pre, s)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pieces {
				if p == "" {
					t.Fatalf("%s: empty piece in %q", pre, s)
				}
			}
			if strings.Join(pieces, "") != s {
				t.Fatalf("%s: pieces %q do not tile %q", pre, pieces, s)
			}
		}
		opts := tokenizer.EncodeOptions{ParseSpecial: parseSpecial}
		if got := string(bpe.Decode(bpe.Encode(s, opts), false)); got != s {
			t.Fatalf("BPE round trip of %q gave %q", s, got)
		}
		want := strings.ReplaceAll(s, "▁", " ")
		if got := string(spm.Decode(spm.Encode(s, opts), false)); got != want {
			t.Fatalf("SPM round trip of %q gave %q, want %q", s, got, want)
		}
		checkWordPiece(t, wpm, s, opts)
	})
}

// asciiWordPiece has a word-initial and a continuation token for every
// printable ASCII character but upper-case letters, and [UNK] (0).
func asciiWordPiece() tokenizer.Config {
	cfg := tokenizer.Config{Model: "bert", BOS: -1, EOS: -1, UNK: 0, PAD: -1, Lowercase: true, StripAccents: true,
		Tokens: [][]byte{[]byte("[UNK]")}, Types: []int32{int32(tokenizer.TypeUnknown)}}
	for c := byte('!'); c <= '~'; c++ {
		if 'A' <= c && c <= 'Z' {
			continue
		}
		cfg.Tokens = append(cfg.Tokens, []byte("▁"+string(c)), []byte{c})
		cfg.Types = append(cfg.Types, int32(tokenizer.TypeNormal), int32(tokenizer.TypeNormal))
	}
	return cfg
}

func checkWordPiece(t *testing.T, tok *tokenizer.Tokenizer, s string, opts tokenizer.EncodeOptions) {
	ids := tok.Encode(s, opts)
	for _, id := range ids {
		if id < 0 || int(id) >= tok.Size() {
			t.Fatalf("WordPiece gave id %d for %q", id, s)
		}
	}
	if len(ids) > utf8.RuneCountInString(s) {
		t.Fatalf("WordPiece gave %d tokens for %d characters of %q", len(ids), utf8.RuneCountInString(s), s)
	}
	var want strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return // non-ASCII words may be [UNK]: nothing exact to expect
		}
		if '!' <= c && c <= '~' {
			want.WriteByte(byte(unicode.ToLower(rune(c))))
		}
	}
	got := strings.ReplaceAll(string(tok.Decode(ids, false)), " ", "")
	if got != want.String() {
		t.Fatalf("WordPiece of %q decoded to %q, want %q", s, got, want.String())
	}
}
