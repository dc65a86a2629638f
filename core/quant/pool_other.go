//go:build !linux

package quant

import "runtime"

// osYield lets other goroutines run where the OS offers no cheap
// sched_yield to this package.
func osYield() { runtime.Gosched() }
