package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/spec"
)

// chainTree is a root and a chain below it with the given path
// probabilities.
func chainTree(probs ...float64) *spec.Tree {
	t := &spec.Tree{}
	t.Reset(1)
	for i, p := range probs {
		t.Add(i, int32(10+i), p)
	}
	return t
}

// A model-drafted request lets the n-gram index's tree stand in when it
// expects to emit tokens faster than the model drafter has been measured
// to: before any measurement, when it expects a whole accepted token.
// Iterations the n-gram drafted never count toward the model's pace, and
// the request's first model-drafted iteration (its prompt fed to the draft
// model) does not either.
func TestNGramStandsInForModel(t *testing.T) {
	d := &drafters{kind: map[*spec.Seq]drafterKind{}}
	s := &spec.Seq{}
	d.kind[s] = draftModel
	require.False(t, d.ngramStandsIn(s, chainTree(), 0), "no proposal")
	require.False(t, d.ngramStandsIn(s, chainTree(0.5, 0.3), 0), "0.8 expected tokens, no pace yet")
	require.True(t, d.ngramStandsIn(s, chainTree(0.9, 0.8, 0.7), 0), "2.4 expected tokens, no pace yet")

	// A pass over n tokens costs 30 ms plus 5 ms a token.
	d.at = func(n int) time.Duration { return 30*time.Millisecond + time.Duration(n)*5*time.Millisecond }
	d.observe(s, draftModel, 200*time.Millisecond, 2) // the prompt's catch-up: not the pace
	require.Zero(t, d.modelPace[s].Iterations())
	d.used = map[*spec.Seq]drafterKind{s: draftNGram}
	d.observe(s, draftModel, time.Millisecond, 5) // the n-gram's iteration: not the model's pace
	require.Zero(t, d.modelPace[s].Iterations())
	clear(d.used)
	d.observe(s, draftModel, 100*time.Millisecond, 4) // 25 ms a token
	require.Equal(t, 1, d.modelPace[s].Iterations())

	// A chain of 3 costs a 50 ms pass: it must expect more than 1 accepted
	// node to beat 25 ms a token (50/(1+e) < 25).
	require.False(t, d.ngramStandsIn(s, chainTree(0.5, 0.3, 0.1), 0))
	require.True(t, d.ngramStandsIn(s, chainTree(0.7, 0.5, 0.3), 0))
	// With three other roots in the pass (65 ms) it must expect more.
	require.False(t, d.ngramStandsIn(s, chainTree(0.7, 0.5, 0.3), 3))

	d.forget(s)
	require.NotContains(t, d.modelPace, s)
	require.NotContains(t, d.kind, s)
}

// The n-gram index drafts deeper than the scheduler's shape (ngramShape)
// unless the config bounds the depth: a prompt that repeats itself gives
// a chain of ngramMaxDepth where the shape says spec.DefaultMaxDepth.
func TestNGramDraftsDeeper(t *testing.T) {
	var toks []int32
	for range 3 {
		for i := range 20 {
			toks = append(toks, int32(100+i))
		}
	}
	depth := func(deeper bool) int {
		d := &drafters{kind: map[*spec.Seq]drafterKind{}, ngramDeeper: deeper}
		s := &spec.Seq{Tokens: toks[:45], Prompt: 45}
		d.kind[s] = draftNGram
		tr := &spec.Tree{}
		require.NoError(t, d.Draft([]*spec.Seq{s}, spec.Shape{Depth: spec.DefaultMaxDepth, Width: 1}, []*spec.Tree{tr}))
		deepest := 0
		for _, n := range tr.Nodes {
			deepest = max(deepest, int(n.Depth))
		}
		return deepest
	}
	require.Equal(t, ngramMaxDepth, depth(true))
	require.Equal(t, spec.DefaultMaxDepth, depth(false), `"spec_max_depth" given`)

	path := tinyFile(t, t.TempDir(), 40, 7, 4)
	for cfg, deeper := range map[string]bool{``: true, `,"spec_max_depth":8`: false} {
		c, err := loop.ParseConfig([]byte(`{"model_path":"` + path + `","threads":1,"context_length":64` + cfg + `}`))
		require.NoError(t, err)
		be, err := newCPU(c)
		require.NoError(t, err)
		require.Equal(t, deeper, be.(*Backend).drafts.ngramDeeper, cfg)
		be.Close()
	}
}

