package engine

import (
	"fmt"
	"os"

	"github.com/lmstream/lmstream/core/internal/sat"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
)

// memoryPlan is a configuration's resolved context length and the memory it
// reserves, worked out from the GGUF metadata before anything is allocated.
type memoryPlan struct {
	context int
	pass    int // the most tokens a slot's cache takes in one pass
	res     loop.Reservation
}

// planMemory resolves "context_length" against the model and adds up what
// a runtime of this configuration reserves at creation or may reserve
// while it serves (every slot decoding with the largest tree, every
// drafter's caches in use):
//
//   - the model file, mapped (every pass reads all of it, so it all ends
//     up resident) and the packed copy of its matrices;
//   - one KV cache per slot: layers × kv heads × context × head dim × 2
//     (K and V) × 2 bytes (float16), but for a local (sliding-window)
//     layer only its window and one pass (a prefill chunk or a verify
//     tree, whichever is larger) in place of the context (kv.Shape);
//   - the early-exit self-draft's caches (its layers only), one per slot,
//     whose passes take a catch-up of at most a prompt chunk and the
//     union of a tree's paths;
//   - a draft model's file, packed weights, caches and scratch;
//   - the forward pass's scratch for the largest batch: every slot
//     prefilling a chunk, and a verify pass with logits for every node.
func planMemory(f *gguf.File, fileSize int64, path string, ctx, chunk, slots int, sc specConfig) (*memoryPlan, error) {
	fp, err := model.Measure(f)
	if err != nil {
		return nil, status.Errorf(status.Model, "%v", err)
	}
	c := fp.Config
	switch {
	case ctx == 0:
		ctx = max(2, min(c.ContextTrain, 2048))
	case ctx > c.ContextTrain:
		return nil, status.Errorf(status.InvalidRequest, `config field "context_length" is %d but the model was trained for %d positions (%s.context_length): at most %d`, ctx, c.ContextTrain, c.Arch, c.ContextTrain)
	}
	// A verify pass holds every decoding slot's root plus at most the budget
	// B of drafted nodes (spec.Scheduler), and never more than full trees;
	// a B priced from the measured cost can reach MaxSpecBudget.
	b := sc.sched.Budget
	if !sc.budgetGiven {
		b = MaxSpecBudget
	}
	depth := sc.sched.MaxDepth
	if !sc.depthGiven {
		depth = max(depth, ngramMaxDepth) // the n-gram index's (ngramShape)
	}
	verify := min(slots*(1+depth*sc.sched.MaxWidth), slots+b)
	// One slot's pass: a prompt chunk, or its tree (its root and at most
	// every drafted node).
	tree := min(1+depth*sc.sched.MaxWidth, 1+b)
	pass := min(ctx, max(chunk, tree))
	// A draft's pass: a catch-up of at most a chunk (draftNet.catchUp),
	// and the union of the tree's paths.
	draftPass := min(ctx, chunk+tree)
	p := &memoryPlan{context: ctx, pass: pass}
	r := &p.res
	r.Add("model file (mapped)", fileSize)
	r.Add("packed weights", fp.Packed)
	r.Add("norms and biases", fp.Vectors)
	kvLine := func(what string, layers, pass int) error {
		kc := c
		kc.Layers = layers
		one, err := kc.KVBytes(ctx, pass)
		if err != nil {
			return status.Errorf(status.InvalidRequest, `config field "context_length" %d: %v`, ctx, err)
		}
		local, rows, shape := 0, ctx, kc.KVShape(ctx, pass)
		for li := range layers {
			if c.Local(li) {
				local, rows = local+1, shape.Held(li)
			}
		}
		held := ""
		if rows < ctx {
			held = fmt.Sprintf(", %d local layers holding %d", local, rows)
		}
		r.Add(fmt.Sprintf("%s (%d slots × %d layers × %d kv heads × %d positions%s × %d dims × 2 (K, V) × 2 B)",
			what, slots, layers, c.KVHeads, ctx, held, c.HeadDim), sat.Mul(int64(slots), one))
		return nil
	}
	if err := kvLine("KV caches", c.Layers, pass); err != nil {
		return nil, err
	}
	early := sc.earlyExit
	if early == 0 {
		early = max(1, c.Layers/3)
	}
	if err := kvLine("early-exit draft caches", min(early, c.Layers), draftPass); err != nil {
		return nil, err
	}
	scratch := func(c model.Config) int64 {
		return c.ScratchBytes(slots*chunk+verify, verify)
	}
	r.Add("forward-pass scratch (estimate)", scratch(c))
	if sc.draftModelPath == "" {
		return p, nil
	}
	dc := c
	if sc.draftModelPath != path {
		df, err := gguf.Open(sc.draftModelPath)
		if err != nil {
			return nil, status.Errorf(status.Model, "draft model %s: %v", sc.draftModelPath, err)
		}
		defer df.Close()
		dfp, err := model.Measure(df)
		if err != nil {
			return nil, status.Errorf(status.Model, "draft model %s: %v", sc.draftModelPath, err)
		}
		if st, err := os.Stat(sc.draftModelPath); err == nil {
			r.Add("draft model file (mapped)", st.Size())
		}
		r.Add("draft model packed weights", dfp.Packed)
		r.Add("draft model scratch (estimate)", scratch(dfp.Config))
		dc = dfp.Config
	}
	one, err := dc.KVBytes(ctx, draftPass)
	if err != nil {
		return nil, status.Errorf(status.InvalidRequest, `config field "context_length" %d: draft model: %v`, ctx, err)
	}
	r.Add(fmt.Sprintf("draft model KV caches (%d slots × %d layers × %d kv heads × %d positions × %d dims × 2 (K, V) × 2 B)",
		slots, dc.Layers, dc.KVHeads, ctx, dc.HeadDim), sat.Mul(int64(slots), one))
	return p, nil
}

// Reserved is the memory the backend was checked against its budget for
// (see planMemory).
func (b *Backend) Reserved() int64 { return b.reserved }
