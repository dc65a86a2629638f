package cu

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/lmstream/lmstream/core/cuda/internal/cmem"
)

// Context is one device and its primary context, with the device facts the
// backend asks for read once at creation.
//
// The primary context (cuDevicePrimaryCtxRetain) is the one the CUDA runtime
// shares with every library in the process; using it rather than
// cuCtxCreate also sidesteps cuCtxCreate's changed signature in CUDA 13.
//
// Every method needs the context current on the calling OS thread (see the
// package comment): call runtime.LockOSThread and Bind, or Enter.
type Context struct {
	d       *Driver
	ordinal int
	dev     int32   // CUdevice
	ctx     uintptr // CUcontext

	name     string
	ccMajor  int
	ccMinor  int
	smCount  int
	totalMem uint64

	// launchMu guards the launch arena: the argument block and the extra
	// array handed to cuLaunchKernel (module.go).
	launchMu sync.Mutex
	arena    *cmem.Block
}

// NewContext retains the primary context of device ordinal and makes it
// current on the calling thread (the caller should hold LockOSThread if it
// goes on to use it on this goroutine).
func NewContext(d *Driver, ordinal int) (*Context, error) {
	n, err := d.DeviceCount()
	if err != nil {
		return nil, err
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d device(s))", ordinal, n)
	}
	c := &Context{d: d, ordinal: ordinal}
	if err := d.check("cuDeviceGet", d.DeviceGet(unsafe.Pointer(&c.dev), int32(ordinal))); err != nil {
		return nil, err
	}
	if err := d.check("cuDevicePrimaryCtxRetain", d.PrimaryCtxRetain(unsafe.Pointer(&c.ctx), c.dev)); err != nil {
		return nil, err
	}
	if err := c.init(); err != nil {
		d.PrimaryCtxRelease(c.dev)
		return nil, err
	}
	return c, nil
}

func (c *Context) init() error {
	if err := c.Bind(); err != nil {
		return err
	}
	name := make([]byte, 256)
	if err := c.d.check("cuDeviceGetName", c.d.DeviceGetName(unsafe.Pointer(&name[0]), int32(len(name)), c.dev)); err != nil {
		return err
	}
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	c.name = string(name)
	for _, a := range []struct {
		attr int
		dst  *int
	}{
		{AttrComputeCapabilityMajor, &c.ccMajor},
		{AttrComputeCapabilityMinor, &c.ccMinor},
		{AttrMultiprocessorCount, &c.smCount},
	} {
		v, err := c.Attribute(a.attr)
		if err != nil {
			return err
		}
		*a.dst = v
	}
	var total uintptr
	if err := c.d.check("cuDeviceTotalMem_v2", c.d.DeviceTotalMem(unsafe.Pointer(&total), c.dev)); err != nil {
		return err
	}
	c.totalMem = uint64(total)
	arena, err := cmem.New(launchArenaSize)
	if err != nil {
		return err
	}
	initArena(arena)
	c.arena = arena
	return nil
}

// Driver is the driver this context calls.
func (c *Context) Driver() *Driver { return c.d }

// Ordinal is the device number NewContext was given.
func (c *Context) Ordinal() int { return c.ordinal }

// Name is the device's name ("NVIDIA H100 80GB HBM3").
func (c *Context) Name() string { return c.name }

// ComputeCapability is the device's SM version (9, 0 for an H100).
func (c *Context) ComputeCapability() (major, minor int) { return c.ccMajor, c.ccMinor }

// Arch is the NVRTC architecture name for this device ("sm_90").
func (c *Context) Arch() string { return fmt.Sprintf("sm_%d%d", c.ccMajor, c.ccMinor) }

// SMCount is the number of multiprocessors.
func (c *Context) SMCount() int { return c.smCount }

// TotalMem is the device memory in bytes.
func (c *Context) TotalMem() uint64 { return c.totalMem }

// Attribute is cuDeviceGetAttribute for one of the Attr* constants (or any
// other CUdevice_attribute value).
func (c *Context) Attribute(attr int) (int, error) {
	var v int32
	if err := c.d.check("cuDeviceGetAttribute", c.d.DeviceGetAttribute(unsafe.Pointer(&v), int32(attr), c.dev)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// MemInfo is cuMemGetInfo: free and total device memory in bytes.
func (c *Context) MemInfo() (free, total uint64, err error) {
	var f, t uintptr
	if err := c.d.check("cuMemGetInfo_v2", c.d.MemGetInfo(unsafe.Pointer(&f), unsafe.Pointer(&t))); err != nil {
		return 0, 0, err
	}
	return uint64(f), uint64(t), nil
}

// Bind makes the context current on the calling OS thread (cuCtxSetCurrent).
// It holds only while the goroutine stays on that thread, so callers lock it
// first with runtime.LockOSThread.
func (c *Context) Bind() error {
	return c.d.check("cuCtxSetCurrent", c.d.CtxSetCurrent(c.ctx))
}

// Enter locks the calling goroutine to its OS thread and binds the context;
// the returned leave unlocks the thread. The engine brackets each step with
// it: leave, err := ctx.Enter(); if err != nil {...}; defer leave().
func (c *Context) Enter() (leave func(), err error) {
	runtime.LockOSThread()
	if err := c.Bind(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// Sync waits for all work on the context (cuCtxSynchronize).
func (c *Context) Sync() error {
	return c.d.check("cuCtxSynchronize", c.d.CtxSynchronize())
}

// Close frees the launch arena and releases the primary context. Memory,
// modules and streams still allocated in it are freed by the driver when the
// last retain of the primary context is released. A second Close does
// nothing.
func (c *Context) Close() error {
	if c.ctx == 0 {
		return nil
	}
	c.launchMu.Lock()
	c.arena.Free()
	c.arena = nil
	c.launchMu.Unlock()
	c.ctx = 0
	return c.d.check("cuDevicePrimaryCtxRelease_v2", c.d.PrimaryCtxRelease(c.dev))
}
