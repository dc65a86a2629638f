package cuda

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/quant"
)

// mixedQwen is a small random qwen2 model (3 layers, embedding 256, 4
// heads of 64 over 2 kv heads, feed-forward 768, vocab 333; about 1 MB)
// whose matrices mix types as a Q4_K_M file does, and more: layer 0 has a
// Q6_K attn_v beside Q4_K attn_q and attn_k (Q·K·V in three launches) and
// a Q6_K ffn_down; layer 1 is Q4_K throughout (fused launches); layer 2
// mixes Q5_0, Q8_0 and Q4_1 (gate·up as two pieces). untied adds a Q6_K
// output head beside a Q4_K token_embd; tied, token_embd is Q8_0.
func mixedQwen(t testing.TB, untied bool, seed int64) *gguf.File {
	return mixedQwenShaped(t, untied, seed, 256, 4, 2)
}

// mixedQwenShaped is mixedQwen with another width (a multiple of 256, for
// the K-quants' rows) and heads.
func mixedQwenShaped(t testing.TB, untied bool, seed int64, embd, heads, kvHeads int) *gguf.File {
	const layers, ff, vocab = 3, 768, 333
	hd := embd / heads
	types := map[string]quant.Type{
		"blk.0.attn_q": quant.Q4_K, "blk.0.attn_k": quant.Q4_K, "blk.0.attn_v": quant.Q6_K, "blk.0.attn_output": quant.Q4_K,
		"blk.0.ffn_gate": quant.Q4_K, "blk.0.ffn_up": quant.Q4_K, "blk.0.ffn_down": quant.Q6_K,
		"blk.1.attn_q": quant.Q4_K, "blk.1.attn_k": quant.Q4_K, "blk.1.attn_v": quant.Q4_K, "blk.1.attn_output": quant.Q4_K,
		"blk.1.ffn_gate": quant.Q4_K, "blk.1.ffn_up": quant.Q4_K, "blk.1.ffn_down": quant.Q4_K,
		"blk.2.attn_q": quant.Q5_0, "blk.2.attn_k": quant.Q5_0, "blk.2.attn_v": quant.Q8_0, "blk.2.attn_output": quant.Q5_0,
		"blk.2.ffn_gate": quant.Q5_0, "blk.2.ffn_up": quant.Q4_1, "blk.2.ffn_down": quant.Q6_K,
		"token_embd": quant.Q8_0, "output": quant.Q6_K,
	}
	if untied {
		types["token_embd"] = quant.Q4_K
	}
	rng := rand.New(rand.NewSource(seed))
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "qwen2"}, {"qwen2.block_count", uint32(layers)}, {"qwen2.embedding_length", uint32(embd)},
		{"qwen2.attention.head_count", uint32(heads)}, {"qwen2.attention.head_count_kv", uint32(kvHeads)},
		{"qwen2.feed_forward_length", uint32(ff)}, {"qwen2.context_length", uint32(512)}, {"qwen2.rope.freq_base", float32(1e6)},
		{"qwen2.attention.layer_norm_rms_epsilon", float32(1e-6)}, {"qwen2.rope.dimension_count", uint32(hd)},
	} {
		require.NoError(t, w.AddKV(kv.k, kv.v))
	}
	add := func(name string, dims []int, sd, mean float64) {
		typ := quant.F32
		if tt, ok := types[strings.TrimSuffix(name, ".weight")]; ok && len(dims) == 2 {
			typ = tt
		}
		n := dims[0]
		if len(dims) == 2 {
			n *= dims[1]
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(mean + sd*rng.NormFloat64())
		}
		data := f32Bytes(x)
		if typ != quant.F32 {
			rb, err := typ.RowBytes(dims[0])
			require.NoError(t, err)
			data = make([]byte, rb*dims[1])
			require.NoError(t, quant.Quantize(typ, x, data))
		}
		require.NoError(t, w.AddTensor(name, typ, dims, data))
	}
	qd, kvd := heads*hd, kvHeads*hd
	sq := math.Sqrt(float64(embd))
	add("token_embd.weight", []int{embd, vocab}, 1, 0)
	add("output_norm.weight", []int{embd}, 0.2, 1)
	if untied {
		add("output.weight", []int{embd, vocab}, 4/sq, 0)
	}
	for l := 0; l < layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", []int{embd}, 0.2, 1)
		add(p+"attn_q.weight", []int{embd, qd}, 1/sq, 0)
		add(p+"attn_k.weight", []int{embd, kvd}, 1/sq, 0)
		add(p+"attn_v.weight", []int{embd, kvd}, 1/sq, 0)
		add(p+"attn_q.bias", []int{qd}, 0.3, 0)
		add(p+"attn_k.bias", []int{kvd}, 0.3, 0)
		add(p+"attn_v.bias", []int{kvd}, 0.3, 0)
		add(p+"attn_output.weight", []int{qd, embd}, 1/math.Sqrt(float64(qd)), 0)
		add(p+"ffn_norm.weight", []int{embd}, 0.2, 1)
		add(p+"ffn_gate.weight", []int{embd, ff}, 1/sq, 0)
		add(p+"ffn_up.weight", []int{embd, ff}, 1/sq, 0)
		add(p+"ffn_down.weight", []int{ff, embd}, 1/math.Sqrt(ff), 0)
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}

