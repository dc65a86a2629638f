package spec

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within fails the test if f has not returned after d (a walk that spins
// cannot be stopped; its goroutine is abandoned).
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// Issue 10, item 4: verification walks are bounded by the tree's size. A
// tree whose node lists itself as its own child (only a hand-built tree
// can; Add forbids it) used to send VerifyGreedy round forever.
func TestVerifyWalksAreBounded(t *testing.T) {
	var tr Tree
	tr.Reset(5)
	tr.Add(0, 1, 0.9)
	tr.Add(1, 1, 0.8)
	// Corrupt it: node 2's child is node 1 (a cycle 1 -> 2 -> 1).
	tr.Nodes[2].FirstChild, tr.Nodes[2].Children = 1, 1
	ones := Dist{P: []float32{0, 1, 0, 0, 0, 0}}
	target := func(int) Dist { return ones }
	var res Result
	within(t, 5*time.Second, "VerifyGreedy", func() { VerifyGreedy(&tr, target, &res) })
	assert.Equal(t, []int{0, 1, 2}, res.Path)
	assert.Equal(t, []int32{1, 1, 1}, res.Tokens)
	within(t, 5*time.Second, "VerifySample", func() { VerifySample(&tr, target, NewSplitMix(1), &res) })
	assert.Equal(t, []int{0, 1, 2}, res.Path)
	assert.Equal(t, []int32{1, 1, 1}, res.Tokens)
}

// NaN and infinite probabilities end the walk with a real token.
func TestVerifyWithBrokenDistributions(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	var tr Tree
	tr.Reset(0)
	tr.Add(0, 2, 0.5)
	tr.Add(0, 3, 0.5)
	tr.Add(1, 1, 0.5)
	for _, d := range []Dist{
		{P: []float32{nan, nan, nan, nan}},
		{P: []float32{inf, nan, inf, 0}},
		{P: []float32{float32(math.Inf(-1)), float32(math.Inf(-1)), 0, 0}},
		{IDs: []int32{3, 2}, P: []float32{nan, nan}},
		{IDs: []int32{3, 1}, P: []float32{0, 0}},
	} {
		target := func(int) Dist { return d }
		var res Result
		within(t, 5*time.Second, "VerifyGreedy", func() { VerifyGreedy(&tr, target, &res) })
		for _, tok := range res.Tokens {
			require.True(t, tok >= 0 && tok < 4, "%v: token %d", d, tok)
		}
		for seed := range uint64(50) {
			within(t, 5*time.Second, "VerifySample", func() { VerifySample(&tr, target, NewSplitMix(seed), &res) })
			for _, tok := range res.Tokens {
				require.True(t, tok >= 0 && tok < 4, "%v: token %d", d, tok)
			}
			require.LessOrEqual(t, len(res.Path), tr.Len())
		}
	}
	assert.Equal(t, int32(0), Argmax(Dist{P: []float32{nan, nan}}))
	assert.Equal(t, int32(2), Argmax(Dist{IDs: []int32{7, 2}, P: []float32{nan, nan}}))
	assert.Equal(t, int32(-1), Argmax(Dist{}))
}
