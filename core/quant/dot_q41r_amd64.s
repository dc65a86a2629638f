//go:build amd64 && !noasm

#include "textflag.h"

// Q4_1 weights against activations repacked by repackQ81 (MatMul only).
// The per-activation-row work of dot_q4_amd64.s is dominated by gathering
// and converting the f16 activation scales, on the shuffle port. Since
// MatMul reuses each activation row for every weight row, it converts them
// once into pair records of 144 bytes:
//   [0:64)    the int8 quants of blocks 2p and 2p+1
//   [64:128)  16 float32: d_x of block 2p ×8, then d_x of block 2p+1 ×8
//   [128:144) float32 [0, s_x(2p), 0, s_x(2p+1)]
// so a row costs one VPDPBUSD, a convert, a multiply, an FMA for the
// d_w·d_x term and one XMM FMA for the m_w·s_x term per pair of blocks.

DATA r41idx<>+0(SB)/8, $0x0b0a090807060504
DATA r41idx<>+8(SB)/8, $0x131211100f0e0d0c
DATA r41idx<>+16(SB)/8, $0x0b0a090807060504
DATA r41idx<>+24(SB)/8, $0x131211100f0e0d0c
DATA r41idx<>+32(SB)/8, $0x1f1e1d1c1b1a1918
DATA r41idx<>+40(SB)/8, $0x2726252423222120
DATA r41idx<>+48(SB)/8, $0x1f1e1d1c1b1a1918
DATA r41idx<>+56(SB)/8, $0x2726252423222120
GLOBL r41idx<>(SB), RODATA|NOPTR, $64

DATA r41sh<>+0(SB)/8, $0
DATA r41sh<>+8(SB)/8, $0
DATA r41sh<>+16(SB)/8, $4
DATA r41sh<>+24(SB)/8, $4
DATA r41sh<>+32(SB)/8, $0
DATA r41sh<>+40(SB)/8, $0
DATA r41sh<>+48(SB)/8, $4
DATA r41sh<>+56(SB)/8, $4
GLOBL r41sh<>(SB), RODATA|NOPTR, $64

DATA r41p02<>+0(SB)/8, $0
DATA r41p02<>+8(SB)/8, $0
DATA r41p02<>+16(SB)/8, $0
DATA r41p02<>+24(SB)/8, $0
DATA r41p02<>+32(SB)/8, $0x0000000200000002
DATA r41p02<>+40(SB)/8, $0x0000000200000002
DATA r41p02<>+48(SB)/8, $0x0000000200000002
DATA r41p02<>+56(SB)/8, $0x0000000200000002
GLOBL r41p02<>(SB), RODATA|NOPTR, $64

#define HSUM16(zacc, yacc, xacc, ytmp, xtmp) \
	VEXTRACTF64X4 $1, zacc, ytmp \
	VADDPS        ytmp, yacc, yacc \
	VEXTRACTF32X4 $1, yacc, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVHLPS      xacc, xtmp, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVSHDUP     xacc, xtmp \
	VADDSS        xtmp, xacc, xacc

#define R41_SETUP \
	MOVQ         $0xffffffffff, AX \
	KMOVQ        AX, K1 \
	VMOVDQU64    r41idx<>(SB), Z29 \
	VMOVDQU64    r41sh<>(SB), Z30 \
	MOVL         $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z31 \
	VMOVDQU64    r41p02<>(SB), Z28

// Z1 = quants of the weight pair, X4 = [d0, m0, d1, m1], Z5 = d0 ×8, d1 ×8.
#define R41_WEIGHTS \
	VMOVDQU8.Z (SI), K1, Z0 \
	VPERMB     Z0, Z29, Z1 \
	VPSRLVQ    Z30, Z1, Z1 \
	VPANDD     Z31, Z1, Z1 \
	VMOVD      (SI), X4 \
	VPINSRD    $1, 20(SI), X4, X4 \
	VCVTPH2PS  X4, X4 \
	VPERMPS    Z4, Z28, Z5

// One repacked activation row whose pair record fields are at q, d, s.
#define R41_ACT(q, d, s, zacc, xmin) \
	VPXORD      Z3, Z3, Z3 \
	VPDPBUSD    q, Z1, Z3 \
	VCVTDQ2PS   Z3, Z3 \
	VMULPS      d, Z5, Z6 \
	VFMADD231PS Z3, Z6, zacc \
	VFMADD231PS s, X4, xmin

// HSUM4 adds all lanes of xmin into lane 0 of xacc.
#define ADDALL(xmin, xacc, xtmp) \
	VMOVHLPS  xmin, xtmp, xtmp \
	VADDPS    xtmp, xmin, xmin \
	VMOVSHDUP xmin, xtmp \
	VADDSS    xtmp, xmin, xmin \
	VADDSS    xmin, xacc, xacc

// func dotQ4_1R(w, xr *byte, npairs int) float32
// Two pairs per iteration into alternating accumulators, so the FMA
// latency chain does not bound the loop.
TEXT ·dotQ4_1R(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ xr+8(FP), DI
	MOVQ npairs+16(FP), CX
	R41_SETUP
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	CMPQ  CX, $2
	JLT   r41one

r41loop:
	R41_WEIGHTS
	R41_ACT((DI), 64(DI), 128(DI), Z8, X12)
	ADDQ $40, SI
	ADDQ $144, DI
	R41_WEIGHTS
	R41_ACT((DI), 64(DI), 128(DI), Z9, X13)
	ADDQ $40, SI
	ADDQ $144, DI
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  r41loop

r41one:
	TESTQ CX, CX
	JEQ   r41done
	R41_WEIGHTS
	R41_ACT((DI), 64(DI), 128(DI), Z8, X12)

r41done:
	VADDPS Z9, Z8, Z8
	VADDPS X13, X12, X12
	HSUM16(Z8, Y8, X8, Y9, X9)
	ADDALL(X12, X8, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET

// func dotQ4_1Rx4(w, xr *byte, xs, npairs int, out *[4]float32)
TEXT ·dotQ4_1Rx4(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ xr+8(FP), DI
	MOVQ xs+16(FP), BX
	MOVQ npairs+24(FP), CX
	R41_SETUP
	LEAQ (BX)(BX*2), DX
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	TESTQ CX, CX
	JEQ   r41x4done

r41x4loop:
	R41_WEIGHTS
	R41_ACT((DI), 64(DI), 128(DI), Z8, X12)
	R41_ACT((DI)(BX*1), 64(DI)(BX*1), 128(DI)(BX*1), Z9, X13)
	R41_ACT((DI)(BX*2), 64(DI)(BX*2), 128(DI)(BX*2), Z10, X14)
	R41_ACT((DI)(DX*1), 64(DI)(DX*1), 128(DI)(DX*1), Z11, X15)
	ADDQ $40, SI
	ADDQ $144, DI
	DECQ CX
	JNZ  r41x4loop

r41x4done:
	MOVQ out+32(FP), AX
	HSUM16(Z8, Y8, X8, Y16, X16)
	ADDALL(X12, X8, X16)
	MOVSS X8, 0(AX)
	HSUM16(Z9, Y9, X9, Y16, X16)
	ADDALL(X13, X9, X16)
	MOVSS X9, 4(AX)
	HSUM16(Z10, Y10, X10, Y16, X16)
	ADDALL(X14, X10, X16)
	MOVSS X10, 8(AX)
	HSUM16(Z11, Y11, X11, Y16, X16)
	ADDALL(X15, X11, X16)
	MOVSS X11, 12(AX)
	VZEROUPPER
	RET
