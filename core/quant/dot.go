package quant

import "sync/atomic"

// Kernel selection. Each public Dot* function calls through the active
// kernel set: the SIMD set (the generic functions with the fields that have
// an assembly version replaced, see setupSIMD in the per-architecture files)
// or the pure-Go reference set. The indirect call costs a few ns per row,
// nothing next to a row of hundreds of blocks.

type quantDot func(w, x []byte) float32

// multiDot is rows consecutive weight rows (w) against na ≤ 4 activation
// rows x[0:], x[xs:], x[2xs:], x[3xs:]: the dot of weight row r with
// activation row j goes to out[j·os + r]; sc holds the activation rows'
// float32 scales (actScales; nil for the K-quants). A result must be
// bit-identical whatever na and rows are (TestBatchInvariance).
type multiDot func(w []byte, rows int, x []byte, xs int, sc []float32, na int, out []float32, os int)

type kernelSet struct {
	name                                        string
	q4_0, q4_1, q5_0, q5_1, q8_0, q4K, q5K, q6K quantDot
	f32                                         func(w, x []float32) float32
	q2K, q3K, iq4nl, iq4xs, mxfp4               quantDot
	iq3s, iq3xxs, iq2xxs, iq2xs, iq2s           quantDot
	f16, bf16                                   func(w []byte, x []float32) float32
	// Optional multi-activation kernels: one weight row against 4
	// activation rows x[0:], x[xs:], x[2xs:], x[3xs:], results in out[0:4].
	// They share the weight decode across the 4 rows; nil means MatMul calls
	// the single-row dot 4 times.
	q4_1x4, q8_0x4, q4_0x4 func(w, x []byte, xs int, out *[4]float32)
	// Optional multi-row kernels by weight type (AVX2): where set, MatMul
	// runs every row through them, 4 activation rows per weight-row visit.
	multi [typeSlots]multiDot
	// Optional Q4_1 kernels over activations repacked by repackQ81 (see
	// dot_q41r_amd64.s): whole block pairs only, xs = repacked row stride.
	q4_1r   func(w, xr []byte, npairs int) float32
	q4_1rx4 func(w, xr []byte, xs, npairs int, out *[4]float32)
	// Optional packed-layout kernels (packed.go): q41p runs na ≤ packActs
	// activation rows (stride xs) over one packed 16-row group, writing
	// out[j*rows+r] for the rows set in mask; q41pack packs 16 whole rows.
	q41p, q80p       func(wp []byte, nb int, x []byte, xs int, sc, out []float32, rows int, mask uint16, na int)
	q41pack, q80pack func(w []byte, wrb, nb int, dst []byte)
	q81Scales        func(x []byte, nb int, dst []float32)
	// Optional 8-row packed-layout kernels by weight type (packed8.go).
	p8     [typeSlots]p8Kernel
	p8Acts [typeSlots]int
	// Optional pair kernels (VNNI): the same over two adjacent 8-row
	// groups (gb bytes apart) at once, 16 floats per activation row.
	p16 [typeSlots]func(wp []byte, gb, nb int, x []byte, xs int, sc, out []float32, os, na int)
	// Optional tile-unit kernels (AMX): the pair kernels' work over pairs
	// consecutive pairs, na ≤ amxMaxActs, for calls of amxMinActs or more
	// activation rows; xa is amxActs of x.
	amx [typeSlots]func(wp []byte, gb, nb int, x, xa []byte, xs int, out []float32, os, na, pairs int)
	// Activation quantizers (whole blocks; bit-identical to the generic
	// code whichever set is active).
	quantQ80, quantQ81, quantQ8K func(src []float32, dst []byte)
}

