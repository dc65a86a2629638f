//go:build unix

package gguf

import (
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A model path that names a FIFO, a device or a directory is refused by
// name, and at once: opening a FIFO for reading would otherwise wait for a
// writer that never comes (the test would hang, not fail, without the fix).
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, tc := range []struct{ path, kind string }{
		{fifo, "a FIFO"},
		{dir, "a directory"},
		{"/dev/null", "a character device"},
	} {
		f, err := Open(tc.path)
		if err == nil {
			f.Close()
			t.Fatalf("%s opened", tc.path)
		}
		if !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), tc.kind) {
			t.Errorf("%s: %v, want it refused as %s", tc.path, err, tc.kind)
		}
	}
}
