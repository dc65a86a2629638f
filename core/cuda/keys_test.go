package cuda

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/sample"
)

// argmaxKey is kernels.cu's argmax_key in Go, operation for operation.
func argmaxKey(v float32, i int) uint64 {
	if !(v > float32(math.Inf(-1))) {
		return 0
	}
	b := math.Float32bits(v)
	if v == 0 {
		b = 0
	}
	o := b | 0x80000000
	if b&0x80000000 != 0 {
		o = ^b
	}
	return uint64(o)<<32 | uint64(0xffffffff-uint32(i))
}

// TestArgmaxKeysOrderAsTheSampler: the largest argmax key of a row, which
// the greedy head's blocks leave in memory whatever order they finish in,
// decodes (argmaxOfKey) to the greedy sampler's choice (core/sample:
// ties to the lowest index, NaN never wins, 0 when nothing is above -inf):
// on random rows drawn
// from a few values so that ties are common, with ±0, ±inf and NaN among
// them, and on rows of nothing but NaN or -inf.
func TestArgmaxKeysOrderAsTheSampler(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	values := []float32{nan, -inf, inf, 0, float32(math.Copysign(0, -1)), 1, -1, 2.5, -2.5, 1e-30, -1e-30, 3e38, -3e38}
	rows := [][]float32{{nan, nan}, {-inf, -inf, -inf}, {nan, -inf}, {-inf, nan, 7}}
	for range 5000 {
		row := make([]float32, 1+rng.Intn(9))
		for i := range row {
			row[i] = values[rng.Intn(len(values))]
		}
		rows = append(rows, row)
	}
	for _, row := range rows {
		var best uint64
		for _, i := range rng.Perm(len(row)) { // blocks finish in any order
			best = max(best, argmaxKey(row[i], i))
		}
		greedy, err := sample.New(sample.Params{Temperature: 0, TopP: 1, RepetitionPenalty: 1}, len(row))
		require.NoError(t, err)
		require.Equal(t, greedy.Sample(row), argmaxOfKey(best), "%v", row)
	}
}
