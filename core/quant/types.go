// Package quant holds the block layouts of GGML's tensor types and the
// kernels over them: dequantization, activation quantization and the dot
// products the forward pass is made of.
package quant

import "fmt"

// Type is a GGML tensor type. The numeric values are GGML's and appear in
// GGUF files, so they never change.
type Type uint32

const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15
	BF16 Type = 30
)

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
	Q4_K: {"Q4_K", QK, 2 + 2 + 12 + QK/2},
	Q5_K: {"Q5_K", QK, 2 + 2 + 12 + QK/8 + QK/2},
	Q6_K: {"Q6_K", QK, QK/2 + QK/4 + QK/16 + 2},
	Q8_K: {"Q8_K", QK, 4 + QK + QK/16*2},
}

// Known reports whether t is a type this package can read.
func (t Type) Known() bool { _, ok := layouts[t]; return ok }

func (t Type) String() string {
	if l, ok := layouts[t]; ok {
		return l.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockElems is the number of elements one block holds (1 for float types).
func (t Type) BlockElems() int { return layouts[t].blockElems }

// BlockBytes is the size in bytes of one block.
func (t Type) BlockBytes() int { return layouts[t].blockBytes }

// RowBytes is the size of a row of n elements, or an error when n is not a
// whole number of blocks or t is unknown.
func (t Type) RowBytes(n int) (int, error) {
	l, ok := layouts[t]
	if !ok {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if n < 0 || n%l.blockElems != 0 {
		return 0, fmt.Errorf("%s row of %d elements is not a whole number of %d-element blocks", l.name, n, l.blockElems)
	}
	return n / l.blockElems * l.blockBytes, nil
}
