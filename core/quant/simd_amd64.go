//go:build amd64 && !noasm

package quant

func setupSIMD(k *kernelSet) {}
