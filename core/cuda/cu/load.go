package cu

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DefaultPaths is where Open looks when given no paths: the loader's search
// by soname first (LD_LIBRARY_PATH, ld.so.cache), then the places drivers
// are installed without being in the cache (Debian/Ubuntu multiarch, RHEL,
// the NVIDIA container toolkit, WSL).
var DefaultPaths = []string{
	"libcuda.so.1",
	"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
	"/usr/lib64/libcuda.so.1",
	"/usr/local/nvidia/lib64/libcuda.so.1",
	"/usr/lib/wsl/lib/libcuda.so.1",
}

// Hooks over dlopen/dlsym, replaced by tests.
var (
	dlopen = func(path string) (uintptr, error) {
		return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	}
	dlsym = purego.Dlsym
)

// Open loads the driver library from the first of paths (DefaultPaths when
// empty) that dlopen accepts, binds every entry point and calls cuInit(0).
// It returns the driver and the path that worked. A library that loads but
// fails (missing symbols, or cuInit failing, as the toolkit's stub
// libcuda.so does with CUDA_ERROR_STUB_LIBRARY) does not end the search:
// a real driver may come later in the list. On failure the error lists every
// path tried with the loader's or the driver's message for each, and wraps
// the last driver *Error (so IsCode(err, ErrNoDevice) works).
func Open(paths []string) (*Driver, string, error) {
	if len(paths) == 0 {
		paths = DefaultPaths
	}
	var (
		tried   []string
		loaded  bool
		lastErr error
	)
	for _, p := range paths {
		h, err := dlopen(p)
		if err != nil {
			tried = append(tried, placeErr(p, err))
			continue
		}
		loaded = true
		d, err := bind(h)
		if err == nil {
			d.Path = p
			err = d.check("cuInit", d.Init(0))
			if err == nil {
				return d, p, nil
			}
			lastErr = err
		}
		tried = append(tried, fmt.Sprintf("%s: loaded, but %v", p, err))
	}
	what := "libcuda.so.1 not found"
	if loaded {
		what = "no usable libcuda.so.1"
	}
	return nil, "", &openError{fmt.Sprintf("cuda: %s (tried: %s)", what, strings.Join(tried, "; ")), lastErr}
}

// openError is Open's failure: its text already quotes the driver's error,
// which it wraps for errors.As.
type openError struct {
	msg  string
	last error
}

func (e *openError) Error() string { return e.msg }
func (e *openError) Unwrap() error { return e.last }

// placeErr is "path: error", without repeating the path when the loader's
// message already starts with it (dlerror's usually does).
func placeErr(path string, err error) string {
	if msg := err.Error(); strings.HasPrefix(msg, path+":") {
		return msg
	}
	return fmt.Sprintf("%s: %v", path, err)
}

// ret keeps the CUresult (a 32-bit enum; the upper half of the register is
// undefined) from SyscallN's results.
func ret(r1, _, _ uintptr) uint32 { return uint32(r1) }

