package tokenizer_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// smallGGUF is a byte-level BPE vocabulary of 8 tokens, with extra
// metadata from kv.
func smallGGUF(t *testing.T, kv map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	require.NoError(t, w.AddKV("tokenizer.ggml.model", "gpt2"))
	require.NoError(t, w.AddKV("tokenizer.ggml.pre", "gpt-2"))
	require.NoError(t, w.AddKV("tokenizer.ggml.tokens", []string{"a", "b", "c", "ab", "<s>", "</s>", "<|eot|>", "<pad>"}))
	require.NoError(t, w.AddKV("tokenizer.ggml.token_type", []int32{1, 1, 1, 1, 3, 3, 3, 3}))
	require.NoError(t, w.AddKV("tokenizer.ggml.merges", []string{"a b"}))
	for _, k := range []string{
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
		"tokenizer.ggml.padding_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
		"tokenizer.ggml.cls_token_id", "tokenizer.ggml.mask_token_id", "tokenizer.ggml.seperator_token_id",
	} {
		if v, ok := kv[k]; ok {
			require.NoError(t, w.AddKV(k, v))
		}
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}

// TestSpecialIDsAreNotTruncated is issue 10's row 7: special token ids
// stored wider than 32 bits, or out of the vocabulary, used to load as
// another token (uint32 0xFFFFFFFF as -1, uint64 2^32+2 as 2, int64 -2^40
// as 0). Each is an error naming the key and the value now.
func TestSpecialIDsAreNotTruncated(t *testing.T) {
	for _, key := range []string{"bos", "eos", "unknown", "padding", "eot", "eom", "cls", "mask", "seperator"} {
		full := "tokenizer.ggml." + key + "_token_id"
		for _, tc := range []struct {
			val  any
			want string
		}{
			{uint32(0xFFFFFFFF), "uint32 4294967295 is out of the range [-1, 7]"},
			{uint64(1<<32 + 2), "uint64 4294967298 is out of the range [-1, 7]"},
			{int64(-1 << 40), "int64 -1099511627776 is out of the range [-1, 7]"},
			{uint32(8), "uint32 8 is out of the range [-1, 7]"},
			{int32(-2), "int32 -2 is out of the range [-1, 7]"},
			{"5", "is a string, want an integer"},
		} {
			_, err := tokenizer.FromGGUF(smallGGUF(t, map[string]any{full: tc.val}))
			require.ErrorContains(t, err, tc.want, "%s = %v", full, tc.val)
			require.ErrorContains(t, err, full)
		}
	}
}

// TestSpecialIDsInRange: ids of any integer width within the vocabulary
// load as themselves, a signed -1 means absent, and end-of-turn ids end
// generation.
func TestSpecialIDsInRange(t *testing.T) {
	tok, err := tokenizer.FromGGUF(smallGGUF(t, map[string]any{
		"tokenizer.ggml.bos_token_id":     uint64(4),
		"tokenizer.ggml.eos_token_id":     uint8(5),
		"tokenizer.ggml.padding_token_id": int32(-1),
		"tokenizer.ggml.eot_token_id":     int64(6),
	}))
	require.NoError(t, err)
	cfg, err := tokenizer.ConfigFromGGUF(smallGGUF(t, map[string]any{
		"tokenizer.ggml.bos_token_id":     uint64(4),
		"tokenizer.ggml.eos_token_id":     uint8(5),
		"tokenizer.ggml.padding_token_id": int32(-1),
		"tokenizer.ggml.eot_token_id":     int64(6),
	}))
	require.NoError(t, err)
	require.EqualValues(t, 4, cfg.BOS)
	require.EqualValues(t, 5, cfg.EOS)
	require.EqualValues(t, -1, cfg.PAD)
	require.EqualValues(t, -1, cfg.UNK)
	require.Equal(t, []int32{6}, cfg.EOG)
	require.True(t, tok.EOG(5))
	require.True(t, tok.EOG(6))
	require.False(t, tok.EOG(4))

	cfg.EOG = []int32{8}
	_, err = tokenizer.New(cfg)
	require.ErrorContains(t, err, "end-of-generation id 8 out of range [0, 8)")
}

// TestMergesNamingMissingTokens: a merge whose left, right or merged text
// is not a token is a broken vocabulary, refused with the key and the
// entry named (issue 52), not run with the rule dropped.
func TestMergesNamingMissingTokens(t *testing.T) {
	for merge, want := range map[string]string{
		"a z": `tokenizer.ggml.merges[1] "a z": right token "z" is not in the vocabulary`,
		"z a": `tokenizer.ggml.merges[1] "z a": left token "z" is not in the vocabulary`,
		"b c": `tokenizer.ggml.merges[1] "b c": merged token "bc" is not in the vocabulary`,
		"abc": `tokenizer.ggml.merges[1] "abc" is not two tokens separated by a space`,
	} {
		w := gguf.NewWriter()
		require.NoError(t, w.AddKV("tokenizer.ggml.model", "gpt2"))
		require.NoError(t, w.AddKV("tokenizer.ggml.pre", "gpt-2"))
		require.NoError(t, w.AddKV("tokenizer.ggml.tokens", []string{"a", "b", "c", "ab"}))
		require.NoError(t, w.AddKV("tokenizer.ggml.merges", []string{"a b", merge}))
		var buf bytes.Buffer
		_, err := w.WriteTo(&buf)
		require.NoError(t, err)
		f, err := gguf.Parse(buf.Bytes())
		require.NoError(t, err)
		_, err = tokenizer.FromGGUF(f)
		require.ErrorContains(t, err, want)
	}
}
