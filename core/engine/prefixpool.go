package engine

import (
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/spec"
)

// cachePool is every slot's KV cache, made at start, with what each
// one holds, so that a new sequence starts from the longest prefix of its
// prompt some cache already computed (prompt-prefix reuse, llama.cpp's
// cache_prompt): the same prompt sent again, or a chat's next turn, which
// repeats the previous turns, prefills only what is new.
//
// A free cache keeps its committed entries and the tokens they stand for
// (the previous sequence's prompt and accepted tokens; never speculation's
// scratch, which Commit drops). A running cache's tokens are its
// sequence's, as far as its cache has committed them. The CPU forward
// pass is batch-invariant (a token's K/V do not depend on the pass that
// computed them), so an entry computed for the same tokens at the same
// position is the one a fresh prefill would write, and reuse keeps the
// output token-identical.
type cachePool struct {
	all []pooledCache
	// clock counts releases: a free cache's used is the clock at its
	// release, so the least recently used has the smallest.
	clock uint64
	// reuse is the runtime config's "prefix_cache" (default true); off,
	// every sequence prefills its whole prompt into an emptied cache.
	reuse bool
	// chunk bounds the entries one copy from a donor reserves (the
	// prefill chunk): a cache's local (sliding-window) layers are sized
	// for passes of that many tokens.
	chunk int
	// donor is the cache copyPrefix copies from, which reclaim must not
	// empty under it.
	donor model.Cache
}

// pooledCache is one cache and what it holds.
type pooledCache struct {
	cache model.Cache
	owner *spec.Seq // the running sequence it serves; nil: free
	toks  []int32   // a free cache's tokens, one per committed entry
	used  uint64    // a free cache's release time (cachePool.clock); 0: never used
}

// free is how many caches no sequence holds.
func (p *cachePool) free() int {
	n := 0
	for i := range p.all {
		if p.all[i].owner == nil {
			n++
		}
	}
	return n
}

// size is how many caches the pool holds (one per slot).
func (p *cachePool) size() int { return len(p.all) }

// add puts a new, empty cache in the pool.
func (p *cachePool) add(c model.Cache) { p.all = append(p.all, pooledCache{cache: c}) }

// held is the tokens cache e's committed entries stand for.
func (e *pooledCache) held() []int32 {
	if e.owner == nil {
		return e.toks
	}
	n := min(e.cache.Len(), len(e.owner.Tokens))
	return e.owner.Tokens[:n]
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// take gives owner, about to prefill prompt, a free cache (nil when none
// is free) and how many leading prompt tokens it already holds: at most
// all but the last, whose pass gives the first token's logits.
func (p *cachePool) take(owner *spec.Seq, prompt []int32) (model.Cache, int) {
	want := prompt[:max(0, len(prompt)-1)]
	pick := p.choose(want)
	if pick < 0 {
		return nil, 0
	}
	e := &p.all[pick]
	n := 0
	if p.reuse {
		n = commonPrefix(e.toks, want)
	}
	e.owner, e.toks = owner, e.toks[:0] // a running cache's tokens are its owner's (held)
	if e.cache.Truncate(n) != nil {
		// A local layer no longer holds the window before n.
		n = 0
		e.cache.Truncate(0) // always works
	}
	if p.reuse {
		n = p.copyPrefix(e.cache, n, want)
	}
	return e.cache, n
}

// choose is the index of the free cache to take for a prompt whose first
// tokens are want (-1: none is free).
//
// A cache that holds a prefix of want and nothing more is taken first,
// the longest such: nothing it holds is lost (a chat's next turn continues
// its previous turn's cache). Otherwise taking a cache throws away what it
// holds beyond want, so the least recently used free cache is taken, and
// the longest prefix any cache holds is copied into it (copyPrefix) — but
// a free cache holding more of want than any copy can bring (where caches
// cannot copy: another device's; or a sliding-window cache whose rows
// moved on) is taken itself, the longest such, the least recently used
// among equals.
func (p *cachePool) choose(want []int32) int {
	copyable := 0 // the longest prefix of want a copy can bring
	for i := range p.all {
		if c, ok := p.all[i].cache.(*kv.Cache); ok && p.reuse && c.Oldest() == 0 {
			copyable = max(copyable, commonPrefix(p.all[i].held(), want))
		}
	}
	pick, pickWhole, pickLCP := -1, false, 0
	for i := range p.all {
		e := &p.all[i]
		if e.owner != nil {
			continue
		}
		lcp := 0
		if p.reuse {
			lcp = commonPrefix(e.toks, want)
		}
		whole := lcp > 0 && lcp >= len(e.toks)-1 // its last entry is fed again anyway
		if !whole && lcp <= copyable {
			lcp = 0 // a copy brings as much: judged by age alone
		}
		switch {
		case pick < 0:
		case whole != pickWhole:
			if !whole {
				continue
			}
		case lcp < pickLCP || lcp == pickLCP && e.used >= p.all[pick].used:
			continue
		}
		pick, pickWhole, pickLCP = i, whole, lcp
	}
	return pick
}

// copyPrefix extends dst, which holds the first n tokens of want, with the
// entries of the cache that holds the longest prefix of want, copied
// (kv.Cache.AppendFrom), and returns how many tokens dst then holds. A
// donor's committed entries never change while it runs (a sequence only
// appends), and the engine goroutine, the only caller, runs no pass now.
func (p *cachePool) copyPrefix(dst model.Cache, n int, want []int32) int {
	to, ok := dst.(*kv.Cache)
	if !ok {
		return n
	}
	var from *kv.Cache
	best := n
	for i := range p.all {
		e := &p.all[i]
		c, ok := e.cache.(*kv.Cache)
		if !ok || e.cache == dst || c.Oldest() > n {
			continue // not a donor: another device's, or its rows moved past n
		}
		if l := commonPrefix(e.held(), want); l > best {
			from, best = c, l
		}
	}
	p.donor = from
	defer func() { p.donor = nil }()
	for from != nil && n < best {
		k := min(best-n, max(1, p.chunk))
		if to.AppendFrom(from, k) != nil {
			break // no page left for the part of a page copied; keep what was copied
		}
		n += k
	}
	return n
}

// reclaim empties the least recently used free cache that holds pages,
// for the page pool when its limit is reached (kv.Pool.SetReclaim): the
// prefixes kept for reuse give way to running sequences. It reports
// whether it emptied one.
func (p *cachePool) reclaim() bool {
	pick := -1
	for i := range p.all {
		e := &p.all[i]
		if e.owner != nil || e.cache == p.donor {
			continue
		}
		if c, ok := e.cache.(*kv.Cache); !ok || c.Bytes() == 0 {
			continue
		}
		if pick < 0 || e.used < p.all[pick].used {
			pick = i
		}
	}
	if pick < 0 {
		return false
	}
	e := &p.all[pick]
	e.toks = e.toks[:0]
	e.cache.Truncate(0)
	return true
}

// put returns owner's cache to the pool, keeping the tokens its committed
// entries hold (owner's tokens are its prompt and accepted output; a
// cache longer than them, which no finished step leaves, is emptied).
func (p *cachePool) put(c model.Cache, owner *spec.Seq) {
	for i := range p.all {
		e := &p.all[i]
		if e.cache != c {
			continue
		}
		p.clock++
		e.owner, e.used = nil, p.clock
		if n := c.Len(); p.reuse && n <= len(owner.Tokens) {
			e.toks = append(e.toks[:0], owner.Tokens[:n]...)
			c.Truncate(n) // gives back the pages of the last pass's scratch
		} else {
			e.toks = e.toks[:0]
			c.Truncate(0)
		}
		return
	}
}
