package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/internal/race"
	"github.com/lmstream/lmstream/internal/testmodel"
	"github.com/lmstream/lmstream/spec"
	"github.com/lmstream/lmstream/streaming"
)

// TestIdleCalibration: with "calibration": "idle" a first start measures
// only the quick curve; the whole one is measured step by step in
// IdleWork, then installed and kept on disk, where a later start finds
// it; a backend closed in the middle of the measurement stops it.
func TestIdleCalibration(t *testing.T) {
	if race.Enabled {
		t.Skip("the default model's calibration is too slow under -race")
	}
	testmodel.Need(t, benchModel)
	dir := t.TempDir()
	config := `"threads":1,"max_slots":2,"context_length":512,"curve_cache_dir":"` + dir + `","calibration":"idle"`

	was := curveMeasurements.Load()
	b := startCPU(t, config)
	n := curveTokens(b.device)
	require.Equal(t, quickSizes(n), b.price.curve.ns, "the start measures the quick curve")
	require.Empty(t, b.price.curve.rootNs)
	require.NotNil(t, b.calibrating)
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	require.Empty(t, files, "a quick curve is not kept")

	steps := 0
	for b.IdleWork() {
		steps++
	}
	require.Greater(t, steps, 10, "one pass per step")
	require.Nil(t, b.calibrating)
	require.Equal(t, spec.CalibrationSizes(n), b.price.curve.ns, "the whole curve replaces it")
	require.NotEmpty(t, b.price.curve.rootNs)
	require.GreaterOrEqual(t, b.Budget(), DefaultMinBudget)
	require.Equal(t, was+2, curveMeasurements.Load())
	files, _ = filepath.Glob(filepath.Join(dir, "*.json"))
	require.Len(t, files, 1, "and is kept")

	warm := startCPU(t, config)
	require.Nil(t, warm.calibrating, "a later start reads the kept curve")
	require.Equal(t, b.price.curve, warm.price.curve)
	require.Equal(t, b.Budget(), warm.Budget())

	// Closed mid-measurement: Close returns (the measurement's goroutine
	// has exited) and nothing is kept.
	other := t.TempDir()
	mid := startCPU(t, `"threads":1,"max_slots":2,"context_length":512,"curve_cache_dir":"`+other+`","calibration":"idle"`)
	for range 3 {
		require.True(t, mid.IdleWork())
	}
	require.NoError(t, mid.Close())
	require.Nil(t, mid.calibrating)
	files, _ = filepath.Glob(filepath.Join(other, "*.json"))
	require.Empty(t, files)
}

// TestIdleCalibrationServes: a runtime calibrating in its idle moments
// answers at once, the same greedy answer as one calibrated at start, and
// completes the measurement between requests.
func TestIdleCalibrationServes(t *testing.T) {
	if race.Enabled {
		t.Skip("the default model's calibration is too slow under -race")
	}
	testmodel.Need(t, benchModel)
	dir := t.TempDir()
	curves.Clear()
	newRT := func(calibration string) *loop.Runtime {
		rt, err := loop.New([]byte(`{"model_path":"` + benchModel + `","threads":1,"max_slots":2,"context_length":512,` +
			`"curve_cache_dir":"` + dir + `","calibration":"` + calibration + `"}`))
		require.NoError(t, err)
		t.Cleanup(rt.Close)
		return rt
	}
	answer := func(rt *loop.Runtime) string {
		ch := streaming.NewChannel()
		defer ch.Release()
		require.NoError(t, rt.Submit([]byte(`{"prompt":"The three primary colours are","max_tokens":24,"temperature":0}`), []*streaming.Channel{ch}))
		text := ""
		for {
			c, err := ch.WaitPop(60 * time.Second)
			require.NoError(t, err)
			text += c.Text
			if c.Finished {
				require.NotEqual(t, streaming.Error, c.Reason, c.ErrMessage)
				return text
			}
		}
	}
	idle := newRT("idle")
	first := answer(idle)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		if len(files) == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the idle runtime never finished its measurement")
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, first, answer(idle))
	curves.Clear()
	os.RemoveAll(dir)
	require.Equal(t, first, answer(newRT("start")))
}
