package nvrtc

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Where Open looks for libnvrtc, in order:
//
//  1. the caller's explicit path (the config's "nvrtc_path"): a file, or a
//     directory holding libnvrtc.so.13, .so.12 or .so;
//  2. $LMSTREAM_NVRTC, the same way;
//  3. the loader's search by soname: libnvrtc.so.13, libnvrtc.so.12,
//     libnvrtc.so (LD_LIBRARY_PATH, ld.so.cache);
//  4. CUDA toolkits: $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64,
//     /usr/local/cuda/targets/<arch>-linux/lib;
//  5. PyPI wheels, in each site-packages directory found without running
//     Python: nvidia/cu13/lib/libnvrtc.so.13 (the CUDA 13 wheel,
//     nvidia-cuda-nvrtc) then nvidia/cuda_nvrtc/lib/libnvrtc.so.12 (CUDA 12,
//     nvidia-cuda-nvrtc-cu12). The directories, in order: $VIRTUAL_ENV,
//     $CONDA_PREFIX, those of each python3 on $PATH (bin/../lib/python3*/
//     {site,dist}-packages, also for the python3 its symlink points at),
//     ~/.local, ~/.pyenv/versions/*, /usr/local, /usr, /usr/lib64, /opt/*,
//     /opt/*/.venv, /opt/conda/envs/*.
//
// An explicit path (1, 2) that fails is an error of its own: asking for one
// library and silently getting another hides configuration mistakes. The
// implicit places (3-5) are tried until one loads. With a driver version
// (OpenForDriver), an NVRTC whose major version is newer than the driver's
// is passed over: its cubins may not load there.
//
// libnvrtc loads its companion libnvrtc-builtins.so.<ver> at compile time
// through its RPATH ($ORIGIN), so it must stay beside libnvrtc (it does in
// the wheels and toolkits); a copied libnvrtc alone fails at compile with
// NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, which Error explains.

var sonames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}

// wheelLibs are the library paths inside a site-packages directory.
var wheelLibs = []string{"nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"}

// NVRTC is an opened libnvrtc.
type NVRTC struct {
	api          *API
	path, how    string
	major, minor int
	tried        []string
}

// New wraps an API (a fake, in tests of code that compiles) as an NVRTC of
// the given version.
func New(api *API, path string, major, minor int) *NVRTC {
	return &NVRTC{api: api, path: path, how: "given", major: major, minor: minor}
}

// Path is the library loaded: a soname when the loader found it, else a
// file path.
func (n *NVRTC) Path() string { return n.path }

// Version is NVRTC's version (13, 0 for CUDA 13.0).
func (n *NVRTC) Version() (major, minor int) { return n.major, n.minor }

// Found says which library was used and how it was found, for logs and
// error messages: `libnvrtc.so.13 (NVRTC 13.0, from the loader path)`.
func (n *NVRTC) Found() string {
	return fmt.Sprintf("%s (NVRTC %d.%d, from %s)", n.path, n.major, n.minor, n.how)
}

// Tried lists the places looked at before the one used.
func (n *NVRTC) Tried() []string { return n.tried }

// Open finds and loads libnvrtc (see the search order above); explicit is
// the config's nvrtc_path ("" when unset).
func Open(explicit string) (*NVRTC, error) { return OpenForDriver(explicit, 0) }

// OpenForDriver is Open passing over NVRTC majors newer than the driver's;
// driverVersion is cuDriverGetVersion's value (12080 for 12.8; 0: any).
func OpenForDriver(explicit string, driverVersion int) (*NVRTC, error) {
	return hostEnv().open(explicit, driverVersion/1000)
}

// env is what the search reads from the machine; tests replace it.
type env struct {
	getenv func(string) string
	root   string // prefix of the fixed absolute places ("" for real)
	goarch string
	load   func(path string) (*API, func(), error)
}

func hostEnv() env {
	return env{getenv: os.Getenv, goarch: runtime.GOARCH, load: loadLib}
}

func loadLib(path string) (*API, func(), error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, nil, err
	}
	closeLib := func() { purego.Dlclose(h) }
	api, err := bind(h, purego.Dlsym)
	if err != nil {
		closeLib()
		return nil, nil, err
	}
	return api, closeLib, nil
}

// try loads path and checks its version; a non-nil error says why it is
// not usable.
func (e env) try(path, how string, maxMajor int) (*NVRTC, error) {
	api, closeLib, err := e.load(path)
	if err != nil {
		return nil, err
	}
	var major, minor int32
	if err := check("nvrtcVersion", api.Version(unsafe.Pointer(&major), unsafe.Pointer(&minor))); err != nil {
		closeLib()
		return nil, err
	}
	if maxMajor > 0 && int(major) > maxMajor {
		closeLib()
		return nil, fmt.Errorf("NVRTC %d.%d is newer than the driver (CUDA %d): its cubins may not load", major, minor, maxMajor)
	}
	return &NVRTC{api: api, path: path, how: how, major: int(major), minor: int(minor)}, nil
}

