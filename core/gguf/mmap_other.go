//go:build !unix

package gguf

import (
	"errors"
	"fmt"
	"os"
)

// Open reads the file at path and parses it. Systems without mmap read the
// whole file into memory; Close then only drops the tensor data.
func Open(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			fe.Path = path
		}
		return nil, err
	}
	f.unmap = func() error { return nil }
	return f, nil
}

// dropPages does nothing where the file is read into memory: those bytes
// are the only copy.
func dropPages(b []byte) {}
