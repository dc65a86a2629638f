// PyPI's JSON API: where each wheel is and what digest the index claims.

package pull

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/status"
)

// httpsRedirects follows at most 10 redirects, all to https: the sums
// guard the bytes anyway, but nothing needs to travel in the clear.
func httpsRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("too many redirects")
	}
	return httpsOnly(req.URL.String())
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
