package model

import (
	"fmt"

	"github.com/lmstream/lmstream/core/quant"
)

// experts is one layer's mixture of experts: the router and each expert's
// three projections. The file stores each projection of all experts as one
// 3-D tensor, expert e's rows the e-th contiguous slab; every expert here
// is a view of its slab, packed as a matrix of its own.
type experts struct {
	router     matrix    // Embd → Experts logits
	routerBias []float32 // [Experts], nil when the family has none
	gate, up   []matrix  // per expert: Embd → FF
	down       []matrix  // per expert: FF → Embd
	// The experts' biases, expert e's at [e·width, (e+1)·width); nil when
	// the family has none.
	gateBias, upBias, downBias []float32
	// The shared expert (MoE.SharedFF > 0): its projections and the
	// [Embd] vector whose dot product with the input, through a sigmoid,
	// weights its output.
	shGate, shUp, shDown matrix
	shGateInp            []float32
}

// matrices are the router and every expert's projections, expert by
// expert (the order pack lays them out in).
func (e *experts) matrices() []*matrix {
	all := []*matrix{&e.router}
	for i := range e.gate {
		all = append(all, &e.gate[i], &e.up[i], &e.down[i])
	}
	if e.shGate.rows > 0 {
		all = append(all, &e.shGate, &e.shUp, &e.shDown)
	}
	return all
}

// experts reads layer p's router and expert tensors. Each 3-D tensor's
// dims are checked against the configuration before the per-expert views
// are made, so c.MoE.Experts (already checked against layer 0's router)
// sizes nothing the file does not hold.
func (ld *loader) experts(c *Config, p string) *experts {
	x := c.MoE
	e := &experts{router: ld.matrix(p+"ffn_gate_inp.weight", c.Embd, x.Experts)}
	gate := ld.expertMatrix(p+"ffn_gate_exps.weight", c.Embd, x.FF, x.Experts)
	up := ld.expertMatrix(p+"ffn_up_exps.weight", c.Embd, x.FF, x.Experts)
	down := ld.expertMatrix(p+"ffn_down_exps.weight", x.FF, c.Embd, x.Experts)
	if x.Biases {
		e.routerBias = ld.vector(p+"ffn_gate_inp.bias", x.Experts)
		e.gateBias = ld.expertBias(p+"ffn_gate_exps.bias", x.FF, x.Experts)
		e.upBias = ld.expertBias(p+"ffn_up_exps.bias", x.FF, x.Experts)
		e.downBias = ld.expertBias(p+"ffn_down_exps.bias", c.Embd, x.Experts)
	}
	if sff := x.SharedFF; sff > 0 {
		e.shGateInp = ld.vector(p+"ffn_gate_inp_shexp.weight", c.Embd)
		e.shGate = ld.matrix(p+"ffn_gate_shexp.weight", c.Embd, sff)
		e.shUp = ld.matrix(p+"ffn_up_shexp.weight", c.Embd, sff)
		e.shDown = ld.matrix(p+"ffn_down_shexp.weight", sff, c.Embd)
	}
	if ld.err != nil {
		return nil
	}
	e.gate, e.up, e.down = gate.slabs(x.Experts), up.slabs(x.Experts), down.slabs(x.Experts)
	return e
}

// expertMatrix is a 3-D tensor of n matrices of rows×cols, as one matrix
// of n·rows rows.
func (ld *loader) expertMatrix(name string, cols, rows, n int) matrix {
	return ld.matrixOf(name, ld.tensor(name, cols, rows, n), cols, rows*n)
}

// expertBias is a 2-D tensor of n bias vectors of width elements, flat.
func (ld *loader) expertBias(name string, width, n int) []float32 {
	t := ld.tensor(name, width, n)
	if t == nil || ld.dry {
		return nil
	}
	v := make([]float32, width*n) // the file holds these elements
	if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
		ld.fail(fmt.Errorf("model: tensor %s: %w", name, err))
		return nil
	}
	return v
}

// slabs splits a matrix of n stacked slabs into n matrices.
func (w matrix) slabs(n int) []matrix {
	rows := w.rows / n
	out := make([]matrix, n)
	for i := range out {
		out[i] = w.rowsView(i*rows, (i+1)*rows)
	}
	return out
}
