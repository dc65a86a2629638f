package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// DraftStats counts a candidate tree where a fitted acceptance model
// needs it: the first-child chain short of the depth limit, and at each
// node the target's tokens reach, the children offered and the one taken.
func TestDraftStats(t *testing.T) {
	// Root 1 → 2 (first) and 3; 2 → 4; 4 → 5, at the depth limit 3.
	var tr Tree
	tr.Reset(1)
	a := tr.Add(0, 2, 0.6)
	tr.Add(0, 3, 0.2)
	c := tr.Add(a, 4, 0.3)
	tr.Add(c, 5, 0.2)

	var s DraftStats
	s.ObserveDraft(&tr, 3)
	require.Equal(t, 1, s.Asked)
	require.Equal(t, 1, s.Drafted)
	require.Equal(t, [3]int{0, 1, 1}, [3]int(s.Spine[:3]), "nodes 2 and 4; 5 is at the limit")
	require.Equal(t, [3]int{0, 1, 1}, [3]int(s.Continued[:3]))
	// Every proposed child, with the conditional probability it was
	// given: 0.6 and 0.2 at the root, 0.3/0.6 below 2, 0.2/0.3 below 4.
	require.Equal(t, [StatRanks]int{1, 1, 0, 0}, s.Proposed[0])
	require.Equal(t, [StatRanks]int{1, 0, 0, 0}, s.Proposed[1])
	require.Equal(t, [StatRanks]int{1, 0, 0, 0}, s.Proposed[2])
	require.InDelta(t, 0.6, s.Believed[0][0], 1e-12)
	require.InDelta(t, 0.2, s.Believed[0][1], 1e-12)
	require.InDelta(t, 0.5, s.Believed[1][0], 1e-12)
	require.InDelta(t, 0.2/0.3, s.Believed[2][0], 1e-12)

	s.ObserveEmitted(&tr, []int32{2, 4, 9}) // two accepted, then a bonus no child holds
	s.ObserveEmitted(&tr, []int32{3})       // the second child as the bonus: a leaf, so the walk ends
	s.ObserveEmitted(&tr, []int32{7})       // none of the root's children
	require.Equal(t, [StatRanks]int{3, 3, 0, 0}, s.Offered[0])
	require.Equal(t, [StatRanks]int{1, 1, 0, 0}, s.Took[0])
	require.Equal(t, [StatRanks]int{1, 0, 0, 0}, s.Offered[1])
	require.Equal(t, [StatRanks]int{1, 0, 0, 0}, s.Took[1])
	require.Equal(t, [StatRanks]int{1, 0, 0, 0}, s.Offered[2])
	require.Equal(t, [StatRanks]int{0, 0, 0, 0}, s.Took[2], "9 is not node 5's token")

	var root Tree
	root.Reset(1)
	s.ObserveDraft(&root, 3) // asked, nothing drafted
	require.Equal(t, 2, s.Asked)
	require.Equal(t, 1, s.Drafted)

	twice := s.Add(s)
	require.Equal(t, 4, twice.Asked)
	require.Equal(t, 6, twice.Offered[0][0])
	require.Equal(t, s, twice.Sub(s))
}

// The scheduler counts the trees it drafted, pre-selection, and walks
// them along what a backend reports emitted; a sequence it did not draft
// for (NoSpec) counts nothing.
func TestSchedulerCountsDrafts(t *testing.T) {
	s := &Scheduler{Config: Config{Policy: GlobalGreedy, Budget: 16, MaxDepth: 2, MaxWidth: 1}, Drafter: &BeamDrafter{Model: newToyDraft(16, 6)}}
	seqs := []*Seq{{Tokens: []int32{1, 2}}, {Tokens: []int32{1, 2}, NoSpec: true}}
	trees, err := s.Plan(seqs, time.Unix(0, 0))
	require.NoError(t, err)
	require.Equal(t, 1, s.Stats.Asked)
	require.Equal(t, 1, s.Stats.Drafted)
	require.Greater(t, trees[0].Len(), 1)
	s.ObserveEmitted(0, []int32{trees[0].Nodes[1].Token, -5})
	s.ObserveEmitted(1, []int32{1, 2, 3})
	require.Equal(t, 1, s.Stats.Took[0][0])
	require.Equal(t, 1, s.Stats.Offered[0][0])
}
