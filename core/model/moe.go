package model

import "github.com/lmstream/lmstream/core/quant"

// The mixture-of-experts FFN. Each token's router logits pick Used of the
// layer's experts (routeToken); the batch's (token, slot) entries are then
// grouped by expert (groupByExpert), so that each expert's three
// projections run once over all the tokens routed to it, as ordinary
// packed matmuls (runExpert); last, each token's weighted expert outputs
// are summed in slot order (combine), as llama.cpp adds them.
//
// Every step is per token except the grouping, and a packed matmul gives
// a row the same bits whatever the other rows, so a token's result does
// not depend on the rest of the batch (speculative verification and
// continuous batching rely on it).

// moeScratch is the mixture-of-experts part of the forward pass's scratch.
type moeScratch struct {
	logits []float32 // [N][Experts] router logits, then probabilities
	taken  []bool    // [Experts] routeToken's marks
	sel    []int32   // [N][Used] each token's experts, best first
	weight []float32 // [N][Used] their weights
	start  []int     // [Experts+1] each expert's run of order
	order  []int32   // entries token·Used+slot, grouped by expert, tokens ascending
	xq     []byte    // one expert's input rows, gathered from the quantized acts
	hidden acts      // one expert's activated rows, quantized for down
	down   []float32 // [entries][Embd] one expert's down projection (the shared expert's: [N][Embd])
	out    []float32 // [N][Used][Embd] each entry's weighted expert output
	shGate []float32 // [N] the shared expert's weight for each token
}

// moeFFN computes s.proj = the experts' weighted sum for the n rows of the
// current acts (the FFN's normed input, xn in float32), plus the shared
// expert's gated output where the model has one.
func (m *Model) moeFFN(e *experts, xn []float32, n int) {
	x, ms := m.cfg.MoE, &m.s.moe
	ms.logits = grow(ms.logits, n*x.Experts)
	m.matmul(&e.router, ms.logits, n)
	addBiasRows(ms.logits, e.routerBias, n)
	ms.route(x, n)
	ms.groupByExpert(x.Experts, n*x.Used)
	ms.out = grow(ms.out, n*x.Used*m.cfg.Embd)
	for ex := range x.Experts {
		if entries := ms.order[ms.start[ex]:ms.start[ex+1]]; len(entries) > 0 {
			m.runExpert(e, ex, entries)
		}
	}
	m.combine(n)
	if e.shGate.rows > 0 {
		m.sharedExpert(e, xn, n)
	}
}

// sharedExpert adds to s.proj, for each of the n tokens, the shared
// expert's SwiGLU output times sigmoid(shGateInp · x): after the routed
// experts' sum, as llama.cpp adds it. The routed experts have read the
// quantized input rows already, so acts can take the hidden rows.
func (m *Model) sharedExpert(e *experts, xn []float32, n int) {
	c, s, ms := &m.cfg, &m.s, &m.s.moe
	d, sff := c.Embd, c.MoE.SharedFF
	ms.shGate = grow(ms.shGate, n)
	for t := range n {
		ms.shGate[t] = sigmoid(dot(e.shGateInp, xn[t*d:(t+1)*d]))
	}
	gate, up := s.gate[:n*sff], s.up[:n*sff]
	m.matmul(&e.shGate, gate, n)
	m.matmul(&e.shUp, up, n)
	swiglu(gate, up, n*sff)
	m.acts().set(gate, n, sff)
	ms.down = grow(ms.down, n*d)
	m.matmul(&e.shDown, ms.down, n)
	for t := range n {
		w, dst := ms.shGate[t], s.proj[t*d:(t+1)*d]
		for j, v := range ms.down[t*d : (t+1)*d] {
			dst[j] += v * w
		}
	}
}

// route picks each of the n tokens' experts and their weights.
func (ms *moeScratch) route(x MoE, n int) {
	ms.sel = grow(ms.sel, n*x.Used)
	ms.weight = grow(ms.weight, n*x.Used)
	if cap(ms.taken) < x.Experts {
		ms.taken = make([]bool, x.Experts)
	}
	ms.taken = ms.taken[:x.Experts]
	for t := range n {
		u := x.Used
		routeToken(x, ms.logits[t*x.Experts:(t+1)*x.Experts], ms.sel[t*u:(t+1)*u], ms.weight[t*u:(t+1)*u], ms.taken)
	}
}

// routeToken turns one token's router logits into its experts (sel, best
// first) and their weights (w). GatingSoftmax ranks the experts by their
// softmax over all logits and keeps those probabilities; GatingSoftmaxKept
// ranks them by logit and takes the softmax over the kept ones. With
// Normalize the kept weights are divided by their sum (at least 2^-14,
// llama.cpp's guard against dividing by 0). logits is overwritten.
func routeToken(x MoE, logits []float32, sel []int32, w []float32, taken []bool) {
	if x.Gating == GatingSoftmax {
		softmaxRow(logits)
	}
	topK(logits, sel, taken)
	for i, e := range sel {
		w[i] = logits[e]
	}
	if x.Gating == GatingSoftmaxKept {
		softmaxRow(w)
	}
	if x.Normalize {
		var sum float32
		for _, v := range w {
			sum += v
		}
		sum = max(sum, 6.103515625e-5)
		for i := range w {
			w[i] /= sum
		}
	}
}

