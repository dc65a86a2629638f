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
