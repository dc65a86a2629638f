package model

import (
	"encoding/json"
	"math"
	"os"
	"runtime"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/tokenizer"
)

// Golden top-5 logits from llama.cpp (llama-cpp-python 0.3.36, CPU build)
// for three prompts, produced by hand with testdata/gen_golden.py. Forward
// runs the same token ids (one chain pass, every logit) and must give, at
// every recorded position: the same top-1 token; within tolGolden of
// llama.cpp's logit for each of its top-5 ids; and the same top-5 set,
// except that ids whose logits lie within 2·tolGolden of the 5th may trade
// places. Both quantize activations to 8 bits per 32 values and keep K/V in
// float16, so neither is exact: the measured max |Δlogit| between them is
// 0.58 (logits of 12–32; 0.83 when our cache held float32), at "The
// capital" where, against the float64 reference on dequantized weights
// (TestRealModelMatchesReference), llama.cpp is off by up to 0.72.
const tolGolden = 1.0

type golden struct {
	Model   string
	Oracle  string
	Prompts []struct {
		Text      string
		Tokens    []int32
		Positions []struct {
			Pos    int
			Top5   []int32
			Logits []float32
		}
	}
}

func TestGoldenTop5(t *testing.T) {
	m, tok := realModel(t, runtime.GOMAXPROCS(0))
	data, err := os.ReadFile("testdata/golden_top5.json")
	require.NoError(t, err)
	var g golden
	require.NoError(t, json.Unmarshal(data, &g))
	require.Len(t, g.Prompts, 3)
	worst := 0.0
	for _, p := range g.Prompts {
		// Our tokenizer agrees with llama.cpp's on these prompts.
		require.Equal(t, p.Tokens, tok.Encode(p.Text, tokenizer.EncodeOptions{ParseSpecial: true}), p.Text)
		rows := run(t, m, new(Batch).chain(m.NewCache(len(p.Tokens)), p.Tokens, true))
		for _, pos := range p.Positions {
			row := rows[pos.Pos]
			require.Equal(t, pos.Top5[0], argmax(row), "%q position %d", p.Text, pos.Pos)
			for j, id := range pos.Top5 {
				d := math.Abs(float64(row[id] - pos.Logits[j]))
				worst = max(worst, d)
				require.Less(t, d, tolGolden, "%q position %d token %d", p.Text, pos.Pos, id)
			}
			ours := top(row, 5)
			fifth := float64(pos.Logits[4])
			for _, id := range ours {
				if !contains(pos.Top5, id) {
					require.Less(t, math.Abs(float64(row[id])-fifth), 2*tolGolden,
						"%q position %d: token %d in our top 5 but not llama.cpp's", p.Text, pos.Pos, id)
				}
			}
		}
	}
	t.Logf("oracle %s on %s: max |Δlogit| %.3f", g.Oracle, g.Model, worst)
}

// TestRealModelMatchesReference runs the float64 reference of tiny_test.go
// (dequantized weights, naive loops) on the default model for one short
// prompt. Measured: max |Δlogit| 1.56 over the whole vocabulary, 0.066 of
// the largest |logit| (the test allows 0.1); top-1 equal at every position.
// The error is the 8-bit activation quantization, which the reference does
// not do.
func TestRealModelMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: float64 reference on the real model")
	}
	m, tok := realModel(t, runtime.GOMAXPROCS(0))
	f, err := gguf.Open(defaultModelPath)
	require.NoError(t, err)
	defer f.Close()
	ref := refLoad(t, f)
	ids := tok.Encode("The capital of France is", tokenizer.EncodeOptions{})
	want := ref.logits(ids)
	got := run(t, m, new(Batch).chain(m.NewCache(len(ids)), ids, true))
	worst, rel := 0.0, 0.0
	for i := range ids {
		require.Equal(t, argmaxF64(want[i]), argmax(got[i]), "position %d", i)
		for j := range got[i] {
			worst = max(worst, math.Abs(float64(got[i][j])-want[i][j]))
		}
		rel = max(rel, maxRelDiff(got[i], want[i]))
	}
	t.Logf("vs float64 reference: max |Δlogit| %.3f, relative to max |logit| %.3g", worst, rel)
	require.Less(t, rel, 0.1)
}

func argmaxF64(x []float64) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func top(x []float32, k int) []int32 {
	idx := make([]int32, len(x))
	for i := range idx {
		idx[i] = int32(i)
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] > x[idx[b]] })
	return idx[:k]
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
