package cu

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func newFakeContext(t *testing.T) (*fakeGPU, *Context) {
	t.Helper()
	g, d := newFake()
	c, err := NewContext(d, 0)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return g, c
}

func TestOpenNamesEveryPlaceTried(t *testing.T) {
	// The real loader, on paths that cannot exist: its own message per path.
	paths := []string{"/nonexistent/a/libcuda.so.1", "/nonexistent/b/libcuda.so.1"}
	_, _, err := Open(paths)
	require.Error(t, err)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "cuda: libcuda.so.1 not found (tried: "), msg)
	for _, p := range paths {
		require.Contains(t, msg, p)
	}
	require.Contains(t, msg, "No such file or directory") // dlerror's text

	// By default every one of DefaultPaths is named (unless this machine has
	// a driver).
	if _, _, err := Open(nil); err != nil {
		for _, p := range DefaultPaths {
			require.Contains(t, err.Error(), p)
		}
	}
}

func TestOpenGoesOnPastABrokenLibrary(t *testing.T) {
	oldOpen, oldSym := dlopen, dlsym
	t.Cleanup(func() { dlopen, dlsym = oldOpen, oldSym })
	dlopen = func(p string) (uintptr, error) {
		if p == "stub" {
			return 1, nil
		}
		return 0, errors.New(p + ": cannot open shared object file")
	}
	dlsym = func(h uintptr, name string) (uintptr, error) {
		if name == "cuLaunchKernel" || name == "cuGraphLaunch" {
			return 0, errors.New("undefined symbol")
		}
		return 0x1234, nil
	}
	_, _, err := Open([]string{"stub", "other"})
	require.EqualError(t, err, "cuda: no usable libcuda.so.1 (tried: stub: loaded, but driver lacks cuLaunchKernel, cuGraphLaunch "+
		"(a CUDA 12 or newer driver is needed); other: cannot open shared object file)")
}

func TestErrorMapping(t *testing.T) {
	g, c := newFakeContext(t)
	g.fail["cuMemAlloc_v2"] = 2
	_, err := c.Alloc(1 << 40)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, Error{Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory", Call: "cuMemAlloc_v2"}, *e)
	require.EqualError(t, err, "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")
	require.True(t, IsCode(fmt.Errorf("wrapped: %w", err), ErrOutOfMemory))
	require.False(t, IsCode(err, ErrNoDevice))

	// A code the driver has no name for still says its number.
	g.fail["cuStreamCreate"] = 12345
	_, err = c.NewStream()
	require.EqualError(t, err, "cuda: cuStreamCreate: CUresult(12345) (12345)")

	// A launch error names the kernel.
	g.fail["cuLaunchKernel"] = 900
	m, err := c.LoadModule([]byte("\x7fELF...."))
	require.NoError(t, err)
	f, err := m.Function("k")
	require.NoError(t, err)
	err = c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, nil, nil)
	require.EqualError(t, err, "kernel k: cuda: cuLaunchKernel: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900): operation not permitted when stream is capturing")
	require.True(t, IsCode(err, ErrStreamCaptureUnsupported))
}

func TestContextFacts(t *testing.T) {
	g, d := newFake()
	c, err := NewContext(d, 0)
	require.NoError(t, err)
	require.Equal(t, fakeName, c.Name())
	maj, min := c.ComputeCapability()
	require.Equal(t, [2]int{9, 0}, [2]int{maj, min})
	require.Equal(t, "sm_90", c.Arch())
	require.Equal(t, 132, c.SMCount())
	require.Equal(t, uint64(80<<30), c.TotalMem())
	l2, err := c.Attribute(AttrL2CacheSize)
	require.NoError(t, err)
	require.Equal(t, 50<<20, l2)
	require.Equal(t, uintptr(fakeCtx), g.current, "NewContext makes the context current")
	v, err := d.Version()
	require.NoError(t, err)
	require.Equal(t, 13000, v)

	leave, err := c.Enter()
	require.NoError(t, err)
	leave()

	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	require.Equal(t, 0, g.retained, "Close releases the primary context exactly once")
	require.Error(t, c.Launch(&Function{h: 1, argBytes: -1}, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, nil, []byte{1, 2, 3, 4}))

	_, err = NewContext(d, 1)
	require.EqualError(t, err, "cuda: device 1 does not exist (1 device(s))")

	// A failure after the retain releases it again.
	g.fail["cuDeviceGetName"] = 100
	_, err = NewContext(d, 0)
	require.True(t, IsCode(err, ErrNoDevice))
	require.Equal(t, 0, g.retained)
}

