package quant

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

func TestArenaAllocAndFree(t *testing.T) {
	a := NewArena(3 << 20)
	require.Equal(t, 3<<20, a.Size())
	require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(a.buf)))&(hugePage-1), "arena not 2 MiB-aligned")
	b := a.alloc(1000)
	c := a.Bytes(1000) // the exported form of alloc
	require.Len(t, b, 1000)
	require.Zero(t, uintptr(unsafe.Pointer(unsafe.SliceData(c)))&63, "allocation not 64-byte aligned")
	for i := range b {
		b[i], c[i] = 1, 2 // the memory is writable and the two do not overlap
	}
	require.Equal(t, byte(1), b[999])
	require.Nil(t, a.alloc(3<<20), "an allocation past the end must fail, not overflow")
	a.Free()
	require.Zero(t, a.Size())
	require.Nil(t, a.alloc(1), "a freed arena hands out nothing")
	a.Free() // twice is harmless
	var nilArena *Arena
	nilArena.Free()
	require.Zero(t, nilArena.Size())
}

// TestPoolCloseStopsWorkers: a pool's workers are goroutines that only
// Close ends; a model that never closed its pool leaked them, and with them
// the last job's closure (issue 10, row 4).
func TestPoolCloseStopsWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	p := NewPool(4)
	var sum [64]int
	p.Run(64, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sum[i] = i
		}
	})
	require.GreaterOrEqual(t, runtime.NumGoroutine(), before+3)
	p.Close()
	p.Close() // twice is harmless
	require.True(t, goroutinesDownTo(before), "pool workers still running after Close")
	// A closed pool still runs work, on the caller alone.
	total := 0
	p.Run(64, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			total += sum[i]
		}
	})
	require.Equal(t, 63*64/2, total)
}

// goroutinesDownTo waits up to 5 s for the goroutine count to fall to n.
// (Not require.Eventually: it polls from a goroutine of its own.)
func goroutinesDownTo(n int) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if runtime.NumGoroutine() <= n {
			return true
		}
	}
	return false
}
