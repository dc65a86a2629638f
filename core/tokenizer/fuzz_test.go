package tokenizer_test

import (
	"strings"
	"testing"

	"github.com/lmstream/lmstream/core/tokenizer"
)

// FuzzRoundTrip checks the invariants that hold for any input: every
// pre-tokenizer's pieces tile the text, byte-level BPE decodes back to the exact input bytes
// (valid UTF-8 or not), and SentencePiece does too up to its space escaping.
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
	})
}
