//go:build !amd64 || noasm

package quant

// KernelsEnv caps the kernel set on amd64 (see simd_amd64.go); this build
// has only the generic kernels.
const KernelsEnv = "LMSTREAM_CPU_KERNELS"

// setupSIMD: no assembly kernels in this build; the generic ones serve.
func setupSIMD(k *kernelSet) {}

func setupSIMDUpTo(k *kernelSet, limit string) {}

func canRun(set string) bool { return set == "generic" }
