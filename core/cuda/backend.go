package cuda

import (
	"sync/atomic"

	"github.com/lmstream/lmstream/core/cpu"
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
)

// The "cuda" backend is the engine of package cpu over a Runner on the GPU.
// Config fields besides the cpu backend's: "cuda_device" (ordinal, 0) and
// "nvrtc_path" (an NVRTC library or folder; searched when absent).
func init() { loop.Register("cuda", New) }

// New loads the config's model onto the GPU.
func New(cfg *loop.Config) (loop.Backend, error) {
	var o Options
	if _, err := cfg.Extra.Take("cuda_device", &o.Device); err != nil {
		return nil, err
	}
	if _, err := cfg.Extra.Take("nvrtc_path", &o.NVRTCPath); err != nil {
		return nil, err
	}
	if o.Device < 0 {
		return nil, status.Errorf(status.InvalidRequest, `config field "cuda_device" must be at least 0, got %d`, o.Device)
	}
	// The target (the first model opened) reports its upload as the
	// weights stage, as the cpu backend reports its packing.
	var first atomic.Bool
	return cpu.NewBackend(cfg, "cuda", func(f *gguf.File, threads int) (model.Runner, error) {
		var progress func(float64)
		if first.CompareAndSwap(false, true) {
			progress = cpu.WeightsProgress(cfg)
		}
		r, err := LoadWithProgress(f, o, progress)
		if err != nil {
			return nil, err // LMS_ERR_BACKEND for the device, LMS_ERR_MODEL for the file
		}
		return r, nil
	})
}
