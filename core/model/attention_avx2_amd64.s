//go:build !noasm

#include "textflag.h"

// AVX2 + FMA + F16C versions of the kernels of attention_amd64.s, for CPUs
// without AVX-512 (see attention_amd64.go). Each gives bit for bit what its
// AVX-512 counterpart gives: a 16-lane accumulator of the AVX-512 kernel is
// two 8-lane halves here (lanes 0-7 and 8-15), and every reduction adds (or
// takes the maximum of) the same pairs in the same tree, lanes i+8 first.
// e^t is built as p·2^m with 2^m from the exponent bits (p·2^m is exact up
// to the one rounding VSCALEFPS also makes). No function here touches R14
// or R15 (R15 is clobbered by global data access under -dynlink).

// CONST8 broadcasts the 32-bit constant c to all lanes of y (x is y's low
// half); clobbers AX.
#define CONST8(c, x, y) \
	MOVL         $c, AX; \
	VMOVD        AX, x; \
	VPBROADCASTD x, y

// EXP8 sets p = e^t for the 8 lanes of t (clamped by the caller): m =
// round(t·log2 e), r = t - m·ln2hi - m·ln2lo, p = 2^m·(degree-6 Taylor
// polynomial of r). Clobbers t (left as r) and m.
#define EXP8(t, m, p, log2e, ln2hi, ln2lo, c2, c3, c4, c5, c6, one) \
	VMULPS       log2e, t, m; \
	VROUNDPS     $0, m, m; \
	VFNMADD231PS ln2hi, m, t; \
	VFNMADD231PS ln2lo, m, t; \
	VMOVAPS      c6, p; \
	VFMADD213PS  c5, t, p; \
	VFMADD213PS  c4, t, p; \
	VFMADD213PS  c3, t, p; \
	VFMADD213PS  c2, t, p; \
	VFMADD213PS  one, t, p; \
	VFMADD213PS  one, t, p; \
	VCVTPS2DQ    m, m; \
	VPSLLD       $23, m, m; \
	VPADDD       one, m, m; \
	VMULPS       m, p, p

// HSUM8 reduces the 8 lanes of y (x its low half, tmp a scratch xmm) to
// lane 0 of x: lanes i+4, then i+2, then i+1.
#define HSUM8(y, x, tmp) \
	VEXTRACTF128 $1, y, tmp; \
	VADDPS       tmp, x, x; \
	VPERMILPS    $0x4e, x, tmp; \
	VADDPS       tmp, x, x; \
	VPERMILPS    $0xb1, x, tmp; \
	VADDSS       tmp, x, x

// HMAX8 is HSUM8 with maximum for sum.
#define HMAX8(y, x, tmp) \
	VEXTRACTF128 $1, y, tmp; \
	VMAXPS       tmp, x, x; \
	VPERMILPS    $0x4e, x, tmp; \
	VMAXPS       tmp, x, x; \
	VPERMILPS    $0xb1, x, tmp; \
	VMAXSS       tmp, x, x

// func attnExpAVX2(x *float32, n int, mx float32) float32
// As attnExp: x[j] = e^(x[j]-mx) for j < n (a multiple of 16); returns the
// sum. t = x - mx is clamped at -87.
TEXT ·attnExpAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS mx+16(FP), Y5
	CONST8(0x3fb8aa3b, X6, Y6)   // log2 e
	CONST8(0x3f317200, X7, Y7)   // ln2 hi = 0.693145751953125
	CONST8(0x35bfbe8e, X8, Y8)   // ln2 lo = 1.4286068e-06
	CONST8(0x3f000000, X9, Y9)   // 1/2
	CONST8(0x3e2aaaab, X10, Y10) // 1/6
	CONST8(0x3d2aaaab, X11, Y11) // 1/24
	CONST8(0x3c088889, X12, Y12) // 1/120
	CONST8(0x3ab60b61, X13, Y13) // 1/720
	CONST8(0xc2ae0000, X14, Y14) // -87
	CONST8(0x3f800000, X15, Y15) // 1
	VXORPS Y0, Y0, Y0            // sum, lanes 0-7 of each 16
	VXORPS Y1, Y1, Y1            // sum, lanes 8-15

