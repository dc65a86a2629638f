package main

import "sync"

// table maps 64-bit handles to Go objects, so no Go pointer ever crosses the
// C boundary. A handle is (generation << 32 | index+1): zero is never valid,
// and a slot's generation changes every time it is freed, so a stale,
// double-released or forged handle is detected instead of reaching another
// object. (runtime/cgo.Handle panics on misuse, and a panic here would abort
// the host process.)
type table[T any] struct {
	mu    sync.RWMutex
	slots []slot[T]
	free  []uint32
}

type slot[T any] struct {
	gen  uint32
	live bool
	val  T
}

func (t *table[T]) add(v T) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var i uint32
	if n := len(t.free); n > 0 {
		i = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		t.slots = append(t.slots, slot[T]{gen: 1})
		i = uint32(len(t.slots) - 1)
	}
	s := &t.slots[i]
	s.live, s.val = true, v
	return uint64(s.gen)<<32 | uint64(i+1)
}

func (t *table[T]) index(h uint64) (uint32, uint32, bool) {
	lo := uint32(h)
	if lo == 0 {
		return 0, 0, false
	}
	return lo - 1, uint32(h >> 32), true
}

// get returns the object of a live handle.
func (t *table[T]) get(h uint64) (T, bool) {
	var zero T
	i, gen, ok := t.index(h)
	if !ok {
		return zero, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(i) >= len(t.slots) {
		return zero, false
	}
	s := &t.slots[i]
	if !s.live || s.gen != gen {
		return zero, false
	}
	return s.val, true
}

// remove invalidates a handle and returns its object; only one caller wins.
func (t *table[T]) remove(h uint64) (T, bool) {
	var zero T
	i, gen, ok := t.index(h)
	if !ok {
		return zero, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(i) >= len(t.slots) {
		return zero, false
	}
	s := &t.slots[i]
	if !s.live || s.gen != gen {
		return zero, false
	}
	v := s.val
	s.live, s.val = false, zero
	s.gen++
	if s.gen == 0 {
		s.gen = 1
	}
	t.free = append(t.free, i)
	return v, true
}
