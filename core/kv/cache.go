// Package kv holds the key/value cache of one sequence.
//
// Pages. A cache holds its entries in pages of PageSize positions, one
// page table per layer, taken as the sequence grows and given back when it
// shrinks (Truncate): a slot whose context is 32,768 positions holds only
// the pages its sequence has reached, so that the slots × context a runtime
// may serve is a ceiling, not a reservation. Pages come from a Pool, whose
// byte limit every cache of a runtime shares (NewIn); a cache made with New
// or NewShape takes its pages from the heap without a limit. A page of
// layer li holds, for its PageSize positions, the keys of every kv head and
// then their values. Values are position-major ([kvhead][pos][unit], V
// hands out the rest of a page from a position on): attention sums value
// rows weighted by their scores, a dimension on each SIMD lane. Keys are
// unit-major ([kvhead][unit][pos], KBlock): attention scores a block of
// positions against a query a dimension at a time, a position on each lane,
// so one load holds 8 or 16 keys' value of a dimension and no key needs a
// horizontal sum (a unit is one uint16 of an entry's RowLen: a float16, a
// Q8_0 block's scale or a pair of its int8s).
//
// Entries are IEEE float16 (uint16 bits), llama.cpp's default cache type,
// rather than float32: a pass reads every cached entry of every layer, and
// by a few hundred positions that is a tenth of the bytes the weights take;
// half the bytes is half that traffic and half the memory. The attention
// kernels widen entries to float32 exactly, so only the rounding at store
// time differs from a float32 cache.
//
// Sharing. A page may be held by several caches at once (AppendFrom shares
// the pages a prefix fills instead of copying them: a request that starts
// from another sequence's prompt prefix, the early-exit draft catching up
// on the target's entries). A cache writes only at positions from Len() on,
// and Reserve gives it its own copy of a shared page before any write
// there, so a page's committed entries never change under another holder.
//
// Scratch. A forward pass over a batch writes the K/V of a sequence's new
// tokens into scratch entries Len()+k, k = 0, 1, ... (the token's index
// among that sequence's tokens in the batch). Nothing is committed by the
// forward pass: Commit then keeps the chosen scratch entries (all of them
// for a prefill chunk or a plain decode step, the accepted root-to-leaf
// path for a verified token tree) by moving them to Len(), Len()+1, ...
// and drops the rest.
//
// Sliding windows. A local layer (a window of w, Gemma 3's sliding-window
// attention) is never read further back than its window: a token at
// position p sees positions p-w+1 .. p. Reserve gives back the pages of a
// local layer that lie wholly before the window of the pass's first token
// and a little history (keep positions, so that a Truncate by a few
// positions, a draft's rewind, still finds its window).
package kv

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// PageSize is the number of positions a page holds: a multiple of the
// attention kernels' 16-key blocks and of their 64-key widening chunks,
// large enough that a page boundary splits few of those chunks, small
// enough that a short sequence holds little it does not use.
const PageSize = 256

// KStride is the stride, in uint16 units, of a key block's rows (one unit
// of every position of a page, KBlock): a page's positions and 8 more, so
// that the rows the score kernel reads one after another (a block of keys,
// every dimension) fall in different L1 sets; at a stride of 512 bytes
// they would all share an eighth of them.
const KStride = PageSize + 8

// keep is the history a local layer holds behind its window: a rewind by up
// to keep positions still finds its window.
const keep = 16

// ErrFull is what Reserve and AppendFrom return (wrapped) when the pool's
// limit leaves no page to take.
var ErrFull = errors.New("kv: the KV cache memory limit is reached")

// Type is how a cache stores an entry's HeadDim values.
type Type uint8

const (
	// F16 stores each value as an IEEE float16 (llama.cpp's default).
	F16 Type = iota
	// Q8_0 stores blocks of 32 values as a float16 scale d and 32 int8 q,
	// each value d·q (llama.cpp's -ctk/-ctv q8_0): 34 bytes per 32 values
	// against 64, for a rounding error of at most d/2 (d = max|x|/127).
	Q8_0
)

