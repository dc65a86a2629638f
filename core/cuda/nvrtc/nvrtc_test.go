package nvrtc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestCompilePassesStringsThroughCMemory(t *testing.T) {
	f := &fakeAPI{}
	n := New(f.api(), "fake", 13, 0)
	cubin, log, err := n.Compile([]byte("__global__ void k(){}"), "k.cu", []string{"--gpu-architecture=sm_90", "-std=c++17"})
	require.NoError(t, err)
	require.Empty(t, log)
	require.Equal(t, "\x7fELF|__global__ void k(){}|--gpu-architecture=sm_90 -std=c++17", string(cubin))
	require.Equal(t, []string{"k.cu"}, f.names)

	// No options: a NULL array.
	_, _, err = n.Compile([]byte("x"), "x.cu", nil)
	require.NoError(t, err)
	require.Nil(t, f.opts[1])

	_, log, err = n.Compile([]byte("#error"), "bad.cu", nil)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "bad.cu(1): error: boom\n", log)
	require.Equal(t, "nvrtc: nvrtcCompileProgram bad.cu: NVRTC_ERROR_COMPILATION\nbad.cu(1): error: boom", err.Error())

	_, _, err = n.Compile([]byte("x"), "x.cu", []string{"--gpu-architecture=compute_90"})
	require.ErrorContains(t, err, "no cubin")
	_, _, err = n.Compile([]byte("x\x00y"), "x.cu", nil)
	require.ErrorContains(t, err, "NUL")

	require.Contains(t, (&Error{Code: 7, Call: "c"}).Error(), "libnvrtc-builtins.so.* must be beside libnvrtc")
	require.Equal(t, "nvrtcResult(99)", (&Error{Code: 99}).Name())
}

func TestCacheKeyChangesWithEachInput(t *testing.T) {
	n := New(nil, "", 13, 0)
	base := n.CacheKey([]byte("src"), "k.cu", "sm_90", Options("sm_90", []string{"-DX=1"}))
	keys := map[string]string{"base": base}
	add := func(what, k string) {
		for w, old := range keys {
			require.NotEqual(t, old, k, "%s hashes like %s", what, w)
		}
		keys[what] = k
	}
	add("source", n.CacheKey([]byte("src2"), "k.cu", "sm_90", Options("sm_90", []string{"-DX=1"})))
	add("name", n.CacheKey([]byte("src"), "j.cu", "sm_90", Options("sm_90", []string{"-DX=1"})))
	add("arch", n.CacheKey([]byte("src"), "k.cu", "sm_80", Options("sm_90", []string{"-DX=1"})))
	add("options", n.CacheKey([]byte("src"), "k.cu", "sm_90", Options("sm_90", []string{"-DX=2"})))
	add("option split", n.CacheKey([]byte("src"), "k.cu", "sm_90", Options("sm_90", []string{"-DX=", "1"})))
	add("version", New(nil, "", 13, 1).CacheKey([]byte("src"), "k.cu", "sm_90", Options("sm_90", []string{"-DX=1"})))
	add("major", New(nil, "", 12, 0).CacheKey([]byte("src"), "k.cu", "sm_90", Options("sm_90", []string{"-DX=1"})))
	require.Equal(t, base, n.CacheKey([]byte("src"), "k.cu", "sm_90", Options("sm_90", []string{"-DX=1"})))
	require.Len(t, base, 64)
}

func TestCompileCachedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LMSTREAM_CACHE_DIR", dir)
	f := &fakeAPI{}
	n := New(f.api(), "fake", 13, 0)
	src := []byte("__global__ void k(){}")

	a, err := n.CompileCached(src, "k.cu", "sm_90", []string{"-DN=4"})
	require.NoError(t, err)
	require.Equal(t, []string{"--gpu-architecture=sm_90", "-default-device", "-std=c++17", "-DN=4"}, f.opts[0])
	b, err := n.CompileCached(src, "k.cu", "sm_90", []string{"-DN=4"})
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.Equal(t, 1, f.compiles, "the second call is a cache hit")

	// A different arch is another entry.
	_, err = n.CompileCached(src, "k.cu", "sm_80", []string{"-DN=4"})
	require.NoError(t, err)
	require.Equal(t, 2, f.compiles)

	// Corrupt entries (a flipped byte, a truncation, garbage) are recompiled
	// and rewritten.
	entry := filepath.Join(dir, n.CacheKey(src, "k.cu", "sm_90", Options("sm_90", []string{"-DN=4"}))+".cubin")
	raw, err := os.ReadFile(entry)
	require.NoError(t, err)
	for i, bad := range [][]byte{
		append([]byte{raw[0] ^ 1}, raw[1:]...),
		raw[:len(raw)-1],
		[]byte("junk"),
		{},
	} {
		require.NoError(t, os.WriteFile(entry, bad, 0o644))
		c, err := n.CompileCached(src, "k.cu", "sm_90", []string{"-DN=4"})
		require.NoError(t, err)
		require.Equal(t, a, c)
		require.Equal(t, 3+i, f.compiles)
		fixed, err := os.ReadFile(entry)
		require.NoError(t, err)
		require.Equal(t, raw, fixed)
	}
	// No temporary files are left behind.
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		require.False(t, strings.HasPrefix(e.Name(), ".tmp"), e.Name())
	}

	// Compile errors are not cached.
	_, err = n.CompileCached([]byte("#error"), "bad.cu", "sm_90", nil)
	require.ErrorContains(t, err, "boom")
	_, err = n.CompileCached([]byte("#error"), "bad.cu", "sm_90", nil)
	require.ErrorContains(t, err, "boom")

	_, err = n.CompileCached(src, "k.cu", "compute_90", nil)
	require.EqualError(t, err, `nvrtc: architecture "compute_90": want sm_XY (a cubin, not PTX)`)

	// An unwritable cache still compiles.
	t.Setenv("LMSTREAM_CACHE_DIR", "/proc/no/such/dir")
	_, err = n.CompileCached(src, "k.cu", "sm_90", nil)
	require.NoError(t, err)
}

