package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
)

// startCPU creates the engine over the default model with config (JSON
// fields after model_path), as a new process would: the curves this
// process measured are forgotten first, so only the disk can spare the
// measuring.
func startCPU(t *testing.T, config string) *Backend {
	t.Helper()
	curves.Clear()
	cfg, err := loop.ParseConfig([]byte(`{"model_path":"` + benchModel + `",` + config + `}`))
	require.NoError(t, err)
	b, err := newCPU(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return b.(*Backend)
}

// TestCurveKeptAcrossStarts: the first start measures the cost curve and
// keeps it in curve_cache_dir; a second start (the process's own curves
// forgotten) reads it and measures nothing, pricing and budgeting exactly
// as the first.
func TestCurveKeptAcrossStarts(t *testing.T) {
	if race.Enabled {
		t.Skip("the default model's calibration is too slow under -race")
	}
	testmodel.Need(t, benchModel)
	dir := t.TempDir()
	config := `"threads":1,"max_slots":1,"context_length":256,"curve_cache_dir":"` + dir + `"`

	was := curveMeasurements.Load()
	cold := startCPU(t, config)
	require.Equal(t, was+1, curveMeasurements.Load(), "the first start measures")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1, "and keeps one curve")

	warm := startCPU(t, config)
	require.Equal(t, was+1, curveMeasurements.Load(), "the second start reads the kept curve")
	require.Equal(t, cold.price.curve, warm.price.curve)
	require.Equal(t, cold.Budget(), warm.Budget())
}

// smallModel loads the default model on one thread, for measuring short
// curves (maxN 4: a fraction of a second).
func smallModel(t *testing.T) (*gguf.File, model.Runner) {
	t.Helper()
	testmodel.Need(t, benchModel)
	f, err := gguf.Open(benchModel)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	m, err := loadCPU(f, 1, nil)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return f, m
}

