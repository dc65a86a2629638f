package tokenizer_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// smolLMPath is the project's default model, fetched by `make model`.
var smolLMPath = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

var smolLM = sync.OnceValues(func() (*tokenizer.Tokenizer, error) {
	f, err := gguf.Open(smolLMPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return tokenizer.FromGGUF(f)
})

func loadSmolLM(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	if _, err := os.Stat(smolLMPath); err != nil {
		tb.Skipf("model %s absent (run `make model` to fetch it): %v", smolLMPath, err)
	}
	tok, err := smolLM()
	require.NoError(tb, err)
	return tok
}

func TestSmolLMVocabulary(t *testing.T) {
	tok := loadSmolLM(t)
	require.Equal(t, 49152, tok.Size())
	require.Equal(t, int32(1), tok.BOS())
	require.Equal(t, int32(2), tok.EOS())
	id, ok := tok.TokenID("<|im_end|>")
	require.True(t, ok)
	require.Equal(t, int32(2), id)
	require.True(t, tok.EOG(2))
	require.True(t, tok.EOG(0), "<|endoftext|>")
	require.False(t, tok.EOG(1))
	for id := int32(0); id < 17; id++ {
		require.True(t, tok.IsSpecial(id), "control token %d", id)
	}
	require.False(t, tok.IsSpecial(17))
}

// Ids produced by Hugging Face tokenizers 0.23 from the same vocabulary and
// merges (see tests/tokenizer/test_tokenizer_parity.py for the full corpus).
func TestSmolLMKnownEncodings(t *testing.T) {
	tok := loadSmolLM(t)
	cases := []struct {
		text string
		want []int32
	}{
		{"Hello, world!", []int32{19556, 28, 905, 17}},
		{"I can't believe it's 2024.", []int32{57, 416, 982, 2875, 357, 506, 216, 34, 32, 34, 36, 30}},
		{"a   b\n\n\tc", []int32{81, 256, 278, 1116, 197, 83}},
		{"你好，世界！", []int32{18645, 250, 48392, 138, 12831, 7906, 240, 178, 239, 230, 8083, 219}},
		{"😀 👨\u200d👩\u200d👧", []int32{10813, 242, 218, 15107, 235, 118, 321, 231, 10813, 235, 119, 321, 231, 10813, 235, 117}},
		{"func main() {}", []int32{10005, 1085, 1000, 4548}},
		{"<|im_start|>user", []int32{44, 108, 306, 79, 3738, 108, 46, 4093}},
	}
	for _, c := range cases {
		require.Equal(t, c.want, tok.Encode(c.text, plain), "%q", c.text)
	}
	chat := "<|im_start|>user\nHi!<|im_end|>\n"
	require.Equal(t, []int32{1, 4093, 198, 26843, 17, 2, 198}, tok.Encode(chat, tokenizer.EncodeOptions{ParseSpecial: true}))
	require.Equal(t, "user\nHi!\n", string(tok.Decode([]int32{1, 4093, 198, 26843, 17, 2, 198}, true)))
}

func TestSmolLMRoundTripCorpus(t *testing.T) {
	tok := loadSmolLM(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "tests", "tokenizer", "corpus.txt"))
	require.NoError(t, err)
	corpus := string(data)
	for _, line := range strings.Split(corpus, "\n") {
		ids := tok.Encode(line, plain)
		require.Equal(t, line, string(tok.Decode(ids, false)))
		var streamed []byte
		for _, id := range ids {
			streamed = append(streamed, tok.Piece(id)...)
		}
		require.Equal(t, line, string(streamed))
	}
	require.Equal(t, corpus, string(tok.Decode(tok.Encode(corpus, plain), false)))
}