func TestCacheDir(t *testing.T) {
	t.Setenv("LMSTREAM_CACHE_DIR", "/a")
	t.Setenv("XDG_CACHE_HOME", "/x")
	d, err := CacheDir()
	require.NoError(t, err)
	require.Equal(t, "/a", d)
	t.Setenv("LMSTREAM_CACHE_DIR", "")
	d, _ = CacheDir()
	require.Equal(t, "/x/lmstream/cubin", d)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	d, _ = CacheDir()
	require.Equal(t, "/home/u/.cache/lmstream/cubin", d)
}

// searchFixture builds a fake machine under a temp root: files named like
// the libraries, and a loader that "loads" only the paths in good (with
// their NVRTC major) and fails the rest as dlopen would.
type searchFixture struct {
	root string
	vars map[string]string
	good map[string]int32
}

func newSearchFixture(t *testing.T) *searchFixture {
	return &searchFixture{root: t.TempDir(), vars: map[string]string{}, good: map[string]int32{}}
}

func (s *searchFixture) file(t *testing.T, rel string) string {
	p := filepath.Join(s.root, rel)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte("not really a library"), 0o755))
	return p
}

func (s *searchFixture) env() env {
	return env{
		getenv: func(k string) string { return s.vars[k] },
		root:   s.root,
		goarch: "amd64",
		load: func(path string) (*API, func(), error) {
			major, ok := s.good[path]
			if !ok {
				return nil, nil, errors.New("cannot open")
			}
			api := (&fakeAPI{}).api()
			api.Version = func(a, b unsafe.Pointer) int32 { *(*int32)(a), *(*int32)(b) = major, 2; return 0 }
			return api, func() {}, nil
		},
	}
}

func TestSearchOrder(t *testing.T) {
	s := newSearchFixture(t)
	home := filepath.Join(s.root, "home/u")
	s.vars["HOME"] = home
	venv := filepath.Join(s.root, "venv")
	s.vars["VIRTUAL_ENV"] = venv
	bin := filepath.Join(s.root, "py/bin")
	s.file(t, "py/bin/python3")
	s.vars["PATH"] = "/nonexistent:" + bin

	// Candidates from last to first; each step makes an earlier place good
	// and checks that it wins.
	steps := []struct {
		path, how string
	}{
		{s.file(t, "opt/conda/envs/x/lib/python3.10/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"), "a wheel in " + filepath.Join(s.root, "opt/conda/envs/x/lib/python3.10/site-packages")},
		{s.file(t, "opt/app/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13"), "a wheel in " + filepath.Join(s.root, "opt/app/.venv/lib/python3.12/site-packages")},
		{s.file(t, "usr/lib/python3/dist-packages/nvidia/cu13/lib/libnvrtc.so.13"), "a wheel in " + filepath.Join(s.root, "usr/lib/python3/dist-packages")},
		{s.file(t, "usr/local/lib/python3.11/dist-packages/nvidia/cu13/lib/libnvrtc.so.13"), "a wheel in " + filepath.Join(s.root, "usr/local/lib/python3.11/dist-packages")},
		{s.file(t, "home/u/.pyenv/versions/3.11.7/lib/python3.11/site-packages/nvidia/cu13/lib/libnvrtc.so.13"), "a wheel in " + filepath.Join(home, ".pyenv/versions/3.11.7/lib/python3.11/site-packages")},
		{s.file(t, "home/u/.local/lib/python3.11/site-packages/nvidia/cu13/lib/libnvrtc.so.13"), "a wheel in " + filepath.Join(home, ".local/lib/python3.11/site-packages")},
		{s.file(t, "py/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13"), "a wheel in " + filepath.Join(s.root, "py/lib/python3.12/site-packages")},
		// Within one site-packages, the CUDA 13 wheel before the CUDA 12 one.
		{s.file(t, "venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"), "a wheel in " + filepath.Join(venv, "lib/python3.12/site-packages")},
		{s.file(t, "venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13"), "a wheel in " + filepath.Join(venv, "lib/python3.12/site-packages")},
		{s.file(t, "usr/local/cuda/targets/x86_64-linux/lib/libnvrtc.so.12"), filepath.Join(s.root, "usr/local/cuda/targets/x86_64-linux/lib")},
		{s.file(t, "usr/local/cuda/lib64/libnvrtc.so"), filepath.Join(s.root, "usr/local/cuda/lib64")},
		{s.file(t, "usr/local/cuda/lib64/libnvrtc.so.13"), filepath.Join(s.root, "usr/local/cuda/lib64")},
		{"libnvrtc.so", "the loader path"},
		{"libnvrtc.so.12", "the loader path"},
		{"libnvrtc.so.13", "the loader path"},
	}
	for _, st := range steps {
		s.good[st.path] = 13
		n, err := s.env().open("", 0)
		require.NoError(t, err, st.path)
		require.Equal(t, st.path, n.Path())
		require.Equal(t, st.how, n.how, st.path)
		major, minor := n.Version()
		require.Equal(t, [2]int{13, 2}, [2]int{major, minor})
	}

	// $LMSTREAM_NVRTC beats them all, and the config beats it.
	envLib := s.file(t, "envlib/libnvrtc.so.13")
	s.good[envLib] = 13
	s.vars["LMSTREAM_NVRTC"] = envLib
	n, err := s.env().open("", 0)
	require.NoError(t, err)
	require.Equal(t, envLib, n.Path())
	require.Equal(t, "libnvrtc.so.13 (NVRTC 13.2, from the loader path)", func() string {
		m, _ := s.env().try("libnvrtc.so.13", "the loader path", 0)
		return m.Found()
	}())
	cfgDir := filepath.Join(s.root, "cfg")
	cfgLib := s.file(t, "cfg/libnvrtc.so.12")
	s.good[cfgLib] = 12
	n, err = s.env().open(cfgDir, 0) // a directory is searched for the sonames
	require.NoError(t, err)
	require.Equal(t, cfgLib, n.Path())
	require.Equal(t, []string{}, append([]string{}, n.Tried()...))
}

