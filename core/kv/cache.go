// Package kv holds the key/value cache of one sequence.
//
// Layout. Keys and values are IEEE float16 (uint16 bits), one contiguous
// block per (layer, kv head): [layer][kvhead][pos][headdim] (a local
// layer's block holds fewer positions; see Sliding windows). Attention for
// one query head reads the keys of one (layer, kv head) pair as a dense
// array of positions, so a head's scan over the context is a linear walk
// through memory. float16, llama.cpp's default cache type, rather than
// float32: a pass reads every cached entry of every layer, and by a few
// hundred positions that is a tenth of the bytes the weights take (at 2048
// positions as many as the weights of the default model); half the bytes is
// half that traffic and half the memory a slot reserves. The attention
// kernels widen entries to float32 exactly, so only the rounding at store
// time differs from a float32 cache.

// Scratch. A forward pass over a batch writes the K/V of a sequence's new
// tokens into scratch entries Len()+k, k = 0, 1, ... (the token's index among
// that sequence's tokens in the batch). Nothing is committed by the forward
// pass: Commit then keeps the chosen scratch entries (all of them for a
// prefill chunk or a plain decode step, the accepted root-to-leaf path for a
// verified token tree) by moving them to Len(), Len()+1, ... and drops the
// rest.
// Sliding windows. A local layer (a window of w, Gemma 3's sliding-window
// attention) is never read further back than its window: a token at
// position p sees positions p-w+1 .. p. Its K/V rows hold only a stretch of
// positions [Off, Off+rows): the window behind Len(), a little history
// (so that a Truncate by a few positions, a draft's rewind, still finds its
// window), the scratch of a pass, and some slack so that the stretch moves
// seldom. When a pass would run past the last row, Reserve moves the
// still-needed rows down to the front (a copy of about w rows every slack
// positions, against the w rows attention reads every position) rather
// than wrapping around: the attention kernels then keep walking a dense
// array of positions, offset by Off. Scratch lives in the same rows after
// the committed ones, so it can never overwrite a committed entry some
// token of the pass still sees. A pass larger than the cache was sized for
// (MaxPass) grows the layer's rows, up to the whole context.
package kv

import (
	"fmt"
	"math"
)

// keep is the history a local layer holds behind its window when its rows
// move: a rewind by up to keep positions still finds its window.
const keep = 16

// margin is how many rows a local layer of window w holds beyond w and the
// largest pass: 16 for the attention kernels' blocks (they start a 16-key
// block at a multiple of 16, and Off is one), keep, and slack before the
// rows move again: an eighth of the window (at least 32), so that moving
// copies about 8 rows a position where attention reads w.
func margin(w int) int {
	return 16 + keep + max(32, (w/8+15)&^15)
}

// Shape is what a cache holds: Layers × KVHeads × HeadDim per position, up
// to Ctx positions. Window[li] > 0 makes layer li local (nil: every layer
// global); MaxPass is the most tokens one pass reserves without growing a
// local layer's rows.
type Shape struct {
	Layers, KVHeads, HeadDim, Ctx int
	Window                        []int
	MaxPass                       int
}

// Rows is how many positions layer li keeps: Ctx for a global layer, for a
// local one its window, the largest pass and a fixed margin, at most Ctx.
func (s Shape) Rows(li int) int {
	if li >= len(s.Window) || s.Window[li] <= 0 {
		return s.Ctx
	}
	w := s.Window[li]
	if w >= s.Ctx || s.MaxPass >= s.Ctx || s.Ctx-w-margin(w) <= s.MaxPass {
		return s.Ctx
	}
	return w + margin(w) + s.MaxPass
}

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
	return nil
}

// Bytes is the memory a cache of this shape reserves: keys and values, 2
// bytes each, kvHeads × headDim × Rows(li) of both for every layer. It is an
// error when a dimension is below 1 or the size does not fit in an int64 (a
// context length read from a config or a file can be anything), so that
// callers can check a configuration before NewShape would panic on it.
func (s Shape) Bytes() (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var total int64
	for li := range s.Layers {
		n := int64(4) // K and V, 2 bytes each
		for _, d := range []int{s.KVHeads, s.HeadDim, s.Rows(li)} {
			if int64(d) > math.MaxInt64/n {
				return 0, fmt.Errorf("kv: a cache of %d layers × %d kv heads × %d dims × %d positions overflows", s.Layers, s.KVHeads, s.HeadDim, s.Ctx)
			}
			n *= int64(d)
		}
		if total > math.MaxInt64-n {
			return 0, fmt.Errorf("kv: a cache of %d layers × %d kv heads × %d dims × %d positions overflows", s.Layers, s.KVHeads, s.HeadDim, s.Ctx)
		}
		total += n
	}
	return total, nil
}

