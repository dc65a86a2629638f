// Package serving is what a serving system is, as the engine runs it and
// the simulator (spec/sim) models it: the table of systems (AdaServe, its
// ablations, SpecInfer, incremental decoding, Sarathi-Serve, vLLM-like) with
// each one's speculation policy, prefill mode, batching and admission
// order, the runtime config's names for them, and the admission rule
// itself. The engine and the simulator both read it, so they run the same
// definitions, and the library links none of the simulator.
//
// One word per concept: a spec.Policy is how candidate trees are chosen
// (AdaServe, greedy, a fixed tree, none); a System is a whole serving
// system, built on one spec.Policy; the runtime config's "spec_policy"
// names a System (ByConfigName).
package serving

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
)

// Prefill is how an iteration treats prompts.
type Prefill int

const (
	// Chunked prefill (Sarathi-Serve, and lmstream's engine): prompts are
	// fed in chunks beside the decoding requests, at most PrefillBudget
	// prompt tokens an iteration (the simulator's Machine.PrefillBudget), earliest TTFT deadline first.
	Chunked Prefill = iota
	// Preempt (vLLM's default scheduler): an iteration with a prompt to
	// prefill runs the prompts whole and nothing else; decoding waits.
	Preempt
)

// Batching limits how many decoding requests run in an iteration (the
// paper's §6.3 continuous-batching strategies).
type Batching int

const (
	// All decoding requests run every iteration.
	All Batching = iota
	// FCFS: while any request has a tighter TPOT SLO than T(all), the
	// decode batch shrinks to the largest n with T(n) within the tightest
	// SLO, the earliest arrivals running and the rest preempted.
	FCFS
	// STTA (shortest time to attain): the same dynamic batch size, but the
	// requests closest to violating their SLO (largest A(r)) run.
	STTA
)

// System is one serving system: how it speculates (its spec.Policy),
// prefills, batches and admits. The engine runs one (ByConfigName) and the
// simulator (spec/sim) compares them all.
type System struct {
	Name     string
	Spec     spec.Policy // the speculation policy (spec.Incremental: none)
	Branch   []int       // SpecInfer's / fixed-length speculation's tree
	Prefill  Prefill
	Batching Batching
	// FCFSAdmit admits by arrival alone, ignoring TTFT deadlines.
	FCFSAdmit bool
	// Order is the order of AdaServe's SLO phase (spec.Config.Order).
	Order spec.Order
	// SLOChunk sizes the prefill chunk of an iteration so that the
	// iteration keeps every decoding request that can still meet its
	// TPOT SLO on pace (spec.PrefillChunk).
	SLOChunk bool
	// SLOBatch lets decoding requests far ahead of their TPOT SLO sit
	// out an iteration that would leave another behind its own
	// (spec.SitOut).
	SLOBatch bool
}

// Systems are the systems the evaluation compares.
var Systems = []System{
	// AdaServe's SLO customization reaches the prefill chunk
	// (spec.PrefillChunk) and the roots (spec.SitOut) too;
	// "adaserve-fixed" is the paper's, with the fixed chunk every other
	// chunked policy takes and every decoding request in every
	// iteration, and "adaserve-all" has the SLO-sized chunk alone.
	{Name: "adaserve", Spec: spec.AdaServe, SLOChunk: true, SLOBatch: true},
	// The public implementation's SLO-phase order: the requests closest
	// to their SLO first, so a budget too small for all saves the most.
	{Name: "adaserve-asc", Spec: spec.AdaServe, Order: spec.Ascending, SLOChunk: true, SLOBatch: true},
	{Name: "adaserve-fixed", Spec: spec.AdaServe},
	{Name: "adaserve-all", Spec: spec.AdaServe, SLOChunk: true},
	{Name: "global-greedy", Spec: spec.GlobalGreedy},
	{Name: "equal-greedy", Spec: spec.EqualGreedy},
	{Name: "specinfer", Spec: spec.SpecInfer},
	{Name: "incremental", Spec: spec.Incremental},
	{Name: "sarathi", Spec: spec.Incremental, FCFSAdmit: true},
	{Name: "vllm", Spec: spec.Incremental, Prefill: Preempt, FCFSAdmit: true},
	{Name: "vllm-spec4", Spec: spec.SpecInfer, Branch: []int{1, 1, 1, 1}, Prefill: Preempt, FCFSAdmit: true},
}

// Strategies are §6.3's continuous-batching strategies (SepPipe is run by
// spec/sim's Sweep separately: one engine per category).
var Strategies = []System{
	{Name: "cb-fcfs", Spec: spec.Incremental, Batching: FCFS, FCFSAdmit: true},
	{Name: "cb-stta", Spec: spec.Incremental, Batching: STTA},
}

// ByName finds a system by its Name among Systems and Strategies.
func ByName(name string) (System, error) {
	for _, p := range append(slices.Clone(Systems), Strategies...) {
		if p.Name == name {
			return p, nil
		}
	}
	return System{}, fmt.Errorf("serving: unknown system %q", name)
}

// configNames maps each "spec_policy" value, in the order the errors list
// them, to the System of the same name. "fcfs" is another name for
// "sarathi".
var configNames = []struct{ config, system string }{
	{"adaserve", "adaserve"}, {"incremental", "incremental"}, {"specinfer", "specinfer"},
	{"equal_greedy", "equal-greedy"}, {"global_greedy", "global-greedy"},
	{"sarathi", "sarathi"}, {"fcfs", "sarathi"}, {"vllm", "vllm"},
}

// ByConfigName is the System a "spec_policy" value names (either
// spelling, "equal_greedy" or the System's "equal-greedy", in any case):
// the one table the engine and the AdaServe harness (core/cmd/lmsadaserve)
// read. An unknown name is an InvalidRequest error listing the known ones.
func ByConfigName(name string) (System, error) {
	key := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	var want []string
	for _, p := range configNames {
		if p.config == key {
			return ByName(p.system)
		}
		want = append(want, fmt.Sprintf("%q", p.config))
	}
	return System{}, status.Errorf(status.InvalidRequest, `config field "spec_policy": unknown policy %q (want %s or %s)`,
		name, strings.Join(want[:len(want)-1], ", "), want[len(want)-1])
}
