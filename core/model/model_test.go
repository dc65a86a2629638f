package model

import (
	"maps"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
)

var weightTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0,
	quant.Q5_1, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K,
	quant.Q2_K, quant.Q3_K, quant.IQ4_NL, quant.IQ4_XS, quant.MXFP4, quant.IQ3_S, quant.IQ3_XXS,
	quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S}

// Tolerances against the float64 reference, as max|Δlogit| / max|logit|
// over a 12-token sequence. The reference uses the same dequantized weights,
// so the difference is float32 arithmetic plus, for quantized weights, the
// quantization of activations to 8 bits (Q8_0/Q8_1/Q8_K) at every matmul
// input (the head too: tied to a Q8_0 token_embd or untied in the layer
// type). The reference rounds K and V to float16 as the cache does, but
// where the float32 and float64 values straddle a float16 rounding boundary
// they still land one float16 ulp (~5e-4 relative) apart. Measured: ≤ 4e-5
// for float weights (float head; 4e-7 with a float32 cache), 7e-3 – 2.3e-2
// for the legacy and K-quants, 4.1e-2 for Q4_K with an untied Q4_K head
// (Q8_K activations, one scale per 256 values). 2 layers of random weights.
const (
	tolFloat = 1e-4
	tolQuant = 6e-2
)

func TestTinyModelsMatchReference(t *testing.T) {
	type tc struct {
		name string
		spec tinySpec
	}
	var cases []tc
	for _, wt := range weightTypes {
		cases = append(cases, tc{"llama/" + wt.String(), defaultTiny(wt)})
	}
	q := defaultTiny(quant.Q8_0)
	q.arch, q.untied, q.embT, q.seed, q.ropeTheta = "qwen2", true, quant.F16, 7, 1e6
	cases = append(cases, tc{"qwen2/Q8_0+bias+untied", q})
	q2 := defaultTiny(quant.F32)
	q2.arch, q2.embT, q2.seed, q2.kvHeads = "qwen2", quant.F32, 3, 1
	cases = append(cases, tc{"qwen2/F32+bias, 1 kv head", q2})
	u := defaultTiny(quant.Q4_K)
	u.untied, u.heads, u.kvHeads, u.seed = true, 4, 4, 5
	cases = append(cases, tc{"llama/Q4_K untied MHA", u})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, f := tinyModel(t, c.spec, 2)
			cfg := m.Config()
			require.Equal(t, c.spec.arch == "qwen2", cfg.RopeNeox)
			require.Equal(t, !c.spec.untied, cfg.TiedOutput)
			ref := refLoad(t, f)
			toks := randTokens(rand.New(rand.NewPCG(c.spec.seed, 9)), 12, cfg.Vocab)
			want := ref.logits(toks)
			cache := m.NewCache(32)
			got := run(t, m, new(Batch).chain(cache, toks, true))
			tol := tolQuant
			switch c.spec.wt {
			case quant.F32, quant.F16, quant.BF16:
				tol = tolFloat
			}
			worst := 0.0
			for i := range toks {
				worst = max(worst, maxRelDiff(got[i], want[i]))
			}
			t.Logf("max relative logit error %.2g", worst)
			require.Less(t, worst, tol)
		})
	}
}

// Tolerance between two ways of computing the same logits with the same
// model (batch vs one token at a time, tree vs chain): the float32 sums may
// be taken in another order, nothing else differs. For most types the
// matmul kernels give bit-identical rows whatever the batch, and the
// difference is 0 or a few ulp (measured ≤ 1e-6). The exception is Q4_1,
// whose 4-row kernel differs from the 1-row one by ~1e-6 relative: that is
// enough to flip the rounding of an 8-bit activation downstream, so the
// same-model tolerance for Q4_1 is the activation-quantization one
// (measured ≤ 4e-3). A wrong mask or position gives errors of order 1.
const (
	tolSame     = 1e-5
	tolSameQ4_1 = 2e-2
)

type sameSpec struct {
	spec tinySpec
	tol  float64
}