func TestMemoryRoundTrip(t *testing.T) {
	g, c := newFakeContext(t)
	p, err := c.Alloc(64)
	require.NoError(t, err)
	require.NoError(t, c.HtoD(p, []byte("0123456789")))
	got := make([]byte, 10)
	require.NoError(t, c.DtoH(got, p))
	require.Equal(t, "0123456789", string(got))

	require.NoError(t, c.Memset(p.Add(2), 'x', 3))
	require.NoError(t, c.DtoH(got, p))
	require.Equal(t, "01xxx56789", string(got))

	fs := []float32{1.5, -2, 3.25}
	require.NoError(t, c.HtoDFloat32(p, fs))
	back := make([]float32, 3)
	require.NoError(t, c.DtoHFloat32(back, p))
	require.Equal(t, fs, back)
	is := []int32{-1, 7}
	require.NoError(t, c.HtoDInt32(p.Add(16), is))
	ib := make([]int32, 2)
	require.NoError(t, c.DtoHInt32(ib, p.Add(16)))
	require.Equal(t, is, ib)
	hs := []uint16{0x3c00, 0xc000}
	require.NoError(t, c.HtoDUint16(p.Add(32), hs))
	hb := make([]uint16, 2)
	require.NoError(t, c.DtoHUint16(hb, p.Add(32)))
	require.Equal(t, hs, hb)

	// Pinned buffers and the async copies.
	s, err := c.NewStream()
	require.NoError(t, err)
	h, err := c.HostAlloc(32)
	require.NoError(t, err)
	copy(h.Bytes(), "pinned bytes")
	require.NoError(t, c.HtoDAsync(p, h, 0, 12, s))
	require.NoError(t, c.DtoHAsync(h, 16, p, 6, s))
	require.NoError(t, s.Sync())
	require.Equal(t, "pinned", string(h.Bytes()[16:22]))
	require.EqualError(t, c.HtoDAsync(p, h, 30, 4, s), "cuda: HtoDAsync: bytes [30, 34) outside a 32-byte host buffer")
	require.EqualError(t, c.DtoHAsync(h, -1, p, 4, s), "cuda: DtoHAsync: bytes [-1, 3) outside a 32-byte host buffer")

	q, err := c.Alloc(16)
	require.NoError(t, err)
	require.NoError(t, c.DtoDAsync(q, p, 6, s))
	require.NoError(t, c.MemsetAsync(q, 'P', 1, s))
	require.NoError(t, c.DtoH(got[:6], q))
	require.Equal(t, "Pinned", string(got[:6]))

	require.NoError(t, h.Free())
	require.NoError(t, h.Free())
	require.Error(t, c.HtoDAsync(p, h, 0, 1, s))
	require.Empty(t, g.hostBufs)
	require.NoError(t, c.Free(p))
	require.NoError(t, c.Free(q))
	require.NoError(t, c.Free(0))
	require.Empty(t, g.allocs)
	require.NoError(t, s.Destroy())
	require.NoError(t, s.Destroy())
	require.Equal(t, 1, g.called("cuStreamDestroy_v2"))

	_, err = c.Alloc(0)
	require.Error(t, err)
}

