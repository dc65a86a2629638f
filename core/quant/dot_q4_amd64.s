//go:build amd64 && !noasm

#include "textflag.h"

// AVX-512 VNNI kernels for the 32-element legacy blocks.
//
// Shape. The kernels take two blocks per iteration so every vector op works
// on a full 64-byte ZMM: the 64 weight quants of the two blocks, in element
// order, against the 64 int8 activations of the matching two activation
// blocks. VPDPBUSD multiplies unsigned bytes (the weight nibbles, 0..15) by
// signed bytes (the activations) and adds groups of four into 16 int32
// lanes, lanes 0-7 belonging to the first block and 8-15 to the second. The
// lanes are converted to float and multiplied by a vector holding each
// block's d_w·d_x in its 8 lanes (VPERMPS spreads the two products), then
// accumulated with FMA; the horizontal sum happens once per row.
//
// Nibble unpacking. A Q4 block keeps element j in the low nibble of qs[j]
// and element j+16 in the high nibble, so in element order the block is
// [qs&15, qs>>4]. One masked load takes both blocks (40 bytes for Q4_1, 36
// for Q4_0: the mask keeps the load inside the row), VPERMB copies each qs
// into two 16-byte lanes ([qs0,qs0,qs1,qs1]), VPSRLVQ shifts the second copy
// of each by 4 and VPANDD keeps the low nibbles: element order, two
// instructions after the load.
//
// Rows are processed in pairs of blocks; the Go wrappers add the odd last
// block with the generic code.

// VPERMB indices: qs of block 0 (bytes off..off+15) twice, then of block 1.
DATA q41idx<>+0(SB)/8, $0x0b0a090807060504
DATA q41idx<>+8(SB)/8, $0x131211100f0e0d0c
DATA q41idx<>+16(SB)/8, $0x0b0a090807060504
DATA q41idx<>+24(SB)/8, $0x131211100f0e0d0c
DATA q41idx<>+32(SB)/8, $0x1f1e1d1c1b1a1918
DATA q41idx<>+40(SB)/8, $0x2726252423222120
DATA q41idx<>+48(SB)/8, $0x1f1e1d1c1b1a1918
DATA q41idx<>+56(SB)/8, $0x2726252423222120
GLOBL q41idx<>(SB), RODATA|NOPTR, $64

DATA q40idx<>+0(SB)/8, $0x0908070605040302
DATA q40idx<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA q40idx<>+16(SB)/8, $0x0908070605040302
DATA q40idx<>+24(SB)/8, $0x11100f0e0d0c0b0a
DATA q40idx<>+32(SB)/8, $0x1b1a191817161514
DATA q40idx<>+40(SB)/8, $0x232221201f1e1d1c
DATA q40idx<>+48(SB)/8, $0x1b1a191817161514
DATA q40idx<>+56(SB)/8, $0x232221201f1e1d1c
GLOBL q40idx<>(SB), RODATA|NOPTR, $64

// Per-qword shift counts: 0 for the low-nibble copy, 4 for the high one.
DATA nibshift<>+0(SB)/8, $0
DATA nibshift<>+8(SB)/8, $0
DATA nibshift<>+16(SB)/8, $4
DATA nibshift<>+24(SB)/8, $4
DATA nibshift<>+32(SB)/8, $0
DATA nibshift<>+40(SB)/8, $0
DATA nibshift<>+48(SB)/8, $4
DATA nibshift<>+56(SB)/8, $4
GLOBL nibshift<>(SB), RODATA|NOPTR, $64

// VPERMPS indices spreading float lane 0 over lanes 0-7 and lane 2 over
// 8-15 (the per-block products sit in lanes 0 and 2 of an XMM).
DATA perm02<>+0(SB)/8, $0
DATA perm02<>+8(SB)/8, $0
DATA perm02<>+16(SB)/8, $0
DATA perm02<>+24(SB)/8, $0
DATA perm02<>+32(SB)/8, $0x0000000200000002
DATA perm02<>+40(SB)/8, $0x0000000200000002
DATA perm02<>+48(SB)/8, $0x0000000200000002
DATA perm02<>+56(SB)/8, $0x0000000200000002
GLOBL perm02<>(SB), RODATA|NOPTR, $64

