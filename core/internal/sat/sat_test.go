package sat

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSaturates(t *testing.T) {
	require.Equal(t, int64(6), Mul(2, 3))
	require.Equal(t, int64(math.MaxInt64), Mul(1<<32, 1<<32))
	require.Equal(t, int64(math.MaxInt64), Mul(-1, 3))
	require.Equal(t, int64(5), Add(2, 3))
	require.Equal(t, int64(math.MaxInt64), Add(math.MaxInt64, 1))
}
