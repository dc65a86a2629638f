package loop_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/streaming"
)

// BenchmarkChunkThroughput measures chunks per second through the engine
// loop and channels with the replay backend: 64 streams of one-token bursts,
// drained by batch pops on two consumer goroutines. It bounds what any
// binding can see, since the bindings add only the copy out.
func BenchmarkChunkThroughput(b *testing.B) {
	const streams, perStream = 64, 10000
	rt := byteRuntimeB(b, streams)
	script := make([][]int32, perStream)
	for i := range script {
		script[i] = []int32{'a' + int32(i%26)}
	}
	js, _ := json.Marshal(script)
	req := []byte(`{"prompt":"x","script":` + string(js) + `}`)
	b.ResetTimer()
	total := 0
	start := time.Now()
	for it := 0; it < b.N; it++ {
		chans := make([]*streaming.Channel, streams)
		for i := range chans {
			chans[i] = streaming.NewChannel()
			chans[i].SetQueue(4096, streaming.Coalesce)
			if err := rt.Submit(req, chans[i:i+1]); err != nil {
				b.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				var buf []streaming.Chunk
				n := 0
				for i := w; i < streams; i += 2 {
					for done := false; !done; {
						chans[i].Wait(-1)
						buf, _ = chans[i].PopBatch(buf[:0], 64)
						for _, c := range buf {
							n++
							done = done || c.Finished
						}
					}
					chans[i].Release()
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}(w)
		}
		wg.Wait()
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "chunks/s")
}

func byteRuntimeB(b *testing.B, maxSlots int) *loop.Runtime {
	pieces := make([]string, 257)
	for i := 0; i < 256; i++ {
		pieces[i] = fmt.Sprintf("%02x", i)
	}
	vocab, _ := json.Marshal(pieces)
	rt, err := loop.New([]byte(fmt.Sprintf(`{"backend":"replay","vocab":%s,"eos_id":256,"special_ids":[256],"max_slots":%d}`, vocab, maxSlots)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rt.Close)
	return rt
}
