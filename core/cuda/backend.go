package cuda

import (
	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/status"
)

// The "cuda" backend is the engine (core/engine) over a Runner on the GPU.
// Config fields besides the engine's: "cuda_device" (ordinal, 0) and
// "nvrtc_path" (an NVRTC library or folder; searched when absent).
func init() { engine.Register("cuda", Device) }

// Device takes the config's GPU fields and loads models onto that GPU.
func Device(cfg *loop.Config) (engine.LoadRunner, error) {
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
	return func(f *gguf.File, _ int, progress func(float64)) (model.Runner, error) {
		r, err := LoadWithProgress(f, o, progress)
		if err != nil {
			return nil, err // LMS_ERR_BACKEND for the device, LMS_ERR_MODEL for the file
		}
		return r, nil
	}, nil
}

// New is the engine on the GPU: the "cuda" runtime backend.
func New(cfg *loop.Config) (loop.Backend, error) { return engine.NewOnDevice(cfg, "cuda", Device) }