// Types are the names ParseType accepts, in Type order.
var Types = []string{"f16", "q8_0"}

func (t Type) String() string {
	if int(t) < len(Types) {
		return Types[t]
	}
	return fmt.Sprintf("kv.Type(%d)", t)
}

// ParseType is the Type of a name of Types.
func ParseType(name string) (Type, error) {
	for i, n := range Types {
		if n == name {
			return Type(i), nil
		}
	}
	return 0, fmt.Errorf("kv: cache type %q is not one of %v", name, Types)
}

// RowLen is the uint16s one entry of one kv head takes: HeadDim for F16,
// 17 per 32 values for Q8_0 (a scale and 16 pairs of int8s).
func (t Type) RowLen(headDim int) int {
	if t == Q8_0 {
		return headDim / 32 * 17
	}
	return headDim
}

// Shape is what a cache holds: Layers × KVHeads × HeadDim per position, up
// to Ctx positions, stored as Type. Window[li] > 0 makes layer li local
// (nil: every layer global); MaxPass is the most tokens one pass reserves
// (a local layer holds its window and one pass).
type Shape struct {
	Layers, KVHeads, HeadDim, Ctx int
	Window                        []int
	MaxPass                       int
	Type                          Type
}

// pages is the most pages layer li holds at once: the whole context for a
// global layer; for a local one, the window, its history and one pass
// (which may start and end mid-page), at most the whole context.
func (s Shape) pages(li int) int {
	all := s.Ctx/PageSize + min(1, s.Ctx%PageSize)
	if li >= len(s.Window) || s.Window[li] <= 0 || s.Window[li] >= s.Ctx {
		return all
	}
	span := s.Window[li] + keep + max(1, s.MaxPass)
	return min(all, (span+PageSize-1)/PageSize+1)
}

// Held is the most positions layer li holds at once (whole pages; the
// context for a global layer).
func (s Shape) Held(li int) int { return min(s.Ctx, s.pages(li)*PageSize) }

func (s Shape) check() error {
	if s.Layers < 1 || s.KVHeads < 1 || s.HeadDim < 1 || s.Ctx < 1 || s.MaxPass < 0 {
		return fmt.Errorf("kv: bad cache shape %d layers × %d kv heads × %d dims × %d positions", s.Layers, s.KVHeads, s.HeadDim, s.Ctx)
	}
	if len(s.Window) > s.Layers {
		return fmt.Errorf("kv: %d layer windows for %d layers", len(s.Window), s.Layers)
	}
	for li, w := range s.Window {
		if w < 0 {
			return fmt.Errorf("kv: layer %d has window %d", li, w)
		}
	}
	switch {
	case int(s.Type) >= len(Types):
		return fmt.Errorf("kv: unknown cache type %d", s.Type)
	case s.Type == Q8_0 && s.HeadDim%32 != 0:
		return fmt.Errorf("kv: a q8_0 cache needs a head dimension that is a multiple of 32, not %d", s.HeadDim)
	}
	return nil
}

// PageBytes is the memory of one page of one layer: K and V for PageSize
// positions of every kv head. It is an error when a dimension is below 1
// or the size does not fit in an int64.
func (s Shape) PageBytes() (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	n := int64(2 * (KStride + PageSize)) // K and V, 2 bytes a uint16
	for _, d := range []int{s.KVHeads, s.Type.RowLen(s.HeadDim)} {
		if int64(d) > math.MaxInt64/n {
			return 0, fmt.Errorf("kv: a page of %d kv heads × %d dims overflows", s.KVHeads, s.HeadDim)
		}
		n *= int64(d)
	}
	return n, nil
}