func sameModels(t *testing.T) map[string]sameSpec {
	q := defaultTiny(quant.Q8_0)
	q.arch = "qwen2"
	q8kv := defaultTiny(quant.Q8_0)
	q8kv.kvType = kv.Q8_0 // a token's entries quantized once, read back alike by every path
	return map[string]sameSpec{"F32": {defaultTiny(quant.F32), tolSame}, "Q4_1": {defaultTiny(quant.Q4_1), tolSameQ4_1},
		"Q6_K": {defaultTiny(quant.Q6_K), tolSame}, "qwen2-Q8_0": {q, tolSame}, "Q8_0-kv-cache": {q8kv, tolSame},
		"gemma3-window4": {tinyGemma(4), tolSame}, "gemma3-window1": {tinyGemma(1), tolSame}}
}

// tinyGemma is a tiny Gemma 3 whose even layers are local with the given
// sliding window (pattern 2), so that chains, decoding and tree branches
// of a few tokens already run past it. A window of 1 (a token sees only
// itself) cuts even into a tree branch's extra entries.
func tinyGemma(window int) tinySpec {
	s := defaultTiny(quant.Q8_0)
	s.arch = "gemma3"
	s.kv = map[string]any{
		"gemma3.attention.sliding_window":         uint32(window),
		"gemma3.attention.sliding_window_pattern": uint32(2),
	}
	return s
}

// TestGemmaWindowMasks checks that the window masks: when every layer is
// local (window 4, 2 layers), the last token's logits depend only on the
// last layers·(4-1)+1 = 7 tokens (each layer reaches 3 positions further
// back), so two chains that differ only before those give the same
// logits; with a global layer they differ.
func TestGemmaWindowMasks(t *testing.T) {
	all := tinyGemma(4)
	all.kv["gemma3.attention.sliding_window_pattern"] = uint32(all.layers + 1) // every layer local
	for _, tc := range []struct {
		spec tinySpec
		same bool
	}{{all, true}, {tinyGemma(4), false}} {
		m, _ := tinyModel(t, tc.spec, 2)
		r := rand.New(rand.NewPCG(9, 9))
		a := randTokens(r, 10, m.Config().Vocab)
		b := append(randTokens(r, 3, m.Config().Vocab), a[3:]...) // the same last 7
		la := run(t, m, new(Batch).chain(m.NewCache(16), a, false))
		lb := run(t, m, new(Batch).chain(m.NewCache(16), b, false))
		if tc.same {
			require.Less(t, maxRelDiff(la[0], lb[0]), tolSame)
		} else {
			require.Greater(t, maxRelDiff(la[0], lb[0]), 1e-3)
		}
	}
}

func TestChainEqualsStepwise(t *testing.T) {
	for name, sm := range sameModels(t) {
		t.Run(name, func(t *testing.T) {
			m, _ := tinyModel(t, sm.spec, 2)
			tolSame := sm.tol
			toks := randTokens(rand.New(rand.NewPCG(2, 2)), 20, m.Config().Vocab)
			// Three tokens committed first, then 17 in one batch.
			c1 := m.NewCache(64)
			run(t, m, new(Batch).chain(c1, toks[:3], false))
			commitAll(t, c1)
			batch := run(t, m, new(Batch).chain(c1, toks[3:], true))
			commitAll(t, c1)
			require.Equal(t, 20, c1.Len())
			// The same, one token per forward pass.
			c2 := m.NewCache(64)
			for i, tok := range toks {
				got := run(t, m, new(Batch).chain(c2, []int32{tok}, true))
				commitAll(t, c2)
				if i >= 3 {
					require.Less(t, maxRelDiff(batch[i-3], got[0]), tolSame, "token %d", i)
				}
			}
		})
	}
}

func TestDecodeEqualsRecompute(t *testing.T) {
	m, _ := tinyModel(t, defaultTiny(quant.Q4_K), 2)
	toks := randTokens(rand.New(rand.NewPCG(3, 3)), 16, m.Config().Vocab)
	c := m.NewCache(16)
	run(t, m, new(Batch).chain(c, toks[:4], false))
	commitAll(t, c)
	for i := 4; i < len(toks); i++ {
		dec := run(t, m, new(Batch).chain(c, toks[i:i+1], false))
		commitAll(t, c)
		fresh := m.NewCache(16)
		full := run(t, m, new(Batch).chain(fresh, toks[:i+1], false))
		require.Less(t, maxRelDiff(dec[0], full[0]), tolSame, "position %d", i)
	}
	// The cache is full: one more token is a clear error.
	err := m.Forward(new(Batch).chain(c, toks[:1], false), make([]float32, m.Config().Vocab))
	require.ErrorContains(t, err, "overflow")
}

