package model

import (
	"fmt"
	"math"

	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
)

// Batch is one forward pass's tokens, drawn from any number of sequences.
// All slices have one entry per token.
type Batch struct {
	Tokens []int32
	// Cache is the token's sequence's cache. The CPU pass needs *kv.Cache;
	// another device's runner takes its own (see Cache).
	Cache []Cache
	// Pos is the token's position: its cache's committed length plus its
	// depth in the tree (siblings share a position).
	Pos []int
	// Parent is the in-batch index of the token's parent (same sequence,
	// earlier in the batch), or -1 when its parent is the sequence's last
	// committed token. A token attends to every committed entry of its
	// cache, its in-batch ancestors and itself. A chain (prefill) has
	// Parent[i] = i-1 within the sequence.
	Parent []int
	// Logits says whether to compute the token's logits; Forward writes one
	// Vocab-row per true entry, in batch order.
	Logits []bool
}

// scratch holds every buffer of a forward pass, grown to the largest batch
// seen and reused, so a warmed-up pass allocates nothing proportional to the
// model.
type scratch struct {
	x, xn          []float32 // [N][Embd] residual stream, normed copy
	q, k, v, att   []float32 // [N][Heads*HeadDim], [N][KVHeads*HeadDim] ×2, [N][Heads*HeadDim]
	proj           []float32 // [N][Embd] attention / FFN output projection
	gate, up       []float32 // [N][FF] (of an expert: [N][MoE.FF])
	moe            moeScratch
	acts           acts             // quantized matmul inputs
	set            [3]*quant.Packed // matmul3's matrices and outputs, kept
	setOut         [3][]float32     // here rather than allocated a call
	ropeTabs       []ropeTab        // per rotation of m.ropes: each token's cos and sin
	qTemp          []float32        // [N] query temperature (AttnTempScale)
	plan           Plan
	tok            []tokInfo // per token: its sequence and visible scratch (from plan)
	extra          []int32   // visible scratch entries outside a token's span (see tokInfo)
	seqs           []seqInfo
	rows           []int // tokens whose logits are wanted
	attBufs        chan *attnBuf
	attItems       []attnItem
	attSplits      []attnSplit // a layer's tiles run side by side (attendSplit)
	attViews       []itemView  // their items' views
	attStarts      []int
	attParts       []float32 // their partial softmaxes
	kRow           []uint16  // one key narrowed for the cache (storeKV)
	attBufsThreads int
}

// tokInfo is where a token sits in its sequence: its scratch index k (its
// K/V go to cache entry base+k) and the scratch entries it attends to: the
// contiguous run [0, span) plus extra[extraLo:extraHi], ascending. A chain
// keeps everything in the span; tree branches off the first path land in
// extra.
type tokInfo struct {
	seq              int
	k, span          int
	extraLo, extraHi int
}

type seqInfo struct {
	cache *kv.Cache
	n     int // tokens of the batch in this sequence
}

// ropeTab is one rotation's cos and sin, [N][HeadDim/2].
type ropeTab struct{ cos, sin []float32 }