// Bytes is the most memory a cache of this shape holds: every layer's
// pages at their most (a global layer's whole context, a local layer's
// window and a pass). It is an error when a dimension is below 1 or the
// size does not fit in an int64 (a context length read from a config or a
// file can be anything), so that callers can check a configuration before
// NewShape would panic on it.
func (s Shape) Bytes() (int64, error) {
	page, err := s.PageBytes()
	if err != nil {
		return 0, err
	}
	var total int64
	for li := range s.Layers {
		n := int64(s.pages(li))
		if n > math.MaxInt64/page || total > math.MaxInt64-n*page {
			return 0, fmt.Errorf("kv: a cache of %d layers × %d kv heads × %d dims × %d positions overflows", s.Layers, s.KVHeads, s.HeadDim, s.Ctx)
		}
		total += n * page
	}
	return total, nil
}

// Bytes is the memory of a cache of all-global layers (see Shape.Bytes).
func Bytes(layers, kvHeads, headDim, ctx int) (int64, error) {
	return Shape{Layers: layers, KVHeads: kvHeads, HeadDim: headDim, Ctx: ctx}.Bytes()
}

// Cache is the K/V cache of one sequence.
type Cache struct {
	shape            Shape
	pool             *Pool // nil: pages from the heap, no limit
	layers           []layer
	kvHeads, headDim int
	rowLen           int // uint16s of one entry of one kv head (Type.RowLen)
	pageLen          int // uint16s in one page
	cap              int
	n                int // committed entries
	pending          int // scratch entries the last Reserve made room for
}

// layer is one layer's page table: pages[i] holds positions [i·PageSize,
// (i+1)·PageSize), nil where none is held (not reached yet, or behind a
// local layer's window).
type layer struct {
	pages  []*page
	window int // 0: global
}

// New makes a cache of ctx positions, every layer global, its pages from
// the heap.
func New(layers, kvHeads, headDim, ctx int) *Cache {
	return NewShape(Shape{Layers: layers, KVHeads: kvHeads, HeadDim: headDim, Ctx: ctx})
}

// NewShape makes a cache of the given shape, its pages from the heap. It
// panics on a shape Bytes refuses; callers bound what they pass (the
// engine checks every configured size against a memory budget first).
func NewShape(s Shape) *Cache { return NewIn(nil, s) }

// NewIn makes a cache of the given shape whose pages come from pool (nil:
// the heap). It holds no page until Reserve.
func NewIn(pool *Pool, s Shape) *Cache {
	if _, err := s.Bytes(); err != nil {
		panic(err.Error())
	}
	rl := s.Type.RowLen(s.HeadDim)
	c := &Cache{shape: s, pool: pool, kvHeads: s.KVHeads, headDim: s.HeadDim, rowLen: rl, cap: s.Ctx,
		pageLen: s.KVHeads * (KStride + PageSize) * rl, layers: make([]layer, s.Layers)}
	for li := range c.layers {
		l := &c.layers[li]
		l.pages = make([]*page, s.Ctx/PageSize+min(1, s.Ctx%PageSize))
		if li < len(s.Window) && s.Window[li] < s.Ctx {
			l.window = s.Window[li]
		}
	}
	return c
}

// Bytes is the memory of the pages the cache holds now (a page shared with
// other caches counts for each of them).
func (c *Cache) Bytes() int64 {
	n := 0
	for _, l := range c.layers {
		for _, p := range l.pages {
			if p != nil {
				n++
			}
		}
	}
	return int64(n) * int64(c.pageLen) * 2
}

// Len is the number of committed entries.
func (c *Cache) Len() int { return c.n }

// Type is how the cache stores its entries.
func (c *Cache) Type() Type { return c.shape.Type }

// RowLen is the uint16s one entry of one kv head takes (Type.RowLen): K
// and V hand out rows of that stride.
func (c *Cache) RowLen() int { return c.rowLen }

// Cap is the most positions the sequence may reach (committed plus
// scratch).
func (c *Cache) Cap() int { return c.cap }

