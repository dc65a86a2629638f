package engine

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/quant"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"

	"golang.org/x/sys/cpu"
)

// The cost curve (cost.go) takes seconds to measure (tens of seconds for a
// 0.5B model on two cores) and was measured by every process creating a
// runtime: most of its start-up. It depends only on the model's shapes
// and tensor types, the machine, the thread count and the code, so it is
// kept on disk under a key naming all of them (curveIdentity), and a
// process finding its key there starts without measuring.
//
// The file is input like any other: one that cannot be read, is larger
// than maxCurveFile, does not parse, names another key or holds a curve
// measureCost could not have produced (validCurve) is ignored, measured
// anew and replaced. It is written to a temporary file renamed into place,
// so a process reading it while another writes sees the whole old file or
// the whole new one.

// curveSchema names what measureCost measures and how the file is laid
// out: change it when either changes, and every kept curve goes stale.
const curveSchema = "lmstream cost curve 1"

const (
	// maxCurveFile bounds the bytes read from a kept curve: a real one
	// is about a kilobyte.
	maxCurveFile = 64 << 10
	// maxCurveFiles bounds the directory: a library upgrade or a new
	// thread count adds files, and the oldest go beyond this many.
	maxCurveFiles = 256
	// maxCurvePass bounds every duration a kept curve may hold; beyond
	// it the file is not a measurement of any pass this engine runs.
	maxCurvePass = 10 * time.Minute
	// maxCurveSizes bounds the tokens and the sequences a kept curve may
	// reach (curveTokens and rootTokens are far below).
	maxCurveSizes = 1 << 12
	// MaxCurveCacheDir bounds "curve_cache_dir", a path.
	MaxCurveCacheDir = 4096
)

// curveMeasurements counts the curves measureCost has measured in this
// process (not those it found kept): the tests' proof that a kept curve
// was used.
var curveMeasurements atomic.Int64

// curveStore is the directory cost curves are kept in; "" keeps none.
type curveStore struct{ dir string }

// takeCurveStore reads "curve_cache_dir": the directory (default
// DefaultCurveCacheDir), or "" to keep no curve.
func takeCurveStore(cfg *loop.Config) (curveStore, error) {
	var dir *string
	if _, err := cfg.Extra.Take("curve_cache_dir", &dir); err != nil {
		return curveStore{}, err
	}
	if dir != nil {
		if len(*dir) > MaxCurveCacheDir || strings.ContainsRune(*dir, 0) {
			return curveStore{}, status.Errorf(status.InvalidRequest, `config field "curve_cache_dir" must be a path of at most %d bytes without NUL, or "" (keep no curve)`, MaxCurveCacheDir)
		}
		return curveStore{dir: *dir}, nil
	}
	d, err := DefaultCurveCacheDir()
	if err != nil {
		return curveStore{}, nil // no home: measure every time, as before
	}
	return curveStore{dir: d}, nil
}

// DefaultCurveCacheDir is where cost curves are kept unless the runtime
// config says: beside the model cache (core/registry), in
// $XDG_CACHE_HOME/lmstream/curves, else ~/.cache/lmstream/curves.
func DefaultCurveCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "lmstream", "curves"), nil
}

// curve is the cost curve of the target m (the model file f at path) on
// device with threads, reaching maxN tokens and maxRoots sequences: the
// one this process measured already, else the kept one, else measured
// (progress hears how far) and kept. nil when a pass failed.
//
// With idle set, a curve neither this process nor the disk has is not
// measured now: curve returns a quick one (measureCost's coarse stand-in)
// and later, the whole measurement (kept when it completes) for the
// engine's idle moments (calibrate.go).
func (s curveStore) curve(device string, f *gguf.File, path string, threads int, m model.Runner, maxN, maxRoots int, progress func(float64), idle bool) (c *costCurve, later func(*passGate) *costCurve) {
	procKey := fmt.Sprintf("%s/%s/%d", device, path, threads)
	if c, ok := curves.Load(procKey); ok && c.(*costCurve).reaches(maxN, maxRoots) {
		return c.(*costCurve), nil
	}
	var key string
	if s.dir != "" {
		key = curveIdentity(device, f, path, threads, m)
	}
	if key != "" {
		if c := s.load(key); c != nil && c.reaches(maxN, maxRoots) {
			curves.Store(procKey, c)
			return c, nil
		}
	}
	measure := func(g *passGate) *costCurve {
		report := progress
		if g != nil {
			report = nil // the runtime is serving: its start-up is over
		}
		c := measureCost(procKey, m, maxN, maxRoots, report, g, false)
		if c != nil && key != "" {
			s.save(key, c)
		}
		return c
	}
	if idle {
		return measureCost(procKey, m, maxN, maxRoots, progress, nil, true), measure
	}
	return measure(nil), nil
}