// A backed-off request that drafts with a model gets the n-gram index's
// tree where it beats plain decoding on its own (ngramBeatsPlain); one
// that chose the index gets nothing, and a tree that would not beat plain
// stays bare. What Standby drafts is marked as the index's.
func TestStandbyDraftsTheIndexForModelRequests(t *testing.T) {
	var toks []int32
	for range 3 {
		for i := range 20 {
			toks = append(toks, int32(100+i))
		}
	}
	d := &drafters{kind: map[*spec.Seq]drafterKind{}}
	copying := &spec.Seq{Tokens: toks[:45], Prompt: 45}           // repeats itself: a long chain
	fresh := &spec.Seq{Tokens: []int32{1, 2, 3, 4, 5}, Prompt: 5} // nothing to match
	own := &spec.Seq{Tokens: toks[:45], Prompt: 45}               // chose the index
	d.kind[copying], d.kind[fresh], d.kind[own] = draftModel, draftModel, draftNGram
	seqs := []*spec.Seq{copying, fresh, own}
	trees := []*spec.Tree{{}, {}, {}}
	shape := spec.Shape{Depth: spec.DefaultMaxDepth, Width: 1}
	require.NoError(t, d.Standby(seqs, shape, trees))
	require.Equal(t, spec.DefaultMaxDepth+1, trees[0].Len(), "the copy's chain")
	require.Equal(t, draftNGram, d.usedBy(copying, draftModel))
	require.Equal(t, 1, trees[1].Len())
	require.Equal(t, draftModel, d.usedBy(fresh, draftModel))
	require.Equal(t, 1, trees[2].Len(), "the index backed itself off")

	// On a curve where each drafted token costs a whole pass, no tree
	// beats plain decoding: they all stay bare.
	d.at = func(n int) time.Duration { return time.Duration(n) * 20 * time.Millisecond }
	require.NoError(t, d.Standby(seqs, shape, trees))
	require.Equal(t, 1, trees[0].Len())
	require.Equal(t, draftModel, d.usedBy(copying, draftModel), "a bare tree is not the index's")

	// The pass is priced for every stream of the iteration, not only the
	// backed-off ones: where a pass costs 20 ms plus 1 ms a token, the
	// copy's chain (8 nodes, about 1.9 expected tokens) pays beside two
	// other streams (47 ms charged for 2.9 tokens against 23 a token) and
	// not beside thirty (290 against 50).
	d.at = func(n int) time.Duration { return 20*time.Millisecond + time.Duration(n)*time.Millisecond }
	d.streams = 3
	require.NoError(t, d.Standby(seqs[:1], shape, trees[:1]))
	require.Equal(t, spec.DefaultMaxDepth+1, trees[0].Len())
	d.streams = 30
	require.NoError(t, d.Standby(seqs[:1], shape, trees[:1]))
	require.Equal(t, 1, trees[0].Len())
}

// ngramBeatsPlain charges a tree what its nodes add to the pass, times
// the streams that wait for them, against one plain pass a token.
func TestNGramBeatsPlain(t *testing.T) {
	d := &drafters{}
	require.False(t, d.ngramBeatsPlain(chainTree(), 1), "no proposal")
	require.False(t, d.ngramBeatsPlain(chainTree(0.6, 0.3), 1), "no curve: 0.9 expected tokens")
	require.True(t, d.ngramBeatsPlain(chainTree(0.6, 0.5), 1), "no curve: 1.1 expected tokens")
	// A pass over n tokens costs 30 ms plus 5 ms a token: alone, a chain
	// of 2 costs 45 ms against 35 plain, so it must expect more than 2/7
	// of a token.
	d.at = func(n int) time.Duration { return 30*time.Millisecond + time.Duration(n)*5*time.Millisecond }
	require.False(t, d.ngramBeatsPlain(chainTree(0.2, 0.05), 1))
	require.True(t, d.ngramBeatsPlain(chainTree(0.25, 0.1), 1))
	// Beside three other streams the plain pass is 50 ms and the chain
	// adds 10 for each of four: 90 ms, so it must expect more than 0.8.
	require.False(t, d.ngramBeatsPlain(chainTree(0.5, 0.25), 4))
	require.True(t, d.ngramBeatsPlain(chainTree(0.6, 0.3), 4))
}