// mixedTol bounds max|Δlogit| / max|logit| between the GPU and the CPU on
// mixedQwen. They run the same weights; they differ in the activation
// quantization of the K-quant matmuls, the CPU's Q8_K (one scale per 256
// values) against the device's blocks of 32, and that difference grows
// through the layers. Measured on the CPU with core/quant patched (for the
// measurement only) to quantize K-quant activations in blocks of 32 as the
// device does: at most 1.5e-2 tied and 3.2e-2 untied over four seeds (and
// 0.10 when Q and K are twice as large, attention sharper, which is why
// they are not). A layout or indexing error moves the logits by their own
// order of magnitude.
const mixedTol = 0.1

// logitsDiff is max |g − c| and max |c| over a row of GPU logits g and
// CPU logits c; a NaN in g fails the test (what names the row).
func logitsDiff(t testing.TB, what string, g, c []float32) (d, s float64) {
	for i := range c {
		require.False(t, math.IsNaN(float64(g[i])), "%s: NaN", what)
		d, s = max(d, math.Abs(float64(g[i]-c[i]))), max(s, math.Abs(float64(c[i])))
	}
	return d, s
}

// TestMixedKQuantModelMatchesCPU loads mixedQwen, tied and untied, on the
// GPU and the CPU and compares the logits of a 20-token prefill (tiles of
// 8, 8 and 4 tokens), a 5-token chain and three single-token steps; the
// GPU's argmax must be the CPU's wherever the CPU's top two are further
// apart than the tolerance. It also checks the loader fused Q·K·V and
// gate·up where their types agree and split them where they do not.
func TestMixedKQuantModelMatchesCPU(t *testing.T) {
	for _, untied := range []bool{false, true} {
		t.Run(fmt.Sprintf("untied=%v", untied), func(t *testing.T) {
			f := mixedQwen(t, untied, 21)
			g, err := Load(f, Options{})
			if err != nil {
				skipOrFail(t, err)
			}
			defer g.Close()
			t.Logf("device: %s", g.Device())
			m, err := model.Load(f, 0)
			require.NoError(t, err)
			defer m.Close()
			cfg := m.Config()
			require.Equal(t, !untied, cfg.TiedOutput)
			require.Len(t, g.layers[0].qkv, 3, "Q4_K, Q4_K, Q6_K: three pieces")
			require.Len(t, g.layers[0].gateUp, 1, "Q4_K gate and up: one fused matrix")
			require.Len(t, g.layers[1].qkv, 1, "Q4_K throughout: one fused matrix")
			require.Len(t, g.layers[2].qkv, 3, "Q5_0, Q5_0, Q8_0: three pieces")
			require.Len(t, g.layers[2].gateUp, 2, "Q5_0 gate, Q4_1 up: two pieces")

			v := cfg.Vocab
			gc, err := g.NewCache(64)
			require.NoError(t, err)
			cc := m.NewCache(64)
			rng := rand.New(rand.NewSource(22))
			worst := 0.0
			step := func(what string, toks []int32, all bool) {
				var gb, cb model.Batch
				chain(&gb, gc, toks, all)
				chain(&cb, cc, toks, all)
				gb.Logits[len(toks)-1], cb.Logits[len(toks)-1] = true, true
				rows := 1
				if all {
					rows = len(toks)
				}
				gl, cl := make([]float32, rows*v), make([]float32, rows*v)
				require.NoError(t, g.Forward(&gb, gl))
				require.NoError(t, m.Forward(&cb, cl))
				commitAll(t, gc, len(toks))
				commitAll(t, cc, len(toks))
				for r := 0; r < rows; r++ {
					gr, cr := gl[r*v:(r+1)*v], cl[r*v:(r+1)*v]
					d, s := logitsDiff(t, fmt.Sprintf("%s row %d", what, r), gr, cr)
					worst = max(worst, d/s)
					require.LessOrEqual(t, d/s, mixedTol, "%s row %d: max |Δlogit| %.4f of max |logit| %.4f", what, r, d, s)
					ag, ac := argmax(gr), argmax(cr)
					if ag != ac && float64(cr[ac]-cr[ag]) > mixedTol*s {
						t.Errorf("%s row %d: GPU argmax %d, CPU %d (CPU logits %.4f vs %.4f)", what, r, ag, ac, cr[ag], cr[ac])
					}
				}
			}
			toks := func(n int) []int32 {
				out := make([]int32, n)
				for i := range out {
					out[i] = int32(rng.Intn(v))
				}
				return out
			}
			step("prefill", toks(20), true)
			step("chain", toks(5), true)
			for i := 0; i < 3; i++ {
				step(fmt.Sprintf("decode %d", i), toks(1), false)
			}
			t.Logf("max |Δlogit| / max |logit|: %.3g (tolerance %.2g)", worst, mixedTol)
		})
	}
}