// lanes 0-7 from lane 0, lanes 8-15 from lane 1
DATA perm01<>+0(SB)/8, $0
DATA perm01<>+8(SB)/8, $0
DATA perm01<>+16(SB)/8, $0
DATA perm01<>+24(SB)/8, $0
DATA perm01<>+32(SB)/8, $0x0000000100000001
DATA perm01<>+40(SB)/8, $0x0000000100000001
DATA perm01<>+48(SB)/8, $0x0000000100000001
DATA perm01<>+56(SB)/8, $0x0000000100000001
GLOBL perm01<>(SB), RODATA|NOPTR, $64

// HSUM16 reduces the 16 float lanes of zacc (using ymid/xmid, its aliases
// ytmp/xtmp as scratch) into the low lane of xacc (= zacc's XMM alias).
#define HSUM16(zacc, yacc, xacc, ytmp, xtmp) \
	VEXTRACTF64X4 $1, zacc, ytmp \
	VADDPS        ytmp, yacc, yacc \
	VEXTRACTF32X4 $1, yacc, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVHLPS      xacc, xtmp, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVSHDUP     xacc, xtmp \
	VADDSS        xtmp, xacc, xacc

// Q4_1 unpack of two blocks at (SI) into Z1 (u8 quants in element order),
// and their (d, m) pairs as floats in X4 = [d0, m0, d1, m1].
#define Q41_WEIGHTS \
	VMOVDQU8.Z (SI), K1, Z0 \
	VPERMB     Z0, Z29, Z1 \
	VPSRLVQ    Z30, Z1, Z1 \
	VPANDD     Z31, Z1, Z1 \
	VMOVD      (SI), X4 \
	VPINSRD    $1, 20(SI), X4, X4 \
	VCVTPH2PS  X4, X4

// One Q8_1 activation row at off(DI) against the decoded weights:
// zacc += per-lane int sums × d_w·d_x, xmin lanes 1,3 += m_w·s_x.
#define Q41_ACT(off, zacc, xmin) \
	VMOVDQU      off+4(DI), Y2 \
	VINSERTI64X4 $1, off+40(DI), Z2, Z2 \
	VPXORD       Z3, Z3, Z3 \
	VPDPBUSD     Z2, Z1, Z3 \
	VMOVD        off(DI), X5 \
	VPINSRD      $1, off+36(DI), X5, X5 \
	VCVTPH2PS    X5, X5 \
	VMULPS       X4, X5, X6 \
	VADDPS       X6, xmin, xmin \
	VPERMPS      Z6, Z28, Z6 \
	VCVTDQ2PS    Z3, Z3 \
	VFMADD231PS  Z3, Z6, zacc

#define Q41_SETUP \
	MOVQ      $0xffffffffff, AX \
	KMOVQ     AX, K1 \
	VMOVDQU64 q41idx<>(SB), Z29 \
	VMOVDQU64 nibshift<>(SB), Z30 \
	MOVL      $0x0f0f0f0f, AX \
	VPBROADCASTD AX, Z31 \
	VMOVDQU64 perm02<>(SB), Z28

// Adds the m·s terms (lanes 1 and 3 of xmin) into lane 0 of xacc.
#define ADDMIN(xmin, xacc, xtmp) \
	VMOVSHDUP xmin, xtmp \
	VMOVHLPS  xtmp, xmin, xmin \
	VADDSS    xmin, xtmp, xtmp \
	VADDSS    xtmp, xacc, xacc

// Q5_1: 24-byte blocks d, m, qh (u32: bit j = 5th bit of element j), qs.
// Two blocks = 48 bytes; qs at 8..23 and 32..47.
DATA q51idx<>+0(SB)/8, $0x0f0e0d0c0b0a0908
DATA q51idx<>+8(SB)/8, $0x1716151413121110
DATA q51idx<>+16(SB)/8, $0x0f0e0d0c0b0a0908
DATA q51idx<>+24(SB)/8, $0x1716151413121110
DATA q51idx<>+32(SB)/8, $0x2726252423222120
DATA q51idx<>+40(SB)/8, $0x2f2e2d2c2b2a2928
DATA q51idx<>+48(SB)/8, $0x2726252423222120
DATA q51idx<>+56(SB)/8, $0x2f2e2d2c2b2a2928
GLOBL q51idx<>(SB), RODATA|NOPTR, $64

