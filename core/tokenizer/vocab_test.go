package tokenizer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// llama.cpp's tokenizer tests are the oracle here: its models/ folder holds
// ggml-vocab-NAME.gguf files (a vocabulary, no weights) with NAME.gguf.inp
// (test strings) and NAME.gguf.out (the ids llama.cpp gives each string,
// without BOS/EOS and without parsing special tokens). The project keeps a
// copy in shared/vocab beside the repository, not in it: see vocabDir.

// vocabDir finds that copy: $LMSTREAM_VOCAB_DIR, or shared/vocab in the
// repository's folder or any folder above it (CI lays shared/ beside its
// clone; a developer's worktree may sit deeper).
func vocabDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("LMSTREAM_VOCAB_DIR"); d != "" {
		return d
	}
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		cand := filepath.Join(dir, "shared", "vocab")
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("llama.cpp's tokenizer test data (shared/vocab) not found beside the repository; CI lays it there")
	}
	t.Skip("llama.cpp's tokenizer test data (shared/vocab) not found; set LMSTREAM_VOCAB_DIR")
	return ""
}

// vocabCase is one test string and the ids llama.cpp gives it.
type vocabCase struct {
	text string
	want []int32
}

// readVocabCases reads NAME.gguf.inp/.out the way llama.cpp's
// test-tokenizer-0 does: strings separated by "\n__ggml_vocab_test__\n",
// one line of space-separated ids per string. (llama.cpp keeps its tests in
// a map, so a string that occurs twice is one test there; both count here.)
func readVocabCases(t *testing.T, inp, out string) []vocabCase {
	t.Helper()
	rawIn, err := os.ReadFile(inp)
	require.NoError(t, err)
	rawOut, err := os.ReadFile(out)
	require.NoError(t, err)
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	for s := string(rawIn); s != ""; {
		i := strings.Index(s, sep)
		if i < 0 {
			texts = append(texts, s)
			break
		}
		texts = append(texts, s[:i])
		s = s[i+len(sep):]
	}
	lines := strings.Split(strings.TrimSuffix(string(rawOut), "\n"), "\n")
	require.Equal(t, len(texts), len(lines), "%s: %d strings, %d id lines", inp, len(texts), len(lines))
	var cases []vocabCase
	for i, text := range texts {
		c := vocabCase{text: text, want: []int32{}}
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.ParseInt(f, 10, 32)
			require.NoError(t, err, "%s line %d", out, i+1)
			c.want = append(c.want, int32(id))
		}
		cases = append(cases, c)
	}
	return cases
}

// vocabStandIns are real model files the project fetches whose tokenizer is
// the one a test set with no vocabulary file of its own was made with.
var vocabStandIns = map[string]string{
	"qwen2": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
}

// vocabRefused are test sets whose tokenizer this package does not have,
// with the error that refuses their file by name. None today; the check
// stays for the next vocabulary llama.cpp adds a test set for.
var vocabRefused = map[string]string{}

func loadTokenizerFile(t *testing.T, path string) *tokenizer.Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	require.NoError(t, err, "%s", path)
	return tok
}

// TestLlamaCppVocabularies runs every test set of llama.cpp's tokenizer
// tests: against its vocabulary file where that is present, else against a
// model file with the same tokenizer where the project has one. Sets with
// neither are listed in the log as unverifiable.
func TestLlamaCppVocabularies(t *testing.T) {
	dir := vocabDir(t)
	inps, err := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf.inp"))
	require.NoError(t, err)
	require.NotEmpty(t, inps, "no test sets in %s", dir)
	sort.Strings(inps)
	var summary []string
	for _, inp := range inps {
		vocab := strings.TrimSuffix(inp, ".inp")
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(vocab), "ggml-vocab-"), ".gguf")
		src := vocab
		if _, err := os.Stat(vocab); err != nil {
			standIn, ok := vocabStandIns[name]
			if !ok {
				summary = append(summary, fmt.Sprintf("%s: unverifiable (no vocabulary file, no model with its tokenizer)", name))
				continue
			}
			src = filepath.Join("..", "..", "models", standIn)
			if _, err := os.Stat(src); err != nil {
				summary = append(summary, fmt.Sprintf("%s: skipped (%s absent; run `make model MODEL=...`)", name, standIn))
				continue
			}
		}
		cases := readVocabCases(t, inp, vocab+".out")
		if want, ok := vocabRefused[name]; ok {
			f, err := gguf.Open(src)
			require.NoError(t, err)
			_, err = tokenizer.FromGGUF(f)
			f.Close()
			require.ErrorContains(t, err, want, name)
			summary = append(summary, fmt.Sprintf("%s: refused by name (%v), %d tests not run", name, err, len(cases)))
			continue
		}
		passed := 0
		t.Run(name, func(t *testing.T) {
			tok := loadTokenizerFile(t, src)
			for _, c := range cases {
				got := tok.Encode(c.text, tokenizer.EncodeOptions{})
				if got == nil {
					got = []int32{}
				}
				if assertEqualIDs(t, c.want, got, c.text) {
					passed++
				}
			}
		})
		summary = append(summary, fmt.Sprintf("%s: %d/%d (%s)", name, passed, len(cases), filepath.Base(src)))
	}
	t.Logf("llama.cpp vocabulary tests:\n  %s", strings.Join(summary, "\n  "))
}

func assertEqualIDs(t *testing.T, want, got []int32, text string) bool {
	t.Helper()
	if fmt.Sprint(want) == fmt.Sprint(got) {
		return true
	}
	t.Errorf("%q:\n want %v\n got  %v", text, want, got)
	return false
}
