package model

import (
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/kv"
	"github.com/lmstream/lmstream/core/quant"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// TestQ8KVRoundTrip: an entry stored as Q8_0 comes back within half a
// block's step of what was stored, the assembly widens exactly what the Go
// definition does, and F16 entries still come back as float16 rounds them.
func TestQ8KVRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 0))
	for _, hd := range []int{32, 64, 128, 256} {
		x := make([]float32, hd)
		for i := range x {
			x[i] = float32(r.NormFloat64()) * float32(1+i%7)
		}
		x[3] = 0
		row := make([]uint16, kv.Q8_0.RowLen(hd))
		narrowKV(row, x, kv.Q8_0)
		got, want := make([]float32, hd), make([]float32, hd)
		widenKV(got, row, kv.Q8_0)
		dequantQ80(want, row)
		require.Equal(t, want, got, "assembly against Go, head dim %d", hd)
		for b := 0; b < hd/32; b++ {
			amax := 0.0
			for _, v := range x[32*b : 32*b+32] {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			for j := 32 * b; j < 32*b+32; j++ {
				require.InDelta(t, x[j], got[j], amax/127/2*1.01+1e-6, "head dim %d value %d", hd, j)
			}
		}
		f16 := make([]uint16, hd)
		narrowKV(f16, x, kv.F16)
		widenKV(got, f16, kv.F16)
		for i := range x {
			require.InDelta(t, x[i], got[i], math.Abs(float64(x[i]))/1024+1e-7)
		}
	}
	spec := defaultTiny(quant.Q8_0)
	spec.embd = 64 // 4 heads of 16
	m, _ := tinyModel(t, spec, 1)
	require.ErrorContains(t, m.SetKVType(kv.Q8_0), "multiple of 32, not 16")
	require.Equal(t, kv.F16, m.Config().KVType)
}

// TestQ8KVCloseToF16 runs the default model over the test passage with a
// float16 cache and with a Q8_0 cache, in 64-token chunks (every chunk reads
// the entries the earlier ones stored): the Q8_0 cache moves the perplexity
// by under 2% and the argmax at nearly every position stays. A chain of
// the same tokens gives the same logits in one pass or in chunks (a Q8_0
// entry is rounded once, when stored, whatever pass reads it).
func TestQ8KVCloseToF16(t *testing.T) {
	m, tok := realModel(t, runtime.GOMAXPROCS(0))
	text, err := os.ReadFile("testdata/passage.txt")
	require.NoError(t, err)
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{})
	byChunks := func(c *kv.Cache, chunk int) [][]float32 {
		var rows [][]float32
		for i := 0; i < len(ids); i += chunk {
			rows = append(rows, run(t, m, new(Batch).chain(c, ids[i:min(i+chunk, len(ids))], true))...)
			commitAll(t, c)
		}
		return rows
	}
	ppl := func(rows [][]float32) float64 {
		var nll float64
		for i := 0; i+1 < len(ids); i++ {
			nll -= logProb(rows[i], ids[i+1])
		}
		return math.Exp(nll / float64(len(ids)-1))
	}
	f16 := byChunks(m.NewCache(len(ids)), 64)
	require.NoError(t, m.SetKVType(kv.Q8_0))
	defer m.SetKVType(kv.F16)
	c := m.NewCache(len(ids))
	require.Equal(t, kv.Q8_0, c.Type())
	q8 := byChunks(c, 64)
	same := 0
	for i := range ids {
		if argmax(f16[i]) == argmax(q8[i]) {
			same++
		}
	}
	p16, p8 := ppl(f16), ppl(q8)
	t.Logf("%d tokens: perplexity %.3f (f16 cache), %.3f (q8_0 cache); argmax equal at %d", len(ids), p16, p8, same)
	require.InDelta(t, p16, p8, 0.02*p16)
	require.GreaterOrEqual(t, same, len(ids)*95/100)
	require.Equal(t, q8, byChunks(m.NewCache(len(ids)), 37), "the same Q8_0 entries whatever the passes")
}
