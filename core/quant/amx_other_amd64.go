//go:build !linux && !noasm

package quant

// amxPermit: only Linux is known to need and grant the AMX permission
// request the kernels depend on; elsewhere they stay off.
func amxPermit() bool { return false }
