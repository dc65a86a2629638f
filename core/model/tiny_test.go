package model

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
)

// tinySpec describes a small random model. Its shapes are multiples of 256
// so every weight type, K-quants included, can hold the layer matrices.
type tinySpec struct {
	arch      string     // "llama", "qwen2" (biases, NEOX rope) or "gemma3" (extra norms; window via kv)
	wt        quant.Type // layer matrices
	embT      quant.Type // token_embd
	untied    bool       // write output.weight
	layers    int
	embd      int
	heads     int
	kvHeads   int
	ff        int
	vocab     int
	seed      uint64
	ropeTheta float32
	// kvType is the KV cache type the model's caches take (SetKVType).
	kvType kv.Type
	// kv overrides metadata: a key of the list below gets this value
	// instead (nil drops it), another key is added.
	kv map[string]any
}

func defaultTiny(wt quant.Type) tinySpec {
	embT := quant.Q8_0
	switch wt {
	case quant.F32, quant.F16, quant.BF16:
		embT = wt // a float head keeps the float models' logits exact
	}
	return tinySpec{arch: "llama", wt: wt, embT: embT, layers: 2, embd: 256, heads: 4, kvHeads: 2,
		ff: 512, vocab: 96, seed: 1, ropeTheta: 10000}
}

// tinyGGUF builds the file of a tiny model in memory. Mutate, when not nil,
// may change the tensors before they are written (for shape-error tests).
func tinyGGUF(t testing.TB, s tinySpec, mutate func(name string, dims []int) []int) *gguf.File {
	t.Helper()
	r := rand.New(rand.NewPCG(s.seed, 42))
	w := gguf.NewWriter()
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", s.arch},
		{s.arch + ".block_count", uint32(s.layers)},
		{s.arch + ".embedding_length", uint32(s.embd)},
		{s.arch + ".attention.head_count", uint32(s.heads)},
		{s.arch + ".attention.head_count_kv", uint32(s.kvHeads)},
		{s.arch + ".feed_forward_length", uint32(s.ff)},
		{s.arch + ".context_length", uint32(512)},
		{s.arch + ".rope.freq_base", s.ropeTheta},
		{s.arch + ".attention.layer_norm_rms_epsilon", float32(1e-5)},
		{s.arch + ".rope.dimension_count", uint32(s.embd / s.heads)},
	}
	for _, kv := range kvs {
		v, over := s.kv[kv.k]
		if !over {
			v = kv.v
		}
		if v != nil {
			require.NoError(t, w.AddKV(kv.k, v))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.kv)) {
		if !slices.ContainsFunc(kvs, func(kv struct {
			k string
			v any
		}) bool {
			return kv.k == k
		}) && s.kv[k] != nil {
			require.NoError(t, w.AddKV(k, s.kv[k]))
		}
	}
	add := func(name string, typ quant.Type, dims []int, gen func() float32) {
		n := 1
		for _, d := range dims {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = gen()
		}
		rb, err := typ.RowBytes(dims[0])
		require.NoError(t, err)
		data := make([]byte, rb*n/dims[0])
		if typ == quant.F32 {
			for i, v := range x {
				data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(math.Float32bits(v)), byte(math.Float32bits(v)>>8), byte(math.Float32bits(v)>>16), byte(math.Float32bits(v)>>24)
			}
		} else {
			require.NoError(t, quant.Quantize(typ, x, data))
		}
		if mutate != nil {
			if d := mutate(name, dims); d != nil {
				dims = d
				rb, _ := typ.RowBytes(dims[0])
				data = make([]byte, rb*func() int {
					p := 1
					for _, v := range dims[1:] {
						p *= v
					}
					return p
				}())
			}
		}
		require.NoError(t, w.AddTensor(name, typ, dims, data))
	}
	normal := func(sd float64) func() float32 { return func() float32 { return float32(r.NormFloat64() * sd) } }
	norm := func() float32 { return float32(1 + 0.2*r.NormFloat64()) }
	hd := s.embd / s.heads
	qd, kvd := s.heads*hd, s.kvHeads*hd
	add("token_embd.weight", s.embT, []int{s.embd, s.vocab}, normal(1))
	add("output_norm.weight", quant.F32, []int{s.embd}, norm)
	if s.untied {
		add("output.weight", s.wt, []int{s.embd, s.vocab}, normal(1/math.Sqrt(float64(s.embd))*4))
	}
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", quant.F32, []int{s.embd}, norm)
		// Q and K a bit larger than 1/√n so attention is not uniform.
		add(p+"attn_q.weight", s.wt, []int{s.embd, qd}, normal(2/math.Sqrt(float64(s.embd))))
		add(p+"attn_k.weight", s.wt, []int{s.embd, kvd}, normal(2/math.Sqrt(float64(s.embd))))
		add(p+"attn_v.weight", s.wt, []int{s.embd, kvd}, normal(1/math.Sqrt(float64(s.embd))))
		if s.arch == "qwen2" {
			add(p+"attn_q.bias", quant.F32, []int{qd}, normal(0.3))
			add(p+"attn_k.bias", quant.F32, []int{kvd}, normal(0.3))
			add(p+"attn_v.bias", quant.F32, []int{kvd}, normal(0.3))
		}
		add(p+"attn_output.weight", s.wt, []int{qd, s.embd}, normal(1/math.Sqrt(float64(qd))))
		add(p+"ffn_norm.weight", quant.F32, []int{s.embd}, norm)
		add(p+"ffn_gate.weight", s.wt, []int{s.embd, s.ff}, normal(1/math.Sqrt(float64(s.embd))))
		add(p+"ffn_up.weight", s.wt, []int{s.embd, s.ff}, normal(1/math.Sqrt(float64(s.embd))))
		add(p+"ffn_down.weight", s.wt, []int{s.ff, s.embd}, normal(1/math.Sqrt(float64(s.ff))))
		if s.arch == "gemma3" {
			add(p+"attn_q_norm.weight", quant.F32, []int{hd}, norm)
			add(p+"attn_k_norm.weight", quant.F32, []int{hd}, norm)
			add(p+"post_attention_norm.weight", quant.F32, []int{s.embd}, norm)
			add(p+"post_ffw_norm.weight", quant.F32, []int{s.embd}, norm)
		}
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	f, err := gguf.Parse(buf.Bytes())
	require.NoError(t, err)
	return f
}

