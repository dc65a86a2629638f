package spec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTreeLinearisation(t *testing.T) {
	// root 10 ─ 11 ─ 13
	//         │    └ 14 ─ 15
	//         └ 12
	var tr Tree
	tr.Reset(10)
	a := tr.Add(0, 11, 0.6)
	b := tr.Add(0, 12, 0.3)
	c := tr.Add(a, 13, 0.3)
	d := tr.Add(a, 14, 0.2)
	e := tr.Add(d, 15, 0.1)
	require.Equal(t, []int{1, 2, 3, 4, 5}, []int{a, b, c, d, e})
	require.NoError(t, tr.Validate())
	require.Equal(t, 3, tr.Depth())
	require.Equal(t, []int{1, 2, 2, 1}, tr.Widths(nil))
	require.Equal(t, 4, tr.Child(1, 14))
	require.Equal(t, -1, tr.Child(2, 14))
	require.Panics(t, func() { tr.Add(0, 99, 0.1) }, "a root child after a grandchild breaks BFS order")

	tok, par, pos := tr.AppendBatch([]int32{7}, []int{-1}, []int{41}, 1, 42)
	require.Equal(t, []int32{7, 10, 11, 12, 13, 14, 15}, tok)
	require.Equal(t, []int{-1, -1, 1, 1, 2, 2, 5}, par)
	require.Equal(t, []int{41, 42, 43, 43, 44, 44, 45}, pos) // siblings share a position

	require.Equal(t, []int{0, 1, 4, 5}, tr.AppendAncestors(nil, 5))
	require.Equal(t, []int{0}, tr.AppendAncestors(nil, 0))
	mask := tr.AncestorMask(nil)
	w := tr.MaskWords()
	for i := range tr.Nodes {
		anc := map[int]bool{}
		for _, j := range tr.AppendAncestors(nil, i) {
			anc[j] = true
		}
		for j := range tr.Nodes {
			require.Equal(t, anc[j], MaskAllows(mask, w, i, j), "mask[%d][%d]", i, j)
		}
	}

	var sub Tree
	require.True(t, tr.Subtree([]int{0, 1, 4, 5}, &sub))
	require.NoError(t, sub.Validate())
	require.Equal(t, []int32{10, 11, 14, 15}, []int32{sub.Nodes[0].Token, sub.Nodes[1].Token, sub.Nodes[2].Token, sub.Nodes[3].Token})
	require.False(t, tr.Subtree([]int{0, 5}, &sub), "not ancestor-closed")
	require.False(t, tr.Subtree([]int{1, 2}, &sub), "no root")
	require.False(t, tr.Subtree([]int{0, 2, 1}, &sub), "not ascending")
}

func TestAncestorMaskWide(t *testing.T) {
	rng := NewSplitMix(1)
	for range 50 {
		tr := randomTree(rng, 6, 5, false)
		mask := tr.AncestorMask(nil)
		w := tr.MaskWords()
		for i := range tr.Nodes {
			anc := tr.AppendAncestors(nil, i)
			require.Equal(t, int(tr.Nodes[i].Depth)+1, len(anc))
			cnt := 0
			for j := range tr.Nodes {
				if MaskAllows(mask, w, i, j) {
					cnt++
				}
			}
			require.Equal(t, len(anc), cnt)
			for _, j := range anc {
				require.True(t, MaskAllows(mask, w, i, j))
			}
		}
	}
}

func TestCanonical(t *testing.T) {
	// Nodes in a scrambled order: 0:child of 2, 1:child of 3, 2:root, 3:child of 2, 4:child of 0.
	tr, perm, err := Canonical([]int32{20, 30, 10, 31, 40}, []int{2, 3, -1, 2, 0}, []float64{.5, .2, 1, .4, .1})
	require.NoError(t, err)
	require.NoError(t, tr.Validate())
	require.Equal(t, []int{2, 0, 3, 4, 1}, perm)
	require.Equal(t, []int32{10, 20, 31, 40, 30}, []int32{tr.Nodes[0].Token, tr.Nodes[1].Token, tr.Nodes[2].Token, tr.Nodes[3].Token, tr.Nodes[4].Token})
	_, _, err = Canonical([]int32{1, 2}, []int{-1, -1}, []float64{1, 1})
	require.Error(t, err)
	_, _, err = Canonical([]int32{1, 2, 3}, []int{-1, 2, 1}, []float64{1, 1, 1})
	require.Error(t, err, "cycle")
}