// tree is the test tree, after a committed prefix:
//
//	0 root
//	├── 1
//	│   ├── 4
//	│   └── 5 ── 6
//	├── 2
//	└── 3
//
// listed in an order where a parent precedes its children but siblings'
// subtrees interleave.
var treeParent = []int{-1, 0, 0, 0, 1, 1, 5}

func treeBatch(c *kv.Cache, toks []int32) *Batch {
	b := new(Batch)
	depth := make([]int, len(treeParent))
	for i, p := range treeParent {
		if p >= 0 {
			depth[i] = depth[p] + 1
		}
		b.add(toks[i], c, c.Len()+depth[i], p, true)
	}
	return b
}

func treePath(i int) []int {
	var p []int
	for ; i >= 0; i = treeParent[i] {
		p = append([]int{i}, p...)
	}
	return p
}

func TestTreeEqualsChains(t *testing.T) {
	for name, sm := range sameModels(t) {
		t.Run(name, func(t *testing.T) {
			m, _ := tinyModel(t, sm.spec, 2)
			tolSame := sm.tol
			r := rand.New(rand.NewPCG(4, 4))
			prefix := randTokens(r, 5, m.Config().Vocab)
			nodes := randTokens(r, len(treeParent), m.Config().Vocab)
			c := m.NewCache(32)
			run(t, m, new(Batch).chain(c, prefix, false))
			commitAll(t, c)
			tree := run(t, m, treeBatch(c, nodes))
			for i := range treeParent {
				var path []int32
				for _, j := range treePath(i) {
					path = append(path, nodes[j])
				}
				fresh := m.NewCache(32)
				run(t, m, new(Batch).chain(fresh, prefix, false))
				commitAll(t, fresh)
				want := run(t, m, new(Batch).chain(fresh, path, false))
				require.Less(t, maxRelDiff(tree[i], want[0]), tolSame, "node %d", i)
			}
		})
	}
}

func TestCommitTreePathThenDecode(t *testing.T) {
	for name, sm := range sameModels(t) {
		t.Run(name, func(t *testing.T) {
			m, _ := tinyModel(t, sm.spec, 2)
			tolSame := sm.tol
			r := rand.New(rand.NewPCG(5, 5))
			v := m.Config().Vocab
			prefix := randTokens(r, 4, v)
			nodes := randTokens(r, len(treeParent), v)
			next := randTokens(r, 3, v)
			// Verify the tree, accept the path 0 → 1 → 5 → 6, decode on.
			c := m.NewCache(32)
			run(t, m, new(Batch).chain(c, prefix, false))
			commitAll(t, c)
			run(t, m, treeBatch(c, nodes))
			require.NoError(t, c.Commit(treePath(6)))
			require.Equal(t, 8, c.Len())
			got := run(t, m, new(Batch).chain(c, next, true))
			// A chain that took the path directly.
			d := m.NewCache(32)
			path := append(append([]int32{}, prefix...), nodes[0], nodes[1], nodes[5], nodes[6])
			run(t, m, new(Batch).chain(d, path, false))
			commitAll(t, d)
			want := run(t, m, new(Batch).chain(d, next, true))
			for i := range next {
				require.Less(t, maxRelDiff(got[i], want[i]), tolSame, "token %d", i)
			}
			// Accepting only the root of another tree also works.
			run(t, m, treeBatch(c, nodes))
			require.NoError(t, c.Commit([]int{0}))
			require.Equal(t, 9, c.Len())
		})
	}
}