func tinyModel(t testing.TB, s tinySpec, threads int) (*Model, *gguf.File) {
	t.Helper()
	f := tinyGGUF(t, s, nil)
	m, err := Load(f, threads)
	require.NoError(t, err)
	require.NoError(t, m.SetKVType(s.kvType))
	return m, f
}

// ---- an independent float64 reference: dequantized weights, naive loops,
// the whole sequence recomputed for every call.

type refModel struct {
	arch                                 string
	layers, embd, heads, kvHeads, hd, ff int
	vocab                                int
	eps, theta                           float64
	emb, out                             [][]float64
	outNorm                              []float64
	l                                    []refLayer
}

type refLayer struct {
	an, fn                 []float64
	wq, wk, wv, wo, wg, wu [][]float64
	wd                     [][]float64
	bq, bk, bv             []float64
}

func refLoad(t testing.TB, f *gguf.File) *refModel {
	t.Helper()
	arch, err := f.String("general.architecture")
	require.NoError(t, err)
	geti := func(k string) int {
		v, err := f.Int(arch + "." + k)
		require.NoError(t, err)
		return v
	}
	getf := func(k string) float64 {
		v, err := f.Float32(arch + "." + k)
		require.NoError(t, err)
		return float64(v)
	}
	mat := func(name string) [][]float64 {
		tn, ok := f.Tensor(name)
		require.True(t, ok, name)
		cols, rows := tn.Dims[0], tn.Rows()
		x := make([]float32, cols*rows)
		require.NoError(t, quant.Dequantize(tn.Type, tn.Data, x))
		m := make([][]float64, rows)
		for r := range m {
			m[r] = make([]float64, cols)
			for c := range m[r] {
				m[r][c] = float64(x[r*cols+c])
			}
		}
		return m
	}
	vec := func(name string) []float64 {
		if _, ok := f.Tensor(name); !ok {
			return nil
		}
		return mat(name)[0]
	}
	r := &refModel{arch: arch, layers: geti("block_count"), embd: geti("embedding_length"),
		heads: geti("attention.head_count"), kvHeads: geti("attention.head_count_kv"), ff: geti("feed_forward_length"),
		eps: getf("attention.layer_norm_rms_epsilon"), theta: getf("rope.freq_base")}
	r.hd = r.embd / r.heads
	r.emb = mat("token_embd.weight")
	r.vocab = len(r.emb)
	r.outNorm = vec("output_norm.weight")
	if _, ok := f.Tensor("output.weight"); ok {
		r.out = mat("output.weight")
	} else {
		r.out = r.emb
	}
	for l := 0; l < r.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		r.l = append(r.l, refLayer{an: vec(p + "attn_norm.weight"), fn: vec(p + "ffn_norm.weight"),
			wq: mat(p + "attn_q.weight"), wk: mat(p + "attn_k.weight"), wv: mat(p + "attn_v.weight"),
			wo: mat(p + "attn_output.weight"), wg: mat(p + "ffn_gate.weight"), wu: mat(p + "ffn_up.weight"),
			wd: mat(p + "ffn_down.weight"), bq: vec(p + "attn_q.bias"), bk: vec(p + "attn_k.bias"), bv: vec(p + "attn_v.bias")})
	}
	return r
}

func refMatVec(w [][]float64, x, bias []float64) []float64 {
	y := make([]float64, len(w))
	for r, row := range w {
		for c, v := range row {
			y[r] += v * x[c]
		}
		if bias != nil {
			y[r] += bias[r]
		}
	}
	return y
}

func refNorm(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * s * w[i]
	}
	return y
}

