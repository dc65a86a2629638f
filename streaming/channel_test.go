package streaming

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func readable(t *testing.T, fd int) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	require.NoError(t, err)
	return n == 1 && fds[0].Revents&unix.POLLIN != 0
}

func attached(t *testing.T, c *Channel) *Sink {
	t.Helper()
	s, err := c.Attach(0, nil, nil)
	require.NoError(t, err)
	return s
}

func TestPopOutcomes(t *testing.T) {
	c := NewChannel()
	s := attached(t, c)
	_, err := c.TryPop()
	require.ErrorIs(t, err, ErrEmpty)
	s.Push(Chunk{TokenIDs: []int32{1}, Text: "a"})
	s.Push(Chunk{TokenIDs: []int32{2}, Text: "b", Finished: true, Reason: EndId})
	got, err := c.PopBatch(nil, 0)
	require.NoError(t, err)
	require.Len(t, got, 2)
	_, err = c.TryPop()
	require.ErrorIs(t, err, ErrDone)
	require.True(t, s.Push(Chunk{Text: "late"}), "pushing after the terminal chunk is ignored")
	_, err = c.TryPop()
	require.ErrorIs(t, err, ErrDone)
	c.Release()
	_, err = c.TryPop()
	require.ErrorIs(t, err, ErrReleased)
}

func TestReadinessDescriptor(t *testing.T) {
	c := NewChannel()
	defer c.Release()
	s := attached(t, c)
	fd, err := c.Fd()
	require.NoError(t, err)
	require.False(t, readable(t, fd), "nothing pending")
	s.Push(Chunk{Text: "a"})
	s.Push(Chunk{Text: "b"})
	require.True(t, readable(t, fd), "chunks pending")
	_, err = c.TryPop()
	require.NoError(t, err)
	require.True(t, readable(t, fd), "one chunk still pending")
	_, err = c.TryPop()
	require.NoError(t, err)
	require.False(t, readable(t, fd), "drained and unfinished")
	s.Push(Chunk{Finished: true, Reason: Cancelled})
	require.True(t, readable(t, fd))
	_, err = c.TryPop()
	require.NoError(t, err)
	require.True(t, readable(t, fd), "a finished channel stays readable")
	fd2, _ := c.Fd()
	require.Equal(t, fd, fd2, "one descriptor per channel")
}

func TestDescriptorMadeLateReflectsState(t *testing.T) {
	c := NewChannel()
	defer c.Release()
	s := attached(t, c)
	s.Push(Chunk{Text: "already here"})
	fd, err := c.Fd()
	require.NoError(t, err)
	require.True(t, readable(t, fd))
}

func TestWaitWakesOnPushReleaseAndTimeout(t *testing.T) {
	c := NewChannel()
	s := attached(t, c)
	start := time.Now()
	require.ErrorIs(t, c.Wait(20*time.Millisecond), ErrEmpty)
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)

	go func() { time.Sleep(10 * time.Millisecond); s.Push(Chunk{Text: "x"}) }()
	ch, err := c.WaitPop(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "x", ch.Text)

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = c.WaitPop(-1) }()
	}
	time.Sleep(10 * time.Millisecond)
	c.Release()
	wg.Wait()
	for _, err := range errs {
		require.ErrorIs(t, err, ErrReleased, "every blocked waiter wakes with a defined status")
	}
	require.False(t, s.Push(Chunk{Text: "y"}), "the producer learns the consumer is gone")
	require.True(t, c.Cancelled(), "releasing cancels the request")
}

func TestSettingsFixedOnceAttached(t *testing.T) {
	c := NewChannel()
	require.NoError(t, c.SetInterval(0))
	require.Equal(t, 1, c.Interval(), "values below 1 mean 1")
	require.NoError(t, c.SetSkipSpecial(false))
	require.Error(t, c.SetQueue(4, Policy(7)))
	require.NoError(t, c.SetQueue(4, Pause))
	s := attached(t, c)
	interval, skip := s.Settings()
	require.Equal(t, 1, interval)
	require.False(t, skip)
	require.ErrorIs(t, c.SetInterval(3), ErrAttached)
	_, err := c.Attach(1, nil, nil)
	require.ErrorIs(t, err, ErrAttached)
	s.Detach()
	_, err = c.Attach(1, nil, nil)
	require.NoError(t, err, "a detached channel can be attached again")
}

