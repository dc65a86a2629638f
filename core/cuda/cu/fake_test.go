package cu

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/lmstream/lmstream/core/cuda/internal/cmem"
)

// fakeGPU is a Driver made of Go funcs: device memory is Go byte slices
// behind made-up addresses, launches are recorded, and any call can be made
// to fail by C name. It lets every layer above Driver run without a GPU.
type fakeGPU struct {
	mu       sync.Mutex
	allocs   map[uintptr][]byte
	next     uintptr
	fail     map[string]uint32 // C name -> CUresult to return
	calls    []string
	launches []fakeLaunch
	current  uintptr
	retained int
	hostBufs map[unsafe.Pointer]*cmem.Block
	captures []uint32
	kParams  [][2]uintptr // cuFuncGetParamInfo's {offset, size} per parameter of every kernel
}

type fakeLaunch struct {
	f           uintptr
	grid, block [3]uint32
	shared      uint32
	stream      uintptr
	paramsNil   bool
	extraNil    bool
	extraWords  [5]uintptr
	blob        []byte
	blobAligned bool
	dependent   bool // through cuLaunchKernelEx with programmatic stream serialization
}

// Static C-style strings for cuGetErrorName/String, as the driver keeps them.
var fakeErrText = map[uint32][2][]byte{
	2:   {[]byte("CUDA_ERROR_OUT_OF_MEMORY\x00"), []byte("out of memory\x00")},
	100: {[]byte("CUDA_ERROR_NO_DEVICE\x00"), []byte("no CUDA-capable device is detected\x00")},
	900: {[]byte("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED\x00"), []byte("operation not permitted when stream is capturing\x00")},
}

const fakeCtx = 0xC0
const fakeName = "Fake GPU 9000"