// TestAttentionGroupsMatch runs mixedQwen widened to other heads — 8 of 64
// dimensions on one kv head, and 6 of 128 (Qwen2.5-Coder-1.5B's head
// dimension, on the other attention instances) — so that verify-sized
// passes run attention blocks taking several query heads. A 250-token
// prefill must match the CPU within mixedTol, and give exactly the logits
// of the same tokens run one at a time (a block per head) and of the pass
// with a block per head.
func TestAttentionGroupsMatch(t *testing.T) {
	for _, sh := range []struct{ embd, heads, kvHeads int }{{512, 8, 1}, {768, 6, 1}} {
		t.Run(fmt.Sprintf("%d heads of %d", sh.heads, sh.embd/sh.heads), func(t *testing.T) {
			f := mixedQwenShaped(t, false, 23, sh.embd, sh.heads, sh.kvHeads)
			g, err := Load(f, Options{})
			if err != nil {
				skipOrFail(t, err)
			}
			defer g.Close()
			m, err := model.Load(f, 0)
			require.NoError(t, err)
			defer m.Close()
			v := m.Config().Vocab
			rng := rand.New(rand.NewSource(24))
			toks := make([]int32, 250) // every attention warp has keys
			for i := range toks {
				toks[i] = int32(rng.Intn(v))
			}
			// pass runs toks in passes of chunk tokens on the GPU.
			pass := func(chunk, groupFrom int) []float32 {
				g.SetAttentionGroupFrom(groupFrom)
				out := make([]float32, len(toks)*v)
				c, err := g.NewCache(256)
				require.NoError(t, err)
				for at := 0; at < len(toks); at += chunk {
					end := min(at+chunk, len(toks))
					var b model.Batch
					chain(&b, c, toks[at:end], true)
					require.NoError(t, g.Forward(&b, out[at*v:end*v]))
					commitAll(t, c, end-at)
				}
				return out
			}
			grouped := pass(len(toks), 1)
			for _, other := range []struct {
				what             string
				chunk, groupFrom int
			}{{"one token a pass", 1, 1}, {"a block per head", len(toks), 1 << 30}} {
				got := pass(other.chunk, other.groupFrom)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(grouped[i]) {
						t.Fatalf("%s: token %d logit %d is %v, %v with grouped attention", other.what, i/v, i%v, got[i], grouped[i])
					}
				}
			}
			g.SetAttentionGroupFrom(0)
			var cb model.Batch
			cc := m.NewCache(256)
			chain(&cb, cc, toks, true)
			cl := make([]float32, len(toks)*v)
			require.NoError(t, m.Forward(&cb, cl))
			worst := 0.0
			for r := range toks {
				d, s := logitsDiff(t, fmt.Sprintf("row %d", r), grouped[r*v:(r+1)*v], cl[r*v:(r+1)*v])
				worst = max(worst, d/s)
				require.LessOrEqual(t, d/s, mixedTol, "row %d: max |Δlogit| %.4f of max |logit| %.4f", r, d, s)
			}
			t.Logf("max |Δlogit| / max |logit| against the CPU: %.3g (tolerance %.2g)", worst, mixedTol)
		})
	}
}