// curveIdentity is the text naming everything a measured curve depends
// on, or "" where that cannot be told (a device other than the CPU whose
// runner does not describe itself, an unreadable file): then nothing is
// kept. The model is named by its file's size and a hash of its header
// (metadata and tensor descriptions: every shape and type a pass runs),
// not of its weights, whose values do not change a pass's cost and whose
// gigabytes would cost a start-up more than the measuring saves.
func curveIdentity(device string, f *gguf.File, path string, threads int, m model.Runner) string {
	var hw string
	if d, ok := m.(interface{ CostIdentity() string }); ok {
		hw = d.CostIdentity()
	} else if device == "cpu" {
		hw = hostIdentity()
	} else {
		return ""
	}
	file, err := fileIdentity(path, f.DataOffset)
	if err != nil {
		return ""
	}
	return strings.Join([]string{curveSchema,
		"device " + device,
		"model " + file,
		"hardware " + hw,
		fmt.Sprintf("threads %d, context %d", threads, curveContext),
		"build " + buildIdentity(),
	}, "\n")
}

// fileIdentity is the size of the file at path and the sha256 of its
// first header bytes. It is opened without waiting (a FIFO put in the
// model's place must not hang start-up) and read only if regular. The
// path is the one just loaded: if a new file was renamed over it since,
// the curve is kept under the new file's name, which costs that file at
// worst a mispriced start, never a wrong token.
func fileIdentity(path string, header int) (string, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || int64(header) > st.Size() || header <= 0 {
		return "", fmt.Errorf("%s: not the regular file loaded", path)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, fd, int64(header)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes, header %d bytes sha256 %x", st.Size(), header, h.Sum(nil)), nil
}

// hostIdentity names the CPU a pass runs on: its model, what it can run
// (the instruction set extensions x/sys/cpu reports) and what this
// process chose to run (quant.Kernels: LMSTREAM_CPU_KERNELS may cap it).
func hostIdentity() string {
	return fmt.Sprintf("%s %s, %d CPUs, features %s, kernels %s",
		runtime.GOARCH, cpuModel(), runtime.NumCPU(), cpuFeatures(), quant.Kernels())
}

// cpuModel is the first "model name" of /proc/cpuinfo (read at most
// 1 MiB of it), or "" where there is none.
var cpuModel = sync.OnceValue(func() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
})

// cpuFeatures lists the extensions x/sys/cpu reports present (its Has*
// fields that are true), for the architecture running.
var cpuFeatures = sync.OnceValue(func() string {
	var names []string
	for _, set := range []any{cpu.X86, cpu.ARM64} {
		v := reflect.ValueOf(set)
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			if strings.HasPrefix(name, "Has") && v.Field(i).Kind() == reflect.Bool && v.Field(i).Bool() {
				names = append(names, strings.TrimPrefix(name, "Has"))
			}
		}
	}
	return strings.Join(names, ",")
})

// buildIdentity names the code measuring: the Go release and the module's
// version, revision and build settings where the build recorded them (a
// development build without them keeps its curves across edits: pass
// "curve_cache_dir": "" to measure every time).
var buildIdentity = sync.OnceValue(func() string {
	parts := []string{runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		parts = append(parts, bi.Main.Path+"@"+bi.Main.Version)
		for _, s := range bi.Settings {
			switch s.Key {
			case "-tags", "GOAMD64", "GOARM64", "CGO_ENABLED", "vcs.revision", "vcs.modified":
				parts = append(parts, s.Key+"="+s.Value)
			}
		}
	}
	return strings.Join(parts, " ")
})

// curveFile is a kept curve as JSON: the key it was measured under and
// costCurve's fields, durations in nanoseconds.
type curveFile struct {
	Key    string  `json:"key"`
	Roots  int     `json:"roots"`
	N      []int   `json:"n"`
	T      []int64 `json:"t_ns"`
	RootN  []int   `json:"root_n"`
	RootT  []int64 `json:"root_t_ns"`
	Entry  int64   `json:"entry_ns"`
	Prompt int64   `json:"prompt_ns"`
}

// path is the file of key: a hash of it (the key itself is inside).
func (s curveStore) path(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16])+".json")
}

