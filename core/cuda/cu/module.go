package cu

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/lmstream/lmstream/core/cuda/internal/cmem"
)

// Module is a loaded cubin (CUmodule).
type Module struct {
	c *Context
	h uintptr
}

// Function is a kernel in a Module (CUfunction).
type Function struct {
	m    *Module
	h    uintptr
	name string
	// argBytes is the size of the kernel's parameter block, from
	// cuFuncGetParamInfo; -1 when the driver cannot tell (before 12.4).
	argBytes int
}

// LoadModule loads a cubin (or PTX/fatbin, which the driver also accepts)
// with cuModuleLoadData. The image is copied to page-aligned memory outside
// the Go heap first: the driver parses it in place, and an ELF image wants
// better alignment than a Go byte slice promises.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: LoadModule: empty image")
	}
	buf, err := cmem.New(len(image) + 1) // +1: a NUL, should the driver read PTX text
	if err != nil {
		return nil, err
	}
	defer buf.Free()
	copy(buf.Bytes(), image)
	m := &Module{c: c}
	if err := c.d.check("cuModuleLoadData", c.d.ModuleLoadData(unsafe.Pointer(&m.h), buf.Ptr(0))); err != nil {
		return nil, err
	}
	return m, nil
}

// Function looks up the kernel called name (its extern "C" name).
func (m *Module) Function(name string) (*Function, error) {
	cname := append([]byte(name), 0)
	f := &Function{m: m, name: name, argBytes: -1}
	if err := m.c.d.check("cuModuleGetFunction", m.c.d.ModuleGetFunction(unsafe.Pointer(&f.h), m.h, unsafe.Pointer(&cname[0]))); err != nil {
		return nil, fmt.Errorf("kernel %q: %w", name, err)
	}
	f.argBytes = paramBytes(m.c.d, f.h)
	return f, nil
}

// paramBytes is the end of a kernel's last parameter (sizeof(Args) for the
// one-struct kernels; 0 for none), or -1 when the driver cannot say. The
// driver does not check the size of the block passed through extra: a short
// one makes the kernel read past it, typically an illegal-address fault that
// poisons the whole context, so Launch checks it here instead.
func paramBytes(d *Driver, f uintptr) int {
	if d.FuncGetParamInfo == nil {
		return -1
	}
	end := 0
	for i := uintptr(0); i < 1024; i++ {
		var off, size uintptr
		if d.FuncGetParamInfo(f, i, unsafe.Pointer(&off), unsafe.Pointer(&size)) != 0 {
			break // CUDA_ERROR_INVALID_VALUE past the last parameter
		}
		end = int(off + size)
	}
	return end
}

// ArgBytes is the size of the argument block the kernel takes, as the
// driver reports it (-1 on drivers before CUDA 12.4, which cannot tell).
func (f *Function) ArgBytes() int { return f.argBytes }

