//go:build unix

package gguf

import (
	"errors"
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// Open maps the file at path read-only and parses it. The mapping lives
// until Close; the kernel pages tensor data in as it is touched, so opening
// a model reads little more than its header. The file must not be truncated
// while mapped (reading a vanished page kills the process with SIGBUS).
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	// The mapping stays valid after the descriptor is closed.
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	size := st.Size()
	if size == 0 {
		// mmap refuses an empty length; let Parse say what is missing.
		_, err := Parse(nil)
		return nil, withPath(err, path)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("gguf: %s: %d bytes is too large to map", path, size)
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gguf: mmap %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		_ = unix.Munmap(data)
		return nil, withPath(err, path)
	}
	f.unmap = func() error { return unix.Munmap(data) }
	return f, nil
}

// withPath names the file in a parse error.
func withPath(err error, path string) error {
	var fe *FormatError
	if errors.As(err, &fe) {
		fe.Path = path
		return fe
	}
	return fmt.Errorf("gguf: %s: %w", path, err)
}
