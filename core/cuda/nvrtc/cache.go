package nvrtc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// Options is the full option list CompileCached compiles with: a cubin for
// arch ("sm_90"; "sm_90a" for arch-specific features), functions without
// qualifiers compiled for the device (-default-device), C++17, then the
// caller's. NVRTC optimizes by default (ptxas -O3), so no -O flag is needed;
// nothing that changes float results (--use_fast_math) is on by default,
// since every kernel is checked against a CPU twin.
func Options(arch string, opts []string) []string {
	return append([]string{"--gpu-architecture=" + arch, "-default-device", "-std=c++17"}, opts...)
}

var realArch = regexp.MustCompile(`^sm_[0-9]+[a-z]?$`)

// CompileCached is Compile with Options(arch, opts), through an on-disk
// cache of cubins (CacheDir) keyed by the source, name, full options, NVRTC
// version and arch. A missing, unreadable or corrupt entry is compiled and
// rewritten; a cache that cannot be written only costs the next run a
// compile.
func (n *NVRTC) CompileCached(src []byte, name, arch string, opts []string) ([]byte, error) {
	if !realArch.MatchString(arch) {
		return nil, fmt.Errorf("nvrtc: architecture %q: want sm_XY (a cubin, not PTX)", arch)
	}
	full := Options(arch, opts)
	key := n.CacheKey(src, name, arch, full)
	dir, dirErr := CacheDir()
	var path string
	if dirErr == nil {
		path = filepath.Join(dir, key+".cubin")
		if cubin, ok := readEntry(path); ok {
			return cubin, nil
		}
	}
	cubin, _, err := n.Compile(src, name, full)
	if err != nil {
		return nil, err
	}
	if dirErr == nil {
		writeEntry(dir, path, cubin)
	}
	return cubin, nil
}

// CacheKey is the hex sha256 naming a cache entry. Every input is
// length-prefixed, so no two different input lists hash the same bytes.
func (n *NVRTC) CacheKey(src []byte, name, arch string, fullOpts []string) string {
	h := sha256.New()
	field := func(b []byte) {
		var l [8]byte
		binary.LittleEndian.PutUint64(l[:], uint64(len(b)))
		h.Write(l[:])
		h.Write(b)
	}
	field([]byte("lmstream cubin v1"))
	field(src)
	field([]byte(name))
	field([]byte(arch))
	field([]byte(fmt.Sprintf("nvrtc %d.%d", n.major, n.minor)))
	for _, o := range fullOpts {
		field([]byte(o))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CacheDir is where cubins are kept: $LMSTREAM_CACHE_DIR, else
// $XDG_CACHE_HOME/lmstream/cubin, else ~/.cache/lmstream/cubin.
func CacheDir() (string, error) {
	if d := os.Getenv("LMSTREAM_CACHE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "lmstream", "cubin"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("nvrtc: no cache directory: %w", err)
	}
	return filepath.Join(home, ".cache", "lmstream", "cubin"), nil
}

// An entry is the cubin followed by its sha256, so a truncated or damaged
// file is recognized (and recompiled) rather than handed to the driver.
var elfMagic = []byte("\x7fELF")

func readEntry(path string) ([]byte, bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < sha256.Size+len(elfMagic) {
		return nil, false
	}
	cubin, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	want := sha256.Sum256(cubin)
	if !bytes.Equal(sum, want[:]) || !bytes.HasPrefix(cubin, elfMagic) {
		return nil, false
	}
	return cubin, true
}

// writeEntry writes atomically (a temporary file renamed into place), so a
// concurrent reader sees the whole entry or none. Errors are dropped: the
// cache is an optimization.
func writeEntry(dir, path string, cubin []byte) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*.cubin")
	if err != nil {
		return
	}
	sum := sha256.Sum256(cubin)
	_, werr := f.Write(append(append([]byte(nil), cubin...), sum[:]...))
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		os.Remove(f.Name())
	}
}
