//go:build amd64 && !noasm

#include "textflag.h"

// func readSumAVX2(p *byte, n int) uint64
// Σ of the uint64 words of p[0:n], n a positive multiple of 128.
TEXT ·readSumAVX2(SB), NOSPLIT, $0-24
	MOVQ  p+0(FP), SI
	MOVQ  n+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

loop:
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y2, Y2
	VPADDQ 96(SI), Y3, Y3
	ADDQ   $128, SI
	SUBQ   $128, CX
	JNZ    loop
	VPADDQ Y1, Y0, Y0
	VPADDQ Y3, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ  X0, AX
	MOVQ   AX, ret+16(FP)
	VZEROUPPER
	RET