// Oldest is the first position every layer still holds: 0 unless a local
// (sliding-window) layer gave back the pages before its window. AppendFrom
// copies from a cache only positions from there on.
func (c *Cache) Oldest() int {
	o := 0
	for li := range c.layers {
		o = max(o, c.first(li))
	}
	return o
}

// first is the first position layer li holds (its first page's), or Len()
// rounded down to a page when it holds none before that.
func (c *Cache) first(li int) int {
	for i, p := range c.layers[li].pages {
		if p != nil || i*PageSize >= c.n {
			return i * PageSize
		}
	}
	return c.n
}

// Pending is the number of scratch entries the last Reserve made room for.
func (c *Cache) Pending() int { return c.pending }

// KBlock is the keys of kv head h in layer li for the page holding pos,
// unit-major: unit u of the entry at the page's position r is block[u·KStride
// + r], and col is pos's r. The page must be held (pos is committed or
// reserved, and not behind a local layer's window).
func (c *Cache) KBlock(li, h, pos int) (block []uint16, col int) {
	p := c.layers[li].pages[pos/PageSize]
	o := h * KStride * c.rowLen
	return p.data[o : o+KStride*c.rowLen : o+KStride*c.rowLen], pos % PageSize
}

// SetK writes the key of position pos (row: RowLen units) for kv head h in
// layer li.
func (c *Cache) SetK(li, h, pos int, row []uint16) {
	b, r := c.KBlock(li, h, pos)
	for u, x := range row[:c.rowLen] {
		b[u*KStride+r] = x
	}
}

// KRow copies the key of position pos for kv head h in layer li into row
// (RowLen units) and returns it.
func (c *Cache) KRow(li, h, pos int, row []uint16) []uint16 {
	b, r := c.KBlock(li, h, pos)
	row = row[:c.rowLen]
	for u := range row {
		row[u] = b[u*KStride+r]
	}
	return row
}

// copyK copies the keys of kv head h at columns [scol, scol+n) of page src
// to columns [dcol, dcol+n) of page dst.
func (c *Cache) copyK(dst, src *page, h, dcol, scol, n int) {
	o := h * KStride * c.rowLen
	for u := range c.rowLen {
		at := o + u*KStride
		copy(dst.data[at+dcol:at+dcol+n], src.data[at+scol:at+scol+n])
	}
}

// V is the values of kv head h in layer li from position pos to the end of
// pos's page: rows of RowLen uint16s (HeadDim float16 values, or Q8_0
// blocks), row r holding position pos+r. The page must be held.
func (c *Cache) V(li, h, pos int) []uint16 {
	p := c.layers[li].pages[pos/PageSize]
	base := c.kvHeads * KStride * c.rowLen
	o, end := base+(h*PageSize+pos%PageSize)*c.rowLen, base+(h+1)*PageSize*c.rowLen
	return p.data[o:end:end]
}

// Entries copies the keys and values of kv head h in layer li at positions
// [from, to) out of their pages, RowLen uint16s each (for tests and tools;
// the forward pass reads the pages in place).
func (c *Cache) Entries(li, h, from, to int) (k, v []uint16) {
	row := make([]uint16, c.rowLen)
	for pos := from; pos < to; pos = PageEnd(pos) {
		m := (min(to, PageEnd(pos)) - pos) * c.rowLen
		for p := pos; p < min(to, PageEnd(pos)); p++ {
			k = append(k, c.KRow(li, h, p, row)...)
		}
		v = append(v, c.V(li, h, pos)[:m]...)
	}
	return k, v
}

// PageEnd is the first position after pos's page: K and V hand out
// positions [pos, PageEnd(pos)).
func PageEnd(pos int) int { return (pos/PageSize + 1) * PageSize }