// Q5_1 weights: nibbles as for Q4_1, then the 64 fifth bits of the pair
// (qh0 | qh1<<32, in element order) become a byte mask and a masked
// VPADDB adds 16 where they are set.
#define Q51_WEIGHTS \
	VMOVDQU8.Z (SI), K1, Z0 \
	VPERMB     Z0, Z29, Z1 \
	VPSRLVQ    Z30, Z1, Z1 \
	VPANDD     Z31, Z1, Z1 \
	MOVL       4(SI), AX \
	MOVL       28(SI), DX \
	SHLQ       $32, DX \
	ORQ        DX, AX \
	KMOVQ      AX, K2 \
	VPADDB     Z16, Z1, K2, Z1 \
	VMOVD      (SI), X4 \
	VPINSRD    $1, 24(SI), X4, X4 \
	VCVTPH2PS  X4, X4

// func dotQ4_1Q8_1VNNI(w, x *byte, npairs int) float32
TEXT ·dotQ4_1Q8_1VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ npairs+16(FP), CX
	Q41_SETUP
	VPXORD Z8, Z8, Z8
	VPXORD Z12, Z12, Z12
	TESTQ CX, CX
	JEQ   q41done

q41loop:
	Q41_WEIGHTS
	Q41_ACT(0, Z8, X12)
	ADDQ $40, SI
	ADDQ $72, DI
	DECQ CX
	JNZ  q41loop

q41done:
	HSUM16(Z8, Y8, X8, Y9, X9)
	ADDMIN(X12, X8, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET

// func dotQ4_1Q8_1x4VNNI(w, x *byte, xs, npairs int, out *[4]float32)
// One weight row against 4 activation rows x, x+xs, x+2xs, x+3xs: the
// nibble unpack and weight scales are shared by the 4.
TEXT ·dotQ4_1Q8_1x4VNNI(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ xs+16(FP), BX
	MOVQ npairs+24(FP), CX
	Q41_SETUP
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
	JEQ   q41x4done

q41x4loop:
	Q41_WEIGHTS
	Q41_ACT(0, Z8, X12)
	ADDQ BX, DI
	Q41_ACT(0, Z9, X13)
	ADDQ BX, DI
	Q41_ACT(0, Z10, X14)
	ADDQ BX, DI
	Q41_ACT(0, Z11, X15)
	SUBQ DX, DI
	ADDQ $40, SI
	ADDQ $72, DI
	DECQ CX
	JNZ  q41x4loop

q41x4done:
	MOVQ out+32(FP), AX
	HSUM16(Z8, Y8, X8, Y16, X16)
	ADDMIN(X12, X8, X16)
	MOVSS X8, 0(AX)
	HSUM16(Z9, Y9, X9, Y16, X16)
	ADDMIN(X13, X9, X16)
	MOVSS X9, 4(AX)
	HSUM16(Z10, Y10, X10, Y16, X16)
	ADDMIN(X14, X10, X16)
	MOVSS X10, 8(AX)
	HSUM16(Z11, Y11, X11, Y16, X16)
	ADDMIN(X15, X11, X16)
	MOVSS X11, 12(AX)
	VZEROUPPER
	RET

// func dotQ5_1Q8_1VNNI(w, x *byte, npairs int) float32
TEXT ·dotQ5_1Q8_1VNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ npairs+16(FP), CX
	Q41_SETUP
	MOVQ      $0xffffffffffff, AX
	KMOVQ     AX, K1
	VMOVDQU64 q51idx<>(SB), Z29
	MOVL      $0x10101010, AX
	VPBROADCASTD AX, Z16
	VPXORD Z8, Z8, Z8
	VPXORD Z12, Z12, Z12
	TESTQ CX, CX
	JEQ   q51done

q51loop:
	Q51_WEIGHTS
	Q41_ACT(0, Z8, X12)
	ADDQ $48, SI
	ADDQ $72, DI
	DECQ CX
	JNZ  q51loop

q51done:
	HSUM16(Z8, Y8, X8, Y9, X9)
	ADDMIN(X12, X8, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET
