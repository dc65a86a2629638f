package engine

import (
	"fmt"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/spec"
)

// MeasureCurve measures the forward pass's cost curve of the model at path
// on a device (load; device names it in the calibration key) with the
// given threads, up to maxN tokens, a prompt token's price, and batches of
// up to maxRoots sequences (none below 2; see costCurve), exactly as a
// runtime does at start-up (the sizes of spec.CalibrationSizes, the best of a few runs
// each): for the AdaServe simulator, which must be driven by the curves
// the engine itself prices with. The curve is unnamed.
func MeasureCurve(device string, load LoadRunner, path string, threads, maxN, maxRoots int) (spec.Curve, error) {
	if threads < 1 || maxN < 2 {
		return spec.Curve{}, status.Errorf(status.InvalidArgument, "MeasureCurve: threads %d and maxN %d must be ≥ 1 and ≥ 2", threads, maxN)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return spec.Curve{}, status.Errorf(status.Model, "%v", err)
	}
	defer f.Close()
	m, err := load(f, threads, nil)
	if err != nil {
		return spec.Curve{}, status.Errorf(status.Model, "%v", err)
	}
	defer m.Close()
	c := measureCost(fmt.Sprintf("%s/%s/%d", device, path, threads), m, maxN, maxRoots, nil)
	if c == nil {
		return spec.Curve{}, status.Errorf(status.Backend, "MeasureCurve: a forward pass failed")
	}
	out := spec.Curve{N: c.ns, T: c.ts, RootN: c.rootNs, RootT: c.rootTs, Entry: c.entry, Prompt: c.prompt}
	if len(c.rootNs) > 0 {
		out.Context = curveContext
	}
	return out, nil
}
