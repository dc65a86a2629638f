package cu

import "unsafe"

// Driver holds one func per CUDA driver entry point that lmstream calls. Each
// returns the raw CUresult (0 is CUDA_SUCCESS). Pointer parameters that the
// driver writes through or reads host memory from are unsafe.Pointer (so the
// pointee stays alive and in place for the call); device pointers and opaque
// handles (CUcontext, CUstream, ...) are uintptr; CUdevice is int32.
//
// The comments give the C symbol bound by Open. A test may build a Driver by
// hand and leave unused fields nil.
type Driver struct {
	// Path is the library Open loaded ("" for a fake).
	Path string

	Init             func(flags uint32) uint32                   // cuInit
	DriverGetVersion func(version unsafe.Pointer) uint32         // cuDriverGetVersion(int*)
	GetErrorName     func(res uint32, str unsafe.Pointer) uint32 // cuGetErrorName(CUresult, const char**)
	GetErrorString   func(res uint32, str unsafe.Pointer) uint32 // cuGetErrorString(CUresult, const char**)

	DeviceGet          func(dev unsafe.Pointer, ordinal int32) uint32             // cuDeviceGet(CUdevice*, int)
	DeviceGetCount     func(count unsafe.Pointer) uint32                          // cuDeviceGetCount(int*)
	DeviceGetName      func(name unsafe.Pointer, n int32, dev int32) uint32       // cuDeviceGetName(char*, int, CUdevice)
	DeviceGetAttribute func(v unsafe.Pointer, attr int32, dev int32) uint32       // cuDeviceGetAttribute(int*, attr, CUdevice)
	DeviceTotalMem     func(bytes unsafe.Pointer, dev int32) uint32               // cuDeviceTotalMem_v2(size_t*, CUdevice)
	PrimaryCtxRetain   func(ctx unsafe.Pointer, dev int32) uint32                 // cuDevicePrimaryCtxRetain(CUcontext*, CUdevice)
	PrimaryCtxRelease  func(dev int32) uint32                                     // cuDevicePrimaryCtxRelease_v2
	CtxSetCurrent      func(ctx uintptr) uint32                                   // cuCtxSetCurrent
	CtxSynchronize     func() uint32                                              // cuCtxSynchronize
	MemGetInfo         func(free, total unsafe.Pointer) uint32                    // cuMemGetInfo_v2(size_t*, size_t*)
	MemAlloc           func(dptr unsafe.Pointer, n uintptr) uint32                // cuMemAlloc_v2(CUdeviceptr*, size_t)
	MemFree            func(dptr uintptr) uint32                                  // cuMemFree_v2
	MemcpyHtoD         func(dst uintptr, src unsafe.Pointer, n uintptr) uint32    // cuMemcpyHtoD_v2
	MemcpyDtoH         func(dst unsafe.Pointer, src uintptr, n uintptr) uint32    // cuMemcpyDtoH_v2
	MemcpyHtoDAsync    func(dst uintptr, src unsafe.Pointer, n, s uintptr) uint32 // cuMemcpyHtoDAsync_v2
	MemcpyDtoHAsync    func(dst unsafe.Pointer, src, n, s uintptr) uint32         // cuMemcpyDtoHAsync_v2
	MemcpyDtoDAsync    func(dst, src, n, s uintptr) uint32                        // cuMemcpyDtoDAsync_v2
	MemsetD8           func(dst uintptr, v uint8, n uintptr) uint32               // cuMemsetD8_v2
	MemsetD8Async      func(dst uintptr, v uint8, n, s uintptr) uint32            // cuMemsetD8Async
	MemHostAlloc       func(p unsafe.Pointer, n uintptr, flags uint32) uint32     // cuMemHostAlloc(void**, size_t, unsigned)
	MemFreeHost        func(p unsafe.Pointer) uint32                              // cuMemFreeHost

	StreamCreate      func(s unsafe.Pointer, flags uint32) uint32        // cuStreamCreate(CUstream*, unsigned)
	StreamDestroy     func(s uintptr) uint32                             // cuStreamDestroy_v2
	StreamSynchronize func(s uintptr) uint32                             // cuStreamSynchronize
	EventCreate       func(e unsafe.Pointer, flags uint32) uint32        // cuEventCreate(CUevent*, unsigned)
	EventRecord       func(e, s uintptr) uint32                          // cuEventRecord
	EventSynchronize  func(e uintptr) uint32                             // cuEventSynchronize
	EventElapsedTime  func(ms unsafe.Pointer, start, end uintptr) uint32 // cuEventElapsedTime_v2, else cuEventElapsedTime (float*)
	EventDestroy      func(e uintptr) uint32                             // cuEventDestroy_v2

	ModuleLoadData    func(m unsafe.Pointer, image unsafe.Pointer) uint32           // cuModuleLoadData(CUmodule*, const void*)
	ModuleUnload      func(m uintptr) uint32                                        // cuModuleUnload
	ModuleGetFunction func(f unsafe.Pointer, m uintptr, name unsafe.Pointer) uint32 // cuModuleGetFunction(CUfunction*, CUmodule, const char*)
	FuncSetAttribute  func(f uintptr, attr int32, v int32) uint32                   // cuFuncSetAttribute
	// FuncGetParamInfo is cuFuncGetParamInfo(f, index, size_t* offset,
	// size_t* size), nil on drivers older than CUDA 12.4 (optional).
	FuncGetParamInfo func(f, index uintptr, off, size unsafe.Pointer) uint32
	// LaunchKernel is cuLaunchKernel(f, grid xyz, block xyz, sharedMemBytes,
	// stream, kernelParams, extra).
	LaunchKernel func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, s uintptr, params, extra unsafe.Pointer) uint32
	// LaunchKernelEx is cuLaunchKernelEx(const CUlaunchConfig*, f,
	// kernelParams, extra), nil where the driver lacks it (optional): the
	// launch that can carry attributes, such as programmatic dependent
	// launch (Context.LaunchDependent).
	LaunchKernelEx func(config unsafe.Pointer, f uintptr, params, extra unsafe.Pointer) uint32

	StreamBeginCapture func(s uintptr, mode uint32) uint32                    // cuStreamBeginCapture_v2
	StreamEndCapture   func(s uintptr, g unsafe.Pointer) uint32               // cuStreamEndCapture(CUstream, CUgraph*)
	GraphInstantiate   func(e unsafe.Pointer, g uintptr, flags uint64) uint32 // cuGraphInstantiateWithFlags
	GraphLaunch        func(e, s uintptr) uint32                              // cuGraphLaunch
	GraphExecDestroy   func(e uintptr) uint32                                 // cuGraphExecDestroy
	GraphDestroy       func(g uintptr) uint32                                 // cuGraphDestroy
}