func TestCancelBeforeAttachReachesTheRuntime(t *testing.T) {
	c := NewChannel()
	c.Cancel()
	called := 0
	_, err := c.Attach(0, func() { called++ }, nil)
	require.NoError(t, err)
	require.Equal(t, 1, called)
	c.Cancel() // idempotent: no second call
	require.Equal(t, 1, called)
}

func TestCoalesceMergesLosslessly(t *testing.T) {
	c := NewChannel()
	require.NoError(t, c.SetQueue(2, Coalesce))
	s := attached(t, c)
	for i := 0; i < 10; i++ {
		s.Push(Chunk{TokenIDs: []int32{int32(i)}, Text: string(rune('a' + i))})
	}
	s.Push(Chunk{TokenIDs: []int32{99}, Finished: true, Reason: Length, Usage: Usage{GeneratedTokens: 11}})
	require.Equal(t, 2, c.Pending())
	got, err := c.PopBatch(nil, 0)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "a", got[0].Text)
	require.Equal(t, "bcdefghij", got[1].Text)
	require.Equal(t, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 99}, got[1].TokenIDs)
	require.True(t, got[1].Finished)
	require.Equal(t, Length, got[1].Reason)
	require.Equal(t, 11, got[1].Usage.GeneratedTokens)
}

func TestPauseReportsFullAndWakesOnDrain(t *testing.T) {
	c := NewChannel()
	require.NoError(t, c.SetQueue(2, Pause))
	drained := make(chan struct{}, 4)
	s, err := c.Attach(0, nil, func() { drained <- struct{}{} })
	require.NoError(t, err)
	s.Push(Chunk{Text: "a"})
	require.False(t, s.Paused())
	s.Push(Chunk{Text: "b"})
	require.True(t, s.Paused())
	_, err = c.TryPop()
	require.NoError(t, err)
	require.False(t, s.Paused())
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		t.Fatal("the runtime was not told the queue has room")
	}
}

func TestPopEachLeavesRefusedChunksQueued(t *testing.T) {
	c := NewChannel()
	s := attached(t, c)
	s.Push(Chunk{Text: "small"})
	s.Push(Chunk{Text: "a much larger chunk"})
	n, err := c.PopEach(0, func(ch *Chunk) bool { return len(ch.Text) < 10 })
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, c.Pending())
	ch, err := c.TryPop()
	require.NoError(t, err)
	require.Equal(t, "a much larger chunk", ch.Text)
}

func TestConsumeStopsWhenTheHandlerSaysSo(t *testing.T) {
	c := NewChannel()
	s := attached(t, c)
	for i := 0; i < 5; i++ {
		s.Push(Chunk{Text: "x"})
	}
	n := 0
	err := c.Consume(func(*Chunk) bool { n++; return n < 3 })
	require.ErrorIs(t, err, ErrInterrupted)
	require.Equal(t, 3, n)
	require.True(t, c.Cancelled())
	require.Equal(t, 2, c.Pending(), "chunks the handler did not see stay queued")
}

func TestQueueMemoryIsReused(t *testing.T) {
	c := NewChannel()
	require.NoError(t, c.SetQueue(8, Coalesce))
	s := attached(t, c)
	for i := 0; i < 10000; i++ {
		s.Push(Chunk{Text: "x"})
		if i%3 == 0 {
			c.TryPop()
		}
	}
	require.LessOrEqual(t, cap(c.queue), 16, "a bounded queue must not grow its backing array")
}

// NotifyCancel's watcher hears a Cancel or Release made while it is set,
// not one made before it nor after stop.
func TestNotifyCancel(t *testing.T) {
	for _, end := range []func(*Channel){(*Channel).Cancel, (*Channel).Release} {
		c := NewChannel()
		heard := 0
		stop := c.NotifyCancel(func() { heard++ })
		end(c)
		end(c)
		stop()
		require.Equal(t, 1, heard)
		c.Release()
	}
	before := NewChannel()
	before.Cancel()
	heard := 0
	stop := before.NotifyCancel(func() { heard++ })
	stop()
	before.Release()
	require.Equal(t, 0, heard, "a cancellation before the watch is not the watcher's")

	after := NewChannel()
	after.NotifyCancel(func() { heard++ })()
	after.Release()
	require.Equal(t, 0, heard, "nor one after stop")
}