// load is the curve kept under key, or nil when there is none that can be
// trusted (see the top of this file).
func (s curveStore) load(key string) *costCurve {
	b, err := readSmallFile(s.path(key), maxCurveFile)
	if err != nil {
		return nil
	}
	var cf curveFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if d.Decode(&cf) != nil || d.More() || cf.Key != key {
		return nil
	}
	c := &costCurve{roots: cf.Roots, ns: cf.N, rootNs: cf.RootN, entry: time.Duration(cf.Entry), prompt: time.Duration(cf.Prompt)}
	for _, t := range cf.T {
		c.ts = append(c.ts, time.Duration(t))
	}
	for _, t := range cf.RootT {
		c.rootTs = append(c.rootTs, time.Duration(t))
	}
	if !validCurve(c) {
		return nil
	}
	return c
}

// readSmallFile reads the regular file at path if it holds at most limit
// bytes, without waiting on a FIFO or reading a device.
func readSmallFile(path string, limit int64) ([]byte, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", path, limit)
	}
	b, err := io.ReadAll(io.LimitReader(fd, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s: grew past %d bytes", path, limit)
	}
	return b, err
}

// validCurve reports whether c is a curve measureCost could have
// produced: sizes exactly spec.CalibrationSizes up to a bounded last,
// every duration positive (entry and prompt at least 0) and within
// maxCurvePass, the chain's and the batches' non-decreasing, and no batch
// cheaper than a chain of as many tokens.
func validCurve(c *costCurve) bool {
	sizes := func(ns []int) bool {
		return len(ns) > 0 && ns[len(ns)-1] >= 1 && ns[len(ns)-1] <= maxCurveSizes && slices.Equal(ns, spec.CalibrationSizes(ns[len(ns)-1]))
	}
	rising := func(ts []time.Duration) bool {
		for i, t := range ts {
			if t <= 0 || t > maxCurvePass || i > 0 && t < ts[i-1] {
				return false
			}
		}
		return true
	}
	switch {
	case len(c.ns) < 2 || !sizes(c.ns) || len(c.ts) != len(c.ns) || !rising(c.ts):
		return false
	case c.roots < 0 || c.roots > maxCurveSizes:
		return false
	case c.entry < 0 || c.entry > maxCurvePass || c.prompt < 0 || c.prompt > maxCurvePass:
		return false
	case len(c.rootNs) == 0:
		return len(c.rootTs) == 0
	case !sizes(c.rootNs) || c.rootNs[len(c.rootNs)-1] != c.roots || len(c.rootTs) != len(c.rootNs) || !rising(c.rootTs):
		return false
	}
	for i, n := range c.rootNs {
		if c.rootTs[i] < c.at(n) {
			return false
		}
	}
	return true
}

// save keeps c under key; failing to (a read-only or full disk) only
// means the next process measures again, so errors are dropped.
func (s curveStore) save(key string, c *costCurve) {
	cf := curveFile{Key: key, Roots: c.roots, N: c.ns, RootN: c.rootNs, Entry: int64(c.entry), Prompt: int64(c.prompt)}
	for _, t := range c.ts {
		cf.T = append(cf.T, int64(t))
	}
	for _, t := range c.rootTs {
		cf.RootT = append(cf.RootT, int64(t))
	}
	b, err := json.Marshal(cf)
	if err != nil || len(b) > maxCurveFile {
		return
	}
	if os.MkdirAll(s.dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(s.dir, ".curve-*.tmp")
	if err != nil {
		return
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path(key))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return
	}
	s.prune()
}

// prune removes the oldest kept curves beyond maxCurveFiles, and
// temporary files an interrupted save left an hour ago or more.
func (s curveStore) prune() {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type kept struct {
		name string
		at   time.Time
	}
	var files []kept
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		switch name := e.Name(); {
		case strings.HasPrefix(name, ".curve-") && strings.HasSuffix(name, ".tmp"):
			if time.Since(info.ModTime()) > time.Hour {
				os.Remove(filepath.Join(s.dir, name))
			}
		case strings.HasSuffix(name, ".json"):
			files = append(files, kept{name, info.ModTime()})
		}
	}
	if len(files) <= maxCurveFiles {
		return
	}
	slices.SortFunc(files, func(a, b kept) int { return a.at.Compare(b.at) })
	for _, k := range files[:len(files)-maxCurveFiles] {
		os.Remove(filepath.Join(s.dir, k.name))
	}
}
