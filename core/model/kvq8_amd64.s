//go:build !noasm

#include "textflag.h"

// func dequantQ80AVX2(dst *float32, src *uint16, nb int)
// Block b at src+34b: a float16 scale d, then 32 int8 q; dst[32b+j] = d·q_j
// (the int8 widened to float32 exactly, one rounding for the product).
TEXT ·dequantQ80AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	TESTQ CX, CX
	JZ   q80done

q80loop:
	VPBROADCASTW (SI), X0
	VCVTPH2PS    X0, Y0
	VPMOVSXBD    2(SI), Y1
	VPMOVSXBD    10(SI), Y2
	VPMOVSXBD    18(SI), Y3
	VPMOVSXBD    26(SI), Y4
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VMULPS       Y0, Y1, Y1
	VMULPS       Y0, Y2, Y2
	VMULPS       Y0, Y3, Y3
	VMULPS       Y0, Y4, Y4
	VMOVUPS      Y1, (DI)
	VMOVUPS      Y2, 32(DI)
	VMOVUPS      Y3, 64(DI)
	VMOVUPS      Y4, 96(DI)
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          q80loop

q80done:
	VZEROUPPER
	RET
