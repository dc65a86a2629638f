// Package nvrtc compiles CUDA C kernels to cubins at run time with NVIDIA's
// NVRTC library, opened through purego (liblmstream.so links no CUDA
// library), and caches the cubins on disk.
//
// Kernels are compiled for the device's exact architecture (sm_XY, a cubin),
// not to PTX: PTX from a toolkit newer than the driver fails to load, while
// a cubin only needs the driver to know the architecture. Sources must not
// include CUDA headers: the PyPI wheels of NVRTC ship none.
//
// Where the library is looked for, in order, is in search.go; Open reports
// which one it used and, on failure, everything it tried.
package nvrtc

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// API holds the NVRTC entry points used, as plain funcs returning the raw
// nvrtcResult (0 is NVRTC_SUCCESS), so tests can fake them. nvrtcProgram
// handles are uintptr; everything NVRTC reads or writes is unsafe.Pointer.
type API struct {
	Version           func(major, minor unsafe.Pointer) int32                                                   // nvrtcVersion(int*, int*)
	CreateProgram     func(prog, src, name unsafe.Pointer, nHeaders int32, headers, names unsafe.Pointer) int32 // nvrtcCreateProgram
	DestroyProgram    func(prog unsafe.Pointer) int32                                                           // nvrtcDestroyProgram(nvrtcProgram*)
	CompileProgram    func(prog uintptr, nOpts int32, opts unsafe.Pointer) int32                                // nvrtcCompileProgram(prog, int, const char* const*)
	GetProgramLogSize func(prog uintptr, n unsafe.Pointer) int32                                                // nvrtcGetProgramLogSize(prog, size_t*)
	GetProgramLog     func(prog uintptr, log unsafe.Pointer) int32                                              // nvrtcGetProgramLog(prog, char*)
	GetCUBINSize      func(prog uintptr, n unsafe.Pointer) int32                                                // nvrtcGetCUBINSize(prog, size_t*)
	GetCUBIN          func(prog uintptr, cubin unsafe.Pointer) int32                                            // nvrtcGetCUBIN(prog, char*)
}

// resultNames are nvrtcResult's names (nvrtc.h, CUDA 13), kept here rather
// than read from nvrtcGetErrorString's static C string.
var resultNames = []string{
	"NVRTC_SUCCESS", "NVRTC_ERROR_OUT_OF_MEMORY", "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	"NVRTC_ERROR_INVALID_INPUT", "NVRTC_ERROR_INVALID_PROGRAM", "NVRTC_ERROR_INVALID_OPTION",
	"NVRTC_ERROR_COMPILATION", "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	"NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION", "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	"NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID", "NVRTC_ERROR_INTERNAL_ERROR", "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
	"NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED", "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED", "NVRTC_ERROR_PCH_CREATE",
	"NVRTC_ERROR_CANCELLED", "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED", "NVRTC_ERROR_BUSY",
}

const errBuiltinOperation = 7

// Error is a failed NVRTC call.
type Error struct {
	Code int32  // nvrtcResult
	Call string // "nvrtcCompileProgram"
	Log  string // the compile log, for compile errors
}

// Name is the nvrtcResult's name.
func (e *Error) Name() string {
	if e.Code >= 0 && int(e.Code) < len(resultNames) {
		return resultNames[e.Code]
	}
	return fmt.Sprintf("nvrtcResult(%d)", e.Code)
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nvrtc: %s: %s", e.Call, e.Name())
	if e.Code == errBuiltinOperation {
		// NVRTC dlopens libnvrtc-builtins.so.<major>.<minor> at compile
		// time, through its RPATH ($ORIGIN) or the loader path.
		s += " (libnvrtc-builtins.so.* must be beside libnvrtc or on the loader path)"
	}
	if e.Log != "" {
		s += "\n" + strings.TrimRight(e.Log, "\n")
	}
	return s
}

func check(call string, res int32) error {
	if res == 0 {
		return nil
	}
	return &Error{Code: res, Call: call}
}

func ret(r1, _, _ uintptr) int32 { return int32(uint32(r1)) }

// bind resolves the entry points in an opened libnvrtc (cold paths, but
// SyscallN keeps the binding uniform and reflection-free).
func bind(h uintptr, sym func(uintptr, string) (uintptr, error)) (*API, error) {
	var missing []string
	get := func(name string) uintptr {
		p, err := sym(h, name)
		if err != nil || p == 0 {
			missing = append(missing, name)
		}
		return p
	}
	var (
		pVersion = get("nvrtcVersion")
		pCreate  = get("nvrtcCreateProgram")
		pDestroy = get("nvrtcDestroyProgram")
		pCompile = get("nvrtcCompileProgram")
		pLogSize = get("nvrtcGetProgramLogSize")
		pLog     = get("nvrtcGetProgramLog")
		pCubinSz = get("nvrtcGetCUBINSize")
		pCubin   = get("nvrtcGetCUBIN")
	)
	if len(missing) > 0 {
		// nvrtcGetCUBIN appeared in CUDA 11.1.
		return nil, fmt.Errorf("library lacks %s (NVRTC 11.1 or newer is needed)", strings.Join(missing, ", "))
	}
	call := purego.SyscallN
	return &API{
		Version: func(a, b unsafe.Pointer) int32 { return ret(call(pVersion, uintptr(a), uintptr(b))) },
		CreateProgram: func(prog, src, name unsafe.Pointer, n int32, hdrs, names unsafe.Pointer) int32 {
			return ret(call(pCreate, uintptr(prog), uintptr(src), uintptr(name), uintptr(n), uintptr(hdrs), uintptr(names)))
		},
		DestroyProgram: func(prog unsafe.Pointer) int32 { return ret(call(pDestroy, uintptr(prog))) },
		CompileProgram: func(prog uintptr, n int32, opts unsafe.Pointer) int32 {
			return ret(call(pCompile, prog, uintptr(n), uintptr(opts)))
		},
		GetProgramLogSize: func(prog uintptr, n unsafe.Pointer) int32 { return ret(call(pLogSize, prog, uintptr(n))) },
		GetProgramLog:     func(prog uintptr, log unsafe.Pointer) int32 { return ret(call(pLog, prog, uintptr(log))) },
		GetCUBINSize:      func(prog uintptr, n unsafe.Pointer) int32 { return ret(call(pCubinSz, prog, uintptr(n))) },
		GetCUBIN:          func(prog uintptr, out unsafe.Pointer) int32 { return ret(call(pCubin, prog, uintptr(out))) },
	}, nil
}
