//go:build amd64 && !noasm

#include "textflag.h"

// Q8_0 and Q4_0 weights against Q8_0 activations (AVX-512 VNNI), two blocks
// per iteration as in dot_q4_amd64.s.
//
// Both operands are signed here (Q8_0 weights are int8, Q4_0 quants are
// q−8), but VPDPBUSD wants one unsigned side. The activations are made
// unsigned by flipping their sign bit (x+128, an XOR), and the excess
// 128·Σw — which depends on the weights only — is computed once per weight
// block pair with a second VPDPBUSD (128 × w) and used as the negated
// starting value of every activation row's accumulator. So the x4 kernels
// pay for it once for four rows, and the sum stays exact in int32.

DATA q40idx2<>+0(SB)/8, $0x0908070605040302
DATA q40idx2<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA q40idx2<>+16(SB)/8, $0x0908070605040302
DATA q40idx2<>+24(SB)/8, $0x11100f0e0d0c0b0a
DATA q40idx2<>+32(SB)/8, $0x1b1a191817161514
DATA q40idx2<>+40(SB)/8, $0x232221201f1e1d1c
DATA q40idx2<>+48(SB)/8, $0x1b1a191817161514
DATA q40idx2<>+56(SB)/8, $0x232221201f1e1d1c
GLOBL q40idx2<>(SB), RODATA|NOPTR, $64

DATA nibshift2<>+0(SB)/8, $0
DATA nibshift2<>+8(SB)/8, $0
DATA nibshift2<>+16(SB)/8, $4
DATA nibshift2<>+24(SB)/8, $4
DATA nibshift2<>+32(SB)/8, $0
DATA nibshift2<>+40(SB)/8, $0
DATA nibshift2<>+48(SB)/8, $4
DATA nibshift2<>+56(SB)/8, $4
GLOBL nibshift2<>(SB), RODATA|NOPTR, $64

DATA perm02b<>+0(SB)/8, $0
DATA perm02b<>+8(SB)/8, $0
DATA perm02b<>+16(SB)/8, $0
DATA perm02b<>+24(SB)/8, $0
DATA perm02b<>+32(SB)/8, $0x0000000200000002
DATA perm02b<>+40(SB)/8, $0x0000000200000002
DATA perm02b<>+48(SB)/8, $0x0000000200000002
DATA perm02b<>+56(SB)/8, $0x0000000200000002
GLOBL perm02b<>(SB), RODATA|NOPTR, $64

#define HSUM16(zacc, yacc, xacc, ytmp, xtmp) \
	VEXTRACTF64X4 $1, zacc, ytmp \
	VADDPS        ytmp, yacc, yacc \
	VEXTRACTF32X4 $1, yacc, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVHLPS      xacc, xtmp, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVSHDUP     xacc, xtmp \
	VADDSS        xtmp, xacc, xacc

// Z27 = 0x80 bytes, Z28 = VPERMPS lanes 0/2 spread, Z25 = 0.
#define Q8_SETUP \
	MOVL         $0x80808080, AX \
	VPBROADCASTD AX, Z27 \
	VMOVDQU64    perm02b<>(SB), Z28 \
	VPXORD       Z25, Z25, Z25

// Q4_0 extras: K1 = 36-byte load mask, Z29 = VPERMB indices, Z30 = shifts,
// Z31 = 0x0f bytes, Z26 = 0x08 bytes.
#define Q40_SETUP \
	MOVQ         $0xfffffffff, AX \
	KMOVQ        AX, K1 \
	VMOVDQU64    q40idx2<>(SB), Z29 \
	VMOVDQU64    nibshift2<>(SB), Z30 \
	MOVL         $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z31 \
	MOVL         $0x08080808, AX \
	VPBROADCASTD AX, Z26