// grow is b resized to n, reallocated only when its capacity is short.
func grow[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// Forward runs the model over b and writes the logits of the tokens with
// Logits[i] set into logits (one Vocab-row each, in batch order). Each
// token's K/V goes into its cache's scratch at Len()+k; nothing is
// committed (see kv.Cache.Commit).
func (m *Model) Forward(b *Batch, logits []float32) error {
	c := &m.cfg
	n := len(b.Tokens)
	if err := m.plan(b, len(logits)); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	s := &m.s
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	s.x = grow(s.x, n*c.Embd)
	s.xn = grow(s.xn, n*c.Embd)
	s.q, s.att = grow(s.q, n*qDim), grow(s.att, n*qDim)
	s.k, s.v = grow(s.k, n*kvDim), grow(s.v, n*kvDim)
	s.proj = grow(s.proj, n*c.Embd)
	s.gate, s.up = grow(s.gate, n*c.ffnWidth()), grow(s.up, n*c.ffnWidth())

	// Token embeddings: dequantized rows of token_embd.
	for i, t := range b.Tokens {
		e := &m.tokEmbd
		rb := len(e.data) / e.rows
		row := s.x[i*c.Embd : (i+1)*c.Embd]
		if err := quant.Dequantize(e.typ, e.data[int(t)*rb:(int(t)+1)*rb], row); err != nil {
			return fmt.Errorf("model: token %d: %w", t, err)
		}
		if c.EmbdScale != 0 {
			scaleRow(row, c.EmbdScale)
		}
	}
	s.ropeTabs = grow(s.ropeTabs, len(m.ropes))
	for k, r := range m.ropes {
		t := &s.ropeTabs[k]
		t.cos, t.sin = r.tables(t.cos, t.sin, b.Pos)
	}
	if c.AttnTempScale != 0 {
		s.qTemp = grow(s.qTemp, n)
		for i, p := range b.Pos {
			s.qTemp[i] = float32(math.Log(math.Floor(float64(p)/float64(c.AttnTempFloor))+1))*c.AttnTempScale + 1
		}
	}
	m.planAttnItems(b)

	for li := range m.layers {
		l := &m.layers[li]
		// Attention block: x += Wo · attention(rope(Wq·xn), rope(Wk·xn), Wv·xn)
		m.acts().set(m.preNorm(l.attnNorm, n), n, c.Embd)
		m.matmul3(&l.wq, &l.wk, &l.wv, s.q, s.k, s.v, n)
		addBiasRows(s.q, l.bq, n)
		addBiasRows(s.k, l.bk, n)
		addBiasRows(s.v, l.bv, n)
		switch c.QKNorm {
		case QKNormPerHead:
			rmsNormRows(s.q, s.q, l.qNorm, n*c.Heads, c.HeadDim, c.RMSEps)
			rmsNormRows(s.k, s.k, l.kNorm, n*c.KVHeads, c.HeadDim, c.RMSEps)
		case QKNormWhole:
			rmsNormRows(s.q, s.q, l.qNorm, n, qDim, c.RMSEps)
			rmsNormRows(s.k, s.k, l.kNorm, n, kvDim, c.RMSEps)
		}
		if l.rope != nil {
			t := &s.ropeTabs[m.ropeIndex(l.rope)]
			for i := 0; i < n; i++ {
				cs, sn := t.cos[i*c.HeadDim/2:(i+1)*c.HeadDim/2], t.sin[i*c.HeadDim/2:(i+1)*c.HeadDim/2]
				for h := 0; h < c.Heads; h++ {
					rope(s.q[i*qDim+h*c.HeadDim:i*qDim+(h+1)*c.HeadDim], cs, sn, c.RopeNeox)
				}
				for h := 0; h < c.KVHeads; h++ {
					rope(s.k[i*kvDim+h*c.HeadDim:i*kvDim+(h+1)*c.HeadDim], cs, sn, c.RopeNeox)
				}
			}
		}
		if c.AttnTempScale != 0 {
			for i := 0; i < n; i++ {
				scaleRow(s.q[i*qDim:(i+1)*qDim], s.qTemp[i])
			}
		}
		m.storeKV(b, li)
		m.attention(b, li)
		m.acts().set(s.att, n, qDim)
		m.matmul(&l.wo, s.proj, n)
		addBiasRows(s.proj, l.bo, n)
		m.residual(s.proj, l.postAttnNorm, n)

		// FFN block: x += FFN(xn), dense or a mixture of experts.
		xn := m.preNorm(l.ffnNorm, n)
		m.acts().set(xn, n, c.Embd)
		if l.moe != nil {
			m.moeFFN(l.moe, xn, n)
		} else {
			m.denseFFN(l, n)
		}
		m.residual(s.proj, l.postFNorm, n)
	}

	// Output head, only for the rows that want logits: gather them, norm,
	// and multiply straight into logits.
	nl := len(s.rows)
	if nl == 0 {
		return nil
	}
	for j, i := range s.rows {
		copy(s.proj[j*c.Embd:(j+1)*c.Embd], s.x[i*c.Embd:(i+1)*c.Embd])
	}
	m.rmsNorm(s.xn, s.proj, m.outNorm, nl)
	m.acts().set(s.xn, nl, c.Embd)
	head := &m.output
	if m.head != nil {
		head = m.head
	}
	m.matmul(head, logits[:nl*head.rows], nl)
	if c.LogitScale != 0 {
		scaleRow(logits[:nl*head.rows], 1/c.LogitScale)
	}
	if c.LogitSoftcap > 0 {
		softcap(logits[:nl*head.rows], c.LogitSoftcap)
	}
	return nil
}

// denseFFN computes s.proj = Wdown · (act(Wgate·xn) ⊙ Wup·xn) for the n
// rows of the current acts.
func (m *Model) denseFFN(l *layer, n int) {
	c, s := &m.cfg, &m.s
	m.matmul3(&l.wGate, &l.wUp, nil, s.gate, s.up, nil, n)
	addBiasRows(s.gate, l.bGate, n)
	addBiasRows(s.up, l.bUp, n)
	m.activate(s.gate, s.up, n*c.FF)
	m.acts().set(s.gate, n, c.FF)
	m.matmul(&l.wDown, s.proj, n)
	addBiasRows(s.proj, l.bDown, n)
}

// activate writes gate[i] = act(gate[i]) · up[i] for the first n, with
// the model's gated activation.
func (m *Model) activate(gate, up []float32, n int) {
	switch {
	case m.cfg.MoE.SwigluOAI:
		swigluOAI(gate, up, n)
	case m.cfg.GELU:
		geglu(gate, up, n)
	default:
		swiglu(gate, up, n)
	}
}

// preNorm is a block's input: the residual stream RMS-normed by w, or the
// stream itself for a family without pre-norms (w nil).
func (m *Model) preNorm(w []float32, n int) []float32 {
	s := &m.s
	if w == nil {
		return s.x[:n*m.cfg.Embd]
	}
	m.rmsNorm(s.xn, s.x, w, n)
	return s.xn
}

// residual adds a block's output y (n rows of Embd) into the residual
// stream, RMS-normalized by post first when the model has that norm
// (Gemma, OLMo 2) and scaled by ResidualScale (Granite); y is clobbered.
func (m *Model) residual(y, post []float32, n int) {
	s, d := &m.s, m.cfg.Embd
	if post != nil {
		m.rmsNorm(y, y, post, n)
	}
	if m.cfg.ResidualScale != 0 {
		scaleRow(y[:n*d], m.cfg.ResidualScale)
	}
	addRows(s.x, y, n*d)
}

// ropeIndex is the position of a layer's rotation in m.ropes (and its
// tables in the scratch).
func (m *Model) ropeIndex(r *ropeSpec) int {
	for k, x := range m.ropes {
		if x == r {
			return k
		}
	}
	panic("model: a layer's rotation is not among the model's")
}

// ForwardHead is Forward with logits for the first rows token ids only,
// rows floats per wanted token: the output head is the largest matrix of a
// small model with a big vocabulary (a third of the Qwen2.5-Coder 0.5B's
// bytes per token), and a draft model proposing only common tokens does
// not need the rest. rows is rounded down to a multiple of 16 (the packed
// layout's row groups); 0 or at least Vocab is Forward.
func (m *Model) ForwardHead(b *Batch, logits []float32, rows int) error {
	rows = rows / 16 * 16
	if rows <= 0 || rows >= m.cfg.Vocab {
		return m.Forward(b, logits)
	}
	if m.headView.rows != rows {
		top, err := m.output.packed.TopRows(rows)
		if err != nil {
			return err
		}
		m.headView = m.output
		m.headView.rows, m.headView.packed = rows, top
	}
	m.head = &m.headView
	defer func() { m.head = nil }()
	return m.Forward(b, logits)
}

// rmsNorm is rmsNormRows over n rows of Embd, spread over the pool for
// larger batches (rows are independent; each row's arithmetic is the same).
func (m *Model) rmsNorm(dst, src, w []float32, n int) {
	d, eps := m.cfg.Embd, m.cfg.RMSEps
	if n < 8 || haveSIMD && n < 256 { // ~50 ns a row with AVX-512 (AVX2 about twice that): a pool dispatch costs more
		rmsNormRows(dst, src, w, n, d, eps)
		return
	}
	m.pool.Run(n, 4, func(lo, hi int) {
		rmsNormRows(dst[lo*d:hi*d], src[lo*d:hi*d], w, hi-lo, d, eps)
	})
}

// plan checks the batch and works out each token's sequence, scratch index
// and visible scratch entries (Plan, shared with the other devices), and
// reserves the scratch in each cache.
func (m *Model) plan(b *Batch, nLogits int) error {
	if m.closed {
		return errClosed // its packed weights are unmapped
	}
	s := &m.s
	p := &s.plan
	if m.head != nil {
		// ForwardHead: rows of head.rows floats; Build counts Vocab-rows.
		nLogits = nLogits / m.head.rows * m.cfg.Vocab
	}
	if err := p.Build(b, m.cfg.Vocab, nLogits); err != nil {
		return err
	}
	s.seqs = s.seqs[:0]
	for i, q := range p.Seqs {
		c, ok := q.Cache.(*kv.Cache)
		if !ok || c == nil {
			return fmt.Errorf("model: sequence %d of the batch has a %T, not a CPU cache", i, q.Cache)
		}
		s.seqs = append(s.seqs, seqInfo{cache: c, n: q.N})
	}
	if err := p.Reserve(); err != nil {
		return err
	}
	n := len(p.Tok)
	if cap(s.tok) < n {
		s.tok = make([]tokInfo, n)
	}
	s.tok = s.tok[:n]
	for i, t := range p.Tok {
		s.tok[i] = tokInfo{seq: t.Seq, k: t.K, span: t.Span, extraLo: t.ExtraLo, extraHi: t.ExtraHi}
	}
	s.extra, s.rows = p.Extra, p.Rows
	return nil
}

// acts is the quantized copy of a matmul input: each matrix reading it asks
// for its activation type, and each type is quantized once (Q, K and V share
// one, as do gate and up).
type acts struct {
	x       []float32
	n, cols int
	buf     [32][]byte
	valid   [32]bool
}

func (m *Model) acts() *acts { return &m.s.acts }

func (a *acts) set(x []float32, n, cols int) {
	a.x, a.n, a.cols = x, n, cols
	a.valid = [32]bool{}
}

func (a *acts) get(at quant.Type, pool *quant.Pool) []byte {
	if a.valid[at] {
		return a.buf[at]
	}
	rb, err := at.RowBytes(a.cols)
	if err != nil {
		panic("model: " + err.Error())
	}
	if cap(a.buf[at]) < a.n*rb {
		a.buf[at] = make([]byte, a.n*rb)
	}
	dst := a.buf[at][:a.n*rb]
	x, cols := a.x, a.cols
	if a.n < 16 { // ~0.2 µs a row (SIMD): below 16 rows a pool dispatch costs more than it saves
		quant.QuantizeActs(at, x, a.n, cols, dst)
	} else {
		pool.Run(a.n, 4, func(lo, hi int) {
			quant.QuantizeActs(at, x[lo*cols:hi*cols], hi-lo, cols, dst[lo*rb:hi*rb])
		})
	}
	a.buf[at], a.valid[at] = dst, true
	return dst
}

// matmul computes out[i] = w · acts row i for the current acts.
func (m *Model) matmul(w *matrix, out []float32, n int) {
	xq := m.s.acts.get(quant.ActType(w.typ), m.pool)
	quant.MatMulPacked(w.packed, xq, n, out[:n*w.rows], m.pool)
}

// matmul3 is matmul of a, b and c (c may be nil) into oa, ob and oc, as
// one pool job where their activation types agree (quant.MatMulPackedSet).
func (m *Model) matmul3(a, b, c *matrix, oa, ob, oc []float32, n int) {
	at := quant.ActType(a.typ)
	if quant.ActType(b.typ) != at || c != nil && quant.ActType(c.typ) != at {
		m.matmul(a, oa, n)
		m.matmul(b, ob, n)
		if c != nil {
			m.matmul(c, oc, n)
		}
		return
	}
	xq := m.s.acts.get(at, m.pool)
	s := &m.s
	s.set[0], s.set[1], s.setOut[0], s.setOut[1] = a.packed, b.packed, oa[:n*a.rows], ob[:n*b.rows]
	k := 2
	if c != nil {
		s.set[2], s.setOut[2], k = c.packed, oc[:n*c.rows], 3
	}
	quant.MatMulPackedSet(s.set[:k], xq, n, s.setOut[:k], m.pool)
	s.set, s.setOut = [3]*quant.Packed{}, [3][]float32{}
}

// storeKV writes each token's K and V into its cache's scratch entry,
// rounded to float16 or quantized to Q8_0 (the cache's kv.Type).
func (m *Model) storeKV(b *Batch, li int) {
	c, s := &m.cfg, &m.s
	hd, kvDim := c.HeadDim, c.KVHeads*c.HeadDim
	for i, t := range s.tok {
		cache := s.seqs[t.seq].cache
		e := cache.Len() + t.k
		s.kRow = grow(s.kRow, cache.RowLen())
		for g := 0; g < c.KVHeads; g++ {
			narrowKV(s.kRow, s.k[i*kvDim+g*hd:i*kvDim+(g+1)*hd], cache.Type())
			cache.SetK(li, g, e, s.kRow)
			narrowKV(cache.V(li, g, e), s.v[i*kvDim+g*hd:i*kvDim+(g+1)*hd], cache.Type())
		}
	}
}
