//go:build amd64 && !noasm

package quant

import "golang.org/x/sys/cpu"

// hasAVXVNNI reports whether the AVX-VNNI 8-row kernels can run: the VEX
// form of VPDPBUSD on YMM registers (Intel client cores from Alder Lake
// on; AMD Zen 5), beside AVX2.
func hasAVXVNNI() bool { return hasAVX2() && cpu.X86.HasAVXVNNI }

// setupAVXVNNI is setupAVX2 with the 8-row kernels of
// gen_packed8_avxvnni.go, which give the AVX2 kernels' bits with fewer
// instructions (VPDPBUSD in place of VPMADDUBSW, VPADDW and VPMADDWD).
func setupAVXVNNI(k *kernelSet) {
	setupAVX2(k)
	installPacked8(k, p8AsmAVXVNNI)
	k.name = "avxvnni"
}