// Bytes is the memory of a cache of all-global layers (see Shape.Bytes).
func Bytes(layers, kvHeads, headDim, ctx int) (int64, error) {
	return Shape{Layers: layers, KVHeads: kvHeads, HeadDim: headDim, Ctx: ctx}.Bytes()
}

// Cache is the K/V cache of one sequence, reserved up front (a local
// layer's rows grow only for a pass beyond the shape's MaxPass).
type Cache struct {
	shape            Shape
	layers           []layer
	kvHeads, headDim int
	cap              int
	n                int // committed entries
	pending          int // scratch entries written by the last forward pass
}

// layer is one layer's K and V: [kvhead][row][headdim], row r holding
// position off+r.
type layer struct {
	k, v   []uint16 // float16 bits
	rows   int
	off    int // a multiple of 16 (see margin)
	window int // 0: global, rows == cap and off == 0
}

// New reserves a cache of ctx positions, every layer global.
func New(layers, kvHeads, headDim, ctx int) *Cache {
	return NewShape(Shape{Layers: layers, KVHeads: kvHeads, HeadDim: headDim, Ctx: ctx})
}

// NewShape reserves a cache of the given shape. It panics on a shape Bytes
// refuses; callers bound what they pass (the cpu backend checks every
// configured size against a memory budget first).
func NewShape(s Shape) *Cache {
	if _, err := s.Bytes(); err != nil {
		panic(err.Error())
	}
	c := &Cache{shape: s, kvHeads: s.KVHeads, headDim: s.HeadDim, cap: s.Ctx, layers: make([]layer, s.Layers)}
	for li := range c.layers {
		l := &c.layers[li]
		l.rows = s.Rows(li)
		if l.rows < s.Ctx {
			l.window = s.Window[li]
		}
		l.k, l.v = make([]uint16, s.KVHeads*l.rows*s.HeadDim), make([]uint16, s.KVHeads*l.rows*s.HeadDim)
	}
	return c
}

// Bytes is the memory the cache holds now (its shape's Bytes, or more once
// a pass beyond MaxPass grew a local layer).
func (c *Cache) Bytes() int64 {
	var n int64
	for _, l := range c.layers {
		n += int64(len(l.k)+len(l.v)) * 2
	}
	return n
}

// Len is the number of committed entries.
func (c *Cache) Len() int { return c.n }

// Cap is the most positions the sequence may reach (committed plus
// scratch); a global layer holds them all, a local one only its window's
// worth (Off, K).
func (c *Cache) Cap() int { return c.cap }

// Oldest is the first position every layer still holds: 0 unless a local
// (sliding-window) layer's rows have moved on past the start (see Sliding
// windows). AppendFrom copies from a cache only positions from there on.
func (c *Cache) Oldest() int {
	o := 0
	for li := range c.layers {
		o = max(o, c.layers[li].off)
	}
	return o
}

// Pending is the number of scratch entries the last Reserve made room for.
func (c *Cache) Pending() int { return c.pending }

// Off is the position of layer li's first row: K(li, h)[(p-Off)·HeadDim:]
// is position p. 0 for a global layer; for a local one a multiple of 16 no
// later than the first position any token of the current pass sees.
func (c *Cache) Off(li int) int { return c.layers[li].off }

// Reserve makes room for n scratch entries at Len(), ..., Len()+n-1 (the
// forward pass calls it before writing them) or reports that they would
// overflow the cache. In a local layer it moves the rows still in some
// token's window to the front first when the pass would run past the last
// row, and grows the rows when even that is not enough.
func (c *Cache) Reserve(n int) error {
	if n < 0 || c.n+n > c.cap {
		return fmt.Errorf("kv: cache overflow: %d committed + %d new tokens > capacity %d", c.n, n, c.cap)
	}
	for li := range c.layers {
		l := &c.layers[li]
		if l.window == 0 || c.n+n-l.off <= l.rows {
			continue
		}
		// The first token of the pass sees from Len()-w+1 on; keep a
		// little more for a rewind.
		off := max(l.off, max(0, c.n-l.window+1-keep)&^15)
		rows := l.rows
		if c.n+n-off > rows {
			rows = min(c.cap, l.window+margin(l.window)+n)
		}
		c.move(l, off, rows)
	}
	c.pending = n
	return nil
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
	const tenth = 0x2e66 // float16 0.1
	hd := c.headDim
	for li := range c.layers {
		l := &c.layers[li]
		for h := range c.kvHeads {
			base := (h*l.rows - l.off) * hd
			k, v := l.k[base+c.n*hd:base+(c.n+n)*hd], l.v[base+c.n*hd:base+(c.n+n)*hd]
			for i := range k {
				k[i], v[i] = tenth, tenth
			}
		}
	}
	c.n += n
	c.pending = 0
	return nil
}