// topK writes the indices of the len(sel) largest values of v into sel,
// largest first; equal values go lowest index first (llama.cpp's argsort
// leaves their order unspecified). Whatever the values (NaN compares
// false), sel holds distinct valid indices.
func topK(v []float32, sel []int32, taken []bool) {
	clear(taken)
	for i := range sel {
		best := -1
		for e, x := range v {
			if !taken[e] && (best < 0 || x > v[best]) {
				best = e
			}
		}
		taken[best] = true
		sel[i] = int32(best)
	}
}

// softmaxRow replaces x by its softmax: the exponentials in float32, their
// sum in float64 and one reciprocal multiplied in, as GGML's soft_max does.
func softmaxRow(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		x[i] = expf(v - mx)
		sum += float64(x[i])
	}
	scaleRow(x, float32(1/sum))
}

// groupByExpert sorts the entries (token·Used + slot) by expert, tokens
// ascending within each, into order; expert e's run is
// order[start[e]:start[e+1]].
func (ms *moeScratch) groupByExpert(nExperts, entries int) {
	if cap(ms.start) < nExperts+1 {
		ms.start = make([]int, nExperts+1)
	}
	ms.start = ms.start[:nExperts+1]
	clear(ms.start)
	for _, e := range ms.sel[:entries] {
		ms.start[e+1]++
	}
	for e := range nExperts {
		ms.start[e+1] += ms.start[e]
	}
	ms.order = grow(ms.order, entries)
	next := ms.start[:nExperts] // advanced as entries are placed, then restored
	for en, e := range ms.sel[:entries] {
		ms.order[next[e]] = int32(en)
		next[e]++
	}
	for e := nExperts - 1; e > 0; e-- {
		ms.start[e] = ms.start[e-1]
	}
	ms.start[0] = 0
}

// runExpert runs expert ex over its entries (all tokens routed to it):
// act(gate·x + b) ⊙ (up·x + b), then down, each output row weighted into
// its entry's slot of ms.out.
func (m *Model) runExpert(e *experts, ex int, entries []int32) {
	c, s, ms := &m.cfg, &m.s, &m.s.moe
	ff, k := c.MoE.FF, len(entries)
	gate, up := s.gate[:k*ff], s.up[:k*ff]
	g, u := &e.gate[ex], &e.up[ex]
	xq := m.gatherActs(quant.ActType(g.typ), entries)
	quant.MatMulPacked(g.packed, xq, k, gate, m.pool)
	if quant.ActType(u.typ) != quant.ActType(g.typ) {
		xq = m.gatherActs(quant.ActType(u.typ), entries)
	}
	quant.MatMulPacked(u.packed, xq, k, up, m.pool)
	if e.gateBias != nil {
		addBiasRows(gate, e.gateBias[ex*ff:(ex+1)*ff], k)
		addBiasRows(up, e.upBias[ex*ff:(ex+1)*ff], k)
	}
	m.activate(gate, up, k*ff)

	d := &e.down[ex]
	ms.hidden.set(gate, k, ff)
	hq := ms.hidden.get(quant.ActType(d.typ), m.pool)
	ms.down = grow(ms.down, k*c.Embd)
	quant.MatMulPacked(d.packed, hq, k, ms.down, m.pool)
	if e.downBias != nil {
		addBiasRows(ms.down, e.downBias[ex*c.Embd:(ex+1)*c.Embd], k)
	}
	for i, en := range entries {
		dst, src := ms.out[int(en)*c.Embd:(int(en)+1)*c.Embd], ms.down[i*c.Embd:(i+1)*c.Embd]
		w := ms.weight[en]
		for j, v := range src {
			dst[j] = v * w
		}
	}
}

// gatherActs copies the quantized input rows (type at) of the entries'
// tokens into ms.xq: each token's row is quantized once, for the whole
// batch, whichever experts it visits.
func (m *Model) gatherActs(at quant.Type, entries []int32) []byte {
	s, ms := &m.s, &m.s.moe
	all := s.acts.get(at, m.pool)
	rb := len(all) / s.acts.n
	if cap(ms.xq) < len(entries)*rb {
		ms.xq = make([]byte, len(entries)*rb)
	}
	xq := ms.xq[:len(entries)*rb]
	used := m.cfg.MoE.Used
	for i, en := range entries {
		t := int(en) / used
		copy(xq[i*rb:(i+1)*rb], all[t*rb:(t+1)*rb])
	}
	return xq
}

// combine writes each token's FFN output into s.proj: the sum of its
// weighted expert outputs, slot by slot, ((o₀ + o₁) + o₂)…, the order
// llama.cpp adds them in.
func (m *Model) combine(n int) {
	d, used, ms := m.cfg.Embd, m.cfg.MoE.Used, &m.s.moe
	for t := range n {
		dst := m.s.proj[t*d : (t+1)*d]
		copy(dst, ms.out[t*used*d:(t*used+1)*d])
		for slot := 1; slot < used; slot++ {
			src := ms.out[(t*used+slot)*d : (t*used+slot+1)*d]
			for j, v := range src {
				dst[j] += v
			}
		}
	}
}

// sigmoid is 1/(1 + e^-x). (llama.cpp computes the shared expert's gate as
// silu(x)/x, the same number up to rounding, but NaN at x = 0.)
func sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }
