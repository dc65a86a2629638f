//go:build !amd64 || noasm

package quant

// setupSIMD: no assembly kernels in this build; the generic ones serve.
func setupSIMD(k *kernelSet) {}