// TestCurveCacheRefusesBadFiles: a kept file that is truncated, not JSON,
// oversized, another key's, or holds values measureCost could not have
// produced, or a FIFO or a directory in the file's place, is not used:
// the curve is measured anew (never a crash or a hang) and, where the
// path allows, the file is replaced by a valid one.
func TestCurveCacheRefusesBadFiles(t *testing.T) {
	f, m := smallModel(t)
	s := curveStore{dir: t.TempDir()}
	const maxN = 4
	measure := func() *costCurve {
		curves.Clear()
		c, _ := s.curve("cpu", f, benchModel, 1, m, maxN, 1, nil, false)
		require.NotNil(t, c)
		return c
	}
	was := curveMeasurements.Load()
	measure()
	require.Equal(t, was+1, curveMeasurements.Load())
	key := curveIdentity("cpu", f, benchModel, 1, m)
	require.NotEmpty(t, key)
	path := s.path(key)
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	measure()
	require.Equal(t, was+1, curveMeasurements.Load(), "a valid kept curve is used")

	// edit rewrites the kept file's JSON through change.
	edit := func(change func(cf *curveFile)) []byte {
		var cf curveFile
		require.NoError(t, json.Unmarshal(good, &cf))
		change(&cf)
		b, err := json.Marshal(cf)
		require.NoError(t, err)
		return b
	}
	bad := map[string][]byte{
		"empty":           {},
		"truncated":       good[:len(good)/2],
		"not json":        []byte("\x00\xff garbage"),
		"two values":      append(append([]byte{}, good...), good...),
		"unknown field":   []byte(strings.Replace(string(good), `"roots"`, `"extra":1,"roots"`, 1)),
		"oversized":       append(append([]byte{}, good...), make([]byte, maxCurveFile)...),
		"another key":     edit(func(cf *curveFile) { cf.Key += " threads 2" }),
		"negative time":   edit(func(cf *curveFile) { cf.T[1] = -5 }),
		"zero time":       edit(func(cf *curveFile) { cf.T[0] = 0 }),
		"absurd time":     edit(func(cf *curveFile) { cf.T[len(cf.T)-1] = int64(maxCurvePass) + 1 }),
		"falling":         edit(func(cf *curveFile) { cf.T[0], cf.T[1] = cf.T[1]+1, cf.T[0] }),
		"short":           edit(func(cf *curveFile) { cf.N, cf.T = cf.N[:1], cf.T[:1] }),
		"odd sizes":       edit(func(cf *curveFile) { cf.N[1] = 3 }),
		"lengths differ":  edit(func(cf *curveFile) { cf.T = cf.T[:len(cf.T)-1] }),
		"huge sizes":      edit(func(cf *curveFile) { cf.N[len(cf.N)-1] = 1 << 40 }),
		"negative prompt": edit(func(cf *curveFile) { cf.Prompt = -1 }),
		"absurd entry":    edit(func(cf *curveFile) { cf.Entry = 1 << 62 }),
		"roots unmeasured": edit(func(cf *curveFile) {
			cf.RootN, cf.RootT = []int{1, 2}, []int64{cf.T[0], cf.T[1]}
		}),
		"a batch under the chain": edit(func(cf *curveFile) {
			cf.Roots, cf.RootN, cf.RootT = 2, []int{1, 2}, []int64{cf.T[0], cf.T[1] - 1}
		}),
		"overflowing number": []byte(strings.Replace(string(good), `"prompt_ns":`, `"prompt_ns":99999999999999999999`, 1)),
	}
	for name, b := range bad {
		require.NoError(t, os.WriteFile(path, b, 0o600), name)
		require.Nil(t, s.load(key), name)
	}
	// Each refused file is measured anew and replaced (a few of them:
	// each measures).
	for _, name := range []string{"truncated", "oversized", "another key", "absurd time"} {
		require.NoError(t, os.WriteFile(path, bad[name], 0o600), name)
		was := curveMeasurements.Load()
		measure()
		require.Equal(t, was+1, curveMeasurements.Load(), "%s: measured anew", name)
		require.NotNil(t, s.load(key), "%s: replaced by a valid file", name)
	}

	// A FIFO in the file's place is not waited on, and is replaced.
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	was = curveMeasurements.Load()
	measure()
	require.Equal(t, was+1, curveMeasurements.Load(), "fifo: measured anew")
	require.NotNil(t, s.load(key), "fifo: replaced by a valid file")

	// A directory cannot be replaced: every start measures, and none fails.
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o700))
	was = curveMeasurements.Load()
	measure()
	require.Equal(t, was+1, curveMeasurements.Load(), "directory: measured anew")
	leftovers, err := filepath.Glob(filepath.Join(s.dir, ".curve-*"))
	require.NoError(t, err)
	require.Empty(t, leftovers, "a failed save leaves no temporary file")

	// "curve_cache_dir": "" keeps none: every start measures.
	s = curveStore{}
	was = curveMeasurements.Load()
	measure()
	measure()
	require.Equal(t, was+2, curveMeasurements.Load())
}

// TestCurveCacheConcurrentWriters: processes saving the same key at once
// (each rename is atomic) never let a reader see a partial file, and
// leave a valid one.
func TestCurveCacheConcurrentWriters(t *testing.T) {
	s := curveStore{dir: filepath.Join(t.TempDir(), "nested", "curves")} // created on first save
	const key = "a key"
	curveOf := func(k int) *costCurve {
		c := &costCurve{roots: 1, prompt: time.Duration(k)}
		for i, n := range []int{1, 2, 3, 4} {
			c.ns, c.ts = append(c.ns, n), append(c.ts, time.Duration(1000*k+i))
		}
		return c
	}
	s.save(key, curveOf(1))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 50 {
				s.save(key, curveOf(w+1))
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 200 {
				c := s.load(key)
				if !(c != nil && c.prompt >= 1 && c.prompt <= 4) {
					t.Errorf("read %+v, not one of the curves written", c)
					return
				}
				if want := curveOf(int(c.prompt)); !equalCurves(c, want) {
					t.Errorf("read %+v, a mix of curves", c)
					return
				}
			}
		})
	}
	wg.Wait()
	require.NotNil(t, s.load(key))
	leftovers, err := filepath.Glob(filepath.Join(s.dir, ".curve-*"))
	require.NoError(t, err)
	require.Empty(t, leftovers)
}