// refRope rotates each head of x (heads×hd) for position pos.
func (r *refModel) refRope(x []float64, pos int) {
	for h := 0; h < len(x)/r.hd; h++ {
		v := x[h*r.hd : (h+1)*r.hd]
		for i := 0; i < r.hd/2; i++ {
			ang := float64(pos) * math.Pow(r.theta, -float64(2*i)/float64(r.hd))
			c, s := math.Cos(ang), math.Sin(ang)
			a, b := 2*i, 2*i+1
			if r.arch == "qwen2" {
				a, b = i, i+r.hd/2
			}
			v[a], v[b] = v[a]*c-v[b]*s, v[a]*s+v[b]*c
		}
	}
}

// logits returns the logits after every token of seq (positions 0, 1, ...).
func (r *refModel) logits(seq []int32) [][]float64 {
	n := len(seq)
	x := make([][]float64, n)
	for i, t := range seq {
		x[i] = append([]float64(nil), r.emb[t]...)
	}
	for _, l := range r.l {
		q, k, v := make([][]float64, n), make([][]float64, n), make([][]float64, n)
		for i := range x {
			xn := refNorm(x[i], l.an, r.eps)
			q[i], k[i], v[i] = refMatVec(l.wq, xn, l.bq), refMatVec(l.wk, xn, l.bk), refMatVec(l.wv, xn, l.bv)
			r.refRope(q[i], i)
			r.refRope(k[i], i)
			// The K/V cache holds float16 (see kv.Cache).
			for d := range k[i] {
				k[i][d] = float64(quant.F16ToF32(quant.F32ToF16(float32(k[i][d]))))
				v[i][d] = float64(quant.F16ToF32(quant.F32ToF16(float32(v[i][d]))))
			}
		}
		for i := range x {
			att := make([]float64, r.heads*r.hd)
			for h := 0; h < r.heads; h++ {
				g := h * r.kvHeads / r.heads
				qh := q[i][h*r.hd : (h+1)*r.hd]
				sc := make([]float64, i+1)
				mx := math.Inf(-1)
				for j := 0; j <= i; j++ {
					for d := 0; d < r.hd; d++ {
						sc[j] += qh[d] * k[j][g*r.hd+d]
					}
					sc[j] /= math.Sqrt(float64(r.hd))
					mx = math.Max(mx, sc[j])
				}
				var sum float64
				for j := range sc {
					sc[j] = math.Exp(sc[j] - mx)
					sum += sc[j]
				}
				for j := range sc {
					for d := 0; d < r.hd; d++ {
						att[h*r.hd+d] += sc[j] / sum * v[j][g*r.hd+d]
					}
				}
			}
			o := refMatVec(l.wo, att, nil)
			for d := range o {
				x[i][d] += o[d]
			}
		}
		for i := range x {
			xn := refNorm(x[i], l.fn, r.eps)
			g, u := refMatVec(l.wg, xn, nil), refMatVec(l.wu, xn, nil)
			for j := range g {
				g[j] = g[j] / (1 + math.Exp(-g[j])) * u[j]
			}
			o := refMatVec(l.wd, g, nil)
			for d := range o {
				x[i][d] += o[d]
			}
		}
	}
	out := make([][]float64, n)
	for i := range x {
		out[i] = refMatVec(r.out, refNorm(x[i], r.outNorm, r.eps), nil)
	}
	return out
}

// ---- batch helpers

// chain appends the tokens of one sequence as a chain (each the child of the
// previous one), positions from the cache's committed length.
func (b *Batch) chain(c *kv.Cache, toks []int32, allLogits bool) *Batch {
	for i, t := range toks {
		p := -1
		if i > 0 {
			p = len(b.Tokens) - 1
		}
		b.add(t, c, c.Len()+i, p, allLogits || i == len(toks)-1)
	}
	return b
}

func (b *Batch) add(tok int32, c *kv.Cache, pos, parent int, logits bool) {
	b.Tokens = append(b.Tokens, tok)
	b.Cache = append(b.Cache, c)
	b.Pos = append(b.Pos, pos)
	b.Parent = append(b.Parent, parent)
	b.Logits = append(b.Logits, logits)
}

func (b *Batch) nLogits() int {
	n := 0
	for _, l := range b.Logits {
		if l {
			n++
		}
	}
	return n
}

// run does a forward pass and returns the logits rows.
func run(t testing.TB, m *Model, b *Batch) [][]float32 {
	t.Helper()
	v := m.Config().Vocab
	out := make([]float32, b.nLogits()*v)
	require.NoError(t, m.Forward(b, out))
	rows := make([][]float32, b.nLogits())
	for i := range rows {
		rows[i] = out[i*v : (i+1)*v]
	}
	return rows
}

func commitAll(t testing.TB, c *kv.Cache) {
	t.Helper()
	idx := make([]int, c.Pending())
	for i := range idx {
		idx[i] = i
	}
	require.NoError(t, c.Commit(idx))
}

// maxRelDiff is max|a-b| / max|b| over two logit rows.
func maxRelDiff[T float32 | float64](a []float32, b []T) float64 {
	var d, s float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
		s = math.Max(s, math.Abs(float64(b[i])))
	}
	return d / s
}

func randTokens(r *rand.Rand, n, vocab int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(r.IntN(vocab))
	}
	return t
}
