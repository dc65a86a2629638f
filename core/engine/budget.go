package engine

import (
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/lmstream/lmstream/core/internal/sat"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/kv"
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
	// kvLimit bounds the page pool every cache takes its pages from (0:
	// no limit, or a device that reserves each cache whole).
	kvLimit int64
	// fixed is what the runtime holds besides the KV caches, and one
	// what one sequence's cache holds at the whole context.
	fixed, one int64
}

// planMemory resolves "context_length" against the model and adds up what
// a runtime of this configuration reserves at creation or may reserve
// while it serves (every slot decoding with the largest tree, every
// drafter's caches in use):
//
//   - the model file, mapped (every pass reads all of it, so it all ends
//     up resident) and the packed copy of its matrices;
//   - a draft model's file, packed weights and scratch;
//   - the forward pass's scratch for the largest batch: every slot
//     prefilling a chunk, and a verify pass with logits for every node;
//   - the KV caches: per slot, layers × kv heads × context × head dim × 2
//     (K and V) × 2 bytes (float16), but for a local (sliding-window)
//     layer only its window and one pass (a prefill chunk or a verify
//     tree, whichever is larger) in place of the context (kv.Shape); the
//     early-exit self-draft's caches (its layers only), whose passes take
//     a catch-up of at most a prompt chunk and the union of a tree's
//     paths; a draft model's caches.
//
// On a paged device (the CPU: caches take pages as their sequences grow,
// from one pool) the caches are a ceiling, not a reservation: the pool is
// limited to what the budget leaves after the rest, and one sequence at
// the whole context must fit in it. The default context is then the
// model's trained context, halved (not below 2048) until one sequence fits.
// Elsewhere every slot's caches are reserved whole, and the default
// context is the trained one up to 2048.
func planMemory(f *gguf.File, fileSize int64, path string, ctx, chunk, slots int, sc specConfig, kvType kv.Type, paged bool, budget int64) (*memoryPlan, error) {
	fp, err := model.Measure(f)
	if err != nil {
		return nil, status.Errorf(status.Model, "%v", err)
	}
	c := fp.Config
	c.KVType = kvType
	given := ctx != 0
	switch {
	case !given && paged:
		ctx = max(2, min(c.ContextTrain, MaxContext))
	case !given:
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
	p := &memoryPlan{}
	r := &p.res
	r.Add("model file (mapped)", fileSize)
	r.Add("packed weights", fp.Packed)
	r.Add("norms and biases", fp.Vectors)
	scratch := func(c model.Config) int64 {
		return c.ScratchBytes(slots*chunk+verify, verify)
	}
	r.Add("forward-pass scratch (estimate)", scratch(c))
	dc := c
	if sc.draftModelPath != "" && sc.draftModelPath != path {
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
		dc.KVType = kvType
	}
	early := sc.earlyExit
	if early == 0 {
		early = max(1, c.Layers/3)
	}
	early = min(early, c.Layers)

	// kvLines adds up the caches of every slot at context ctx: what each
	// cache holds at most, and a line per kind of cache.
	kvLines := func(ctx int, add func(string, int64)) error {
		pass := min(ctx, max(chunk, tree))
		// A draft's pass: a catch-up of at most a chunk (draftNet.catchUp),
		// and the union of the tree's paths.
		draftPass := min(ctx, chunk+tree)
		if err := kvLine(ctx, "KV caches", c, slots, c.Layers, pass, add); err != nil {
			return err
		}
		if err := kvLine(ctx, "early-exit draft caches", c, slots, early, draftPass, add); err != nil {
			return err
		}
		if sc.draftModelPath != "" {
			if err := kvLine(ctx, "draft model KV caches", dc, slots, dc.Layers, draftPass, add); err != nil {
				return fmt.Errorf("draft model: %w", err)
			}
		}
		return nil
	}
	// oneSequence is what one sequence's cache holds at the whole context.
	oneSequence := func(ctx int, add func(string, int64)) error {
		return kvLine(ctx, "KV cache of one sequence at the whole context", c, 1, c.Layers, min(ctx, max(chunk, tree)), add)
	}
	if paged && !given {
		for ctx > 2048 {
			var one int64
			err := oneSequence(ctx, func(_ string, n int64) { one = n })
			if err == nil && sat.Add(r.Total(), one) <= budget {
				break
			}
			ctx = max(2048, ctx/2)
		}
	}
	p.context, p.pass = ctx, min(ctx, max(chunk, tree))
	if !paged {
		return p, kvLines(ctx, r.Add)
	}
	var ceiling, one int64
	var lines []string
	if err := kvLines(ctx, func(what string, n int64) {
		ceiling = sat.Add(ceiling, n)
		lines = append(lines, fmt.Sprintf("%s %s", what, loop.FormatBytes(n)))
	}); err != nil {
		return nil, err
	}
	var oneLine string
	if err := oneSequence(ctx, func(what string, n int64) { oneLine, one = what, n }); err != nil {
		return nil, err
	}
	p.fixed, p.one = r.Total(), one
	if sat.Add(r.Total(), one) > budget {
		r.Add(oneLine, one)
		return p, nil // Check refuses it, with the breakdown
	}
	// The pool may take whatever the budget leaves (the slots' caches
	// never hold more than the ceiling; passes outside them, the start-up
	// measurement's, borrow pages for a while); the budget is checked for
	// the ceiling.
	p.kvLimit = budget - r.Total()
	if budget == math.MaxInt64 {
		p.kvLimit = 0 // no limit known
	}
	r.Add(fmt.Sprintf("KV pages, taken as sequences grow (%s)", strings.Join(lines, ", ")), min(ceiling, budget-r.Total()))
	return p, nil
}

// kvLine adds (to add) the caches of slots sequences of a model of shape c
// cut to its first layers, at context ctx, whose passes take at most pass
// tokens, with the numbers behind them.
func kvLine(ctx int, what string, c model.Config, slots, layers, pass int, add func(string, int64)) error {
	c.Layers = layers
	one, err := c.KVBytes(ctx, pass)
	if err != nil {
		return status.Errorf(status.InvalidRequest, `config field "context_length" %d: %v`, ctx, err)
	}
	local, rows, shape := 0, ctx, c.KVShape(ctx, pass)
	for li := range layers {
		if c.Local(li) {
			local, rows = local+1, shape.Held(li)
		}
	}
	held := ""
	if rows < ctx {
		held = fmt.Sprintf(", %d local layers holding %d", local, rows)
	}
	unit := "slots"
	if slots == 1 {
		unit = "slot"
	}
	entry := fmt.Sprintf("%d dims × 2 (K, V) × 2 B", c.HeadDim)
	if c.KVType == kv.Q8_0 {
		entry = fmt.Sprintf("%d dims × 2 (K, V) × 34/32 B (q8_0)", c.HeadDim)
	}
	entry += fmt.Sprintf(", keys padded %d/%d", kv.KStride, kv.PageSize)
	add(fmt.Sprintf("%s (%d %s × %d layers × %d kv heads × %d positions%s × %s)",
		what, slots, unit, layers, c.KVHeads, ctx, held, entry), sat.Mul(int64(slots), one))
	return nil
}

// Memory is what the runtime was planned for on a paged device: the
// memory it holds besides the KV caches (model, weights, scratch), and what
// one sequence's KV cache holds at the whole context (0 and 0 elsewhere).
func (b *Backend) Memory() (fixed, oneSequence int64) { return b.memory.fixed, b.memory.one }

// KVPages is the memory of the KV pages the runtime's caches hold now and
// the limit the memory budget puts on them (0 and 0 on a device that
// reserves its caches whole).
func (b *Backend) KVPages() (inUse, limit int64) {
	if b.pages == nil {
		return 0, 0
	}
	return b.pages.InUse(), b.pages.Limit()
}

// Reserved is the memory the backend was checked against its budget for
// (see planMemory).
func (b *Backend) Reserved() int64 { return b.reserved }