func TestTwoSequencesInOneBatch(t *testing.T) {
	m, _ := tinyModel(t, defaultTiny(quant.Q4_0), 2)
	v := m.Config().Vocab
	r := rand.New(rand.NewPCG(6, 6))
	pa, pb := randTokens(r, 6, v), randTokens(r, 3, v)
	na, nb := randTokens(r, 4, v), randTokens(r, len(treeParent), v)

	// Separately: a decodes a 4-token chunk, b verifies the tree.
	sa, sb := m.NewCache(32), m.NewCache(32)
	run(t, m, new(Batch).chain(sa, pa, false))
	commitAll(t, sa)
	run(t, m, new(Batch).chain(sb, pb, false))
	commitAll(t, sb)
	wantA := run(t, m, new(Batch).chain(sa, na, true))
	wantB := run(t, m, treeBatch(sb, nb))

	// Together, prefixes in one batch, then a's chunk and b's tree
	// interleaved token by token.
	ca, cb := m.NewCache(32), m.NewCache(32)
	run(t, m, new(Batch).chain(ca, pa, false).chain(cb, pb, false))
	commitAll(t, ca)
	commitAll(t, cb)
	b := new(Batch)
	tb := treeBatch(cb, nb)
	var order []int // logits row of each token in b: a's rows then b's
	lastA, ia, ib := -1, 0, 0
	idxB := make([]int, len(nb))
	for ia < len(na) || ib < len(nb) {
		if ia < len(na) {
			b.add(na[ia], ca, ca.Len()+ia, lastA, true)
			lastA = len(b.Tokens) - 1
			order = append(order, ia)
			ia++
		}
		if ib < len(nb) {
			p := tb.Parent[ib]
			if p >= 0 {
				p = idxB[p]
			}
			b.add(nb[ib], cb, tb.Pos[ib], p, true)
			idxB[ib] = len(b.Tokens) - 1
			order = append(order, len(na)+ib)
			ib++
		}
	}
	got := run(t, m, b)
	for j, o := range order {
		var want []float32
		if o < len(na) {
			want = wantA[o]
		} else {
			want = wantB[o-len(na)]
		}
		require.Less(t, maxRelDiff(got[j], want), tolSame, "batch token %d", j)
	}
}

func TestThreadsDoNotChangeResults(t *testing.T) {
	m, _ := tinyModel(t, defaultTiny(quant.Q5_K), 1)
	toks := randTokens(rand.New(rand.NewPCG(8, 8)), 10, m.Config().Vocab)
	one := run(t, m, new(Batch).chain(m.NewCache(16), toks, true))
	for _, th := range []int{2, 3, 1} {
		m.SetThreads(th)
		got := run(t, m, new(Batch).chain(m.NewCache(16), toks, true))
		for i := range got {
			require.Less(t, maxRelDiff(got[i], one[i]), tolSame)
		}
	}
}

func TestBatchErrors(t *testing.T) {
	m, _ := tinyModel(t, defaultTiny(quant.Q8_0), 1)
	v := m.Config().Vocab
	c := m.NewCache(8)
	logits := make([]float32, 8*v)
	for _, tc := range []struct {
		name string
		b    *Batch
		want string
	}{
		{"lengths", &Batch{Tokens: []int32{1}, Cache: []Cache{c}}, "has 1 caches, 0 positions"},
		{"token", new(Batch).chain(c, []int32{int32(v)}, false), "outside the vocabulary"},
		{"nil cache", &Batch{Tokens: []int32{1}, Cache: []Cache{nil}, Pos: []int{0}, Parent: []int{-1}, Logits: []bool{true}}, "no cache"},
		{"parent after", &Batch{Tokens: []int32{1, 2}, Cache: []Cache{c, c}, Pos: []int{0, 1}, Parent: []int{1, -1}, Logits: []bool{true, true}}, "must come earlier"},
		{"position", &Batch{Tokens: []int32{1}, Cache: []Cache{c}, Pos: []int{3}, Parent: []int{-1}, Logits: []bool{true}}, "position 3, want 0"},
		{"overflow", new(Batch).chain(c, make([]int32, 9), false), "overflow the cache of 8"},
	} {
		require.ErrorContains(t, m.Forward(tc.b, logits), tc.want, tc.name)
	}
	c2 := m.NewCache(8)
	cross := new(Batch).chain(c, []int32{1}, false)
	cross.add(2, c2, 1, 0, true)
	require.ErrorContains(t, m.Forward(cross, logits), "another sequence")
	require.ErrorContains(t, m.Forward(new(Batch).chain(c, []int32{1, 2}, true), logits[:v]), "2 tokens want logits")
	require.NoError(t, m.Forward(new(Batch), nil))
}

