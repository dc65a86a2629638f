package model

import (
	"math"
	"slices"
)

// routerTensor is layer 0's router, whose width is the expert count: the
// count is checked against it before anything is sized by the count.
const routerTensor = "blk.0.ffn_gate_inp.weight"

// readMoE reads the expert keys of a family with a mixture-of-experts FFN
// into c.MoE. A dense family reads none of them (refuseUnread lets them
// through only when they are 0).
func readMoE(c *Config, fam family, m *meta) {
	r := fam.moe
	if r == nil {
		return
	}
	def, lo := -1, 1
	if r.optional {
		def, lo = 0, 0
	}
	var n int
	m.integer("expert_count", &n, def, lo, math.MaxInt)
	if n == 0 || len(m.errs) > 0 {
		// Dense (Mixtral's family without experts): an expert_used_count
		// other than 0 is then refused as unread.
		return
	}
	// An expert count of 2^31 must not size anything: the router's
	// tensor, which the file really holds, bounds it.
	router, ok := m.f.Tensor(routerTensor)
	switch {
	case !ok:
		m.fail("%s.expert_count is %d but the file has no router tensor %s", c.Arch, n, routerTensor)
		return
	case !slices.Equal(router.Dims, []int{c.Embd, n}):
		m.fail("%s.expert_count is %d but the router %s has dims %v, want [%d %d]", c.Arch, n, routerTensor, router.Dims, c.Embd, n)
		return
	}
	moe := MoE{Experts: n, Gating: r.gating, Normalize: r.normalize, Biases: r.biases, SwigluOAI: r.swigluOAI}
	m.integer("expert_used_count", &moe.Used, -1, 1, n)
	// Grouped routing (DeepSeek V3's) is not supported: one group, or none,
	// routes as plain top-k, and the groups used then mean nothing.
	var groups, groupsUsed int
	m.integer("expert_group_count", &groups, 0, 0, 1)
	m.integer("expert_group_used_count", &groupsUsed, 0, 0, math.MaxInt)
	if len(m.errs) > 0 {
		return
	}
	moe.FF = c.FF
	if r.ffKey {
		def := -1
		if r.ffKeyOptional {
			def = max(c.FF/moe.Used, 1)
		}
		m.integer("expert_feed_forward_length", &moe.FF, def, 1, math.MaxInt)
	}
	if r.shared {
		m.integer("expert_shared_feed_forward_length", &moe.SharedFF, c.FF, 1, math.MaxInt)
	}
	c.MoE = moe
}
