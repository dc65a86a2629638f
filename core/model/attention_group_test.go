package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// The grouped value sums against plain Go loops, and the properties batch
// invariance rests on: a head's sums do not depend on how many heads a
// call takes or on splitting the sum into two calls (the scores' are
// TestScoresT's).
func TestGroupedAttentionKernels(t *testing.T) {
	forKernelSets(t, testGroupedAttentionKernels)
}

func testGroupedAttentionKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, hd := range []int{64, 128} {
		for _, nblk := range []int{1, 2, 5} {
			n := 16 * nblk
			v := make([]float32, n*hd)
			for i := range v {
				v[i] = float32(r.NormFloat64())
			}
			// Value sums: 1..4 heads, whole or split, against axpy.
			p := make([]float32, 4*n)
			for i := range p {
				p[i] = float32(r.Float64())
			}
			ref := make([]float32, 4*hd)
			simdWsumG(&p[0], n, 4, &v[0], n, hd, &ref[0], hd, false)
			for nh := 1; nh <= 4; nh++ {
				got := make([]float32, nh*hd)
				simdWsumG(&p[0], n, nh, &v[0], n, hd, &got[0], hd, false)
				split := make([]float32, nh*hd)
				a := n / 3
				simdWsumG(&p[0], n, nh, &v[0], a, hd, &split[0], hd, false)
				simdWsumG(&p[a], n, nh, &v[a*hd], n-a, hd, &split[0], hd, true)
				for h := 0; h < nh; h++ {
					want := make([]float32, hd)
					for j := 0; j < n; j++ {
						axpy(want, p[h*n+j], v[j*hd:(j+1)*hd])
					}
					for d := 0; d < hd; d++ {
						require.Equal(t, math.Float32bits(ref[h*hd+d]), math.Float32bits(got[h*hd+d]), "nh %d", nh)
						require.Equal(t, math.Float32bits(ref[h*hd+d]), math.Float32bits(split[h*hd+d]), "split, nh %d", nh)
						require.InDelta(t, want[d], got[h*hd+d], 1e-4)
					}
					emu := make([]float32, hd)
					emuWsumG(p[h*n:], v, n, hd, emu)
					require.Equal(t, -1, sameBits(emu, got[h*hd:(h+1)*hd]), "nh %d head %d: model", nh, h)
					// acc: the sum continues from out's values.
					emuWsumG(p[h*n:], v, n, hd, emu)
					cont := append([]float32(nil), got...)
					simdWsumG(&p[0], n, nh, &v[0], n, hd, &cont[0], hd, true)
					require.Equal(t, -1, sameBits(emu, cont[h*hd:(h+1)*hd]), "nh %d head %d: acc", nh, h)
				}
			}
		}
	}
}

// With the grouped kernels every token's logits are bit-identical however
// it is batched: one token per pass, a chain, or a branch of a tree (whose
// ancestors are partly "extra" entries). Speculative verification relies on
// this to reproduce plain greedy decoding exactly.
func TestGroupedAttentionBatchInvariant(t *testing.T) {
	forKernelSets(t, testGroupedAttentionBatchInvariant)
}

