package tokenizer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWordCacheIsBounded(t *testing.T) {
	c := newWordCache(4)
	for i := range 100 {
		c.put(fmt.Sprint("w", i), []int32{int32(i)})
		require.LessOrEqual(t, len(c.cur)+len(c.prev), 8)
	}
	ids, ok := c.get("w99")
	require.True(t, ok)
	require.Equal(t, []int32{99}, ids)
	_, ok = c.get("w0")
	require.False(t, ok)

	// A hit in the old generation is carried into the new one.
	c = newWordCache(2)
	c.put("a", []int32{1})
	c.put("b", []int32{2})
	c.put("c", []int32{3}) // "a", "b" now old
	_, ok = c.get("a")
	require.True(t, ok)
	c.put("d", []int32{4}) // rotates: "a" survives, "b" is dropped
	_, ok = c.get("a")
	require.True(t, ok)
	_, ok = c.get("b")
	require.False(t, ok)
}
