package cuda

import (
	"fmt"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
)

// Cache is one sequence's K/V cache in device memory, in kv.Cache's layout
// ([layer][kv head][position][head dim] float16, keys and values apart) and
// with its contract: a pass writes scratch entries after the committed ones,
// Commit keeps the accepted ones.
type Cache struct {
	r          *Runner
	k, v       cu.DevicePtr
	layers     int
	cap        int
	n, pending int
}

func (c *Cache) Len() int { return c.n }
func (c *Cache) Cap() int { return c.cap }

func (c *Cache) Reserve(n int) error {
	if n < 0 || c.n+n > c.cap {
		return fmt.Errorf("cuda: cache overflow: %d committed + %d new tokens > capacity %d", c.n, n, c.cap)
	}
	c.pending = n
	return nil
}

func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("cuda: Truncate(%d) with %d committed entries", n, c.n)
	}
	c.n, c.pending = n, 0
	return nil
}

// fillByte is what every byte of a filled entry's keys and values holds
// (Fill): read as float16, 0x2e2e is 0.0966, near the 0.1 that kv.Cache
// fills the CPU's rows with, so attention over a filled cache sums
// ordinary numbers.
const fillByte = 0x2e

// Fill commits n entries whose keys and values are fillByte, written by
// memsets queued on the runner's stream (ordered with the passes): a cache
// as long as a sequence's without the passes that would compute one, for
// timing the passes that read it. The start-up measurement of batches
// (core/engine's filledCache) takes it where a cache has it; without it, 64
// slots of 256 committed tokens were prefilled in 128-token passes, about
// 24 k tokens at every runtime's creation. A memset per layer and kv head,
// keys and values: the rows of one such block are contiguous.
func (c *Cache) Fill(n int) error {
	if err := c.Reserve(n); err != nil {
		return err
	}
	if n > 0 {
		leave, err := c.r.dev.ctx.Enter()
		if err != nil {
			return err
		}
		defer leave()
		row := c.r.cfg.HeadDim * 2
		for b := range c.layers * c.r.cfg.KVHeads {
			off := (b*c.cap + c.n) * row
			for _, p := range []cu.DevicePtr{c.k, c.v} {
				if err := c.r.dev.ctx.MemsetAsync(p.Add(off), fillByte, n*row, c.r.dev.stream); err != nil {
					return err
				}
			}
		}
	}
	c.n += n
	c.pending = 0
	return nil
}

// Commit keeps scratch entries Len()+scratch[j] as Len()+j. Entries that
// move are copied on the device by kv_commit, queued on the runner's
// stream behind the pass that wrote them; a path that is already in place
// (a prefill chunk, a plain decode step) costs nothing.
func (c *Cache) Commit(scratch []int) error {
	prev := -1
	for _, s := range scratch {
		if s <= prev {
			return fmt.Errorf("cuda: Commit: scratch indices %v are not strictly increasing", scratch)
		}
		if s >= c.pending {
			return fmt.Errorf("cuda: Commit: scratch entry %d, but the last forward pass wrote %d", s, c.pending)
		}
		prev = s
	}
	var src, dst []int
	for j, s := range scratch {
		if s != j {
			src, dst = append(src, s), append(dst, j)
		}
	}
	if len(src) > 0 {
		if err := c.r.moveEntries(c, src, dst); err != nil {
			return err
		}
	}
	c.n += len(scratch)
	c.pending = 0
	return nil
}

// moveEntries queues kv_commit launches of up to kernels.CommitMoves moves
// each; stream order keeps the moves in order across launches.
func (r *Runner) moveEntries(c *Cache, src, dst []int) error {
	leave, err := r.dev.ctx.Enter()
	if err != nil {
		return err
	}
	defer leave()
	hd, blocks := r.cfg.HeadDim, c.layers*r.cfg.KVHeads
	for lo := 0; lo < len(src); lo += kernels.CommitMoves {
		hi := min(lo+kernels.CommitMoves, len(src))
		a := &commitArgs{k: c.k, v: c.v, cap: int32(c.cap), hd: int32(hd), blocks: int32(blocks),
			len: int32(c.n), moves: int32(hi - lo)}
		for j := lo; j < hi; j++ {
			a.src[j-lo], a.dst[j-lo] = int32(src[j]), int32(dst[j])
		}
		var w cu.ArgWriter
		if err := r.dev.launch(r.dev.k.kvCommit, [3]uint32{ceilDiv(blocks*hd, 256), 1, 1}, [3]uint32{256, 1, 1}, pack(&w, a)); err != nil {
			return err
		}
	}
	return nil
}
