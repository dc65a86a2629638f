package pull

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lmstream/lmstream/core/status"
)

// lock takes an exclusive flock on path, calling waiting about every second
// while another holder makes it wait (a progress callback that wants to
// stop gets its chance), and polling so that ctx can end the wait. flock
// (not fcntl) locks belong to the open file, so two pulls in one process
// exclude each other as two processes do, and the kernel drops the lock of
// a process that dies.
func lock(ctx context.Context, path string, waiting func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, status.Errorf(status.Backend, "lock %s: %v", path, err)
	}
	for polls := 0; ; polls++ {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() {
				unix.Flock(int(f.Fd()), unix.LOCK_UN)
				f.Close()
			}, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, status.Errorf(status.Backend, "lock %s: %v", path, err)
		}
		if polls%20 == 0 {
			waiting()
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, status.Errorf(status.Interrupted, "pull cancelled while waiting for another pull of the same model")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
