package streaming

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func readyKeys(m *Mux) []uint64 {
	buf := make([]uint64, 64)
	k := append([]uint64(nil), buf[:m.Ready(buf)]...)
	sort.Slice(k, func(i, j int) bool { return k[i] < k[j] })
	return k
}

// A member is listed and the descriptor readable exactly while it has chunks
// pending, the terminal one included; popping the terminal chunk takes it
// out of the ready set without removing it.
func TestMuxReadyFollowsPendingChunks(t *testing.T) {
	m, err := NewMux()
	require.NoError(t, err)
	defer m.Close()
	fd, err := m.Fd()
	require.NoError(t, err)
	a, b := NewChannel(), NewChannel()
	sa, sb := attached(t, a), attached(t, b)
	require.NoError(t, m.Add(a, 1))
	require.NoError(t, m.Add(b, 2))
	require.Empty(t, readyKeys(m))
	require.False(t, readable(t, fd))

	sa.Push(Chunk{Text: "x"})
	require.Equal(t, []uint64{1}, readyKeys(m))
	require.True(t, readable(t, fd))
	sb.Push(Chunk{Text: "y"})
	sb.Push(Chunk{Text: "z"})
	require.Equal(t, []uint64{1, 2}, readyKeys(m))

	_, err = a.TryPop()
	require.NoError(t, err)
	require.Equal(t, []uint64{2}, readyKeys(m))
	_, err = b.TryPop()
	require.NoError(t, err)
	require.Equal(t, []uint64{2}, readyKeys(m), "one chunk still pending")
	_, err = b.TryPop()
	require.NoError(t, err)
	require.Empty(t, readyKeys(m))
	require.False(t, readable(t, fd))

	sa.Push(Chunk{Finished: true, Reason: StopWords})
	require.Equal(t, []uint64{1}, readyKeys(m))
	ch, err := a.TryPop()
	require.NoError(t, err)
	require.True(t, ch.Finished)
	require.Empty(t, readyKeys(m), "a drained stream drops out by itself")
	require.False(t, readable(t, fd))
}

func TestMuxMembership(t *testing.T) {
	m1, err := NewMux()
	require.NoError(t, err)
	defer m1.Close()
	m2, err := NewMux()
	require.NoError(t, err)
	defer m2.Close()

	// Chunks pending before Add make the member ready at once.
	a := NewChannel()
	sa := attached(t, a)
	sa.Push(Chunk{Text: "early"})
	require.NoError(t, m1.Add(a, 7))
	require.Equal(t, []uint64{7}, readyKeys(m1))

	require.ErrorIs(t, m2.Add(a, 8), ErrInMux)
	require.ErrorIs(t, m1.Add(NewChannel(), 7), ErrDupKey)
	require.ErrorIs(t, m2.Remove(a), ErrNotMember)

	require.NoError(t, m1.Remove(a))
	require.Empty(t, readyKeys(m1))
	require.ErrorIs(t, m1.Remove(a), ErrNotMember)
	require.NoError(t, m2.Add(a, 7), "a removed channel may join another mux")
	require.Equal(t, []uint64{7}, readyKeys(m2))

	// Release removes the member, ready or not.
	a.Release()
	require.Empty(t, readyKeys(m2))
	require.ErrorIs(t, m2.Remove(a), ErrNotMember)
	require.ErrorIs(t, m2.Add(a, 9), ErrReleased)

	// Close takes everyone out; a channel outlives its mux.
	b := NewChannel()
	sb := attached(t, b)
	require.NoError(t, m2.Add(b, 1))
	m2.Close()
	m2.Close()
	_, err = m2.Fd()
	require.ErrorIs(t, err, ErrMuxClosed)
	require.ErrorIs(t, m2.Add(NewChannel(), 2), ErrMuxClosed)
	sb.Push(Chunk{Text: "after"})
	got, err := b.TryPop()
	require.NoError(t, err)
	require.Equal(t, "after", got.Text)
	require.NoError(t, m1.Add(b, 1), "Close freed the channel for another mux")
}

func TestMuxWait(t *testing.T) {
	m, err := NewMux()
	require.NoError(t, err)
	c := NewChannel()
	s := attached(t, c)
	require.NoError(t, m.Add(c, 3))

	start := time.Now()
	require.ErrorIs(t, m.Wait(20*time.Millisecond), ErrEmpty)
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)

	go func() {
		time.Sleep(10 * time.Millisecond)
		s.Push(Chunk{Text: "wake"})
	}()
	require.NoError(t, m.Wait(-1))
	require.Equal(t, []uint64{3}, readyKeys(m))
	require.NoError(t, m.Wait(0), "already ready: no wait")

	_, err = c.TryPop()
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- m.Wait(-1) }()
	time.Sleep(10 * time.Millisecond)
	m.Close()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrMuxClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the waiter")
	}
}

// Many producers push into many channels of one mux while one consumer
// serves them all through Wait, Ready and PopBatch: every chunk arrives once
// and in order, every stream ends with its terminal chunk, and the ready set
// is empty at the end. Run under -race in CI.
func TestMuxManyStreams(t *testing.T) {
	const streams, chunks = 200, 50
	m, err := NewMux()
	require.NoError(t, err)
	defer m.Close()
	chans := make([]*Channel, streams)
	sinks := make([]*Sink, streams)
	for i := range chans {
		chans[i] = NewChannel()
		require.NoError(t, chans[i].SetQueue(8, Pause))
		sinks[i] = attached(t, chans[i])
		require.NoError(t, m.Add(chans[i], uint64(i)))
	}
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < streams; i += 4 {
				for k := 0; k < chunks; k++ {
					for sinks[i].Paused() { // the consumer lags: wait as the engine would
						time.Sleep(50 * time.Microsecond)
					}
					sinks[i].Push(Chunk{Text: fmt.Sprintf("%d.%d;", i, k)})
				}
				sinks[i].Push(Chunk{Finished: true, Reason: Length})
			}
		}()
	}
	got := make([]string, streams)
	finished := 0
	keys := make([]uint64, 32)
	var batch []Chunk
	deadline := time.Now().Add(30 * time.Second)
	for finished < streams {
		require.True(t, time.Now().Before(deadline), "stalled with %d of %d streams finished", finished, streams)
		if err := m.Wait(time.Second); err == ErrEmpty {
			continue
		}
		for _, k := range keys[:m.Ready(keys)] {
			batch, err = chans[k].PopBatch(batch[:0], 0)
			if err == ErrEmpty {
				continue // another pop got there first: impossible with one consumer, but harmless
			}
			require.NoError(t, err)
			for _, ch := range batch {
				got[k] += ch.Text
				if ch.Finished {
					finished++
				}
			}
		}
	}
	wg.Wait()
	for i := range got {
		want := ""
		for k := 0; k < chunks; k++ {
			want += fmt.Sprintf("%d.%d;", i, k)
		}
		require.Equal(t, want, got[i], "stream %d", i)
	}
	require.Empty(t, readyKeys(m))
}
