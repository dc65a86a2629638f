package nvrtc

import (
	"strings"
	"sync"
	"unsafe"
)

// fakeAPI compiles by recording what it was given, as NVRTC would read it
// through the C pointers, and "emits" an ELF-looking cubin that encodes its
// inputs. A source containing "#error" fails with a log.
type fakeAPI struct {
	mu       sync.Mutex
	compiles int
	srcs     []string
	names    []string
	opts     [][]string
}

func cstr(p unsafe.Pointer) string {
	var b []byte
	for i := 0; ; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			return string(b)
		}
		b = append(b, c)
	}
}

type fakeProg struct {
	src, name string
	opts      []string
	log       string
	cubin     []byte
}

func (f *fakeAPI) api() *API {
	progs := map[uintptr]*fakeProg{}
	next := uintptr(1)
	return &API{
		Version: func(a, b unsafe.Pointer) int32 { *(*int32)(a), *(*int32)(b) = 13, 0; return 0 },
		CreateProgram: func(prog, src, name unsafe.Pointer, n int32, h, hn unsafe.Pointer) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			progs[next] = &fakeProg{src: cstr(src), name: cstr(name)}
			*(*uintptr)(prog) = next
			next++
			return 0
		},
		DestroyProgram: func(prog unsafe.Pointer) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(progs, *(*uintptr)(prog))
			return 0
		},
		CompileProgram: func(prog uintptr, n int32, opts unsafe.Pointer) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			p := progs[prog]
			for i := 0; i < int(n); i++ {
				p.opts = append(p.opts, cstr(*(*unsafe.Pointer)(unsafe.Add(opts, 8*i))))
			}
			f.compiles++
			f.srcs = append(f.srcs, p.src)
			f.names = append(f.names, p.name)
			f.opts = append(f.opts, p.opts)
			if strings.Contains(p.src, "#error") {
				p.log = p.name + "(1): error: boom\n"
				return 6
			}
			p.cubin = []byte("\x7fELF|" + p.src + "|" + strings.Join(p.opts, " "))
			if strings.Contains(strings.Join(p.opts, " "), "compute_") {
				p.cubin = nil
			}
			return 0
		},
		GetProgramLogSize: func(prog uintptr, n unsafe.Pointer) int32 {
			*(*uintptr)(n) = uintptr(len(progs[prog].log) + 1)
			return 0
		},
		GetProgramLog: func(prog uintptr, log unsafe.Pointer) int32 {
			copy(unsafe.Slice((*byte)(log), len(progs[prog].log)+1), progs[prog].log+"\x00")
			return 0
		},
		GetCUBINSize: func(prog uintptr, n unsafe.Pointer) int32 { *(*uintptr)(n) = uintptr(len(progs[prog].cubin)); return 0 },
		GetCUBIN: func(prog uintptr, out unsafe.Pointer) int32 {
			copy(unsafe.Slice((*byte)(out), len(progs[prog].cubin)), progs[prog].cubin)
			return 0
		},
	}
}
