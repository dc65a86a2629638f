package loop

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/status"
)

func TestBudgetSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	n, ok := memTotal(write("meminfo", "MemTotal:       24683936 kB\nMemFree:        1 kB\n"))
	require.True(t, ok)
	require.Equal(t, int64(24683936*1024), n)
	_, ok = memTotal(write("bad", "MemFree: 1 kB\n"))
	require.False(t, ok)
	_, ok = cgroupLimit(write("v2max", "max\n"))
	require.False(t, ok, `"max" is no limit`)
	_, ok = cgroupLimit(write("v1none", "9223372036854771712\n"))
	require.False(t, ok, "v1's page-rounded 2^63 is no limit")
	n, ok = cgroupLimit(write("v2", "4294967296\n"))
	require.True(t, ok)
	require.Equal(t, int64(4<<30), n)
	b := DefaultBudget()
	require.Positive(t, b.Bytes)
	require.NotEmpty(t, b.Source)
}

func TestReservationCheck(t *testing.T) {
	var r Reservation
	r.Add("weights", 100)
	r.Add("nothing", 0)
	r.Add("KV caches (2 slots)", 900)
	require.NoError(t, r.Check(Budget{1000, "test"}))
	err := r.Check(Budget{999, "a test budget"})
	require.Equal(t, status.Capacity, status.CodeOf(err))
	require.EqualError(t, err, `config: the runtime would reserve 1.0 kB (1000 B) of memory but its budget is 999 B (a test budget; set "memory_budget_bytes" to change it): weights 100 B, KV caches (2 slots) 900 B`)
	r.Add("overflow", math.MaxInt64)
	require.Equal(t, int64(math.MaxInt64), r.Total(), "sums saturate")
	require.Error(t, r.Check(Budget{math.MaxInt64 - 1, "x"}))
}

func TestConfigBudgetField(t *testing.T) {
	c, err := ParseConfig([]byte(`{"backend":"replay","memory_budget_bytes":123456789}`))
	require.NoError(t, err)
	require.Equal(t, Budget{123456789, `config field "memory_budget_bytes"`}, c.MemoryBudget())
	c, err = ParseConfig([]byte(`{"backend":"replay"}`))
	require.NoError(t, err)
	require.Equal(t, DefaultBudget(), c.MemoryBudget())
	_, err = ParseConfig([]byte(`{"memory_budget_bytes":-1}`))
	require.ErrorContains(t, err, `"memory_budget_bytes"`)
	_, err = ParseConfig([]byte(`{"max_queue":2000000}`))
	require.ErrorContains(t, err, `"max_queue" must be in [1, 1048576]`)
}
