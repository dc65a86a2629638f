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
// a model reads little more than its header.
//
// The file must not be truncated or rewritten in place while its tensor
// data is read: a page past a new end of file raises SIGBUS, which kills
// the process unless the read runs under Guard. Unchanged tells whether the
// file still has the size and modification time it was opened with.
//
// Only a regular file is opened: a FIFO, a device or a directory is
// refused by name. The open itself must not wait, so it is non-blocking:
// a plain open of a FIFO blocks until some writer opens the other end,
// which may be never. The check is on the opened descriptor, so the path
// cannot be swapped between the check and the mapping.
func Open(path string) (*File, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		fd.Close()
		return nil, fmt.Errorf("gguf: %s is not a regular file (%s)", path, fileKind(st.Mode()))
	}
	size := st.Size()
	if size == 0 {
		fd.Close()
		// mmap refuses an empty length; let Parse say what is missing.
		_, err := Parse(nil)
		return nil, withPath(err, path)
	}
	if size > math.MaxInt {
		fd.Close()
		return nil, fmt.Errorf("gguf: %s: %d bytes is too large to map", path, size)
	}
	data, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("gguf: mmap %s: %w", path, err)
	}
	// The mapping stays valid after the descriptor is closed, but the
	// descriptor is kept for Unchanged: fstat on it sees the mapped file
	// itself, even when the path has since been replaced by another file
	// (which leaves the mapping intact and is no change to it).
	var f *File
	err = guardMapping(data, path, func() (err error) {
		f, err = Parse(data)
		return err
	})
	if err != nil {
		fd.Close()
		_ = unix.Munmap(data)
		return nil, withPath(err, path)
	}
	f.path, f.mapping = path, data
	mtime := st.ModTime()
	f.changed = func() error {
		now, err := fd.Stat()
		if err != nil {
			return fmt.Errorf("gguf: %s: %w", path, err)
		}
		if now.Size() != size || !now.ModTime().Equal(mtime) {
			return fmt.Errorf("gguf: %s changed while in use: %d bytes modified %s when opened, now %d bytes modified %s",
				path, size, mtime.Format("2006-01-02 15:04:05.000000000"), now.Size(), now.ModTime().Format("2006-01-02 15:04:05.000000000"))
		}
		return nil
	}
	f.unmap = func() error {
		f.mapping = nil
		return errors.Join(unix.Munmap(data), fd.Close())
	}
	return f, nil
}

// guardMapping is Guard for a mapping that has no File yet: Parse reads the
// header through the mapping, and the file may be cut short meanwhile.
func guardMapping(data []byte, path string, fn func() error) error {
	tmp := &File{path: path, mapping: data}
	return tmp.Guard(fn)
}

// withPath names the file in a parse error.
func withPath(err error, path string) error {
	var fe *FormatError
	if errors.As(err, &fe) {
		fe.Path = path
		return fe
	}
	if _, named := err.(*FaultError); named {
		return err
	}
	return fmt.Errorf("gguf: %s: %w", path, err)
}

// fileKind names what a non-regular path is, for the refusal.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}

// dropPages takes whole pages of the read-only shared file mapping out of
// the resident set (MADV_DONTNEED: for a file mapping the contents stay
// the file's, read back from the page cache on the next access).
func dropPages(b []byte) { _ = unix.Madvise(b, unix.MADV_DONTNEED) }