// bind resolves every symbol with dlsym and wraps each in a SyscallN call
// (no reflection, unlike purego.RegisterFunc: launches and graph launches are
// hot). All missing symbols are reported together.
//
// Each wrapper converts its unsafe.Pointer arguments to uintptr inside the
// SyscallN call expression itself: SyscallN is go:uintptrescapes, which keeps
// the pointees alive and unmoved for the call only in that form.
func bind(h uintptr) (*Driver, error) {
	d := &Driver{}
	var missing []string
	sym := func(names ...string) uintptr {
		for _, n := range names {
			if p, err := dlsym(h, n); err == nil && p != 0 {
				return p
			}
		}
		missing = append(missing, names[0])
		return 0
	}
	// opt resolves an entry point newer drivers have; 0 when absent.
	opt := func(name string) uintptr {
		p, _ := dlsym(h, name)
		return p
	}
	var (
		pInit             = sym("cuInit")
		pDriverGetVersion = sym("cuDriverGetVersion")
		pGetErrorName     = sym("cuGetErrorName")
		pGetErrorString   = sym("cuGetErrorString")
		pDeviceGet        = sym("cuDeviceGet")
		pDeviceGetCount   = sym("cuDeviceGetCount")
		pDeviceGetName    = sym("cuDeviceGetName")
		pDeviceGetAttr    = sym("cuDeviceGetAttribute")
		pDeviceTotalMem   = sym("cuDeviceTotalMem_v2")
		pPrimaryRetain    = sym("cuDevicePrimaryCtxRetain")
		pPrimaryRelease   = sym("cuDevicePrimaryCtxRelease_v2")
		pCtxSetCurrent    = sym("cuCtxSetCurrent")
		pCtxSynchronize   = sym("cuCtxSynchronize")
		pMemGetInfo       = sym("cuMemGetInfo_v2")
		pMemAlloc         = sym("cuMemAlloc_v2")
		pMemFree          = sym("cuMemFree_v2")
		pHtoD             = sym("cuMemcpyHtoD_v2")
		pDtoH             = sym("cuMemcpyDtoH_v2")
		pHtoDAsync        = sym("cuMemcpyHtoDAsync_v2")
		pDtoHAsync        = sym("cuMemcpyDtoHAsync_v2")
		pDtoDAsync        = sym("cuMemcpyDtoDAsync_v2")
		pMemsetD8         = sym("cuMemsetD8_v2")
		pMemsetD8Async    = sym("cuMemsetD8Async")
		pMemHostAlloc     = sym("cuMemHostAlloc")
		pMemFreeHost      = sym("cuMemFreeHost")
		pStreamCreate     = sym("cuStreamCreate")
		pStreamDestroy    = sym("cuStreamDestroy_v2")
		pStreamSync       = sym("cuStreamSynchronize")
		pEventCreate      = sym("cuEventCreate")
		pEventRecord      = sym("cuEventRecord")
		pEventSync        = sym("cuEventSynchronize")
		// CUDA 12.8 added _v2 and CUDA 13 headers map the plain name to it;
		// older drivers have only the original.
		pEventElapsed  = sym("cuEventElapsedTime_v2", "cuEventElapsedTime")
		pEventDestroy  = sym("cuEventDestroy_v2")
		pModuleLoad    = sym("cuModuleLoadData")
		pModuleUnload  = sym("cuModuleUnload")
		pModuleGetFunc = sym("cuModuleGetFunction")
		pFuncSetAttr   = sym("cuFuncSetAttribute")
		pFuncParamInfo = opt("cuFuncGetParamInfo") // CUDA 12.4+
		pLaunch        = sym("cuLaunchKernel")
		pLaunchEx      = opt("cuLaunchKernelEx") // CUDA 12.0+
		pBeginCapture  = sym("cuStreamBeginCapture_v2")
		pEndCapture    = sym("cuStreamEndCapture")
		pGraphInst     = sym("cuGraphInstantiateWithFlags")
		pGraphLaunch   = sym("cuGraphLaunch")
		pGraphExecDel  = sym("cuGraphExecDestroy")
		pGraphDel      = sym("cuGraphDestroy")
	)
	if len(missing) > 0 {
		return nil, fmt.Errorf("driver lacks %s (a CUDA 12 or newer driver is needed)", strings.Join(missing, ", "))
	}
	call := purego.SyscallN

	d.Init = func(flags uint32) uint32 { return ret(call(pInit, uintptr(flags))) }
	d.DriverGetVersion = func(v unsafe.Pointer) uint32 { return ret(call(pDriverGetVersion, uintptr(v))) }
	d.GetErrorName = func(r uint32, s unsafe.Pointer) uint32 { return ret(call(pGetErrorName, uintptr(r), uintptr(s))) }
	d.GetErrorString = func(r uint32, s unsafe.Pointer) uint32 { return ret(call(pGetErrorString, uintptr(r), uintptr(s))) }

	d.DeviceGet = func(dev unsafe.Pointer, ord int32) uint32 { return ret(call(pDeviceGet, uintptr(dev), uintptr(ord))) }
	d.DeviceGetCount = func(n unsafe.Pointer) uint32 { return ret(call(pDeviceGetCount, uintptr(n))) }
	d.DeviceGetName = func(name unsafe.Pointer, n, dev int32) uint32 {
		return ret(call(pDeviceGetName, uintptr(name), uintptr(n), uintptr(dev)))
	}
	d.DeviceGetAttribute = func(v unsafe.Pointer, attr, dev int32) uint32 {
		return ret(call(pDeviceGetAttr, uintptr(v), uintptr(attr), uintptr(dev)))
	}
	d.DeviceTotalMem = func(b unsafe.Pointer, dev int32) uint32 { return ret(call(pDeviceTotalMem, uintptr(b), uintptr(dev))) }
	d.PrimaryCtxRetain = func(c unsafe.Pointer, dev int32) uint32 { return ret(call(pPrimaryRetain, uintptr(c), uintptr(dev))) }
	d.PrimaryCtxRelease = func(dev int32) uint32 { return ret(call(pPrimaryRelease, uintptr(dev))) }
	d.CtxSetCurrent = func(c uintptr) uint32 { return ret(call(pCtxSetCurrent, c)) }
	d.CtxSynchronize = func() uint32 { return ret(call(pCtxSynchronize)) }
	d.MemGetInfo = func(free, total unsafe.Pointer) uint32 { return ret(call(pMemGetInfo, uintptr(free), uintptr(total))) }

	d.MemAlloc = func(p unsafe.Pointer, n uintptr) uint32 { return ret(call(pMemAlloc, uintptr(p), n)) }
	d.MemFree = func(p uintptr) uint32 { return ret(call(pMemFree, p)) }
	d.MemcpyHtoD = func(dst uintptr, src unsafe.Pointer, n uintptr) uint32 { return ret(call(pHtoD, dst, uintptr(src), n)) }
	d.MemcpyDtoH = func(dst unsafe.Pointer, src, n uintptr) uint32 { return ret(call(pDtoH, uintptr(dst), src, n)) }
	d.MemcpyHtoDAsync = func(dst uintptr, src unsafe.Pointer, n, s uintptr) uint32 {
		return ret(call(pHtoDAsync, dst, uintptr(src), n, s))
	}
	d.MemcpyDtoHAsync = func(dst unsafe.Pointer, src, n, s uintptr) uint32 {
		return ret(call(pDtoHAsync, uintptr(dst), src, n, s))
	}
	d.MemcpyDtoDAsync = func(dst, src, n, s uintptr) uint32 { return ret(call(pDtoDAsync, dst, src, n, s)) }
	d.MemsetD8 = func(dst uintptr, v uint8, n uintptr) uint32 { return ret(call(pMemsetD8, dst, uintptr(v), n)) }
	d.MemsetD8Async = func(dst uintptr, v uint8, n, s uintptr) uint32 {
		return ret(call(pMemsetD8Async, dst, uintptr(v), n, s))
	}
	d.MemHostAlloc = func(p unsafe.Pointer, n uintptr, flags uint32) uint32 {
		return ret(call(pMemHostAlloc, uintptr(p), n, uintptr(flags)))
	}
	d.MemFreeHost = func(p unsafe.Pointer) uint32 { return ret(call(pMemFreeHost, uintptr(p))) }

	d.StreamCreate = func(s unsafe.Pointer, flags uint32) uint32 {
		return ret(call(pStreamCreate, uintptr(s), uintptr(flags)))
	}
	d.StreamDestroy = func(s uintptr) uint32 { return ret(call(pStreamDestroy, s)) }
	d.StreamSynchronize = func(s uintptr) uint32 { return ret(call(pStreamSync, s)) }
	d.EventCreate = func(e unsafe.Pointer, flags uint32) uint32 {
		return ret(call(pEventCreate, uintptr(e), uintptr(flags)))
	}
	d.EventRecord = func(e, s uintptr) uint32 { return ret(call(pEventRecord, e, s)) }
	d.EventSynchronize = func(e uintptr) uint32 { return ret(call(pEventSync, e)) }
	d.EventElapsedTime = func(ms unsafe.Pointer, a, b uintptr) uint32 { return ret(call(pEventElapsed, uintptr(ms), a, b)) }
	d.EventDestroy = func(e uintptr) uint32 { return ret(call(pEventDestroy, e)) }

	d.ModuleLoadData = func(m, image unsafe.Pointer) uint32 { return ret(call(pModuleLoad, uintptr(m), uintptr(image))) }
	d.ModuleUnload = func(m uintptr) uint32 { return ret(call(pModuleUnload, m)) }
	d.ModuleGetFunction = func(f unsafe.Pointer, m uintptr, name unsafe.Pointer) uint32 {
		return ret(call(pModuleGetFunc, uintptr(f), m, uintptr(name)))
	}
	d.FuncSetAttribute = func(f uintptr, attr, v int32) uint32 {
		return ret(call(pFuncSetAttr, f, uintptr(attr), uintptr(v)))
	}
	if pFuncParamInfo != 0 {
		d.FuncGetParamInfo = func(f, i uintptr, off, size unsafe.Pointer) uint32 {
			return ret(call(pFuncParamInfo, f, i, uintptr(off), uintptr(size)))
		}
	}
	d.LaunchKernel = func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params, extra unsafe.Pointer) uint32 {
		return ret(call(pLaunch, f, uintptr(gx), uintptr(gy), uintptr(gz), uintptr(bx), uintptr(by), uintptr(bz),
			uintptr(shared), s, uintptr(params), uintptr(extra)))
	}

	if pLaunchEx != 0 {
		d.LaunchKernelEx = func(config unsafe.Pointer, f uintptr, params, extra unsafe.Pointer) uint32 {
			return ret(call(pLaunchEx, uintptr(config), f, uintptr(params), uintptr(extra)))
		}
	}

	d.StreamBeginCapture = func(s uintptr, mode uint32) uint32 { return ret(call(pBeginCapture, s, uintptr(mode))) }
	d.StreamEndCapture = func(s uintptr, g unsafe.Pointer) uint32 { return ret(call(pEndCapture, s, uintptr(g))) }
	d.GraphInstantiate = func(e unsafe.Pointer, g uintptr, flags uint64) uint32 {
		return ret(call(pGraphInst, uintptr(e), g, uintptr(flags)))
	}
	d.GraphLaunch = func(e, s uintptr) uint32 { return ret(call(pGraphLaunch, e, s)) }
	d.GraphExecDestroy = func(e uintptr) uint32 { return ret(call(pGraphExecDel, e)) }
	d.GraphDestroy = func(g uintptr) uint32 { return ret(call(pGraphDel, g)) }
	return d, nil
}