// Reserve makes room for n scratch entries at Len(), ..., Len()+n-1 (the
// forward pass calls it before writing them) or reports that they would
// overflow the cache, or that the pool has no page left (ErrFull; the
// pages already taken stay with the cache, the committed entries are
// untouched). Pages a local layer no longer needs are given back first.
// Reserving again for the same n takes nothing more.
func (c *Cache) Reserve(n int) error {
	c.pending = 0
	if n < 0 || c.n+n > c.cap {
		return fmt.Errorf("kv: cache overflow: %d committed + %d new tokens > capacity %d", c.n, n, c.cap)
	}
	if n == 0 {
		return nil
	}
	for li := range c.layers {
		l := &c.layers[li]
		if l.window > 0 {
			// The pass's first token sees from Len()-w+1 on; keep a
			// little more for a rewind.
			from := max(0, c.n-l.window+1-keep)
			for i := 0; (i+1)*PageSize <= from; i++ {
				c.drop(l, i)
			}
		}
		for i := c.n / PageSize; i <= (c.n+n-1)/PageSize; i++ {
			if err := c.own(l, i); err != nil {
				return err
			}
		}
	}
	c.pending = n
	return nil
}

// own makes page i of l one this cache holds alone, taking a new one or
// copying a shared one.
func (c *Cache) own(l *layer, i int) error {
	p := l.pages[i]
	if p != nil && p.refs.Load() == 1 {
		return nil
	}
	q, err := c.pool.get(c.pageLen)
	if err != nil {
		return err
	}
	if p != nil {
		copy(q.data, p.data)
		p.release()
	}
	l.pages[i] = q
	return nil
}

// drop gives back page i of l.
func (c *Cache) drop(l *layer, i int) {
	if p := l.pages[i]; p != nil {
		l.pages[i] = nil
		p.release()
	}
}

// Fill commits n entries holding one small value (0.1) in every key and
// value row, written to memory as a forward pass writes its rows: a cache
// as long as a sequence's without the pass that would compute one, for
// timing the passes that read it (the cost curve of a batch of sequences).
// Rows reserved but never written would read as the one zero page the
// kernel maps for untouched memory, always in the CPU's caches, and time
// a long sequence as a short one.
func (c *Cache) Fill(n int) error {
	if err := c.Reserve(n); err != nil {
		return err
	}
	row := make([]uint16, c.rowLen)
	switch c.shape.Type {
	case Q8_0:
		for b := 0; b < len(row); b += 17 {
			row[b] = 0x1273 // float16 0.1/127, the scale of q = 127 (0x7f7f: two of them)
			for j := 1; j < 17; j++ {
				row[b+j] = 0x7f7f
			}
		}
	default:
		for i := range row {
			row[i] = 0x2e66 // float16 0.1
		}
	}
	for li := range c.layers {
		for h := range c.kvHeads {
			for pos := c.n; pos < c.n+n; pos = PageEnd(pos) {
				m := (min(c.n+n, PageEnd(pos)) - pos) * c.rowLen
				v := c.V(li, h, pos)[:m]
				for i := 0; i < m; i += c.rowLen {
					copy(v[i:], row)
					c.SetK(li, h, pos+i/c.rowLen, row)
				}
			}
		}
	}
	c.n += n
	c.pending = 0
	return nil
}