func (e env) open(explicit string, maxMajor int) (*NVRTC, error) {
	var tried []string
	for _, x := range []struct{ label, how, v string }{
		{"config nvrtc_path", "config nvrtc_path", explicit},
		{"$LMSTREAM_NVRTC", "$LMSTREAM_NVRTC", e.getenv("LMSTREAM_NVRTC")},
	} {
		if x.v == "" {
			tried = append(tried, x.label+" unset")
			continue
		}
		n, err := e.explicit(x.v, x.how, maxMajor)
		if err != nil {
			return nil, fmt.Errorf("nvrtc: %s %q: %w", x.label, x.v, err)
		}
		n.tried = tried
		return n, nil
	}

	// try records a failed candidate and returns the NVRTC that loaded.
	try := func(path, how string) *NVRTC {
		n, err := e.try(path, how, maxMajor)
		if err != nil {
			tried = append(tried, placeErr(path, err))
			return nil
		}
		n.tried = tried
		return n
	}
	for _, so := range sonames {
		if n := try(so, "the loader path"); n != nil {
			return n, nil
		}
	}
	for _, dir := range e.toolkitDirs() {
		found := false
		for _, so := range sonames {
			p := filepath.Join(dir, so)
			if !isFile(p) {
				continue
			}
			found = true
			if n := try(p, dir); n != nil {
				return n, nil
			}
		}
		if !found {
			tried = append(tried, dir+": no libnvrtc.so*")
		}
	}
	sites := e.sitePackages()
	for _, sp := range sites {
		for _, rel := range wheelLibs {
			p := filepath.Join(sp, rel)
			if isFile(p) {
				if n := try(p, "a wheel in "+sp); n != nil {
					return n, nil
				}
			}
		}
	}
	if len(sites) == 0 {
		tried = append(tried, "no site-packages directories")
	} else {
		tried = append(tried, fmt.Sprintf("site-packages %s: no %s", strings.Join(sites, ", "), strings.Join(wheelLibs, " or ")))
	}
	return nil, fmt.Errorf("nvrtc: not found (tried: %s); install the nvidia-cuda-nvrtc wheel "+
		"(python3 -m pip install nvidia-cuda-nvrtc) or set nvrtc_path", strings.Join(tried, "; "))
}

// explicit loads a path the user named: a file, or a directory holding one
// of the sonames.
func (e env) explicit(v, how string, maxMajor int) (*NVRTC, error) {
	if st, err := os.Stat(v); err == nil && st.IsDir() {
		var errs []string
		for _, so := range sonames {
			p := filepath.Join(v, so)
			if !isFile(p) {
				continue
			}
			n, err := e.try(p, how, maxMajor)
			if err == nil {
				return n, nil
			}
			errs = append(errs, placeErr(p, err))
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("directory holds no %s", strings.Join(sonames, ", "))
		}
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return e.try(v, how, maxMajor)
}

var toolkitArch = map[string]string{"amd64": "x86_64-linux", "arm64": "sbsa-linux", "ppc64le": "ppc64le-linux"}

func (e env) toolkitDirs() []string {
	var dirs []string
	for _, v := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if p := e.getenv(v); p != "" {
			dirs = append(dirs, filepath.Join(p, "lib64"))
		}
	}
	dirs = append(dirs, e.root+"/usr/local/cuda/lib64")
	if a, ok := toolkitArch[e.goarch]; ok {
		dirs = append(dirs, e.root+"/usr/local/cuda/targets/"+a+"/lib")
	}
	return dedup(dirs)
}

// sitePackages globs the well-known places Python keeps packages; it never
// runs Python (slow, and possibly not the Python the user means anyway).
func (e env) sitePackages() []string {
	var pats []string
	prefix := func(p string) {
		pats = append(pats, p+"/lib/python3*/site-packages", p+"/lib/python3*/dist-packages")
	}
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := e.getenv(v); p != "" {
			prefix(p)
		}
	}
	for _, dir := range filepath.SplitList(e.getenv("PATH")) {
		py := filepath.Join(dir, "python3")
		if !isFile(py) {
			continue
		}
		prefix(filepath.Dir(filepath.Clean(dir)))
		if real, err := filepath.EvalSymlinks(py); err == nil {
			prefix(filepath.Dir(filepath.Dir(real)))
		}
	}
	if home := e.getenv("HOME"); home != "" {
		prefix(home + "/.local")
		prefix(home + "/.pyenv/versions/*")
	}
	for _, p := range []string{"/usr/local", "/usr", "/opt/*", "/opt/*/.venv", "/opt/conda/envs/*"} {
		prefix(e.root + p)
	}
	pats = append(pats, e.root+"/usr/lib64/python3*/site-packages")
	var dirs []string
	for _, pat := range pats {
		m, _ := filepath.Glob(pat)
		dirs = append(dirs, m...)
	}
	return dedup(dirs)
}

// placeErr is "path: error", without repeating the path when the loader's
// message already starts with it (dlerror's usually does).
func placeErr(path string, err error) string {
	if msg := err.Error(); strings.HasPrefix(msg, path+":") {
		return msg
	}
	return fmt.Sprintf("%s: %v", path, err)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func dedup(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		s = filepath.Clean(s)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