func TestLaunchPassesArgsThroughExtra(t *testing.T) {
	g, c := newFakeContext(t)
	m, err := c.LoadModule([]byte("\x7fELF rest of a cubin"))
	require.NoError(t, err)
	_, err = m.Function("nope")
	require.EqualError(t, err, `kernel "nope": cuda: cuModuleGetFunction: CUresult(500) (500)`)
	// struct { void* p; int i; float f; unsigned u; } as one parameter
	g.kParams = [][2]uintptr{{0, 24}}
	f, err := m.Function("k")
	require.NoError(t, err)
	require.Equal(t, "k", f.Name())
	require.Equal(t, 24, f.ArgBytes())
	require.NoError(t, f.SetMaxDynamicShared(100<<10))
	require.Equal(t, 1, g.called("cuFuncSetAttribute(8,102400)"))

	s, err := c.NewStream()
	require.NoError(t, err)
	var w ArgWriter
	w.Ptr(0xdeadbeef00)
	w.I32(-3)
	w.F32(0.5)
	w.U32(7)
	args := w.Bytes()
	require.Len(t, args, 24)
	require.NoError(t, c.Launch(f, [3]uint32{4, 2, 1}, [3]uint32{128, 1, 1}, 4096, s, args))
	// The wrong size is refused before the driver sees it.
	require.EqualError(t, c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, nil, args[:16]),
		"cuda: Launch k: 16 argument bytes, the kernel takes 24")
	// A kernel without parameters takes nil, with extra NULL; two
	// parameters make a block up to the end of the second.
	g.kParams = nil
	f0, err := m.Function("k")
	require.NoError(t, err)
	require.Equal(t, 0, f0.ArgBytes())
	require.NoError(t, c.Launch(f0, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, nil, nil))
	g.kParams = [][2]uintptr{{0, 4}, {8, 8}}
	f2, err := m.Function("k")
	require.NoError(t, err)
	require.Equal(t, 16, f2.ArgBytes())
	// A driver before 12.4 cannot tell: no check.
	c.d.FuncGetParamInfo = nil
	fu, err := m.Function("k")
	require.NoError(t, err)
	require.Equal(t, -1, fu.ArgBytes())

	require.Len(t, g.launches, 2)
	l := g.launches[0]
	require.Equal(t, [3]uint32{4, 2, 1}, l.grid)
	require.Equal(t, [3]uint32{128, 1, 1}, l.block)
	require.Equal(t, uint32(4096), l.shared)
	require.Equal(t, s.Handle(), l.stream)
	require.True(t, l.paramsNil, "kernelParams must be NULL when extra is used")
	require.False(t, l.extraNil)
	require.Equal(t, uintptr(launchParamBufferPointer), l.extraWords[0])
	require.Equal(t, uintptr(launchParamBufferSize), l.extraWords[2])
	require.Equal(t, uintptr(launchParamEnd), l.extraWords[4])
	require.Equal(t, args, l.blob)
	require.True(t, l.blobAligned)
	// The array, size word and blob are in the arena, not the Go heap.
	require.Equal(t, c.arena.Addr(arenaBlobOff), l.extraWords[1])
	require.Equal(t, c.arena.Addr(arenaSizeOff), l.extraWords[3])
	require.True(t, g.launches[1].extraNil && g.launches[1].paramsNil && g.launches[1].stream == 0)

	require.Error(t, c.Launch(fu, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, nil, make([]byte, MaxArgBytes+1)))
	require.Error(t, c.Launch(nil, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, nil, nil))

	_, err = c.LoadModule([]byte("not an elf"))
	require.True(t, IsCode(err, ErrInvalidImage))
	require.NoError(t, m.Unload())
	require.NoError(t, m.Unload())
	require.Equal(t, 1, g.called("cuModuleUnload"))
}