func testGroupedAttentionBatchInvariant(t *testing.T) {
	wide := defaultTiny(quant.Q4_1)
	wide.embd, wide.heads, wide.kvHeads = 768, 12, 2 // groups of 6: two parts of 3
	for name, spec := range map[string]tinySpec{"Q4_1": defaultTiny(quant.Q4_1), "Q8_0": defaultTiny(quant.Q8_0), "wide-Q4_1": wide} {
		t.Run(name, func(t *testing.T) {
			m, _ := tinyModel(t, spec, 2)
			r := rand.New(rand.NewPCG(9, 9))
			v := m.Config().Vocab
			prefix := randTokens(r, 21, v)
			nodes := randTokens(r, len(treeParent), v)
			c := m.NewCache(64)
			run(t, m, new(Batch).chain(c, prefix, false))
			commitAll(t, c)
			tree := run(t, m, treeBatch(c, nodes))
			for i := range treeParent {
				var path []int32
				for _, j := range treePath(i) {
					path = append(path, nodes[j])
				}
				// The path as one chain, and one token at a time.
				fresh := m.NewCache(64)
				run(t, m, new(Batch).chain(fresh, prefix, false))
				commitAll(t, fresh)
				chain := run(t, m, new(Batch).chain(fresh, path, true))
				step := m.NewCache(64)
				run(t, m, new(Batch).chain(step, prefix, false))
				commitAll(t, step)
				var last [][]float32
				for _, tok := range path {
					last = run(t, m, new(Batch).chain(step, []int32{tok}, true))
					commitAll(t, step)
				}
				require.Equal(t, chain[len(chain)-1], tree[i], "node %d: tree vs chain", i)
				require.Equal(t, last[0], tree[i], "node %d: tree vs one token per pass", i)
			}
		})
	}
}

// Chains long enough that one item's tokens see different numbers of
// 16-key blocks, 64-key value chunks and 256-key tiles (prefixes ending
// just before, on and after those edges) still give each token exactly the
// logits of one token per pass; and a 2-thread model, which runs the tiles
// of a pass with few items side by side (attendSplit), gives what a
// 1-thread model gives running them in order.
func TestChainItemsMatchOneTokenPerPass(t *testing.T) {
	forKernelSets(t, testChainItemsMatchOneTokenPerPass)
}

func testChainItemsMatchOneTokenPerPass(t *testing.T) {
	m, _ := tinyModel(t, defaultTiny(quant.Q8_0), 2)
	one, _ := tinyModel(t, defaultTiny(quant.Q8_0), 1)
	v := m.Config().Vocab
	for _, pre := range []int{0, 13, 61, 62, 64, 70, 250, 256, 300, 520} {
		r := rand.New(rand.NewPCG(uint64(pre), 5))
		prefix, chain := randTokens(r, pre, v), randTokens(r, 9, v)
		ctx := pre + len(chain)
		c := m.NewCache(ctx)
		if pre > 0 {
			run(t, m, new(Batch).chain(c, prefix, false))
			commitAll(t, c)
		}
		batch := run(t, m, new(Batch).chain(c, chain, true))
		step, ref := m.NewCache(ctx), one.NewCache(ctx)
		if pre > 0 {
			run(t, m, new(Batch).chain(step, prefix, false))
			commitAll(t, step)
			run(t, one, new(Batch).chain(ref, prefix, false))
			commitAll(t, ref)
		}
		for i, tok := range chain {
			got := run(t, m, new(Batch).chain(step, []int32{tok}, true))
			commitAll(t, step)
			require.Equal(t, got[0], batch[i], "prefix %d, chain token %d", pre, i)
			want := run(t, one, new(Batch).chain(ref, []int32{tok}, true))
			commitAll(t, ref)
			require.Equal(t, want[0], got[0], "prefix %d, chain token %d: 1 thread vs 2", pre, i)
		}
	}
}

// The fold kernel is fma(out, a, o·b) lane by lane, on every kernel set.
func TestFoldKernel(t *testing.T) {
	forKernelSets(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		for _, n := range []int{16, 64, 128} {
			out, o := make([]float32, n), make([]float32, n)
			for i := range out {
				out[i], o[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			a, b := float32(r.Float64()), float32(r.Float64())
			want := make([]float32, n)
			for i := range want {
				want[i] = fma32(out[i], a, o[i]*b)
			}
			simdFold(&out[0], &o[0], n, a, b)
			for i := range want {
				require.Equal(t, math.Float32bits(want[i]), math.Float32bits(out[i]), "n %d lane %d", n, i)
			}
		}
	})
}

// axpy adds a·x to y.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] += a * v
	}
}
