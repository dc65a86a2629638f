package quant

import "golang.org/x/sys/unix"

// adviseHugePages asks Linux to back b (2 MiB-aligned, whole pages, not yet
// touched) with transparent huge pages. An error (THP compiled out, an old
// kernel) leaves 4 KiB pages, which only costs speed.
func adviseHugePages(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
}
