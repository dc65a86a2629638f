package loop_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/replay"
)

// queueWatcher is the replay backend with a view of the queue, as the
// CPU engine's AdaServe has (loop.QueueWatcher).
type queueWatcher struct {
	loop.Backend
	mu    sync.Mutex
	views [][]loop.Queued
}

func (w *queueWatcher) WatchesQueue() bool { return true }

func (w *queueWatcher) WatchQueue(q []loop.Queued) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.views = append(w.views, slices.Clone(q))
}

// TestQueueWatcherSeesTheQueue: before each iteration the backend is shown
// the requests waiting for a slot, keyed by admission deadline.
func TestQueueWatcherSeesTheQueue(t *testing.T) {
	pieces := make([]string, 257)
	for i := range 256 {
		pieces[i] = hex.EncodeToString([]byte{byte(i)})
	}
	vocab, _ := json.Marshal(pieces)
	cfg, err := loop.ParseConfig([]byte(fmt.Sprintf(`{"backend":"replay","vocab":%s,"eos_id":256}`, vocab)))
	require.NoError(t, err)
	b, err := replay.New(cfg)
	require.NoError(t, err)
	w := &queueWatcher{Backend: b}
	rt := loop.Start(w, 1, 8)
	t.Cleanup(rt.Close)

	busy := submit(t, rt, `{"prompt":"x","delay_ms":20,"script":`+scriptFor("busy")+`}`)
	waitFor(t, "the slot to be taken", func() bool { return rt.Stats().ActiveSlots == 1 })
	before := time.Now().UnixNano()
	relaxed := submit(t, rt, `{"prompt":"x","ttft_slo_ms":5000,"script":`+scriptFor("r")+`}`)
	urgent := submit(t, rt, `{"prompt":"x","ttft_slo_ms":50,"script":`+scriptFor("u")+`}`)
	after := time.Now().UnixNano()
	drain(t, busy)
	drain(t, urgent)
	drain(t, relaxed)

	w.mu.Lock()
	defer w.mu.Unlock()
	// max_slots is 1, so the view holds the one earliest deadline: the
	// urgent request's, though it was submitted last.
	seen := false
	for _, v := range w.views {
		require.LessOrEqual(t, len(v), 1)
		if len(v) == 1 && v[0].Deadline < before+int64(time.Second) {
			require.GreaterOrEqual(t, v[0].Deadline, before+50*int64(time.Millisecond))
			require.LessOrEqual(t, v[0].Deadline, after+50*int64(time.Millisecond))
			seen = true
		}
	}
	require.True(t, seen, "the urgent request was shown waiting")
	require.Empty(t, w.views[len(w.views)-1], "nothing waits at the end")
}
