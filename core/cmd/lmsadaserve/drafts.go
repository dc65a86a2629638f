package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/spec/sim"
)

// draftsFile is where an -engine run keeps each served workload's draft
// counts (the engine's spec.DraftStats), for -replay to fit its
// acceptance from as the run did.
const draftsFile = "engine-drafts.json"

// servedDrafts is one line of draftsFile: a policy's run of one replica
// at one load, and what its drafts did.
type servedDrafts struct {
	Policy  string
	Load    float64
	Replica int
	Drafts  spec.DraftStats
}

// minOffered is how many times a depth's first drafted child must have
// been offered to the target for the replay's acceptance to have a row
// of its own (sim.FitAcceptance).
const minOffered = 20

// fittedMachine is m replaying a workload the engine served with the
// counts d of its drafts: m's acceptance fitted from d
// (sim.FitAcceptance), or m as it is where d counts too little to fit
// (a policy that does not speculate drafts nothing). A draft model's
// replay keeps drafting always and going on always: the engine's draft
// model stops where its steps cannot pay, which the replay's own gate
// (sim.Machine.Gate) decides again, so only what the target accepts is
// taken.
func fittedMachine(m sim.Machine, d spec.DraftStats, draftModel bool) (sim.Machine, bool) {
	a, err := sim.FitAcceptance("fitted from the engine's drafts", d, minOffered)
	if err != nil {
		return m, false
	}
	if draftModel {
		a.Drafts, a.Continues = 1, 1
	}
	m.Accept = a
	return m, true
}

func writeDrafts(path string, served []servedDrafts) error {
	data, err := json.MarshalIndent(served, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// readDrafts reads an -engine run's draftsFile from dir, by policy, load
// and replica; none (and no error) for a run from before the file.
func readDrafts(dir string) (map[draftKey]spec.DraftStats, error) {
	data, err := os.ReadFile(filepath.Join(dir, draftsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var served []servedDrafts
	if err := json.Unmarshal(data, &served); err != nil {
		return nil, fmt.Errorf("%s: %w", draftsFile, err)
	}
	out := map[draftKey]spec.DraftStats{}
	for _, s := range served {
		out[keyOf(s.Policy, s.Load, s.Replica)] = s.Drafts
	}
	return out, nil
}

type draftKey struct {
	policy  string
	load    int64 // ten-thousandths, as engine-requests.csv writes the loads
	replica int
}

func keyOf(policy string, load float64, replica int) draftKey {
	return draftKey{policy, int64(math.Round(load * 1e4)), replica}
}

// pairSetting is the measured setting of a target and its draft model
// (cpu-measured-pair): the simulated engine of an -engine run of the pair
// (engineSettingOn: its curves, budget, tree limits, step gate and the
// draft cache's catch-up, the paper's categories over the committed
// prompts' lengths, outputs capped at o.maxTokens) swept over every
// policy and load. An -engine run can only afford a few points of the
// pair (13 minutes for 4 workloads at one load); this is the whole sweep
// on the same machine model, which the replays validate at the points the
// engine served. With o.curves an engine run's directory, the acceptance
// is fitted from the drafts that run counted, pooled over everything it
// served (fittedMachine); otherwise it is sim.DraftModelAcceptance.
func pairSetting(o simOpts, c sim.Curve, loads []float64, requests, replicas int) (sim.Setting, error) {
	prompts, err := loadPromptSets(o.prompts)
	if err != nil {
		return sim.Setting{}, err
	}
	eo := engineOpts{out: o.out, model: o.model, draft: o.draft, threads: o.threads, slots: o.slots,
		requests: requests, replicas: replicas, maxTokens: o.maxTokens, loads: loads, seed: o.seed,
		adaptive: true, curves: o.curves}
	s, err := engineSettingOn(eo, c, prompts)
	if err != nil {
		return sim.Setting{}, err
	}
	s.Name = "cpu-measured-pair"
	if o.curves == "" {
		return s, nil
	}
	drafts, err := readDrafts(o.curves)
	if err != nil {
		return sim.Setting{}, err
	}
	var pooled spec.DraftStats
	for _, d := range drafts {
		pooled = pooled.Add(d)
	}
	if m, ok := fittedMachine(s.Machine, pooled, true); ok {
		m.Accept.Name = "fitted from " + filepath.Join(o.curves, draftsFile)
		s.Machine = m
	}
	return s, nil
}