// AppendFrom commits the next n entries, positions Len() … Len()+n−1, as
// src's committed entries at the same positions, layer for layer over this
// cache's layers (src may hold more: a cache of a model's first layers
// borrows from the whole model's). A page src has filled that this cache
// does not hold yet is shared, not copied; the entries of any other page
// are copied into a page of this cache's own (so that src, which may be
// running, never has to copy the page it is writing in). Why: a prompt's prefix another sequence
// computed costs a page table entry instead of a prefill, and the
// early-exit self-draft, which runs the target's own first layers, takes
// the target's K/V for the tokens it committed instead of a pass of those
// layers. It is an error, changing nothing but pages taken (ErrFull), when
// the shapes differ, src has not committed those positions, or a local
// layer of src no longer holds them.
func (c *Cache) AppendFrom(src *Cache, n int) error {
	from := c.n
	switch {
	case n < 0 || from+n > src.n:
		return fmt.Errorf("kv: AppendFrom: positions %d…%d, but the source holds %d", from, from+n-1, src.n)
	case len(c.layers) > len(src.layers) || c.kvHeads != src.kvHeads || c.headDim != src.headDim || c.shape.Type != src.shape.Type:
		return fmt.Errorf("kv: AppendFrom: a cache of %d layers × %d kv heads × %d dims (%s) from one of %d × %d × %d (%s)",
			len(c.layers), c.kvHeads, c.headDim, c.shape.Type, len(src.layers), src.kvHeads, src.headDim, src.shape.Type)
	case from+n > c.cap:
		return fmt.Errorf("kv: cache overflow: %d committed + %d new tokens > capacity %d", from, n, c.cap)
	}
	if n == 0 {
		return nil
	}
	for li := range c.layers {
		if o := src.first(li); from < o {
			return fmt.Errorf("kv: AppendFrom: layer %d of the source keeps positions from %d on, not %d", li, o, from)
		}
	}
	c.pending = 0
	for li := range c.layers {
		l, s := &c.layers[li], &src.layers[li]
		for i := from / PageSize; i <= (from+n-1)/PageSize; i++ {
			if l.pages[i] == nil && (i+1)*PageSize <= src.n {
				// A page src has filled: src never writes in it again,
				// and this cache copies it before writing in it.
				p := s.pages[i]
				p.refs.Add(1)
				l.pages[i] = p
				continue
			}
			if err := c.own(l, i); err != nil {
				return err
			}
			lo, hi := max(from, i*PageSize), min(from+n, (i+1)*PageSize)
			m := (hi - lo) * c.rowLen
			for h := range c.kvHeads {
				c.copyK(l.pages[i], s.pages[i], h, lo%PageSize, lo%PageSize, hi-lo)
				copy(c.V(li, h, lo)[:m], src.V(li, h, lo)[:m])
			}
		}
	}
	c.n += n
	return nil
}

// Commit keeps the scratch entries Len()+scratch[0], Len()+scratch[1], ...
// as the committed entries Len(), Len()+1, ... and drops every other scratch
// entry. scratch must be strictly increasing (a root-to-node path of a
// token tree lists ancestors before descendants) and within the entries the
// last forward pass wrote.
func (c *Cache) Commit(scratch []int) error {
	prev := -1
	for _, s := range scratch {
		if s <= prev {
			return fmt.Errorf("kv: Commit: scratch indices %v are not strictly increasing", scratch)
		}
		if s >= c.pending {
			return fmt.Errorf("kv: Commit: scratch entry %d, but the last forward pass wrote %d", s, c.pending)
		}
		prev = s
	}
	// Entry j moves from Len()+scratch[j] down to Len()+j. scratch[j] >= j
	// and increases, so no source is overwritten before it is read.
	hd := c.rowLen
	for j, s := range scratch {
		if s == j {
			continue
		}
		dst, src := c.n+j, c.n+s
		for li := range c.layers {
			l := &c.layers[li]
			for h := range c.kvHeads {
				c.copyK(l.pages[dst/PageSize], l.pages[src/PageSize], h, dst%PageSize, src%PageSize, 1)
				copy(c.V(li, h, dst)[:hd], c.V(li, h, src)[:hd])
			}
		}
	}
	c.n += len(scratch)
	c.pending = 0
	return nil
}