// Launches from many goroutines each see their own arguments: the arena is
// guarded (run under -race).
func TestLaunchConcurrent(t *testing.T) {
	g, c := newFakeContext(t)
	f := &Function{m: &Module{c: c, h: 1}, h: 2, name: "k", argBytes: -1}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				var w ArgWriter
				w.I64(int64(i*1000 + j))
				w.U32(uint32(j))
				if err := c.Launch(f, [3]uint32{uint32(i + 1), 1, 1}, [3]uint32{1, 1, 1}, 0, nil, w.Bytes()); err != nil {
					t.Error(err)
				}
			}
		}(i)
	}
	wg.Wait()
	require.Len(t, g.launches, 400)
	for _, l := range g.launches {
		i := int(l.grid[0]) - 1
		v := int64(l.blob[0]) | int64(l.blob[1])<<8 | int64(l.blob[2])<<16
		require.Equal(t, int64(i*1000)+int64(l.blob[8]), v)
	}
}

func TestGraphCaptureAndEvents(t *testing.T) {
	g, c := newFakeContext(t)
	s, err := c.NewStream()
	require.NoError(t, err)
	require.NoError(t, s.BeginCapture())
	require.Equal(t, []uint32{captureModeThreadLocal}, g.captures)
	gr, err := s.EndCapture()
	require.NoError(t, err)
	ex, err := gr.Instantiate()
	require.NoError(t, err)
	require.NoError(t, gr.Destroy())
	require.NoError(t, gr.Destroy())
	require.NoError(t, ex.Launch(s))
	require.NoError(t, ex.Destroy())
	require.NoError(t, ex.Destroy())
	require.Equal(t, 1, g.called("cuGraphDestroy"))
	require.Equal(t, 1, g.called("cuGraphExecDestroy"))

	a, err := c.NewEvent()
	require.NoError(t, err)
	b, err := c.NewEvent()
	require.NoError(t, err)
	require.NoError(t, a.Record(s))
	require.NoError(t, b.Record(s))
	require.NoError(t, b.Sync())
	dt, err := Elapsed(a, b)
	require.NoError(t, err)
	require.Equal(t, 1500*time.Microsecond, dt)
	require.NoError(t, a.Destroy())
	require.NoError(t, b.Destroy())
	require.NoError(t, c.Sync())
	free, total, err := c.MemInfo()
	require.NoError(t, err)
	require.Equal(t, [2]uint64{70 << 30, 80 << 30}, [2]uint64{free, total})
}

// TestLaunchDependentPacksTheConfig: LaunchDependent hands cuLaunchKernelEx
// a CUlaunchConfig with the launch shape, the stream and one attribute,
// programmatic stream serialization, laid out as the driver reads it; with
// no cuLaunchKernelEx it is refused and Launch still works.
func TestLaunchDependentPacksTheConfig(t *testing.T) {
	g, c := newFakeContext(t)
	f := &Function{m: &Module{c: c, h: 1}, h: 2, name: "k", argBytes: -1}
	s, err := c.NewStream()
	require.NoError(t, err)
	require.True(t, c.CanLaunchDependent())
	var w ArgWriter
	w.I64(42)
	require.NoError(t, c.LaunchDependent(f, [3]uint32{5, 3, 1}, [3]uint32{128, 2, 1}, 1024, s, w.Bytes()))
	l := g.launches[len(g.launches)-1]
	require.True(t, l.dependent)
	require.Equal(t, [3]uint32{5, 3, 1}, l.grid)
	require.Equal(t, [3]uint32{128, 2, 1}, l.block)
	require.Equal(t, uint32(1024), l.shared)
	require.Equal(t, s.handle(), l.stream)
	require.Equal(t, w.Bytes(), l.blob)

	c.d.LaunchKernelEx = nil
	require.False(t, c.CanLaunchDependent())
	require.ErrorContains(t, c.LaunchDependent(f, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, s, w.Bytes()), "no programmatic dependent launch")
	require.NoError(t, c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, s, w.Bytes()))
	require.False(t, g.launches[len(g.launches)-1].dependent)
}