func TestLoadErrors(t *testing.T) {
	spec := defaultTiny(quant.Q4_0)
	f := tinyGGUF(t, spec, func(name string, dims []int) []int {
		if name == "blk.1.ffn_up.weight" {
			return []int{dims[0], dims[1] + 32}
		}
		return nil
	})
	_, err := Load(f, 1)
	require.ErrorContains(t, err, "blk.1.ffn_up.weight has dims [256 544], the config wants [256 512]")

	f = tinyGGUF(t, spec, func(name string, dims []int) []int {
		if name == "blk.0.attn_norm.weight" {
			return []int{128}
		}
		return nil
	})
	_, err = Load(f, 1)
	require.ErrorContains(t, err, "blk.0.attn_norm.weight")

	// bert: its WordPiece vocabulary loads (core/tokenizer), but it is an
	// embedding model, not one this engine generates with.
	for _, arch := range []string{"gpt2", "bert"} {
		spec.arch = arch
		_, err = Load(tinyGGUF(t, spec, nil), 1)
		require.ErrorContains(t, err, `architecture "`+arch+`" is not supported`)
		require.True(t, strings.Contains(err.Error(), "llama"))
	}
}

// TestGemmaLoadErrors: Gemma 3's own metadata and tensors are checked as
// the rest are, each error naming what is wrong.
func TestGemmaLoadErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		kv   map[string]any
		bad  string // a tensor given the wrong shape
		want string
	}{
		"zero window":         {kv: map[string]any{"gemma3.attention.sliding_window": uint32(0)}, want: "gemma3.attention.sliding_window"},
		"negative capping":    {kv: map[string]any{"gemma3.final_logit_softcapping": float32(-3)}, want: "final_logit_softcapping is -3"},
		"value length":        {kv: map[string]any{"gemma3.attention.value_length": uint32(32)}, want: "value_length 32 ≠ key_length 64"},
		"q norm shape":        {bad: "blk.1.attn_q_norm.weight", want: "blk.1.attn_q_norm.weight has dims [65]"},
		"post ffn norm shape": {bad: "blk.0.post_ffw_norm.weight", want: "blk.0.post_ffw_norm.weight"},
	} {
		t.Run(name, func(t *testing.T) {
			s := tinyGemma(4)
			maps.Copy(s.kv, tc.kv)
			f := tinyGGUF(t, s, func(n string, dims []int) []int {
				if n == tc.bad {
					return []int{dims[0] + 1}
				}
				return nil
			})
			_, err := Load(f, 1)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestGemmaSoftcap: with final_logit_softcapping c every logit lies in
// (-c, c), and is c·tanh(z/c) of the uncapped one.
func TestGemmaSoftcap(t *testing.T) {
	plain, _ := tinyModel(t, tinyGemma(4), 1)
	s := tinyGemma(4)
	s.kv["gemma3.final_logit_softcapping"] = float32(2)
	capped, _ := tinyModel(t, s, 1)
	require.Equal(t, float32(2), capped.Config().LogitSoftcap)
	toks := randTokens(rand.New(rand.NewPCG(5, 5)), 6, plain.Config().Vocab)
	a := run(t, plain, new(Batch).chain(plain.NewCache(8), toks, true))
	b := run(t, capped, new(Batch).chain(capped.NewCache(8), toks, true))
	big := false
	for i := range a {
		for j, z := range a[i] {
			require.InDelta(t, 2*math.Tanh(float64(z)/2), b[i][j], 1e-5)
			big = big || math.Abs(float64(z)) > 2
		}
	}
	require.True(t, big, "some uncapped logit exceeds the cap")
}

func TestForwardAllocatesNothingWhenWarm(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	m, _ := tinyModel(t, defaultTiny(quant.Q4_1), 2)
	c := m.NewCache(64)
	toks := randTokens(rand.New(rand.NewPCG(1, 1)), 8, m.Config().Vocab)
	b := new(Batch).chain(c, toks, true)
	logits := make([]float32, 8*m.Config().Vocab)
	require.NoError(t, m.Forward(b, logits))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 10
	for range runs {
		require.NoError(t, m.Forward(b, logits))
	}
	runtime.ReadMemStats(&after)
	// The pool's job records and closures are small fixed-size allocations
	// per parallel loop (measured 52 per pass, ~6 KB, for 2 layers); nothing grows with
	// the model or the batch (the scratch of this pass is ~300 KB).
	bytes := float64(after.TotalAlloc-before.TotalAlloc) / runs
	allocs := float64(after.Mallocs-before.Mallocs) / runs
	t.Logf("per warm Forward: %.0f allocations, %.0f bytes", allocs, bytes)
	require.Less(t, bytes, 32768.0)
}