// Weight pair → Z1 signed quants in element order, Z7 = −128·Σw per lane,
// X4 = [d0, 0, d1, 0].
#define Q80_WEIGHTS \
	VMOVDQU      2(SI), Y1 \
	VINSERTI64X4 $1, 36(SI), Z1, Z1 \
	MOVWLZX      (SI), AX \
	VMOVD        AX, X4 \
	VPINSRW      $2, 34(SI), X4, X4 \
	VCVTPH2PS    X4, X4 \
	VPXORD       Z7, Z7, Z7 \
	VPDPBUSD     Z1, Z27, Z7 \
	VPSUBD       Z7, Z25, Z7

#define Q40_WEIGHTS \
	VMOVDQU8.Z (SI), K1, Z0 \
	VPERMB     Z0, Z29, Z1 \
	VPSRLVQ    Z30, Z1, Z1 \
	VPANDD     Z31, Z1, Z1 \
	VPSUBB     Z26, Z1, Z1 \
	MOVWLZX    (SI), AX \
	VMOVD      AX, X4 \
	VPINSRW    $2, 18(SI), X4, X4 \
	VCVTPH2PS  X4, X4 \
	VPXORD     Z7, Z7, Z7 \
	VPDPBUSD   Z1, Z27, Z7 \
	VPSUBD     Z7, Z25, Z7

// One Q8_0 activation pair at (DI): zacc += int sums × d_w·d_x.
#define Q80_ACT(zacc) \
	VMOVDQU      2(DI), Y2 \
	VINSERTI64X4 $1, 36(DI), Z2, Z2 \
	VPXORD       Z27, Z2, Z2 \
	VMOVDQA64    Z7, Z3 \
	VPDPBUSD     Z1, Z2, Z3 \
	MOVWLZX      (DI), AX \
	VMOVD        AX, X5 \
	VPINSRW      $2, 34(DI), X5, X5 \
	VCVTPH2PS    X5, X5 \
	VMULPS       X4, X5, X6 \
	VPERMPS      Z6, Z28, Z6 \
	VCVTDQ2PS    Z3, Z3 \
	VFMADD231PS  Z3, Z6, zacc

// Q5_0: 22-byte blocks d, qh, qs; two blocks = 44 bytes, qs at 6..21 and
// 28..43, qh at 2 and 24. Quants q−16 (signed) as for Q4_0.
DATA q50idx<>+0(SB)/8, $0x0d0c0b0a09080706
DATA q50idx<>+8(SB)/8, $0x1514131211100f0e
DATA q50idx<>+16(SB)/8, $0x0d0c0b0a09080706
DATA q50idx<>+24(SB)/8, $0x1514131211100f0e
DATA q50idx<>+32(SB)/8, $0x232221201f1e1d1c
DATA q50idx<>+40(SB)/8, $0x2b2a292827262524
DATA q50idx<>+48(SB)/8, $0x232221201f1e1d1c
DATA q50idx<>+56(SB)/8, $0x2b2a292827262524
GLOBL q50idx<>(SB), RODATA|NOPTR, $64

#define Q50_WEIGHTS \
	VMOVDQU8.Z (SI), K1, Z0 \
	VPERMB     Z0, Z29, Z1 \
	VPSRLVQ    Z30, Z1, Z1 \
	VPANDD     Z31, Z1, Z1 \
	MOVL       2(SI), AX \
	MOVL       24(SI), DX \
	SHLQ       $32, DX \
	ORQ        DX, AX \
	KMOVQ      AX, K2 \
	VPADDB     Z26, Z1, K2, Z1 \
	VPSUBB     Z26, Z1, Z1 \
	MOVWLZX    (SI), AX \
	VMOVD      AX, X4 \
	VPINSRW    $2, 22(SI), X4, X4 \
	VCVTPH2PS  X4, X4 \
	VPXORD     Z7, Z7, Z7 \
	VPDPBUSD   Z1, Z27, Z7 \
	VPSUBD     Z7, Z25, Z7

#define X4_BODY \
	Q80_ACT(Z8) \
	ADDQ BX, DI \
	Q80_ACT(Z9) \
	ADDQ BX, DI \
	Q80_ACT(Z10) \
	ADDQ BX, DI \
	Q80_ACT(Z11) \
	SUBQ DX, DI \
	ADDQ $68, DI