func newFake() (*fakeGPU, *Driver) {
	g := &fakeGPU{allocs: map[uintptr][]byte{}, next: 0x7f0000000000, fail: map[string]uint32{}, hostBufs: map[unsafe.Pointer]*cmem.Block{}}
	d := &Driver{}
	// r records the call and returns the injected failure, if any.
	r := func(name string) uint32 {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.calls = append(g.calls, name)
		return g.fail[name]
	}
	errText := func(i int) func(uint32, unsafe.Pointer) uint32 {
		return func(res uint32, p unsafe.Pointer) uint32 {
			t, ok := fakeErrText[res]
			if !ok {
				*(*unsafe.Pointer)(p) = nil
				return 1 // CUDA_ERROR_INVALID_VALUE, as the driver answers unknown codes
			}
			*(*unsafe.Pointer)(p) = unsafe.Pointer(&t[i][0])
			return 0
		}
	}
	d.GetErrorName, d.GetErrorString = errText(0), errText(1)
	d.Init = func(uint32) uint32 { return r("cuInit") }
	d.DriverGetVersion = func(v unsafe.Pointer) uint32 { *(*int32)(v) = 13000; return r("cuDriverGetVersion") }
	d.DeviceGetCount = func(n unsafe.Pointer) uint32 { *(*int32)(n) = 1; return r("cuDeviceGetCount") }
	d.DeviceGet = func(dev unsafe.Pointer, ord int32) uint32 { *(*int32)(dev) = ord; return r("cuDeviceGet") }
	d.DeviceGetName = func(name unsafe.Pointer, n, dev int32) uint32 {
		b := unsafe.Slice((*byte)(name), n)
		copy(b, fakeName+"\x00")
		return r("cuDeviceGetName")
	}
	d.DeviceGetAttribute = func(v unsafe.Pointer, attr, dev int32) uint32 {
		vals := map[int32]int32{AttrComputeCapabilityMajor: 9, AttrComputeCapabilityMinor: 0, AttrMultiprocessorCount: 132,
			AttrL2CacheSize: 50 << 20, AttrMaxSharedMemoryPerBlockOptin: 227 << 10}
		*(*int32)(v) = vals[attr]
		return r("cuDeviceGetAttribute")
	}
	d.DeviceTotalMem = func(b unsafe.Pointer, dev int32) uint32 { *(*uintptr)(b) = 80 << 30; return r("cuDeviceTotalMem_v2") }
	d.PrimaryCtxRetain = func(c unsafe.Pointer, dev int32) uint32 {
		*(*uintptr)(c) = fakeCtx
		g.retained++
		return r("cuDevicePrimaryCtxRetain")
	}
	d.PrimaryCtxRelease = func(dev int32) uint32 { g.retained--; return r("cuDevicePrimaryCtxRelease_v2") }
	d.CtxSetCurrent = func(c uintptr) uint32 { g.current = c; return r("cuCtxSetCurrent") }
	d.CtxSynchronize = func() uint32 { return r("cuCtxSynchronize") }
	d.MemGetInfo = func(f, t unsafe.Pointer) uint32 {
		*(*uintptr)(f), *(*uintptr)(t) = 70<<30, 80<<30
		return r("cuMemGetInfo_v2")
	}
	d.MemAlloc = func(p unsafe.Pointer, n uintptr) uint32 {
		if res := r("cuMemAlloc_v2"); res != 0 {
			return res
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.allocs[g.next] = make([]byte, n)
		*(*uintptr)(p) = g.next
		g.next += (n + 255) &^ 255
		return 0
	}
	d.MemFree = func(p uintptr) uint32 {
		if _, ok := g.allocs[p]; !ok {
			return 1
		}
		delete(g.allocs, p)
		return r("cuMemFree_v2")
	}
	d.MemcpyHtoD = func(dst uintptr, src unsafe.Pointer, n uintptr) uint32 {
		copy(g.dev(dst, n), unsafe.Slice((*byte)(src), n))
		return r("cuMemcpyHtoD_v2")
	}
	d.MemcpyDtoH = func(dst unsafe.Pointer, src, n uintptr) uint32 {
		copy(unsafe.Slice((*byte)(dst), n), g.dev(src, n))
		return r("cuMemcpyDtoH_v2")
	}
	d.MemcpyHtoDAsync = func(dst uintptr, src unsafe.Pointer, n, s uintptr) uint32 {
		copy(g.dev(dst, n), unsafe.Slice((*byte)(src), n))
		return r("cuMemcpyHtoDAsync_v2")
	}
	d.MemcpyDtoHAsync = func(dst unsafe.Pointer, src, n, s uintptr) uint32 {
		copy(unsafe.Slice((*byte)(dst), n), g.dev(src, n))
		return r("cuMemcpyDtoHAsync_v2")
	}
	d.MemcpyDtoDAsync = func(dst, src, n, s uintptr) uint32 {
		copy(g.dev(dst, n), g.dev(src, n))
		return r("cuMemcpyDtoDAsync_v2")
	}
	d.MemsetD8 = func(dst uintptr, v uint8, n uintptr) uint32 {
		for i := range g.dev(dst, n) {
			g.dev(dst, n)[i] = v
		}
		return r("cuMemsetD8_v2")
	}
	d.MemsetD8Async = func(dst uintptr, v uint8, n, s uintptr) uint32 {
		for i := range g.dev(dst, n) {
			g.dev(dst, n)[i] = v
		}
		return r("cuMemsetD8Async")
	}
	d.MemHostAlloc = func(p unsafe.Pointer, n uintptr, flags uint32) uint32 {
		b, err := cmem.New(int(n))
		if err != nil {
			return 2
		}
		g.hostBufs[b.Ptr(0)] = b
		*(*unsafe.Pointer)(p) = b.Ptr(0)
		return r("cuMemHostAlloc")
	}
	d.MemFreeHost = func(p unsafe.Pointer) uint32 {
		b, ok := g.hostBufs[p]
		if !ok {
			return 1
		}
		delete(g.hostBufs, p)
		b.Free()
		return r("cuMemFreeHost")
	}
	handle := uintptr(0x1000)
	newHandle := func(p unsafe.Pointer, name string) uint32 {
		handle++
		*(*uintptr)(p) = handle
		return r(name)
	}
	d.StreamCreate = func(s unsafe.Pointer, flags uint32) uint32 { return newHandle(s, "cuStreamCreate") }
	d.StreamDestroy = func(uintptr) uint32 { return r("cuStreamDestroy_v2") }
	d.StreamSynchronize = func(uintptr) uint32 { return r("cuStreamSynchronize") }
	d.EventCreate = func(e unsafe.Pointer, flags uint32) uint32 { return newHandle(e, "cuEventCreate") }
	d.EventRecord = func(e, s uintptr) uint32 { return r("cuEventRecord") }
	d.EventSynchronize = func(uintptr) uint32 { return r("cuEventSynchronize") }
	d.EventElapsedTime = func(ms unsafe.Pointer, a, b uintptr) uint32 { *(*float32)(ms) = 1.5; return r("cuEventElapsedTime") }
	d.EventDestroy = func(uintptr) uint32 { return r("cuEventDestroy_v2") }
	d.ModuleLoadData = func(m, image unsafe.Pointer) uint32 {
		if string(unsafe.Slice((*byte)(image), 4)) != "\x7fELF" {
			return 200 // CUDA_ERROR_INVALID_IMAGE
		}
		return newHandle(m, "cuModuleLoadData")
	}
	d.ModuleUnload = func(uintptr) uint32 { return r("cuModuleUnload") }
	d.ModuleGetFunction = func(f unsafe.Pointer, m uintptr, name unsafe.Pointer) uint32 {
		if cString(name) != "k" {
			return 500 // CUDA_ERROR_NOT_FOUND
		}
		return newHandle(f, "cuModuleGetFunction")
	}
	d.FuncSetAttribute = func(f uintptr, attr, v int32) uint32 { return r(fmt.Sprintf("cuFuncSetAttribute(%d,%d)", attr, v)) }
	d.FuncGetParamInfo = func(f, i uintptr, off, size unsafe.Pointer) uint32 {
		if int(i) >= len(g.kParams) {
			return 1
		}
		*(*uintptr)(off), *(*uintptr)(size) = g.kParams[i][0], g.kParams[i][1]
		return 0
	}
	d.LaunchKernel = func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params, extra unsafe.Pointer) uint32 {
		l := fakeLaunch{f: f, grid: [3]uint32{gx, gy, gz}, block: [3]uint32{bx, by, bz}, shared: shared, stream: s,
			paramsNil: params == nil, extraNil: extra == nil}
		if extra != nil {
			// Read extra as the driver does: {1, &blob, 2, &size, 0}.
			l.extraWords = *(*[5]uintptr)(extra)
			blob := *(*unsafe.Pointer)(unsafe.Add(extra, 8))
			size := *(*uintptr)(*(*unsafe.Pointer)(unsafe.Add(extra, 24)))
			l.blob = append([]byte(nil), unsafe.Slice((*byte)(blob), size)...)
			l.blobAligned = uintptr(blob)%8 == 0
		}
		res := r("cuLaunchKernel")
		g.mu.Lock()
		g.launches = append(g.launches, l)
		g.mu.Unlock()
		return res
	}
	d.LaunchKernelEx = func(config unsafe.Pointer, f uintptr, params, extra unsafe.Pointer) uint32 {
		// Read the CUlaunchConfig and its attributes as the driver does.
		cfg := unsafe.Slice((*byte)(config), 56)
		le := binary.LittleEndian
		var grid, block [3]uint32
		for i := range 3 {
			grid[i], block[i] = le.Uint32(cfg[4*i:]), le.Uint32(cfg[12+4*i:])
		}
		attrs, n := *(*unsafe.Pointer)(unsafe.Add(config, 40)), le.Uint32(cfg[48:])
		dependent := false
		for i := range int(n) {
			a := unsafe.Slice((*byte)(unsafe.Add(attrs, 72*i)), 72)
			if le.Uint32(a) == 6 && le.Uint32(a[8:]) == 1 {
				dependent = true
			}
		}
		res := d.LaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], le.Uint32(cfg[24:]),
			uintptr(le.Uint64(cfg[32:])), params, extra)
		g.mu.Lock()
		g.launches[len(g.launches)-1].dependent = dependent
		g.mu.Unlock()
		return res
	}
	d.StreamBeginCapture = func(s uintptr, mode uint32) uint32 {
		g.captures = append(g.captures, mode)
		return r("cuStreamBeginCapture_v2")
	}
	d.StreamEndCapture = func(s uintptr, gr unsafe.Pointer) uint32 { return newHandle(gr, "cuStreamEndCapture") }
	d.GraphInstantiate = func(e unsafe.Pointer, gr uintptr, flags uint64) uint32 {
		return newHandle(e, "cuGraphInstantiateWithFlags")
	}
	d.GraphLaunch = func(e, s uintptr) uint32 { return r("cuGraphLaunch") }
	d.GraphExecDestroy = func(uintptr) uint32 { return r("cuGraphExecDestroy") }
	d.GraphDestroy = func(uintptr) uint32 { return r("cuGraphDestroy") }
	return g, d
}

// dev is the fake device memory [p, p+n), which must lie in one allocation.
func (g *fakeGPU) dev(p, n uintptr) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	for base, b := range g.allocs {
		if p >= base && p+n <= base+uintptr(len(b)) {
			return b[p-base : p-base+n]
		}
	}
	panic(fmt.Sprintf("fake: [%#x, +%d) is not device memory", p, n))
}

func (g *fakeGPU) called(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.calls {
		if c == name {
			n++
		}
	}
	return n
}
