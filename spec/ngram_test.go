package spec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// firstPath follows the first child from the root: the drafter's best guess.
func firstPath(t *Tree) []int32 {
	var out []int32
	for v := 0; t.Nodes[v].Children > 0; {
		v = int(t.Nodes[v].FirstChild)
		out = append(out, t.Nodes[v].Token)
	}
	return out
}

func TestNGramProposesRepetition(t *testing.T) {
	pattern := []int32{11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	var toks []int32
	for range 4 {
		toks = append(toks, pattern...)
	}
	toks = append(toks, 11, 12, 13) // the model is repeating again
	// All of it is prompt, so no emitted token calibrates the counts'
	// estimates (TestNGramCalibrates does).
	s := &Seq{Tokens: toks, Prompt: len(toks)}
	d := NGramDrafter{MaxOrder: 4, MinOrder: 1}
	tr := &Tree{}
	require.NoError(t, d.Draft([]*Seq{s}, Shape{Depth: 6, Width: 1}, []*Tree{tr}))
	require.Equal(t, []int32{14, 15, 16, 17, 18, 19}, firstPath(tr))
	require.NoError(t, tr.Validate())
	// Every occurrence agrees. The root's 4-gram "20 11 12 13" occurred 3
	// times before: 3/(3+1) with the discount of 1. The next node's
	// "11 12 13 14" occurred 4 times: 4/5.
	require.InDelta(t, 0.75, tr.Nodes[1].Prob, 1e-12)
	require.InDelta(t, 0.75*0.8, tr.Nodes[2].Prob, 1e-12)

	// Generation continues: the index catches up incrementally and the
	// proposal moves on.
	s.Tokens = append(s.Tokens, 14, 15)
	require.NoError(t, d.Draft([]*Seq{s}, Shape{Depth: 3, Width: 2}, []*Tree{tr}))
	require.Equal(t, []int32{16, 17, 18}, firstPath(tr))
	require.Equal(t, len(s.Tokens), s.DraftState.(*ngramSeq).idx.Len())
}

func TestNGramBranches(t *testing.T) {
	// The longest suffix "3 9 1 2" was followed once by 4: 1/(1+1). Width 2
	// wants a second proposal, so the drafter backs off to "9 1 2", followed
	// by 4 and 3: 3 gets the half the discount left, times 1/(2+1).
	s := &Seq{Tokens: []int32{1, 2, 3, 9, 1, 2, 4, 9, 1, 2, 3, 9, 1, 2}, Prompt: 14}
	d := NGramDrafter{MaxOrder: 4, MinOrder: 1}
	tr := &Tree{}
	require.NoError(t, d.Draft([]*Seq{s}, Shape{Depth: 2, Width: 2}, []*Tree{tr}))
	require.Equal(t, int32(4), tr.Nodes[1].Token)
	require.Equal(t, int32(3), tr.Nodes[2].Token)
	require.InDelta(t, 0.5, tr.Nodes[1].Prob, 1e-12)
	require.InDelta(t, 0.5/3, tr.Nodes[2].Prob, 1e-12)
	// Both continue with 9 (and only 9 ever followed them).
	require.Equal(t, []int{1, 2, 2}, tr.Widths(nil))
	require.Equal(t, int32(9), tr.Nodes[3].Token)
	require.InDelta(t, 0.25, tr.Nodes[3].Prob, 1e-12)

	// Nothing to match: a root-only tree.
	s2 := &Seq{Tokens: []int32{5, 6, 7}}
	require.NoError(t, d.Draft([]*Seq{s2}, Shape{Depth: 3, Width: 2}, []*Tree{tr}))
	require.Equal(t, 1, tr.Len())

	// A shared index of earlier outputs fills in.
	d.Shared = NewIndex(4)
	d.Shared.AppendDocument([]int32{40, 6, 7, 8, 30})
	d.Shared.AppendDocument([]int32{6, 7, 8, 31})
	require.NoError(t, d.Draft([]*Seq{s2}, Shape{Depth: 2, Width: 1}, []*Tree{tr}))
	require.Equal(t, []int32{8, 31}, firstPath(tr), "the most recent of two equal counts first, no match across documents")
}

// By default a match must be two tokens long (a single shared token
// predicts little), and matches up to eight tokens are told apart: a
// longer match ranks first even where a shorter suffix's continuation was
// seen more often.
func TestNGramDefaultOrders(t *testing.T) {
	var d NGramDrafter
	tr := &Tree{}
	// Only the last token, 7, occurred before (followed by 8).
	s := &Seq{Tokens: []int32{7, 8, 1, 2, 3, 7}, Prompt: 6}
	require.NoError(t, d.Draft([]*Seq{s}, Shape{Depth: 3, Width: 1}, []*Tree{tr}))
	require.Equal(t, 1, tr.Len(), "a one-token match drafts nothing")
	require.Equal(t, 8, s.DraftState.(*ngramSeq).idx.order, "suffixes up to eight tokens are indexed")

	// "0 1 2 3 4 5 6 7" was followed by 50 once; its last four tokens
	// "4 5 6 7" by 60 three times. The eight-token match wins.
	var toks []int32
	for range 3 {
		toks = append(toks, 4, 5, 6, 7, 60, 0)
	}
	toks = append(toks, 1, 2, 3, 4, 5, 6, 7, 50, 0, 1, 2, 3, 4, 5, 6, 7)
	s = &Seq{Tokens: toks, Prompt: len(toks)}
	d = NGramDrafter{}
	require.NoError(t, d.Draft([]*Seq{s}, Shape{Depth: 1, Width: 1}, []*Tree{tr}))
	require.Equal(t, []int32{50}, firstPath(tr))
	require.InDelta(t, 0.5, tr.Nodes[1].Prob, 1e-12, "one sighting, discount 1")
}

// The drafter checks its own predictions against the tokens a sequence
// emits and scales each match order's probabilities by how they fared: a
// sequence copying its prompt earns its long matches more than the counts'
// 1/(1+1) for a single sighting, and one that keeps departing from what
// followed before earns less.
func TestNGramCalibrates(t *testing.T) {
	draft := func(s *Seq) float64 {
		t.Helper()
		var d NGramDrafter
		tr := &Tree{}
		require.NoError(t, d.Draft([]*Seq{s}, Shape{Depth: 1, Width: 1}, []*Tree{tr}))
		require.Equal(t, 2, tr.Len())
		return tr.Nodes[1].Prob
	}
	// Copying: the prompt is 100 distinct tokens, the output its first 40.
	var prompt []int32
	for i := range int32(100) {
		prompt = append(prompt, 1000+i)
	}
	toks := append(append([]int32{}, prompt...), prompt[:40]...)
	asPrompt := draft(&Seq{Tokens: toks, Prompt: len(toks)})
	require.InDelta(t, 0.5, asPrompt, 1e-12, "uncalibrated: one sighting, discount 1")
	copying := draft(&Seq{Tokens: toks, Prompt: len(prompt)})
	require.Greater(t, copying, 0.9)

	// Departing: after "1 2" comes a new token every time.
	toks = []int32{1, 2, 500}
	for i := range int32(30) {
		toks = append(toks, 1, 2, 600+i)
	}
	toks = append(toks, 1, 2)
	asPrompt = draft(&Seq{Tokens: toks, Prompt: len(toks)})
	departing := draft(&Seq{Tokens: toks, Prompt: 3})
	require.Less(t, departing, 0.6*asPrompt)
}

func TestIndexIncrementalMatchesRebuild(t *testing.T) {
	rng := NewSplitMix(3)
	var toks []int32
	inc := NewIndex(4)
	for range 3000 {
		toks = append(toks, int32(rng.Uint64()%6))
		inc.Sync(toks)
	}
	full := NewIndex(4)
	full.Sync(toks)
	require.Equal(t, full.head, inc.head)
	require.Equal(t, full.prev, inc.prev)
	// Truncation rebuilds.
	inc.Sync(toks[:10])
	require.Equal(t, 10, inc.Len())
}

// BenchmarkNGramIteration measures one decoding iteration of the n-gram
// drafter with a 4k-token context: index the newly emitted tokens and draft
// a depth-4, width-3 tree.
func BenchmarkNGramIteration(b *testing.B) {
	rng := NewSplitMix(1)
	// Text-like: a 4096-token context over a 2000-token vocabulary with a
	// lot of repetition (phrases of 3..12 tokens reused).
	var toks []int32
	var phrases [][]int32
	for len(toks) < 4096 {
		if len(phrases) > 0 && rng.Uint64()%3 != 0 {
			toks = append(toks, phrases[rng.Uint64()%uint64(len(phrases))]...)
			continue
		}
		p := make([]int32, 3+rng.Uint64()%10)
		for i := range p {
			p[i] = int32(rng.Uint64() % 2000)
		}
		phrases = append(phrases, p)
		toks = append(toks, p...)
	}
	s := &Seq{Tokens: toks[:4096:4096]}
	var d NGramDrafter
	trees := []*Tree{{}}
	shape := Shape{Depth: 4, Width: 3}
	_ = d.Draft([]*Seq{s}, shape, trees)
	extra := toks[:4096]
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.Tokens = append(s.Tokens, extra[i%len(extra)]) // one emitted token per iteration
		if len(s.Tokens) > 8192 {
			b.StopTimer()
			s.Tokens = s.Tokens[:4096]
			s.DraftState = nil
			_ = d.Draft([]*Seq{s}, shape, trees)
			b.StartTimer()
		}
		if err := d.Draft([]*Seq{s}, shape, trees); err != nil {
			b.Fatal(err)
		}
	}
}