exploop:
	CMPQ    CX, $16
	JB      expdone
	VMOVUPS (SI), Y2
	VSUBPS  Y5, Y2, Y2
	VMAXPS  Y14, Y2, Y2
	EXP8(Y2, Y3, Y4, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y15)
	VMOVUPS Y4, (SI)
	VADDPS  Y4, Y0, Y0
	VMOVUPS 32(SI), Y2
	VSUBPS  Y5, Y2, Y2
	VMAXPS  Y14, Y2, Y2
	EXP8(Y2, Y3, Y4, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y15)
	VMOVUPS Y4, 32(SI)
	VADDPS  Y4, Y1, Y1
	ADDQ    $64, SI
	SUBQ    $16, CX
	JMP     exploop

expdone:
	VADDPS Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func swigluAVX2(gate, up *float32, n int)
// As swigluAVX512: gate[i] = gate[i]·up[i] / (1+e^(-gate[i])) for i < n (a
// multiple of 16), -gate[i] clamped to [-87, 87].
TEXT ·swigluAVX2(SB), NOSPLIT, $0-24
	MOVQ gate+0(FP), SI
	MOVQ up+8(FP), DI
	MOVQ n+16(FP), CX
	CONST8(0x3fb8aa3b, X4, Y4)   // log2 e
	CONST8(0x3f317200, X5, Y5)   // ln2 hi
	CONST8(0x35bfbe8e, X6, Y6)   // ln2 lo
	CONST8(0x3f000000, X7, Y7)   // 1/2
	CONST8(0x3e2aaaab, X8, Y8)   // 1/6
	CONST8(0x3d2aaaab, X9, Y9)   // 1/24
	CONST8(0x3c088889, X10, Y10) // 1/120
	CONST8(0x3ab60b61, X11, Y11) // 1/720
	CONST8(0xc2ae0000, X12, Y12) // -87
	CONST8(0x3f800000, X13, Y13) // 1
	CONST8(0x42ae0000, X14, Y14) // 87
	CONST8(0x80000000, X15, Y15) // sign bit

