package cu

import (
	"math"
	"math/rand"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/lmstream/lmstream/core/cuda/internal/testkernel"
	"github.com/lmstream/lmstream/core/cuda/nvrtc"
	"github.com/stretchr/testify/require"
)

// gpuContext opens the real driver and device 0, skipping with the
// loader's error when there is no GPU unless LMSTREAM_REQUIRE_GPU=1 (the GPU
// check sets it, so a device run cannot pass by skipping). The test's
// goroutine is locked to its thread, where the context is current.
func gpuContext(t *testing.T) *Context {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("LMSTREAM_REQUIRE_GPU") == "1" {
		skip = t.Fatalf
	}
	d, path, err := Open(nil)
	if err != nil {
		skip("%v", err)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	c, err := NewContext(d, 0)
	if err != nil {
		skip("cuda: %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	v, _ := d.Version()
	maj, min := c.ComputeCapability()
	t.Logf("%s: driver %d, %s, sm_%d%d, %d SMs, %d MiB", path, v, c.Name(), maj, min, c.SMCount(), c.TotalMem()>>20)
	return c
}

func TestGPUDeviceFacts(t *testing.T) {
	c := gpuContext(t)
	require.NotEmpty(t, c.Name())
	maj, _ := c.ComputeCapability()
	require.GreaterOrEqual(t, maj, 5)
	require.Positive(t, c.SMCount())
	require.Positive(t, c.TotalMem())
	for _, a := range []struct {
		name string
		attr int
	}{{"L2 bytes", AttrL2CacheSize}, {"smem optin", AttrMaxSharedMemoryPerBlockOptin}, {"warp", AttrWarpSize},
		{"threads/block", AttrMaxThreadsPerBlock}, {"smem/block", AttrMaxSharedMemoryPerBlock}} {
		v, err := c.Attribute(a.attr)
		require.NoError(t, err)
		require.Positive(t, v, a.name)
		t.Logf("%s: %d", a.name, v)
	}
	warp, _ := c.Attribute(AttrWarpSize)
	require.Equal(t, 32, warp)
	free, total, err := c.MemInfo()
	require.NoError(t, err)
	require.LessOrEqual(t, free, total)
}

func TestGPUMemory(t *testing.T) {
	c := gpuContext(t)
	p, err := c.Alloc(1 << 20)
	require.NoError(t, err)
	defer c.Free(p)
	src := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(src)
	require.NoError(t, c.HtoD(p, src))
	got := make([]byte, len(src))
	require.NoError(t, c.DtoH(got, p))
	require.Equal(t, src, got)
	require.NoError(t, c.Memset(p.Add(100), 0xab, 50))
	require.NoError(t, c.DtoH(got[:200], p))
	for i := 100; i < 150; i++ {
		require.Equal(t, byte(0xab), got[i])
	}
	require.Equal(t, src[150:200], got[150:200])

	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	h, err := c.HostAlloc(4096)
	require.NoError(t, err)
	defer h.Free()
	copy(h.Bytes(), src[:4096])
	q, err := c.Alloc(4096)
	require.NoError(t, err)
	defer c.Free(q)
	require.NoError(t, c.MemsetAsync(q, 0, 4096, s))
	require.NoError(t, c.HtoDAsync(q, h, 0, 2048, s))
	require.NoError(t, c.DtoDAsync(q.Add(2048), p.Add(2048), 2048, s))
	clear(h.Bytes())
	require.NoError(t, c.DtoHAsync(h, 0, q, 4096, s))
	require.NoError(t, s.Sync())
	require.Equal(t, src[:4096], h.Bytes())

	_, err = c.Alloc(int(c.TotalMem()) * 2)
	require.True(t, IsCode(err, ErrOutOfMemory), "%v", err)
	t.Logf("expected error: %v", err)
}

// f16 bits of f, rounded to nearest even, as cvt.rn.f16.f32 does.
func f16bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	e := int(b>>23&0xff) - 127 + 15
	m := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000:
		return sign | 0x7e00 // NaN
	case e >= 31:
		return sign | 0x7c00
	case e <= 0:
		shift := uint(14 - e)
		if shift > 24 {
			return sign
		}
		return sign | uint16(roundShift(m|0x800000, shift))
	}
	v := uint32(e)<<10 + roundShift(m, 13)
	if v >= 0x7c00 {
		return sign | 0x7c00
	}
	return sign | uint16(v)
}

func roundShift(m uint32, shift uint) uint32 {
	r, rem, half := m>>shift, m&(1<<shift-1), uint32(1)<<(shift-1)
	if rem > half || rem == half && r&1 == 1 {
		r++
	}
	return r
}

func dp4a(a, b, c int32) int32 {
	for i := 0; i < 4; i++ {
		c += int32(int8(a>>(8*i))) * int32(int8(b>>(8*i)))
	}
	return c
}

func TestGPUKernelEagerAndGraph(t *testing.T) {
	c := gpuContext(t)
	nv, err := nvrtc.Open("")
	if err != nil {
		t.Fatalf("GPU present but %v", err)
	}
	t.Logf("nvrtc: %s", nv.Found())
	t.Setenv("LMSTREAM_CACHE_DIR", t.TempDir())
	cubin, err := nv.CompileCached([]byte(testkernel.Source), "testkernel.cu", c.Arch(), nil)
	require.NoError(t, err)
	m, err := c.LoadModule(cubin)
	require.NoError(t, err)
	defer m.Unload()
	_, err = m.Function("missing")
	require.True(t, IsCode(err, ErrNotFound), "%v", err)
	f, err := m.Function(testkernel.Name)
	require.NoError(t, err)
	optin, err := c.Attribute(AttrMaxSharedMemoryPerBlockOptin)
	require.NoError(t, err)
	require.NoError(t, f.SetMaxDynamicShared(optin))

	const n = 1000
	rng := rand.New(rand.NewSource(2))
	a, b := make([]int32, n), make([]int32, n)
	x := make([]float32, n)
	for i := range a {
		a[i], b[i] = int32(rng.Uint32()), int32(rng.Uint32())
		x[i] = float32(rng.NormFloat64() * 100)
	}
	x[0], x[1], x[2], x[3] = 65504/3.0, 1e-6, 1e5, float32(math.Copysign(0, -1)) // f16 max, subnormal, overflow, -0
	const scale, bias = 3, -7
	alloc := func(bytes int) DevicePtr {
		p, err := c.Alloc(bytes)
		require.NoError(t, err)
		t.Cleanup(func() { c.Free(p) })
		return p
	}
	da, db, dx, ddot, dhalf := alloc(4*n), alloc(4*n), alloc(4*n), alloc(4*n), alloc(2*n)
	require.NoError(t, c.HtoDInt32(da, a))
	require.NoError(t, c.HtoDInt32(db, b))
	require.NoError(t, c.HtoDFloat32(dx, x))

	var w ArgWriter
	w.Ptr(da)
	w.Ptr(db)
	w.Ptr(ddot)
	w.Ptr(dhalf)
	w.Ptr(dx)
	require.Equal(t, 40, w.Offset())
	w.I32(n)
	w.F32(scale)
	w.I32(bias)
	args := w.Bytes()
	require.Len(t, args, testkernel.ArgsSize)

	grid, block := [3]uint32{(n + 127) / 128, 1, 1}, [3]uint32{128, 1, 1}
	check := func(what string) {
		dot, half := make([]int32, n), make([]uint16, n)
		require.NoError(t, c.DtoHInt32(dot, ddot))
		require.NoError(t, c.DtoHUint16(half, dhalf))
		for i := 0; i < n; i++ {
			require.Equal(t, dp4a(a[i], b[i], bias), dot[i], "%s: dot[%d]", what, i)
			require.Equal(t, f16bits(x[i]*scale), half[i], "%s: half[%d] of %g", what, i, x[i]*scale)
		}
	}

	s, err := c.NewStream()
	require.NoError(t, err)
	defer s.Destroy()
	ev0, err := c.NewEvent()
	require.NoError(t, err)
	defer ev0.Destroy()
	ev1, err := c.NewEvent()
	require.NoError(t, err)
	defer ev1.Destroy()

	// Eager, then read back on the legacy stream: the blocking stream orders it.
	require.NoError(t, ev0.Record(s))
	require.NoError(t, c.Launch(f, grid, block, 0, s, args))
	require.NoError(t, ev1.Record(s))
	require.NoError(t, ev1.Sync())
	dt, err := Elapsed(ev0, ev1)
	require.NoError(t, err)
	t.Logf("eager launch: %v GPU time", dt)
	check("eager")
	eagerDot, eagerHalf := make([]byte, 4*n), make([]byte, 2*n)
	require.NoError(t, c.DtoH(eagerDot, ddot))
	require.NoError(t, c.DtoH(eagerHalf, dhalf))

	// The same launch captured into a graph, with clearing memsets before it;
	// the arguments are overwritten after capture to show the graph kept its
	// own copy.
	require.NoError(t, s.BeginCapture())
	require.NoError(t, c.MemsetAsync(ddot, 0, 4*n, s))
	require.NoError(t, c.MemsetAsync(dhalf, 0, 2*n, s))
	require.NoError(t, c.Launch(f, grid, block, 0, s, args))
	g, err := s.EndCapture()
	require.NoError(t, err)
	ex, err := g.Instantiate()
	require.NoError(t, err)
	require.NoError(t, g.Destroy())
	defer ex.Destroy()
	var junk ArgWriter
	for i := 0; i < 7; i++ {
		junk.Ptr(0)
	}
	require.NoError(t, c.Launch(f, grid, block, 0, s, junk.Bytes()[:testkernel.ArgsSize])) // n = 0: does nothing
	require.NoError(t, c.Memset(ddot, 0xff, 4*n))
	for rep := 0; rep < 3; rep++ {
		require.NoError(t, ex.Launch(s))
	}
	require.NoError(t, s.Sync())
	graphDot, graphHalf := make([]byte, 4*n), make([]byte, 2*n)
	require.NoError(t, c.DtoH(graphDot, ddot))
	require.NoError(t, c.DtoH(graphHalf, dhalf))
	require.Equal(t, eagerDot, graphDot, "graph replay is bit-identical to the eager launch")
	require.Equal(t, eagerHalf, graphHalf)

	// Timing, reported only: 1000 eager launches of the kernel and 1000
	// replays of the graph (two memsets and the kernel); host time is what
	// queuing costs through purego.
	for _, mode := range []string{"eager", "graph"} {
		start := time.Now()
		require.NoError(t, ev0.Record(s))
		for i := 0; i < 1000; i++ {
			if mode == "eager" {
				require.NoError(t, c.Launch(f, grid, block, 0, s, args))
			} else {
				require.NoError(t, ex.Launch(s))
			}
		}
		host := time.Since(start)
		require.NoError(t, ev1.Record(s))
		require.NoError(t, ev1.Sync())
		dt, err := Elapsed(ev0, ev1)
		require.NoError(t, err)
		t.Logf("%s: %v per iteration GPU time, %v host time to queue", mode, dt/1000, host/1000)
	}

	// A synchronous copy while capturing fails the capture (thread-local mode
	// checks this thread), and EndCapture reports it.
	require.NoError(t, s.BeginCapture())
	err = c.HtoD(ddot, make([]byte, 4))
	t.Logf("sync copy during capture: %v", err)
	require.Error(t, err)
	_, err = s.EndCapture()
	t.Logf("EndCapture after it: %v", err)
	require.Error(t, err)

	// The driver itself does not check the block's size (a short one faults
	// with an illegal address, poisoning the context); Launch refuses it,
	// knowing the size from cuFuncGetParamInfo (CUDA 12.4+).
	t.Logf("kernel parameter block: %d bytes", f.ArgBytes())
	if v, _ := c.Driver().Version(); v >= 12040 {
		require.Equal(t, testkernel.ArgsSize, f.ArgBytes())
		require.EqualError(t, c.Launch(f, grid, block, 0, s, args[:8]), "cuda: Launch k: 8 argument bytes, the kernel takes 56")
	}
	require.NoError(t, s.Sync())
}