func equalCurves(a, b *costCurve) bool {
	ja, _ := json.Marshal([]any{a.ns, a.ts, a.rootNs, a.rootTs, a.entry, a.prompt, a.roots})
	jb, _ := json.Marshal([]any{b.ns, b.ts, b.rootNs, b.rootTs, b.entry, b.prompt, b.roots})
	return string(ja) == string(jb)
}

// TestCurveIdentity: the key names the model file's header and size, the
// thread count and the hardware, so another model or thread count never
// reads this one's curve; a device that cannot describe itself keeps none.
func TestCurveIdentity(t *testing.T) {
	f, m := smallModel(t)
	one := curveIdentity("cpu", f, benchModel, 1, m)
	require.Contains(t, one, "features ")
	require.Contains(t, one, "kernels ")
	require.NotEqual(t, one, curveIdentity("cpu", f, benchModel, 2, m))
	require.Empty(t, curveIdentity("other", f, benchModel, 1, m), "an undescribed device keeps no curve")

	// The same header at another size is another file.
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "copy.gguf")
	b, err := os.ReadFile(benchModel)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(copyPath, b, 0o600))
	require.Equal(t, one, curveIdentity("cpu", f, copyPath, 1, m), "a copy is the same model")
	require.NoError(t, os.WriteFile(copyPath, b[:len(b)-1], 0o600))
	require.NotEqual(t, one, curveIdentity("cpu", f, copyPath, 1, m))
	// Another header.
	b[f.DataOffset-1] ^= 1
	require.NoError(t, os.WriteFile(copyPath, b, 0o600))
	require.NotEqual(t, one, curveIdentity("cpu", f, copyPath, 1, m))
	// Not a regular file: no key.
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	require.Empty(t, curveIdentity("cpu", f, fifo, 1, m))
}

// TestCurveCacheDirField: "curve_cache_dir" is a path, "" or absent.
func TestCurveCacheDirField(t *testing.T) {
	for config, want := range map[string]string{`{"curve_cache_dir":"x/y"}`: "x/y", `{"curve_cache_dir":""}`: ""} {
		cfg, err := loop.ParseConfig([]byte(config))
		require.NoError(t, err)
		s, err := takeCurveStore(cfg)
		require.NoError(t, err)
		require.Equal(t, want, s.dir)
	}
	for _, config := range []string{`{"curve_cache_dir":"a\u0000b"}`, `{"curve_cache_dir":1}`, `{"curve_cache_dir":"` + strings.Repeat("a", MaxCurveCacheDir+1) + `"}`} {
		cfg, err := loop.ParseConfig([]byte(config))
		require.NoError(t, err)
		_, err = takeCurveStore(cfg)
		require.Error(t, err, config)
	}
}

// TestCurveCachePrunes: beyond maxCurveFiles the oldest curves go, and
// an interrupted save's temporary file once it is an hour old.
func TestCurveCachePrunes(t *testing.T) {
	s := curveStore{dir: t.TempDir()}
	old := time.Now().Add(-2 * time.Hour)
	for i := range maxCurveFiles + 3 {
		p := filepath.Join(s.dir, strings.Repeat("0", 4)+string(rune('a'+i%26))+time.Duration(i).String()+".json")
		require.NoError(t, os.WriteFile(p, []byte("{}"), 0o600))
		at := old.Add(time.Duration(i) * time.Second)
		require.NoError(t, os.Chtimes(p, at, at))
	}
	stale, fresh := filepath.Join(s.dir, ".curve-1.tmp"), filepath.Join(s.dir, ".curve-2.tmp")
	require.NoError(t, os.WriteFile(stale, nil, 0o600))
	require.NoError(t, os.Chtimes(stale, old, old))
	require.NoError(t, os.WriteFile(fresh, nil, 0o600))
	s.prune()
	files, err := filepath.Glob(filepath.Join(s.dir, "*.json"))
	require.NoError(t, err)
	require.Len(t, files, maxCurveFiles)
	require.NoFileExists(t, filepath.Join(s.dir, "0000a0s.json"), "the oldest went")
	require.NoFileExists(t, stale)
	require.FileExists(t, fresh, "a save under way keeps its file")
}
