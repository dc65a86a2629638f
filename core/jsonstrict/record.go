package jsonstrict

import (
	"slices"
	"sync"
	"sync/atomic"
)

// recording notes, while a Record is open, every key a parser asks a
// document for: what the parsers accept, for the test that keeps the
// public header's field lists (include/lmstream.h) and the parsers in
// step. Off, it costs Take one atomic load.
var recording struct {
	on   atomic.Bool
	mu   sync.Mutex
	keys map[string]map[string]bool // by the document's kind ("config", "request")
}

// Record starts noting every key a parser asks for (Take, TakeIn, Has, Kind),
// whether the document has it or not, by the document's kind ("config",
// "request", "settings"). stop ends the recording and returns the keys
// of each kind, sorted. One recording at a time.
func Record() (stop func() map[string][]string) {
	recording.mu.Lock()
	recording.keys = map[string]map[string]bool{}
	recording.mu.Unlock()
	recording.on.Store(true)
	return func() map[string][]string {
		recording.on.Store(false)
		recording.mu.Lock()
		defer recording.mu.Unlock()
		out := map[string][]string{}
		for what, keys := range recording.keys {
			for k := range keys {
				out[what] = append(out[what], k)
			}
			slices.Sort(out[what])
		}
		recording.keys = nil
		return out
	}
}

func record(what, key string) {
	recording.mu.Lock()
	defer recording.mu.Unlock()
	if recording.keys == nil {
		return
	}
	if recording.keys[what] == nil {
		recording.keys[what] = map[string]bool{}
	}
	recording.keys[what][key] = true
}
