package engine

import (
	"sync/atomic"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
)

// OpenRunner loads the model of a GGUF file onto a device, with threads
// host threads for the work the device leaves to the CPU.
type OpenRunner func(f *gguf.File, threads int) (model.Runner, error)

// LoadRunner is what a device provides: it loads the model of a GGUF file
// as a runner (forward pass, caches, heads), telling progress (when not
// nil) the share of its weights loaded, from 0 to 1.
type LoadRunner func(f *gguf.File, threads int, progress func(float64)) (model.Runner, error)

// Device makes a runtime's LoadRunner from its config, taking the
// device's own fields from cfg.Extra ("cuda_device"); the engine takes
// every other field.
type Device func(cfg *loop.Config) (LoadRunner, error)

// Register makes the engine over device d a runtime backend named name
// ("cpu", "cuda"). Device packages call it from an init function.
func Register(name string, d Device) {
	loop.Register(name, func(cfg *loop.Config) (loop.Backend, error) { return NewOnDevice(cfg, name, d) })
}

// NewOnDevice is the engine over device d, named name in messages and
// calibration keys: New with d's runner, the target's weights loading
// reported as the weights stage of cfg's progress.
func NewOnDevice(cfg *loop.Config, name string, d Device) (loop.Backend, error) {
	load, err := d(cfg)
	if err != nil {
		return nil, err
	}
	return New(cfg, name, reportingFirst(cfg, load))
}

// reportingFirst opens models with load and reports the target's weights
// (the first model it opens) as the weights stage, from 0.05 to 0.3 of the
// whole creation (New's shares). A draft model opened later, during the
// speculation stage, reports nothing: the fraction must not go back.
func reportingFirst(cfg *loop.Config, load LoadRunner) OpenRunner {
	var first atomic.Bool
	return func(f *gguf.File, threads int) (model.Runner, error) {
		var progress func(float64)
		if first.CompareAndSwap(false, true) {
			progress = weightsProgress(cfg)
		}
		return load(f, threads, progress)
	}
}

// weightsProgress maps a device's share of the weights loaded (0 to 1)
// onto the weights stage of cfg's creation progress.
func weightsProgress(cfg *loop.Config) func(float64) {
	return func(x float64) { cfg.Report(loop.StageWeights, weightsStart+(specStart-weightsStart)*x) }
}
