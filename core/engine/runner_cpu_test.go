package engine

import (
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
)

// The engine's tests run it over the real CPU runner (core/model's), as
// core/cpu registers it: that package imports this one, so these tests
// cannot import it, and register the same runner under the same name.
func init() { Register("cpu", func(*loop.Config) (LoadRunner, error) { return loadCPU, nil }) }

func loadCPU(f *gguf.File, threads int, progress func(float64)) (model.Runner, error) {
	m, err := model.LoadWithProgress(f, threads, progress)
	if err != nil {
		return nil, err
	}
	return model.CPU{Model: m}, nil
}

// newCPU is the "cpu" backend for cfg.
func newCPU(cfg *loop.Config) (loop.Backend, error) {
	return NewOnDevice(cfg, "cpu", func(*loop.Config) (LoadRunner, error) { return loadCPU, nil })
}