sloop:
	CMPQ    CX, $8
	JB      sdone
	VMOVUPS (SI), Y0     // g
	VXORPS  Y15, Y0, Y1  // -g
	VMAXPS  Y12, Y1, Y1
	VMINPS  Y14, Y1, Y1
	EXP8(Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y13) // e^-g
	VADDPS  Y13, Y3, Y3  // 1 + e^-g
	VMULPS  (DI), Y0, Y0 // g·up
	VDIVPS  Y3, Y0, Y0   // g·up / (1 + e^-g)
	VMOVUPS Y0, (SI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     sloop

sdone:
	VZEROUPPER
	RET

// attn2_iota: lane i holds i, i < 16.
DATA attn2_iota<>+0(SB)/4, $0
DATA attn2_iota<>+4(SB)/4, $1
DATA attn2_iota<>+8(SB)/4, $2
DATA attn2_iota<>+12(SB)/4, $3
DATA attn2_iota<>+16(SB)/4, $4
DATA attn2_iota<>+20(SB)/4, $5
DATA attn2_iota<>+24(SB)/4, $6
DATA attn2_iota<>+28(SB)/4, $7
DATA attn2_iota<>+32(SB)/4, $8
DATA attn2_iota<>+36(SB)/4, $9
DATA attn2_iota<>+40(SB)/4, $10
DATA attn2_iota<>+44(SB)/4, $11
DATA attn2_iota<>+48(SB)/4, $12
DATA attn2_iota<>+52(SB)/4, $13
DATA attn2_iota<>+56(SB)/4, $14
DATA attn2_iota<>+60(SB)/4, $15
GLOBL attn2_iota<>(SB), RODATA|NOPTR, $64

// func attnWsumGAVX2(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool)
//
// As attnWsumG: for each head h < nh (1 to 4), out[h·os : h·os+hd] (= 0,
// or its current value when acc) += Σ_j p[h·ps + j]·v[j·hd : (j+1)·hd],
// one FMA per key and element in key order. hd is a multiple of 64. The
// columns go in blocks of 64 (one head), 32 (two or three heads) or 16
// (four), so that 8 to 12 accumulators hide the FMA latency; the blocking
// does not change any element's arithmetic.
TEXT ·attnWsumGAVX2(SB), NOSPLIT, $0-65
	MOVQ p+0(FP), SI
	MOVQ ps+8(FP), R13
	SHLQ $2, R13
	MOVQ nh+16(FP), R11
	MOVQ v+24(FP), DI
	MOVQ hd+40(FP), DX
	SHLQ $2, DX
	MOVQ out+48(FP), R8
	MOVQ os+56(FP), R12
	SHLQ $2, R12
	XORQ BX, BX // column offset in bytes
	CMPQ R11, $1
	JEQ  wg1block
	CMPQ R11, $2
	JEQ  wg2block
	CMPQ R11, $3
	JEQ  wg3block

wblock:
	CMPQ BX, DX
	JAE  wgdone
	// Accumulators: head h in Y(8+2h), Y(9+2h).
	LEAQ   (R8)(BX*1), AX // out of head 0, this column block
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	CMPB   acc+64(FP), $0
	JEQ    wkeys
	VMOVUPS (AX), Y8
	VMOVUPS 32(AX), Y9
	CMPQ    R11, $2
	JB      wkeys
	ADDQ    R12, AX
	VMOVUPS (AX), Y10
	VMOVUPS 32(AX), Y11
	CMPQ    R11, $3
	JB      wkeys
	ADDQ    R12, AX
	VMOVUPS (AX), Y12
	VMOVUPS 32(AX), Y13
	CMPQ    R11, $4
	JB      wkeys
	ADDQ    R12, AX
	VMOVUPS (AX), Y14
	VMOVUPS 32(AX), Y15

wkeys:
	LEAQ (DI)(BX*1), R10 // value row j, this column block
	MOVQ SI, R9          // p of head 0, key j
	MOVQ n+32(FP), CX

wkey:
	TESTQ        CX, CX
	JZ           wstore
	VMOVUPS      (R10), Y0
	VMOVUPS      32(R10), Y1
	VBROADCASTSS (R9), Y4
	VFMADD231PS  Y0, Y4, Y8
	VFMADD231PS  Y1, Y4, Y9
	CMPQ         R11, $2
	JB           wnext
	VBROADCASTSS (R9)(R13*1), Y5
	VFMADD231PS  Y0, Y5, Y10
	VFMADD231PS  Y1, Y5, Y11
	CMPQ         R11, $3
	JB           wnext
	VBROADCASTSS (R9)(R13*2), Y6
	VFMADD231PS  Y0, Y6, Y12
	VFMADD231PS  Y1, Y6, Y13
	CMPQ         R11, $4
	JB           wnext
	LEAQ         (R9)(R13*2), AX
	VBROADCASTSS (AX)(R13*1), Y7
	VFMADD231PS  Y0, Y7, Y14
	VFMADD231PS  Y1, Y7, Y15

wnext:
	ADDQ $4, R9
	ADDQ DX, R10
	DECQ CX
	JMP  wkey

wstore:
	LEAQ    (R8)(BX*1), AX
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	CMPQ    R11, $2
	JB      wnextblock
	ADDQ    R12, AX
	VMOVUPS Y10, (AX)
	VMOVUPS Y11, 32(AX)
	CMPQ    R11, $3
	JB      wnextblock
	ADDQ    R12, AX
	VMOVUPS Y12, (AX)
	VMOVUPS Y13, 32(AX)
	CMPQ    R11, $4
	JB      wnextblock
	ADDQ    R12, AX
	VMOVUPS Y14, (AX)
	VMOVUPS Y15, 32(AX)

wnextblock:
	ADDQ $64, BX
	JMP  wblock

wgdone:
	VZEROUPPER
	RET

	// One head, 64 columns: accumulators Y8-Y15.
wg1block:
	CMPQ    BX, DX
	JAE     wgdone
	LEAQ    (R8)(BX*1), AX
	CMPB    acc+64(FP), $0
	JEQ     wg1zero
	VMOVUPS (AX), Y8
	VMOVUPS 32(AX), Y9
	VMOVUPS 64(AX), Y10
	VMOVUPS 96(AX), Y11
	VMOVUPS 128(AX), Y12
	VMOVUPS 160(AX), Y13
	VMOVUPS 192(AX), Y14
	VMOVUPS 224(AX), Y15
	JMP     wg1keys

wg1zero:
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

wg1keys:
	LEAQ (DI)(BX*1), R10
	MOVQ SI, R9
	MOVQ n+32(FP), CX

wg1key:
	TESTQ        CX, CX
	JZ           wg1store
	VBROADCASTSS (R9), Y4
	VFMADD231PS  (R10), Y4, Y8
	VFMADD231PS  32(R10), Y4, Y9
	VFMADD231PS  64(R10), Y4, Y10
	VFMADD231PS  96(R10), Y4, Y11
	VFMADD231PS  128(R10), Y4, Y12
	VFMADD231PS  160(R10), Y4, Y13
	VFMADD231PS  192(R10), Y4, Y14
	VFMADD231PS  224(R10), Y4, Y15
	ADDQ         $4, R9
	ADDQ         DX, R10
	DECQ         CX
	JMP          wg1key

wg1store:
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VMOVUPS Y10, 64(AX)
	VMOVUPS Y11, 96(AX)
	VMOVUPS Y12, 128(AX)
	VMOVUPS Y13, 160(AX)
	VMOVUPS Y14, 192(AX)
	VMOVUPS Y15, 224(AX)
	ADDQ    $256, BX
	JMP     wg1block

	// Two heads, 32 columns: head h in Y(8+4h) .. Y(11+4h).
wg2block:
	CMPQ    BX, DX
	JAE     wgdone
	LEAQ    (R8)(BX*1), AX
	CMPB    acc+64(FP), $0
	JEQ     wg2zero
	VMOVUPS (AX), Y8
	VMOVUPS 32(AX), Y9
	VMOVUPS 64(AX), Y10
	VMOVUPS 96(AX), Y11
	VMOVUPS (AX)(R12*1), Y12
	VMOVUPS 32(AX)(R12*1), Y13
	VMOVUPS 64(AX)(R12*1), Y14
	VMOVUPS 96(AX)(R12*1), Y15
	JMP     wg2keys

wg2zero:
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

wg2keys:
	LEAQ (DI)(BX*1), R10
	MOVQ SI, R9
	MOVQ n+32(FP), CX

wg2key:
	TESTQ        CX, CX
	JZ           wg2store
	VMOVUPS      (R10), Y0
	VMOVUPS      32(R10), Y1
	VMOVUPS      64(R10), Y2
	VMOVUPS      96(R10), Y3
	VBROADCASTSS (R9), Y4
	VBROADCASTSS (R9)(R13*1), Y5
	VFMADD231PS  Y0, Y4, Y8
	VFMADD231PS  Y1, Y4, Y9
	VFMADD231PS  Y2, Y4, Y10
	VFMADD231PS  Y3, Y4, Y11
	VFMADD231PS  Y0, Y5, Y12
	VFMADD231PS  Y1, Y5, Y13
	VFMADD231PS  Y2, Y5, Y14
	VFMADD231PS  Y3, Y5, Y15
	ADDQ         $4, R9
	ADDQ         DX, R10
	DECQ         CX
	JMP          wg2key

wg2store:
	VMOVUPS Y8, (AX)
	VMOVUPS Y9, 32(AX)
	VMOVUPS Y10, 64(AX)
	VMOVUPS Y11, 96(AX)
	VMOVUPS Y12, (AX)(R12*1)
	VMOVUPS Y13, 32(AX)(R12*1)
	VMOVUPS Y14, 64(AX)(R12*1)
	VMOVUPS Y15, 96(AX)(R12*1)
	ADDQ    $128, BX
	JMP     wg2block

	// Three heads, 32 columns: head h in Y(4+4h) .. Y(7+4h); the value
	// row's first 24 columns in Y0-Y2, the last 8 read by each FMA.
wg3block:
	CMPQ    BX, DX
	JAE     wgdone
	LEAQ    (R8)(BX*1), AX
	CMPB    acc+64(FP), $0
	JEQ     wg3zero
	VMOVUPS (AX), Y4
	VMOVUPS 32(AX), Y5
	VMOVUPS 64(AX), Y6
	VMOVUPS 96(AX), Y7
	VMOVUPS (AX)(R12*1), Y8
	VMOVUPS 32(AX)(R12*1), Y9
	VMOVUPS 64(AX)(R12*1), Y10
	VMOVUPS 96(AX)(R12*1), Y11
	VMOVUPS (AX)(R12*2), Y12
	VMOVUPS 32(AX)(R12*2), Y13
	VMOVUPS 64(AX)(R12*2), Y14
	VMOVUPS 96(AX)(R12*2), Y15
	JMP     wg3keys

wg3zero:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

wg3keys:
	LEAQ (DI)(BX*1), R10
	MOVQ SI, R9
	MOVQ n+32(FP), CX

wg3key:
	TESTQ        CX, CX
	JZ           wg3store
	VMOVUPS      (R10), Y0
	VMOVUPS      32(R10), Y1
	VMOVUPS      64(R10), Y2
	VBROADCASTSS (R9), Y3
	VFMADD231PS  Y0, Y3, Y4
	VFMADD231PS  Y1, Y3, Y5
	VFMADD231PS  Y2, Y3, Y6
	VFMADD231PS  96(R10), Y3, Y7
	VBROADCASTSS (R9)(R13*1), Y3
	VFMADD231PS  Y0, Y3, Y8
	VFMADD231PS  Y1, Y3, Y9
	VFMADD231PS  Y2, Y3, Y10
	VFMADD231PS  96(R10), Y3, Y11
	VBROADCASTSS (R9)(R13*2), Y3
	VFMADD231PS  Y0, Y3, Y12
	VFMADD231PS  Y1, Y3, Y13
	VFMADD231PS  Y2, Y3, Y14
	VFMADD231PS  96(R10), Y3, Y15
	ADDQ         $4, R9
	ADDQ         DX, R10
	DECQ         CX
	JMP          wg3key

wg3store:
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, 32(AX)
	VMOVUPS Y6, 64(AX)
	VMOVUPS Y7, 96(AX)
	VMOVUPS Y8, (AX)(R12*1)
	VMOVUPS Y9, 32(AX)(R12*1)
	VMOVUPS Y10, 64(AX)(R12*1)
	VMOVUPS Y11, 96(AX)(R12*1)
	VMOVUPS Y12, (AX)(R12*2)
	VMOVUPS Y13, 32(AX)(R12*2)
	VMOVUPS Y14, 64(AX)(R12*2)
	VMOVUPS Y15, 96(AX)(R12*2)
	ADDQ    $128, BX
	JMP     wg3block

// func attnMaxAVX2(x *float32, n int) float32
// As attnMax: the largest of x[0:n] (-Inf for n = 0); the tail is a masked
// load, so nothing past x[n-1] is read.
TEXT ·attnMaxAVX2(SB), NOSPLIT, $0-20
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	CONST8(0xff800000, X0, Y0)
	VMOVAPS Y0, Y1

maxloop:
	CMPQ   CX, $16
	JB     maxtail
	VMAXPS (SI), Y0, Y0
	VMAXPS 32(SI), Y1, Y1
	ADDQ   $64, SI
	SUBQ   $16, CX
	JMP    maxloop

maxtail:
	TESTQ        CX, CX
	JZ           maxreduce
	VMOVD        CX, X2
	VPBROADCASTD X2, Y2
	VMOVDQU      attn2_iota<>(SB), Y3
	VPCMPGTD     Y3, Y2, Y4 // lane i < n: i in 0-7
	VMASKMOVPS   (SI), Y4, Y5
	VMAXPS       Y5, Y0, Y6
	VBLENDVPS    Y4, Y6, Y0, Y0
	VMOVDQU      attn2_iota<>+32(SB), Y3
	VPCMPGTD     Y3, Y2, Y4 // lane i < n: i in 8-15
	VMASKMOVPS   32(SI), Y4, Y5
	VMAXPS       Y5, Y1, Y6
	VBLENDVPS    Y4, Y6, Y1, Y1

maxreduce:
	VMAXPS Y1, Y0, Y0
	HMAX8(Y0, X0, X1)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func rmsNormAVX2(dst, src, w *float32, d int, eps float32)
// As rmsNormAVX512: dst = src·r ⊙ w, r = 1/√(Σsrc²/d + eps), for one row
// of d (a multiple of 16); the sum of squares in two interleaved 16-lane
// accumulators (Y0|Y1 and Y2|Y3) over alternating 16-element chunks.
TEXT ·rmsNormAVX2(SB), NOSPLIT, $0-36
	MOVQ   dst+0(FP), DI
	MOVQ   src+8(FP), SI
	MOVQ   w+16(FP), DX
	MOVQ   d+24(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   BX, BX
	MOVQ   CX, R8
	SHLQ   $2, R8 // bytes

sq2:
	LEAQ        128(BX), AX
	CMPQ        AX, R8
	JA          sq1
	VMOVUPS     (SI)(BX*1), Y4
	VMOVUPS     32(SI)(BX*1), Y5
	VMOVUPS     64(SI)(BX*1), Y6
	VMOVUPS     96(SI)(BX*1), Y7
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1
	VFMADD231PS Y6, Y6, Y2
	VFMADD231PS Y7, Y7, Y3
	MOVQ        AX, BX
	JMP         sq2

sq1:
	CMPQ        BX, R8
	JAE         sqdone
	VMOVUPS     (SI)(BX*1), Y4
	VMOVUPS     32(SI)(BX*1), Y5
	VFMADD231PS Y4, Y4, Y0
	VFMADD231PS Y5, Y5, Y1

sqdone:
	VADDPS       Y2, Y0, Y0
	VADDPS       Y3, Y1, Y1
	VADDPS       Y1, Y0, Y0
	HSUM8(Y0, X0, X1)
	VCVTSI2SSQ   CX, X1, X1
	VDIVSS       X1, X0, X0
	VADDSS       eps+32(FP), X0, X0
	VSQRTSS      X0, X0, X0
	MOVL         $0x3f800000, AX
	VMOVD        AX, X1
	VDIVSS       X0, X1, X0
	VBROADCASTSS X0, Y0
	XORQ         BX, BX

scale:
	CMPQ    BX, R8
	JAE     normdone
	VMULPS  (SI)(BX*1), Y0, Y2
	VMULPS  (DX)(BX*1), Y2, Y2
	VMOVUPS Y2, (DI)(BX*1)
	ADDQ    $32, BX
	JMP     scale

normdone:
	VZEROUPPER
	RET

// func addAVX2(x, y *float32, n int)
// x[i] += y[i] for i < n (a multiple of 16).
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ BX, BX

addloop:
	CMPQ    BX, CX
	JAE     adddone
	VMOVUPS (DI)(BX*1), Y0
	VMOVUPS 32(DI)(BX*1), Y1
	VADDPS  (SI)(BX*1), Y0, Y0
	VADDPS  32(SI)(BX*1), Y1, Y1
	VMOVUPS Y0, (DI)(BX*1)
	VMOVUPS Y1, 32(DI)(BX*1)
	ADDQ    $64, BX
	JMP     addloop

adddone:
	VZEROUPPER
	RET

// func widenF16AVX2(dst *float32, src *uint16, n int)
// dst[i] = float32(src[i]) (exact) for i < n, a multiple of 16.
TEXT ·widenF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   widendone

widenloop:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       widenloop

widendone:
	VZEROUPPER
	RET

// func narrowF16AVX2(dst *uint16, src *float32, n int)
// dst[i] = float16(src[i]), rounded to nearest even, for i < n, a multiple
// of 16.
TEXT ·narrowF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   narrowdone

narrowloop:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VCVTPS2PH $0, Y0, X2
	VCVTPS2PH $0, Y1, X3
	VMOVDQU   X2, (DI)
	VMOVDQU   X3, 16(DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       narrowloop

narrowdone:
	VZEROUPPER
	RET

// func attnFoldAVX2(out, o *float32, n int, a, b float32)
// out[i] = fma(out[i], a, o[i]·b) for i < n (a multiple of 16): one tile's
// value sums folded into the running ones (softState.fold).
TEXT ·attnFoldAVX2(SB), NOSPLIT, $0-32
	MOVQ         out+0(FP), DI
	MOVQ         o+8(FP), SI
	MOVQ         n+16(FP), CX
	SHLQ         $2, CX
	VBROADCASTSS a+24(FP), Y2
	VBROADCASTSS b+28(FP), Y3
	XORQ         BX, BX

foldloop:
	CMPQ        BX, CX
	JAE         folddone
	VMULPS      (SI)(BX*1), Y3, Y0
	VMULPS      32(SI)(BX*1), Y3, Y1
	VFMADD231PS (DI)(BX*1), Y2, Y0
	VFMADD231PS 32(DI)(BX*1), Y2, Y1
	VMOVUPS     Y0, (DI)(BX*1)
	VMOVUPS     Y1, 32(DI)(BX*1)
	ADDQ        $64, BX
	JMP         foldloop

folddone:
	VZEROUPPER
	RET