func TestExplicitPathsDoNotFallBack(t *testing.T) {
	s := newSearchFixture(t)
	s.good["libnvrtc.so.13"] = 13
	_, err := s.env().open("/no/such/libnvrtc.so", 0)
	require.EqualError(t, err, `nvrtc: config nvrtc_path "/no/such/libnvrtc.so": cannot open`)
	s.vars["LMSTREAM_NVRTC"] = s.root
	_, err = s.env().open("", 0)
	require.EqualError(t, err, `nvrtc: $LMSTREAM_NVRTC "`+s.root+`": directory holds no libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so`)
}

func TestSearchSkipsNVRTCNewerThanDriver(t *testing.T) {
	s := newSearchFixture(t)
	s.good["libnvrtc.so.13"] = 13
	s.good["libnvrtc.so.12"] = 12
	n, err := s.env().open("", 12)
	require.NoError(t, err)
	require.Equal(t, "libnvrtc.so.12", n.Path())
	require.Equal(t, []string{"config nvrtc_path unset", "$LMSTREAM_NVRTC unset",
		"libnvrtc.so.13: NVRTC 13.2 is newer than the driver (CUDA 12): its cubins may not load"}, n.Tried())
}

func TestNotFoundNamesEverythingTried(t *testing.T) {
	s := newSearchFixture(t)
	s.vars["HOME"] = filepath.Join(s.root, "home")
	s.vars["CUDA_HOME"] = "/opt/cuda-x"
	sp := filepath.Join(s.root, "usr/local/lib/python3.11/site-packages")
	require.NoError(t, os.MkdirAll(sp, 0o755))
	bad := s.file(t, "usr/local/cuda/lib64/libnvrtc.so.13") // exists but does not load
	_, err := s.env().open("", 0)
	require.EqualError(t, err, "nvrtc: not found (tried: config nvrtc_path unset; $LMSTREAM_NVRTC unset; "+
		"libnvrtc.so.13: cannot open; libnvrtc.so.12: cannot open; libnvrtc.so: cannot open; "+
		"/opt/cuda-x/lib64: no libnvrtc.so*; "+bad+": cannot open; "+
		s.root+"/usr/local/cuda/targets/x86_64-linux/lib: no libnvrtc.so*; "+
		"site-packages "+sp+": no nvidia/cu13/lib/libnvrtc.so.13 or nvidia/cuda_nvrtc/lib/libnvrtc.so.12); "+
		"install the nvidia-cuda-nvrtc wheel (python3 -m pip install nvidia-cuda-nvrtc) or set nvrtc_path")
}

// The real loader on a file that is not a library: its message comes back.
func TestRealLoaderError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "libnvrtc.so.13")
	require.NoError(t, os.WriteFile(p, []byte(strings.Repeat("not an ELF file at all, just text. ", 8)), 0o644))
	_, err := Open(p)
	require.Error(t, err)
	require.Contains(t, err.Error(), `nvrtc: config nvrtc_path "`+p+`": `)
	require.Contains(t, err.Error(), "invalid ELF header")
}