// Device attributes (CUdevice_attribute) for Context.Attribute.
const (
	AttrMaxThreadsPerBlock           = 1
	AttrMaxSharedMemoryPerBlock      = 8
	AttrWarpSize                     = 10
	AttrMultiprocessorCount          = 16
	AttrL2CacheSize                  = 38
	AttrComputeCapabilityMajor       = 75
	AttrComputeCapabilityMinor       = 76
	AttrMaxSharedMemoryPerBlockOptin = 97
)

// Other driver enum values this package passes.
const (
	funcAttrMaxDynamicSharedBytes = 8 // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

	launchParamEnd           = 0 // CU_LAUNCH_PARAM_END
	launchParamBufferPointer = 1 // CU_LAUNCH_PARAM_BUFFER_POINTER
	launchParamBufferSize    = 2 // CU_LAUNCH_PARAM_BUFFER_SIZE

	captureModeThreadLocal = 1 // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL

	// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION: the kernel may
	// start before the previous kernel in the stream has finished, and
	// waits for it with griddepcontrol.wait (Hopper and newer).
	launchAttrProgrammaticStreamSerialization = 6

	streamDefault = 0 // CU_STREAM_DEFAULT: synchronizes with the legacy stream
	eventDefault  = 0 // CU_EVENT_DEFAULT: timing enabled
)

// Version is cuDriverGetVersion: 1000*major + 10*minor (13000 is CUDA 13.0).
func (d *Driver) Version() (int, error) {
	var v int32
	if err := d.check("cuDriverGetVersion", d.DriverGetVersion(unsafe.Pointer(&v))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceCount is cuDeviceGetCount.
func (d *Driver) DeviceCount() (int, error) {
	var n int32
	if err := d.check("cuDeviceGetCount", d.DeviceGetCount(unsafe.Pointer(&n))); err != nil {
		return 0, err
	}
	return int(n), nil
}