// Unload unloads the module; its Functions become invalid. A second Unload
// does nothing.
func (m *Module) Unload() error {
	if m == nil || m.h == 0 {
		return nil
	}
	h := m.h
	m.h = 0
	return m.c.d.check("cuModuleUnload", m.c.d.ModuleUnload(h))
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// SetMaxDynamicShared allows launches of f with up to bytes of dynamic
// shared memory; needed above 48 KiB (cuFuncSetAttribute
// MAX_DYNAMIC_SHARED_SIZE_BYTES), up to AttrMaxSharedMemoryPerBlockOptin.
func (f *Function) SetMaxDynamicShared(bytes int) error {
	return f.m.c.d.check("cuFuncSetAttribute", f.m.c.d.FuncSetAttribute(f.h, funcAttrMaxDynamicSharedBytes, int32(bytes)))
}

// The launch arena: one mapping per Context holding, at fixed offsets,
//
//	[0, 40)         extra = {BUFFER_POINTER, &blob, BUFFER_SIZE, &size, END}
//	[40, 48)        size  (size_t)
//	[64, 32832)     blob  (the kernel's argument struct)
//	[32832, 32888)  a CUlaunchConfig (LaunchDependent)
//	[32888, 32960)  its one CUlaunchAttribute
//
// The addresses never change, so only the size and the blob are written per
// launch. cuLaunchKernel (and stream capture) copies the blob before
// returning, so the next launch may overwrite it at once.
const (
	arenaSizeOff = 40
	arenaBlobOff = 64
	// MaxArgBytes is the largest argument struct Launch takes: the driver's
	// limit for kernel parameters on Volta and newer with CUDA 12.1+.
	MaxArgBytes     = 32764
	arenaConfigOff  = arenaBlobOff + 32768
	arenaAttrOff    = arenaConfigOff + launchConfigBytes
	launchArenaSize = arenaAttrOff + launchAttrBytes
)

// The C layouts of CUlaunchConfig and CUlaunchAttribute on 64-bit Linux:
//
//	CUlaunchConfig     grid xyz, block xyz, sharedMemBytes (7 × u32), pad,
//	                   hStream (8), attrs (8), numAttrs (u32), pad: 56 bytes
//	CUlaunchAttribute  id (u32), pad (4), value (a 64-byte union): 72 bytes
const (
	launchConfigBytes = 56
	launchAttrBytes   = 72
)

// putLaunchConfig writes a CUlaunchConfig for grid×block, shared bytes and
// stream s with one attribute at attr, and that attribute: programmatic
// stream serialization allowed.
func putLaunchConfig(cfg, attr []byte, attrAddr uintptr, grid, block [3]uint32, shared uint32, s uintptr) {
	le := binary.LittleEndian
	for i, v := range []uint32{grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, 0} {
		le.PutUint32(cfg[4*i:], v)
	}
	le.PutUint64(cfg[32:], uint64(s))
	le.PutUint64(cfg[40:], uint64(attrAddr))
	le.PutUint32(cfg[48:], 1)
	le.PutUint32(cfg[52:], 0)
	clear(attr[:launchAttrBytes])
	le.PutUint32(attr[0:], launchAttrProgrammaticStreamSerialization)
	le.PutUint32(attr[8:], 1) // value.programmaticStreamSerializationAllowed
}

func initArena(a *cmem.Block) {
	a.PutWord(0, launchParamBufferPointer)
	a.PutWord(8, a.Addr(arenaBlobOff))
	a.PutWord(16, launchParamBufferSize)
	a.PutWord(24, a.Addr(arenaSizeOff))
	a.PutWord(32, launchParamEnd)
}

// CanLaunchDependent reports whether LaunchDependent is available: the
// driver has cuLaunchKernelEx and the device is Hopper or newer.
func (c *Context) CanLaunchDependent() bool { return c.d.LaunchKernelEx != nil && c.ccMajor >= 9 }

// LaunchDependent is Launch with programmatic dependent launch: f may start
// while the kernel before it on s is still running, so it must execute
// griddepcontrol.wait before it touches anything that kernel writes (and
// write nothing before that). Its launch and what it does first overlap
// the previous kernel's tail. Inside a stream capture it becomes a
// programmatic edge of the graph.
func (c *Context) LaunchDependent(f *Function, grid, block [3]uint32, sharedBytes int, s *Stream, args []byte) error {
	if !c.CanLaunchDependent() {
		return fmt.Errorf("cuda: LaunchDependent %s: the driver or device has no programmatic dependent launch", f.Name())
	}
	return c.launch(f, grid, block, sharedBytes, s, args, true)
}

// Launch queues f on s (nil: the legacy default stream) with grid×block
// threads and sharedBytes of dynamic shared memory. args is the kernel's one
// parameter, a struct passed by value (__global__ void k(const Args a)),
// exactly sizeof(Args) bytes in the C layout: build it with ArgWriter. It
// travels through cuLaunchKernel's extra array (kernelParams NULL), copied
// into the Context's launch arena, which a mutex guards (the engine
// launches from one goroutine per context, so it is never contended).
// A kernel without parameters takes nil args.
func (c *Context) Launch(f *Function, grid, block [3]uint32, sharedBytes int, s *Stream, args []byte) error {
	return c.launch(f, grid, block, sharedBytes, s, args, false)
}

func (c *Context) launch(f *Function, grid, block [3]uint32, sharedBytes int, s *Stream, args []byte, dependent bool) error {
	if f == nil || f.h == 0 {
		return fmt.Errorf("cuda: Launch: nil function")
	}
	if len(args) > MaxArgBytes {
		return fmt.Errorf("cuda: Launch %s: %d argument bytes, at most %d", f.name, len(args), MaxArgBytes)
	}
	if f.argBytes >= 0 && len(args) != f.argBytes {
		return fmt.Errorf("cuda: Launch %s: %d argument bytes, the kernel takes %d", f.name, len(args), f.argBytes)
	}
	if sharedBytes < 0 {
		return fmt.Errorf("cuda: Launch %s: negative shared memory", f.name)
	}
	c.launchMu.Lock()
	defer c.launchMu.Unlock()
	if c.arena == nil {
		return fmt.Errorf("cuda: Launch %s: context is closed", f.name)
	}
	var extra unsafe.Pointer
	if len(args) > 0 {
		copy(c.arena.Bytes()[arenaBlobOff:], args)
		c.arena.PutWord(arenaSizeOff, uintptr(len(args)))
		extra = c.arena.Ptr(0)
	}
	if dependent {
		b := c.arena.Bytes()
		putLaunchConfig(b[arenaConfigOff:], b[arenaAttrOff:], c.arena.Addr(arenaAttrOff), grid, block, uint32(sharedBytes), s.handle())
		if res := c.d.LaunchKernelEx(c.arena.Ptr(arenaConfigOff), f.h, nil, extra); res != 0 {
			return fmt.Errorf("kernel %s: %w", f.name, c.d.check("cuLaunchKernelEx", res))
		}
		return nil
	}
	res := c.d.LaunchKernel(f.h, grid[0], grid[1], grid[2], block[0], block[1], block[2],
		uint32(sharedBytes), s.handle(), nil, extra)
	if res != 0 {
		return fmt.Errorf("kernel %s: %w", f.name, c.d.check("cuLaunchKernel", res))
	}
	return nil
}
