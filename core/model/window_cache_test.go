package model

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lmstream/lmstream/core/kv"

	"github.com/stretchr/testify/require"
)

// TestGemmaWindowedCacheEqualsFull runs one long random history of prefill
// chunks, decode steps, tree passes committing one root-to-node path, and
// short rewinds, on a cache whose local layers keep only their window
// (NewCache) and on one that keeps every position of every layer (kv.New).
// Every logit must be equal bit for bit: the windowed cache gives back the
// pages behind its windows but attention reads the same keys and values in
// the same order. Windows 1 (the window
// cuts into tree branches), 4, and 20 (a window that spans 16-key blocks,
// so the kernels start before it); head dims 64 (the grouped kernels) and
// 48 (the per-head path).
func TestGemmaWindowedCacheEqualsFull(t *testing.T) {
	const ctx = 600
	for _, w := range []int{1, 4, 20} {
		for _, embd := range []int{256, 192} {
			t.Run(fmt.Sprintf("window%d-hd%d", w, embd/4), func(t *testing.T) {
				spec := tinyGemma(w)
				spec.embd = embd
				m, _ := tinyModel(t, spec, 2)
				c := m.Config()
				v := c.Vocab
				win := m.NewCache(ctx)
				full := kv.New(c.Layers, c.KVHeads, c.HeadDim, ctx)
				r := rand.New(rand.NewPCG(uint64(w), uint64(embd)))
				both := func(mk func(c *kv.Cache) *Batch) {
					t.Helper()
					require.Equal(t, run(t, m, mk(full)), run(t, m, mk(win)), "at %d committed", full.Len())
				}
				for full.Len() < ctx-120 {
					switch op := r.IntN(10); {
					case op < 3: // a prefill chunk, up to 110 tokens
						toks := randTokens(r, 1+r.IntN(110), v)
						both(func(c *kv.Cache) *Batch { return new(Batch).chain(c, toks, true) })
						commitAll(t, full)
						commitAll(t, win)
					case op < 7: // a decode step
						toks := randTokens(r, 1, v)
						both(func(c *kv.Cache) *Batch { return new(Batch).chain(c, toks, true) })
						commitAll(t, full)
						commitAll(t, win)
					case op < 9: // a verify tree, one path kept
						nodes := randTokens(r, len(treeParent), v)
						both(func(c *kv.Cache) *Batch { return treeBatch(c, nodes) })
						path := treePath(r.IntN(len(treeParent)))
						require.NoError(t, full.Commit(path))
						require.NoError(t, win.Commit(path))
					default: // a rewind of a few positions (a draft's)
						n := max(0, full.Len()-1-r.IntN(10))
						require.NoError(t, full.Truncate(n))
						require.NoError(t, win.Truncate(n))
					}
					require.Equal(t, full.Len(), win.Len())
				}
				// The local layers gave back the pages behind their window.
				require.Positive(t, win.Oldest())
				require.Zero(t, full.Oldest())
				require.Less(t, win.Bytes(), full.Bytes())
			})
		}
	}
}

// TestGemmaCacheBytesFollowTheWindow checks the memory of a long-context
// cache: the local layers' pages follow the window and the largest pass,
// not the context, and a cache filled to its context in passes of that
// size never holds more than Config.KVBytes accounts for.
func TestGemmaCacheBytesFollowTheWindow(t *testing.T) {
	m, _ := tinyModel(t, tinyGemma(4), 2) // layer 0 local, layer 1 global
	c := m.Config()
	page := int64(c.KVHeads*c.HeadDim*2) * (kv.KStride + kv.PageSize) // K and V, float16, one layer
	for _, ctx := range []int{1024, 8192, 32768} {
		for _, pass := range []int{0, 128} {
			got, err := c.KVBytes(ctx, pass)
			require.NoError(t, err)
			global := page * int64(ctx/kv.PageSize) // the global layer's pages hold every position
			// The window, its history and a pass, straddling a page boundary.
			require.Equal(t, 2*page, got-global, "ctx %d pass %d", ctx, pass)
			if ctx > 8192 {
				continue
			}
			cache := m.NewCachePass(ctx, pass)
			for cache.Len() < ctx {
				require.NoError(t, cache.Fill(min(max(1, pass), ctx-cache.Len())))
				require.LessOrEqual(t, cache.Bytes(), got)
			}
			require.GreaterOrEqual(t, cache.Bytes(), global+page) // every global page, and the window
		}
	}
	// A window as large as the context keeps everything.
	got, err := c.KVBytes(40, 0)
	require.NoError(t, err)
	require.Equal(t, 2*page, got)
}
