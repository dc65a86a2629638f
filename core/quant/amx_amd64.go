//go:build amd64 && !noasm

package quant

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// AMX: Intel's tile unit (Sapphire Rapids and later Xeons). The Q4_K and
// Q6_K kernels (gen_amx.go) run the pair kernels' work with tile products
// for calls of several activation rows: a verify pass, a batch of
// streams, a prefill chunk. Their sums are the VNNI pair kernels' exact
// integers, so their results are the same bits (TestAMXEqualsPacked16).

// hasAMX reports whether the CPU has the AMX tile and int8 instructions,
// the pair kernels beside them (the AMX kernel reads their layout and
// decodes with GFNI), and the OS lets this process use the tiles.
func hasAMX() bool {
	return cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8 && hasVNNI512() && cpu.X86.HasAVX512GFNI && amxPermit()
}

// setupAMX installs the AMX Q4_K and Q6_K kernels beside the pair
// kernels.
func setupAMX(k *kernelSet) {
	if k.p16[Q4_K] == nil || k.p16[Q6_K] == nil {
		return
	}
	k.name = "avx512vnni+amx"
	k.amx[Q4_K] = amxChecked(Q4_K, q4kP16AMX)
	k.amx[Q6_K] = amxChecked(Q6_K, q6kP16AMX)
}

// amxChecked wraps the AMX kernel of wt in the bounds checks of its
// slices: the assembly reads what the arguments say without looking.
func amxChecked(wt Type, kern func(wp *byte, gb, nb int, x, xa *byte, xs int, out *float32, os int, na, pairs int)) func(wp []byte, gb, nb int, x, xa []byte, xs int, out []float32, os, na, pairs int) {
	rec, xb, stride := p8Record(wt), Q8_K.BlockBytes(), amxActStride(wt)
	return func(wp []byte, gb, nb int, x, xa []byte, xs int, out []float32, os, na, pairs int) {
		if na < 1 || na > amxMaxActs || nb < 1 || pairs < 1 || gb < nb*rec {
			panic("quant: AMX kernel: bad call")
		}
		_ = wp[(2*pairs-1)*gb+nb*rec-1]
		_ = x[(na-1)*xs+nb*xb-1]
		_ = xa[na*nb*stride-1]
		_ = out[(na-1)*os+2*p8Rows*pairs-1]
		kern(unsafe.SliceData(wp), gb, nb, unsafe.SliceData(x), unsafe.SliceData(xa), xs, unsafe.SliceData(out), 4*os, na, pairs)
	}
}
