package spec

import (
	"errors"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// toyDraft is a DraftModel whose distribution after a context depends on its
// last two tokens; it records every call.
type toyDraft struct {
	vocab int
	rows  [][]float32
	calls [][]Query
	fail  bool
}

func newToyDraft(vocab int, seed uint64) *toyDraft {
	rng := NewSplitMix(seed)
	m := &toyDraft{vocab: vocab}
	for range vocab * vocab {
		row := make([]float32, vocab)
		sum := 0.0
		w := make([]float64, vocab)
		for i := range w {
			w[i] = math.Pow(rng.Uniform(), 3) // skewed
			sum += w[i]
		}
		for i := range row {
			row[i] = float32(w[i] / sum)
		}
		m.rows = append(m.rows, row)
	}
	return m
}

func (m *toyDraft) Vocab() int { return m.vocab }

func (m *toyDraft) dist(ctx []int32, path []int32) []float32 {
	all := append(append([]int32{}, ctx...), path...)
	n := len(all)
	return m.rows[int(all[n-2])*m.vocab+int(all[n-1])]
}

func (m *toyDraft) NextDistributions(qs []Query, out []float32) error {
	if m.fail {
		return errors.New("boom")
	}
	cp := make([]Query, len(qs))
	for i, q := range qs {
		cp[i] = q
		cp[i].Path = append([]int32{}, q.Path...)
		copy(out[i*m.vocab:], m.dist(q.Context, q.Path))
	}
	m.calls = append(m.calls, cp)
	return nil
}

// pathTokens returns the tokens below the root down to node.
func pathTokens(t *Tree, node int) []int32 {
	var p []int32
	for j := node; j > 0; j = int(t.Nodes[j].Parent) {
		p = append(p, t.Nodes[j].Token)
	}
	slices.Reverse(p)
	return p
}

func TestBeamDrafter(t *testing.T) {
	m := newToyDraft(9, 1)
	b := &BeamDrafter{Model: m}
	seqs := []*Seq{
		{Tokens: []int32{1, 2, 3}, Prompt: 2},
		{Tokens: []int32{4, 5}, Prompt: 1},
		{Tokens: []int32{0, 8, 7, 6}, Prompt: 4},
	}
	trees := []*Tree{{}, {}, {}}
	const d, w = 4, 3
	require.NoError(t, b.Draft(seqs, Shape{Depth: d, Width: w}, trees))

	// One batched model call per layer: the roots, then n×w nodes.
	require.Len(t, m.calls, d)
	require.Len(t, m.calls[0], len(seqs))
	for k := 1; k < d; k++ {
		require.Len(t, m.calls[k], len(seqs)*w)
		for _, q := range m.calls[k] {
			// Every query's parent was a query of the previous call.
			found := false
			for _, p := range m.calls[k-1] {
				found = found || (p.Seq == q.Seq && p.Node == q.Parent)
			}
			require.True(t, found)
			require.Equal(t, k, q.Depth)
			require.Equal(t, pathTokens(trees[q.Seq], q.Node), q.Path)
		}
	}

	for i, tr := range trees {
		require.NoError(t, tr.Validate())
		require.Equal(t, seqs[i].Tokens[len(seqs[i].Tokens)-1], tr.Root())
		require.Equal(t, []int{1, w, w, w, w}, tr.Widths(nil))
		// Path probabilities are products of the draft's conditionals.
		for v := 1; v < tr.Len(); v++ {
			n := tr.Nodes[v]
			cond := m.dist(seqs[i].Tokens, pathTokens(tr, int(n.Parent)))[n.Token]
			require.InDelta(t, tr.Nodes[n.Parent].Prob*float64(cond), n.Prob, 1e-9)
		}
		// Brute force: each layer holds the w most probable of all
		// children (whole vocabulary) of the previous layer.
		for depth := 1; depth <= d; depth++ {
			var all []float64
			for v := range tr.Nodes {
				if int(tr.Nodes[v].Depth) != depth-1 {
					continue
				}
				row := m.dist(seqs[i].Tokens, pathTokens(tr, v))
				for _, p := range row {
					all = append(all, tr.Nodes[v].Prob*float64(p))
				}
			}
			sort.Sort(sort.Reverse(sort.Float64Slice(all)))
			var got []float64
			for _, n := range tr.Nodes {
				if int(n.Depth) == depth {
					got = append(got, n.Prob)
				}
			}
			sort.Sort(sort.Reverse(sort.Float64Slice(got)))
			require.InDeltaSlice(t, all[:w], got, 1e-12, "layer %d", depth)
		}
		// Siblings come in descending probability.
		for v := range tr.Nodes {
			n := tr.Nodes[v]
			for c := n.FirstChild + 1; c < n.FirstChild+n.Children; c++ {
				require.GreaterOrEqual(t, tr.Nodes[c-1].Prob, tr.Nodes[c].Prob)
			}
		}
	}

	// Fixed branching (SpecInfer's tree).
	m.calls = nil
	require.NoError(t, b.Draft(seqs[:1], Shape{Branch: DefaultBranch}, trees))
	require.Equal(t, []int{1, 1, 1, 3, 3, 3, 3, 3, 3}, trees[0].Widths(nil))
	require.Len(t, m.calls, len(DefaultBranch))

	m.fail = true
	require.Error(t, b.Draft(seqs, Shape{Depth: 2, Width: 2}, trees))
}

func TestTopK(t *testing.T) {
	row := []float32{0.1, 0, 0.3, 0.3, 0.05, 0.25}
	got := topK(row, 3, nil)
	require.Equal(t, []int32{2, 3, 5}, []int32{got[0].token, got[1].token, got[2].token})
	got = topK(row, 10, nil)
	require.Len(t, got, 5, "zeros are never proposed")
	require.Equal(t, int32(4), got[4].token)
}

// topKToy serves the same toy model through TopKDraftModel.
type topKToy struct{ *toyDraft }

func (m topKToy) NextTopK(qs []Query, k int, ids []int32, probs []float32) error {
	for i, q := range qs {
		for j, c := range topK(m.dist(q.Context, q.Path), k, nil) {
			ids[i*k+j], probs[i*k+j] = c.token, float32(c.cond)
		}
	}
	return nil
}

func TestBeamDrafterTopK(t *testing.T) {
	m := newToyDraft(9, 8)
	seqs := newSeqs(3)
	full := []*Tree{{}, {}, {}}
	fused := []*Tree{{}, {}, {}}
	for _, shape := range []Shape{{Depth: 4, Width: 3}, {Depth: 2, Width: 1}, {Branch: DefaultBranch}} {
		require.NoError(t, (&BeamDrafter{Model: m}).Draft(seqs, shape, full))
		require.NoError(t, (&BeamDrafter{Model: topKToy{m}}).Draft(seqs, shape, fused))
		for i := range full {
			require.Equal(t, full[i].Nodes, fused[i].Nodes)
		}
	}
}

// countingDraft counts the queries of each call.
type countingDraft struct {
	*toyDraft
	calls [][]Query
}

func (m *countingDraft) NextDistributions(qs []Query, out []float32) error {
	m.calls = append(m.calls, append([]Query(nil), qs...))
	return m.toyDraft.NextDistributions(qs, out)
}

func TestSpineDrafter(t *testing.T) {
	m := &countingDraft{toyDraft: newToyDraft(12, 3)}
	seqs := newSeqs(3)
	trees := []*Tree{{}, {}, {}}
	shape := Shape{Depth: 4, Width: 3, Spine: true}
	require.NoError(t, (&BeamDrafter{Model: m}).Draft(seqs, shape, trees))
	require.Len(t, m.calls, 4)
	for d, qs := range m.calls {
		require.Len(t, qs, len(seqs), "one query per sequence at depth %d", d)
		for i, q := range qs {
			require.Equal(t, i, q.Seq)
			require.Equal(t, d, q.Depth)
		}
	}
	for i, tr := range trees {
		spine := 0 // the node expanded at each depth
		for d := 1; d <= 4; d++ {
			kids := tr.Nodes[spine]
			require.EqualValues(t, 3, kids.Children, "seq %d depth %d", i, d)
			// The expanded child is the most probable one; the others are leaves.
			first := int(kids.FirstChild)
			for c := first; c < first+3; c++ {
				require.LessOrEqual(t, tr.Nodes[c].Prob, tr.Nodes[first].Prob)
				if c > first {
					require.Zero(t, tr.Nodes[c].Children)
				}
			}
			// Path probabilities multiply the draft's conditionals.
			dist := m.dist(seqs[i].Tokens, pathTokens(tr, spine))
			require.InDelta(t, tr.Nodes[spine].Prob*float64(dist[tr.Nodes[first].Token]), tr.Nodes[first].Prob, 1e-9)
			spine = first
		}
		require.Equal(t, 1+4*3, tr.Len())
	}
}

func TestStopProbEndsDrafting(t *testing.T) {
	m := newToyDraft(12, 3)
	seqs := newSeqs(3)
	for _, spine := range []bool{true, false} {
		trees := []*Tree{{}, {}, {}}
		const stop = 0.2
		require.NoError(t, (&BeamDrafter{Model: m}).Draft(seqs, Shape{Depth: 6, Width: 2, Spine: spine, StopProb: stop}, trees))
		for _, tr := range trees {
			for _, n := range tr.Nodes[1:] {
				if n.Children > 0 {
					require.GreaterOrEqual(t, n.Prob, stop, "a node under StopProb was expanded")
				}
			}
			// Without the cut the trees would be 6 layers deep; the toy's
			// probabilities fall under 0.2 well before.
			require.Less(t, tr.Depth(), 6)
		}
	}
}

// TestStopProbReadsCalibration: with Shape.Calib the stop rule judges a
// node by its calibrated probability. Raised factors expand nodes whose
// raw probability is under StopProb (so trees grow deeper), lowered ones
// stop nodes above it; the trees keep the raw probabilities.
func TestStopProbReadsCalibration(t *testing.T) {
	m := newToyDraft(12, 3)
	seqs := newSeqs(3)
	const stop = 0.2
	depths := func(calib []float64) (total int) {
		trees := []*Tree{{}, {}, {}}
		require.NoError(t, (&BeamDrafter{Model: m}).Draft(seqs, Shape{Depth: 6, Width: 2, Spine: true, StopProb: stop, Calib: calib}, trees))
		for _, tr := range trees {
			for _, n := range tr.Nodes[1:] {
				require.Equal(t, n.Raw, n.Prob, "drafting leaves the raw f")
				if n.Children > 0 {
					require.GreaterOrEqual(t, Calibrated(n.Raw, int(n.Depth), calib), stop, "a node under StopProb was expanded")
				}
			}
			total += tr.Depth()
		}
		return total
	}
	plain := depths(nil)
	raised := depths([]float64{1, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5})
	lowered := depths([]float64{1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5})
	require.Greater(t, raised, plain)
	require.Less(t, lowered, plain)
}
