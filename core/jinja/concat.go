package jinja

import "unsafe"

// Chat templates often build their prompt by concatenation, message
// after message: {% set ns.out = ns.out ~ part %}. Copying ns.out each
// time makes that quadratic, in time and in bytes allocated (a thousand
// messages of a megabyte's conversation copy half a gigabyte), which
// would both be slow and exhaust the allocation budget of a legitimate
// render. concat makes it linear: a long concatenation's result lives in
// a buffer with room to spare, and concatenating onto exactly that
// result again appends in place.
//
// That is safe because a Go string is a view of bytes that never change:
// the strings made from a buffer cover only its first len(buf) bytes,
// and appending writes past them. A string that is not the buffer's
// latest (an older, shorter result, or a slice of one) is not
// extended in place; its concatenation copies as usual.

// growMin is the smallest result kept growable: short strings are cheap
// to copy and not worth a table entry.
const growMin = 256

// maxGrowable bounds the table of growable buffers; past it the oldest
// entries go (their strings stay valid, just no longer extended in
// place).
const maxGrowable = 64

type growBuf struct {
	buf  []byte // the bytes so far; cap is the room
	born int64  // when it entered the table, for eviction
}

// concat joins parts, charging the budget for what it allocates.
func (r *renderer) concat(parts ...string) (string, error) {
	total := 0
	for _, p := range parts {
		if len(p) > r.lim.Output-total {
			return "", r.fail("the template would build a string of more than %d bytes", r.lim.Output)
		}
		total += len(p)
	}
	if total < growMin {
		if err := r.alloc(int64(total)); err != nil {
			return "", err
		}
		b := make([]byte, 0, total)
		for _, p := range parts {
			b = append(b, p...)
		}
		return string(b), nil
	}
	if first := parts[0]; len(first) > 0 {
		key := unsafe.Pointer(unsafe.StringData(first))
		g, ok := r.grow[key]
		if ok && len(g.buf) == len(first) && cap(g.buf)-len(g.buf) < total-len(first) {
			delete(r.grow, key) // outgrown: the new buffer takes over
		} else if ok && len(g.buf) == len(first) {
			if err := r.scan(total - len(first)); err != nil {
				return "", err
			}
			for _, p := range parts[1:] {
				g.buf = append(g.buf, p...) // within cap: the bytes stay where they are
			}
			return unsafe.String(&g.buf[0], len(g.buf)), nil
		}
	}
	size := min(2*total, r.lim.Output)
	if err := r.alloc(int64(size)); err != nil {
		return "", err
	}
	buf := make([]byte, 0, size)
	for _, p := range parts {
		buf = append(buf, p...)
	}
	if r.grow == nil {
		r.grow = make(map[unsafe.Pointer]*growBuf)
	}
	if len(r.grow) >= maxGrowable {
		r.evictGrowable()
	}
	r.growSeq++
	r.grow[unsafe.Pointer(&buf[0])] = &growBuf{buf: buf, born: r.growSeq}
	return unsafe.String(&buf[0], len(buf)), nil
}

func (r *renderer) evictGrowable() {
	var oldest unsafe.Pointer
	var born int64 = -1
	for k, g := range r.grow {
		if born < 0 || g.born < born {
			oldest, born = k, g.born
		}
	}
	delete(r.grow, oldest)
}