var genericKernels = kernelSet{
	name: "generic",
	q4_0: DotQ4_0Q8_0Generic, q4_1: DotQ4_1Q8_1Generic,
	q5_0: DotQ5_0Q8_0Generic, q5_1: DotQ5_1Q8_1Generic,
	q8_0: DotQ8_0Q8_0Generic,
	q4K:  DotQ4_KQ8_KGeneric, q5K: DotQ5_KQ8_KGeneric, q6K: DotQ6_KQ8_KGeneric,
	q2K: DotQ2_KQ8_KGeneric, q3K: DotQ3_KQ8_KGeneric, iq4nl: DotIQ4_NLQ8_0Generic,
	iq4xs: DotIQ4_XSQ8_KGeneric, mxfp4: DotMXFP4Q8_0Generic,
	iq3s: DotIQ3_SQ8_KGeneric, iq3xxs: DotIQ3_XXSQ8_KGeneric,
	iq2xxs: DotIQ2_XXSQ8_KGeneric, iq2xs: DotIQ2_XSQ8_KGeneric, iq2s: DotIQ2_SQ8_KGeneric,
	f32: DotF32Generic, f16: DotF16F32Generic, bf16: DotBF16F32Generic,
	q81Scales: q81ScalesGeneric,
	quantQ80:  quantizeQ8_0Generic, quantQ81: quantizeQ8_1Generic, quantQ8K: quantizeQ8_KGeneric,
}

var simdKernels = genericKernels

var active atomic.Pointer[kernelSet]

func init() {
	setupSIMD(&simdKernels)
	active.Store(&simdKernels)
}

// UseSIMD switches between the SIMD kernels (true, the default) and the
// pure-Go reference kernels (false) for every Dot* function and MatMul; it
// returns the previous setting. Where the CPU or the build (tag noasm) has
// no SIMD kernels, both settings run the generic code.
func UseSIMD(on bool) (was bool) {
	was = active.Load() == &simdKernels
	if on {
		active.Store(&simdKernels)
	} else {
		active.Store(&genericKernels)
	}
	return was
}

// Kernels names the active kernel set ("generic", "avx512vnni", ...).
func Kernels() string { return active.Load().name }

// DotQ4_0Q8_0 is the dot of a Q4_0 weight row with a Q8_0 activation row
// (block count from len(w)).
func DotQ4_0Q8_0(w, x []byte) float32 { return active.Load().q4_0(w, x) }

// DotQ4_1Q8_1 is the dot of a Q4_1 weight row with a Q8_1 activation row.
func DotQ4_1Q8_1(w, x []byte) float32 { return active.Load().q4_1(w, x) }

// DotQ5_0Q8_0 is the dot of a Q5_0 weight row with a Q8_0 activation row.
func DotQ5_0Q8_0(w, x []byte) float32 { return active.Load().q5_0(w, x) }

// DotQ5_1Q8_1 is the dot of a Q5_1 weight row with a Q8_1 activation row.
func DotQ5_1Q8_1(w, x []byte) float32 { return active.Load().q5_1(w, x) }

// DotQ8_0Q8_0 is the dot of a Q8_0 weight row with a Q8_0 activation row.
func DotQ8_0Q8_0(w, x []byte) float32 { return active.Load().q8_0(w, x) }

// DotQ4_KQ8_K is the dot of a Q4_K weight row with a Q8_K activation row.
func DotQ4_KQ8_K(w, x []byte) float32 { return active.Load().q4K(w, x) }

// DotQ5_KQ8_K is the dot of a Q5_K weight row with a Q8_K activation row.
func DotQ5_KQ8_K(w, x []byte) float32 { return active.Load().q5K(w, x) }

// DotQ6_KQ8_K is the dot of a Q6_K weight row with a Q8_K activation row.
func DotQ6_KQ8_K(w, x []byte) float32 { return active.Load().q6K(w, x) }

// DotF32 is Σ w_i·x_i over len(w) elements.
func DotF32(w, x []float32) float32 { return active.Load().f32(w, x) }

// DotF16F32 is the dot of an F16 row (len(w)/2 values) with float32s.
func DotF16F32(w []byte, x []float32) float32 { return active.Load().f16(w, x) }

// DotBF16F32 is the dot of a BF16 row (len(w)/2 values) with float32s.
func DotBF16F32(w []byte, x []float32) float32 { return active.Load().bf16(w, x) }