// AppendFrom commits the next n entries, positions Len() … Len()+n−1,
// copied from src's committed entries at the same positions, layer for
// layer over this cache's layers (src may hold more: a cache of a model's
// first layers borrows from the whole model's). Why: the early-exit
// self-draft runs the target's own first layers, so the K/V the target
// wrote for the tokens it committed are the ones the draft's cache lacks;
// copying them costs microseconds where feeding the tokens again costs a
// pass of those layers (on SmolLM2-135M, 8 ms to catch up 64 tokens
// against 3.2 ms a decoded token). It is an error, changing nothing, when
// the shapes differ, src has not committed those positions, or a local
// layer of src no longer holds them.
func (c *Cache) AppendFrom(src *Cache, n int) error {
	from := c.n
	switch {
	case n < 0 || from+n > src.n:
		return fmt.Errorf("kv: AppendFrom: positions %d…%d, but the source holds %d", from, from+n-1, src.n)
	case len(c.layers) > len(src.layers) || c.kvHeads != src.kvHeads || c.headDim != src.headDim:
		return fmt.Errorf("kv: AppendFrom: a cache of %d layers × %d kv heads × %d dims from one of %d × %d × %d",
			len(c.layers), c.kvHeads, c.headDim, len(src.layers), src.kvHeads, src.headDim)
	}
	for li := range c.layers {
		if s := &src.layers[li]; from < s.off {
			return fmt.Errorf("kv: AppendFrom: layer %d of the source keeps positions from %d on, not %d", li, s.off, from)
		}
	}
	if err := c.Reserve(n); err != nil {
		return err
	}
	hd := c.headDim
	for li := range c.layers {
		l, s := &c.layers[li], &src.layers[li]
		for h := range c.kvHeads {
			dst, at := (h*l.rows-l.off+from)*hd, (h*s.rows-s.off+from)*hd
			copy(l.k[dst:dst+n*hd], s.k[at:at+n*hd])
			copy(l.v[dst:dst+n*hd], s.v[at:at+n*hd])
		}
	}
	c.n += n
	c.pending = 0
	return nil
}

// move shifts layer l's committed rows so that row 0 is position off, into
// new storage of rows rows when that differs.
func (c *Cache) move(l *layer, off, rows int) {
	hd := c.headDim
	k, v := l.k, l.v
	if rows != l.rows {
		k, v = make([]uint16, c.kvHeads*rows*hd), make([]uint16, c.kvHeads*rows*hd)
	}
	keepN := max(0, c.n-off) // committed positions [off, Len) survive
	for h := range c.kvHeads {
		src, dst := (h*l.rows+off-l.off)*hd, h*rows*hd
		copy(k[dst:dst+keepN*hd], l.k[src:src+keepN*hd])
		copy(v[dst:dst+keepN*hd], l.v[src:src+keepN*hd])
	}
	l.k, l.v, l.rows, l.off = k, v, rows, off
}

// K is the key block of one (layer, kv head): rows of HeadDim float16
// values, row r holding position Off(layer)+r (Cap() rows for a global
// layer).
func (c *Cache) K(layer, head int) []uint16 {
	l := &c.layers[layer]
	o, n := head*l.rows*c.headDim, l.rows*c.headDim
	return l.k[o : o+n : o+n]
}

// V is the value block of one (layer, kv head), laid out as K.
func (c *Cache) V(layer, head int) []uint16 {
	l := &c.layers[layer]
	o, n := head*l.rows*c.headDim, l.rows*c.headDim
	return l.v[o : o+n : o+n]
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
	hd := c.headDim
	for j, s := range scratch {
		if s == j {
			continue
		}
		for li := range c.layers {
			l := &c.layers[li]
			for h := range c.kvHeads {
				base := (h*l.rows - l.off) * hd
				dst, src := base+(c.n+j)*hd, base+(c.n+s)*hd
				copy(l.k[dst:dst+hd], l.k[src:src+hd])
				copy(l.v[dst:dst+hd], l.v[src:src+hd])
			}
		}
	}
	c.n += len(scratch)
	c.pending = 0
	return nil
}

// Truncate drops committed entries from n on (and any scratch). A local
// layer that no longer holds the window before position n (it keeps only
// the last window and a few positions more) makes it an error; Truncate(0)
// always works.
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("kv: Truncate(%d) with %d committed entries", n, c.n)
	}
	if n == 0 {
		for li := range c.layers {
			c.layers[li].off = 0
		}
	}
	for li := range c.layers {
		l := &c.layers[li]
		if need := max(0, n-l.window+1) &^ 15; l.window > 0 && need < l.off {
			return fmt.Errorf("kv: Truncate(%d): layer %d keeps positions from %d on (a window of %d), the next token needs %d", n, li, l.off, l.window, max(0, n-l.window+1))
		}
	}
	c.n = n
	c.pending = 0
	return nil
}