#define X4_PROLOGUE \
	MOVQ w+0(FP), SI \
	MOVQ x+8(FP), DI \
	MOVQ xs+16(FP), BX \
	MOVQ npairs+24(FP), CX \
	LEAQ (BX)(BX*2), DX \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11

#define X4_EPILOGUE \
	MOVQ out+32(FP), AX \
	HSUM16(Z8, Y8, X8, Y16, X16) \
	MOVSS X8, 0(AX) \
	HSUM16(Z9, Y9, X9, Y16, X16) \
	MOVSS X9, 4(AX) \
	HSUM16(Z10, Y10, X10, Y16, X16) \
	MOVSS X10, 8(AX) \
	HSUM16(Z11, Y11, X11, Y16, X16) \
	MOVSS X11, 12(AX) \
	VZEROUPPER

// func dotQ8_0Q8_0VNNI(w, x *byte, npairs int) float32
TEXT ·dotQ8_0Q8_0VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ npairs+16(FP), CX
	Q8_SETUP
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	TESTQ CX, CX
	JEQ   q80done

q80loop:
	Q80_WEIGHTS
	Q80_ACT(Z8)
	ADDQ $68, SI
	ADDQ $68, DI
	DECQ CX
	JNZ  q80loop

q80done:
	HSUM16(Z8, Y8, X8, Y9, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET

// func dotQ4_0Q8_0VNNI(w, x *byte, npairs int) float32
TEXT ·dotQ4_0Q8_0VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ npairs+16(FP), CX
	Q8_SETUP
	Q40_SETUP
	VPXORD Z8, Z8, Z8
	TESTQ CX, CX
	JEQ   q40done

q40loop:
	Q40_WEIGHTS
	Q80_ACT(Z8)
	ADDQ $36, SI
	ADDQ $68, DI
	DECQ CX
	JNZ  q40loop

q40done:
	HSUM16(Z8, Y8, X8, Y9, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET

// func dotQ8_0Q8_0x4VNNI(w, x *byte, xs, npairs int, out *[4]float32)
TEXT ·dotQ8_0Q8_0x4VNNI(SB), NOSPLIT, $0-40
	X4_PROLOGUE
	Q8_SETUP
	TESTQ CX, CX
	JEQ   q80x4done

q80x4loop:
	Q80_WEIGHTS
	X4_BODY
	ADDQ $68, SI
	DECQ CX
	JNZ  q80x4loop

q80x4done:
	X4_EPILOGUE
	RET

// func dotQ4_0Q8_0x4VNNI(w, x *byte, xs, npairs int, out *[4]float32)
TEXT ·dotQ4_0Q8_0x4VNNI(SB), NOSPLIT, $0-40
	X4_PROLOGUE
	Q8_SETUP
	Q40_SETUP
	TESTQ CX, CX
	JEQ   q40x4done

q40x4loop:
	Q40_WEIGHTS
	X4_BODY
	ADDQ $36, SI
	DECQ CX
	JNZ  q40x4loop

q40x4done:
	X4_EPILOGUE
	RET

// func dotQ5_0Q8_0VNNI(w, x *byte, npairs int) float32
TEXT ·dotQ5_0Q8_0VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ npairs+16(FP), CX
	Q8_SETUP
	Q40_SETUP
	MOVQ      $0xfffffffffff, AX
	KMOVQ     AX, K1
	VMOVDQU64 q50idx<>(SB), Z29
	MOVL      $0x10101010, AX
	VPBROADCASTD AX, Z26
	VPXORD Z8, Z8, Z8
	TESTQ CX, CX
	JEQ   q50done

q50loop:
	Q50_WEIGHTS
	Q80_ACT(Z8)
	ADDQ $44, SI
	ADDQ $68, DI
	DECQ CX
	JNZ  q50loop

q50done:
	HSUM16(Z8, Y8, X8, Y9, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET
