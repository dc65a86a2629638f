// Package cpu is the CPU device: the model's forward pass on the host's
// cores (core/model's runner, its weights packed for the SIMD kernels),
// registered as the runtime backend "cpu". Everything above the forward
// pass (batching, prefill, speculation, sampling, verification) is the
// engine's (core/engine), the same on every device.
package cpu

import (
	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
)

func init() { engine.Register("cpu", Device) }

// Device is the CPU device for a runtime config: it has no fields of its
// own.
func Device(*loop.Config) (engine.LoadRunner, error) { return Load, nil }

// Load loads the model of f onto the CPU with threads worker threads,
// reporting its weight packing to progress (when not nil).
func Load(f *gguf.File, threads int, progress func(float64)) (model.Runner, error) {
	m, err := model.LoadWithProgress(f, threads, progress)
	if err != nil {
		return nil, err
	}
	return model.CPU{Model: m}, nil
}

// New is the engine on the CPU: the "cpu" runtime backend.
func New(cfg *loop.Config) (loop.Backend, error) { return engine.NewOnDevice(cfg, "cpu", Device) }
