// Package quant holds the block layouts of GGML's tensor types and the
// kernels over them: dequantization, activation quantization and the dot
// products the forward pass is made of.
package quant

import "fmt"

// Type is a GGML tensor type. The numeric values are GGML's and appear in
// GGUF files, so they never change.
type Type uint32

const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40
	Q1_0    Type = 41
	Q2_0    Type = 42
)

// typeSlots bounds the type ids of the kernel tables indexed by Type.
const typeSlots = int(Q2_0) + 1

// typeNames names every id GGML has given a type, those this package cannot
// read included, so that a file using one is refused by name ("IQ1_S")
// rather than by number. Ids 4, 5, 31–33 and 36–38 are types GGML removed.
var typeNames = map[Type]string{
	4: "Q4_2", 5: "Q4_3",
	IQ2_XXS: "IQ2_XXS", IQ2_XS: "IQ2_XS", IQ3_XXS: "IQ3_XXS", IQ1_S: "IQ1_S",
	IQ3_S: "IQ3_S", IQ2_S: "IQ2_S", I8: "I8", I16: "I16", I32: "I32", I64: "I64",
	F64: "F64", IQ1_M: "IQ1_M", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
	TQ1_0: "TQ1_0", TQ2_0: "TQ2_0", 36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8",
	NVFP4: "NVFP4", Q1_0: "Q1_0", Q2_0: "Q2_0",
}

// QK is the element count of the K-quant super-block.
const QK = 256

type layout struct {
	name       string
	blockElems int // elements per block
	blockBytes int // bytes per block
}

var layouts = map[Type]layout{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	BF16: {"BF16", 1, 2},
	Q4_0: {"Q4_0", 32, 2 + 16},
	Q4_1: {"Q4_1", 32, 2 + 2 + 16},
	Q5_0: {"Q5_0", 32, 2 + 4 + 16},
	Q5_1: {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0: {"Q8_0", 32, 2 + 32},
	Q8_1: {"Q8_1", 32, 2 + 2 + 32},
	Q2_K: {"Q2_K", QK, QK/16 + QK/4 + 2 + 2},
	Q3_K: {"Q3_K", QK, QK/8 + QK/4 + 12 + 2},
	Q4_K: {"Q4_K", QK, 2 + 2 + 12 + QK/2},
	Q5_K: {"Q5_K", QK, 2 + 2 + 12 + QK/8 + QK/2},
	Q6_K: {"Q6_K", QK, QK/2 + QK/4 + QK/16 + 2},
	Q8_K: {"Q8_K", QK, 4 + QK + QK/16*2},

	IQ4_NL: {"IQ4_NL", 32, 2 + 16},
	IQ4_XS: {"IQ4_XS", QK, 2 + 2 + QK/64 + QK/2},
	MXFP4:  {"MXFP4", 32, 1 + 16},

	IQ3_S:   {"IQ3_S", QK, 2 + QK/4 + QK/32 + QK/8 + QK/64},
	IQ3_XXS: {"IQ3_XXS", QK, 2 + QK/4 + QK/8},
	IQ2_XXS: {"IQ2_XXS", QK, 2 + QK/4},
	IQ2_XS:  {"IQ2_XS", QK, 2 + QK/4 + QK/32},
	IQ2_S:   {"IQ2_S", QK, 2 + QK/4 + QK/16},
}

// layoutTable is layouts indexed by type id (a zero blockElems: not a
// type this package reads): the matmuls ask a type's sizes on every call,
// and a map lookup each time was 0.7% of a SmolLM2 decode step.
var layoutTable = func() (t [typeSlots]layout) {
	for typ, l := range layouts {
		t[typ] = l
	}
	return t
}()

// layoutOf is t's layout and whether this package reads t.
func layoutOf(t Type) (layout, bool) {
	if uint64(t) >= uint64(len(layoutTable)) {
		return layout{}, false
	}
	l := layoutTable[t]
	return l, l.blockElems > 0
}

// Known reports whether t is a type this package can read.
func (t Type) Known() bool { _, ok := layoutOf(t); return ok }

func (t Type) String() string {
	if l, ok := layoutOf(t); ok {
		return l.name
	}
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Support is nil when t is a type this package can read, else an error
// that names it: "tensor type IQ1_S (19) is not supported" for a type
// GGML defines, "unknown tensor type 99" for an id it does not.
func (t Type) Support() error {
	if t.Known() {
		return nil
	}
	if n, ok := typeNames[t]; ok {
		return fmt.Errorf("tensor type %s (%d) is not supported", n, uint32(t))
	}
	return fmt.Errorf("unknown tensor type %d", uint32(t))
}

// BlockElems is the number of elements one block holds (1 for float types).
func (t Type) BlockElems() int { l, _ := layoutOf(t); return l.blockElems }

// BlockBytes is the size in bytes of one block.
func (t Type) BlockBytes() int { l, _ := layoutOf(t); return l.blockBytes }

// RowBytes is the size of a row of n elements, or an error when n is not a
// whole number of blocks or t is unknown.
func (t Type) RowBytes(n int) (int, error) {
	l, ok := layoutOf(t)
	if !ok {
		return 0, t.Support()
	}
	if n < 0 || n%l.blockElems != 0 {
		return 0, fmt.Errorf("%s row of %d elements is not a whole number of %d-element blocks", l.name, n, l.blockElems)
	}
	return n / l.blockElems * l.blockBytes, nil
}