// Truncate drops committed entries from n on (and any scratch), giving back
// the pages wholly past n. A local layer that no longer holds the window
// before position n (it keeps only the last window and a few positions
// more) makes it an error; Truncate(0) always works and gives back every
// page.
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("kv: Truncate(%d) with %d committed entries", n, c.n)
	}
	for li := range c.layers {
		l := &c.layers[li]
		o := c.first(li)
		if need := max(0, n-l.window+1) &^ 15; n > 0 && l.window > 0 && need < o {
			return fmt.Errorf("kv: Truncate(%d): layer %d keeps positions from %d on (a window of %d), the next token needs %d", n, li, o, l.window, max(0, n-l.window+1))
		}
	}
	for li := range c.layers {
		l := &c.layers[li]
		for i := (n + PageSize - 1) / PageSize; i < len(l.pages); i++ {
			c.drop(l, i)
		}
	}
	c.n = n
	c.pending = 0
	return nil
}

// Release gives back every page (Truncate(0)).
func (c *Cache) Release() { _ = c.Truncate(0) }

// page is one layer's K and V for PageSize positions, held by refs caches.
type page struct {
	data []uint16
	refs atomic.Int32
	pool *Pool
}

// release drops one holder; the last one gives the page back to its pool.
func (p *page) release() {
	if p.refs.Add(-1) == 0 && p.pool != nil {
		p.pool.put(p)
	}
}

// Pool is the page store the caches of a runtime share, with a limit on
// the bytes of pages it hands out. A page given back stays in the pool for
// the next cache that needs a page of its size; the limit counts those
// too, and the pool drops free pages of another size when a cache needs
// room. When nothing is free and the limit is reached, the pool asks its
// reclaimer (SetReclaim: the engine empties the least recently used idle
// cache) for pages before it reports ErrFull.
type Pool struct {
	mu      sync.Mutex
	limit   int64 // 0: none
	used    int64 // bytes of pages handed out or kept free
	free    map[int][]*page
	reclaim func() bool
}

// maxReclaims bounds how many times one page request asks the reclaimer.
const maxReclaims = 64

// NewPool makes a pool of at most limit bytes of pages (0: no limit).
func NewPool(limit int64) *Pool { return &Pool{limit: limit, free: map[int][]*page{}} }

// SetReclaim sets the function the pool calls, without holding its lock,
// when the limit is reached: it gives pages back (by emptying caches) and
// reports whether it found any to give.
func (p *Pool) SetReclaim(f func() bool) {
	p.mu.Lock()
	p.reclaim = f
	p.mu.Unlock()
}

// Limit is the pool's limit in bytes (0: none).
func (p *Pool) Limit() int64 { return p.limit }

// InUse is the bytes of pages some cache holds now.
func (p *Pool) InUse() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.used
	for size, l := range p.free {
		n -= int64(len(l)) * int64(size) * 2
	}
	return n
}

// get hands out a page of size uint16s, held once.
func (p *Pool) get(size int) (*page, error) {
	if p == nil {
		q := &page{data: make([]uint16, size)}
		q.refs.Store(1)
		return q, nil
	}
	bytes := int64(size) * 2
	for try := 0; ; try++ {
		p.mu.Lock()
		if l := p.free[size]; len(l) > 0 {
			q := l[len(l)-1]
			p.free[size] = l[:len(l)-1]
			p.mu.Unlock()
			q.refs.Store(1)
			return q, nil
		}
		if p.limit > 0 && p.used+bytes > p.limit {
			for s, l := range p.free {
				p.used -= int64(len(l)) * int64(s) * 2
				delete(p.free, s)
			}
		}
		if p.limit == 0 || p.used+bytes <= p.limit {
			p.used += bytes
			p.mu.Unlock()
			q := &page{data: make([]uint16, size), pool: p}
			q.refs.Store(1)
			return q, nil
		}
		reclaim, used := p.reclaim, p.used
		p.mu.Unlock()
		if try == maxReclaims || reclaim == nil || !reclaim() {
			return nil, fmt.Errorf("%w: %d bytes of pages in use, a limit of %d", ErrFull, used, p.limit)
		}
	}
}

// put keeps a page no cache holds for the next request of its size.
func (p *Pool) put(q *page) {
	p.mu.Lock()
	p.free[len(q.data)] = append(p.free[len(q.data)], q)
	p.mu.Unlock()
}
