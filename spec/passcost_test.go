package spec

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPassCost: a pass is the roots' pass, the rows beyond the measured
// context, and the chain's slope over the tokens beside the roots.
func TestPassCost(t *testing.T) {
	ms := time.Millisecond
	chain := func(n int) time.Duration { return 4*ms + time.Duration(n)*ms/2 }
	roots := func(n int) time.Duration { return 4*ms + time.Duration(n)*ms }
	c := PassCost{Chain: chain, Roots: roots, Context: 100, Entry: time.Microsecond}

	require.Equal(t, 12*ms, c.Pass(8, 0, 0, 0), "8 roots at the measured context: R(8)")
	require.Equal(t, 12*ms+3*ms, c.Pass(8, 0, 6, 0), "6 tree nodes beside them at the chain's 0.5 ms each")
	require.Equal(t, 12*ms+3*ms, c.Pass(8, 0, 0, 6), "so does a prompt chunk without a prompt price")
	require.Equal(t, 12*ms+500*time.Microsecond, c.Pass(8, 500, 0, 0), "500 rows beyond the context at 1 µs each")
	require.Equal(t, chain(20), c.Pass(0, 0, 0, 20), "a prompt chunk alone is a chain")
	require.Equal(t, 12*ms, c.Pass(8, -5, 0, 0), "never less than the measured context")

	// With a prompt token's price, a chunk costs that a token, beside
	// roots or alone (a one-token pass, then the price).
	p := c
	p.Prompt = 300 * time.Microsecond
	require.Equal(t, 12*ms+3*ms+6*p.Prompt, p.Pass(8, 0, 6, 6))
	require.Equal(t, chain(1)+19*p.Prompt, p.Pass(0, 0, 0, 20))
	require.Equal(t, chain(1), p.Pass(0, 0, 0, 1))
	require.Zero(t, p.Pass(0, 0, 0, 0))

	// Rows beyond the context: a sequence's committed tokens are all but
	// its root, and a short one counts as the measured context.
	long := &Seq{Tokens: make([]int32, 251), Prompt: 200}
	short := &Seq{Tokens: make([]int32, 40), Prompt: 30}
	require.Equal(t, 250, long.Committed())
	require.Equal(t, 150, c.Beyond(long))
	require.Equal(t, 0, c.Beyond(short))
	require.Equal(t, 150, c.BeyondAll([]*Seq{long, short}))
	require.Equal(t, roots(2)+150*time.Microsecond, c.Plain([]*Seq{long, short}))

	// Without a roots curve or an entry price it is the chain curve, as
	// the derived GPU curves price.
	cc := ChainCost(chain)
	require.Equal(t, chain(8), cc.Pass(8, 1000, 0, 0))
	require.Equal(t, chain(14), cc.Pass(8, 0, 6, 0))
	require.Equal(t, chain(2), cc.Plain([]*Seq{long, short}))
}

// TestSitOutPricesRoots: where each sequence's root costs more than a
// chain's token (its own rows read from memory), an urgent sequence the
// chain would leave be is short of slack, and a root that leaves saves
// its rows beyond the measured context too.
func TestSitOutPricesRoots(t *testing.T) {
	ms := time.Millisecond
	chain := func(n int) time.Duration { return time.Duration(n) * ms }
	roots := func(n int) time.Duration { return 2 * time.Duration(n) * ms }
	urgent := sitOutSeq(5*ms, 3, 6*ms) // 14 ms of slack
	moderate := sitOutSeq(30*ms, 1, 10*ms)
	banked := sitOutSeq(5*ms, 9, 20*ms)
	relaxed := sitOutSeq(100*ms, 0, 0)
	dec := []*Seq{urgent, moderate, banked, relaxed}

	// The chain prices four roots at 4 ms: 14 ms covers two iterations.
	_, k := SitOut(ChainCost(chain), dec, 0, sitOutNow, 0, nil, nil)
	require.Zero(t, k)
	// At 2 ms a root the iteration is 8 ms: the urgent one wants 6, and
	// one root fewer gives it.
	out, k := SitOut(PassCost{Chain: chain, Roots: roots}, dec, 0, sitOutNow, 0, nil, nil)
	require.Equal(t, 1, k)
	require.Equal(t, []int{3}, marked(out))

	// Rows beyond 10 committed tokens at 0.5 ms: the relaxed request
	// holds 20 of them, so the pass is 3 roots (6 ms) and 10 ms of its
	// rows. 25 ms of slack wants 9 ms; with the relaxed one out the pass
	// is 4 ms, and the moderate one (70 ms of slack) need not sit out.
	urgent = sitOutSeq(10*ms, 3, 15*ms)
	moderate = sitOutSeq(40*ms, 1, 10*ms)
	long := &Seq{Tokens: make([]int32, 31), Prompt: 30, SLO: 100 * ms, Start: sitOutNow}
	c := PassCost{Chain: chain, Roots: roots, Context: 10, Entry: ms / 2}
	out, k = SitOut(c, []*Seq{urgent, moderate, long}, 0, sitOutNow, 0, nil, nil)
	require.Equal(t, 1, k)
	require.Equal(t, []int{2}, marked(out))
}
