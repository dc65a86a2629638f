// Package kv holds the key/value cache of one sequence.
//
// Layout. Keys and values are IEEE float16 (uint16 bits), one contiguous
// block per (layer, kv head): [layer][kvhead][pos][headdim]. Attention for
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
package kv

import (
	"fmt"
	"math"
)

// Cache is the K/V cache of one sequence, reserved in full up front.
type Cache struct {
	layers, kvHeads, headDim, cap int
	k, v                          []uint16 // float16 bits
	n                             int      // committed entries
	pending                       int      // scratch entries written by the last forward pass
}

// Bytes is the memory New reserves for a cache of this shape: keys and
// values, 2 bytes each, layers × kvHeads × ctx × headDim of both. It is an
// error when a dimension is below 1 or the size does not fit in an int64
// (a context length read from a config or a file can be anything), so that
// callers can check a configuration before New would panic on it.
func Bytes(layers, kvHeads, headDim, ctx int) (int64, error) {
	if layers < 1 || kvHeads < 1 || headDim < 1 || ctx < 1 {
		return 0, fmt.Errorf("kv: bad cache shape %d layers × %d kv heads × %d dims × %d positions", layers, kvHeads, headDim, ctx)
	}
	n := int64(4) // K and V, 2 bytes each
	for _, d := range []int{layers, kvHeads, headDim, ctx} {
		if int64(d) > math.MaxInt64/n {
			return 0, fmt.Errorf("kv: a cache of %d layers × %d kv heads × %d dims × %d positions overflows", layers, kvHeads, headDim, ctx)
		}
		n *= int64(d)
	}
	return n, nil
}

// New reserves a cache of ctx positions for a model with the given shape.
// It panics on a shape Bytes refuses; callers bound what they pass (the cpu
// backend checks every configured size against a memory budget first).
func New(layers, kvHeads, headDim, ctx int) *Cache {
	if _, err := Bytes(layers, kvHeads, headDim, ctx); err != nil {
		panic(err.Error())
	}
	size := layers * kvHeads * ctx * headDim
	return &Cache{layers: layers, kvHeads: kvHeads, headDim: headDim, cap: ctx,
		k: make([]uint16, size), v: make([]uint16, size)}
}

// Len is the number of committed entries.
func (c *Cache) Len() int { return c.n }

// Cap is the number of positions the cache holds (committed plus scratch).
func (c *Cache) Cap() int { return c.cap }

// Pending is the number of scratch entries the last Reserve made room for.
func (c *Cache) Pending() int { return c.pending }

// Reserve makes room for n scratch entries at Len(), ..., Len()+n-1 (the
// forward pass calls it before writing them) or reports that they would
// overflow the cache.
func (c *Cache) Reserve(n int) error {
	if n < 0 || c.n+n > c.cap {
		return fmt.Errorf("kv: cache overflow: %d committed + %d new tokens > capacity %d", c.n, n, c.cap)
	}
	c.pending = n
	return nil
}

// K is the key block of one (layer, kv head): Cap() rows of HeadDim float16
// values.
func (c *Cache) K(layer, head int) []uint16 {
	o := (layer*c.kvHeads + head) * c.cap * c.headDim
	return c.k[o : o+c.cap*c.headDim : o+c.cap*c.headDim]
}

// V is the value block of one (layer, kv head): Cap() rows of HeadDim
// float16 values.
func (c *Cache) V(layer, head int) []uint16 {
	o := (layer*c.kvHeads + head) * c.cap * c.headDim
	return c.v[o : o+c.cap*c.headDim : o+c.cap*c.headDim]
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
		for blk := 0; blk < c.layers*c.kvHeads; blk++ {
			base := blk * c.cap * hd
			dst, src := base+(c.n+j)*hd, base+(c.n+s)*hd
			copy(c.k[dst:dst+hd], c.k[src:src+hd])
			copy(c.v[dst:dst+hd], c.v[src:src+hd])
		}
	}
	c.n += len(scratch)
	c.pending = 0
	return nil
}

// Truncate drops committed entries from n on (and any scratch).
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("kv: Truncate(%d) with %d committed entries", n, c.n)
	}
	c.n = n
	c.pending = 0
	return nil
}
