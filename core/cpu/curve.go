package cpu

import (
	"fmt"
	"time"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
)

// MeasureCurve measures the forward pass's cost curve of the model at path
// with the given threads, up to maxN tokens, exactly as a runtime does at
// start-up (the sizes of spec.CalibrationSizes, best of two runs each): for
// tools that model the engine, such as the AdaServe simulator (spec/sim),
// which must be driven by the curve the engine itself prices with.
func MeasureCurve(path string, threads, maxN int) (ns []int, ts []time.Duration, err error) {
	if threads < 1 || maxN < 2 {
		return nil, nil, status.Errorf(status.InvalidArgument, "MeasureCurve: threads %d and maxN %d must be ≥ 1 and ≥ 2", threads, maxN)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, status.Errorf(status.Model, "%v", err)
	}
	defer f.Close()
	mm, err := model.Load(f, threads)
	if err != nil {
		return nil, nil, status.Errorf(status.Model, "%v", err)
	}
	m := model.CPU{Model: mm}
	defer m.Close()
	c := measureCost(fmt.Sprintf("cpu/%s/%d", path, threads), m, maxN, nil)
	if c == nil {
		return nil, nil, status.Errorf(status.Backend, "MeasureCurve: a forward pass failed")
	}
	return c.ns, c.ts, nil
}
