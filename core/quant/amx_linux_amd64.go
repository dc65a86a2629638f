//go:build !noasm

package quant

import "syscall"

// amxPermit asks Linux for the AMX tile data state (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA; Linux 5.16+). Without it the
// first tile instruction faults. The permission is the whole process's,
// so asking once is enough; a refusal (an older kernel, a host thread
// whose signal stack is too small for the tile state) leaves the VNNI
// kernels in place.
func amxPermit() bool {
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}
