//go:build !noasm

#include "textflag.h"

// Attention kernels (AVX-512F). See attention_amd64.go.

// func attnExp(x *float32, n int, mx float32) float32
// x[j] = e^(x[j]-mx) for j < n (a multiple of 16); returns the sum. e^t for
// t ≤ 0 as 2^m·p(r), m = round(t·log2 e), r = t - m·ln 2 (two-part ln 2),
// p the degree-6 Taylor polynomial; t is clamped at -87.
TEXT ·attnExp(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS mx+16(FP), Z8
	MOVL         $0x3fb8aa3b, AX // log2 e
	VPBROADCASTD AX, Z9
	MOVL         $0x3f317200, AX // ln2 hi = 0.693145751953125
	VPBROADCASTD AX, Z10
	MOVL         $0x35bfbe8e, AX // ln2 lo = 1.4286068e-06
	VPBROADCASTD AX, Z11
	MOVL         $0x3f000000, AX // 1/2
	VPBROADCASTD AX, Z12
	MOVL         $0x3e2aaaab, AX // 1/6
	VPBROADCASTD AX, Z13
	MOVL         $0x3d2aaaab, AX // 1/24
	VPBROADCASTD AX, Z14
	MOVL         $0x3c088889, AX // 1/120
	VPBROADCASTD AX, Z15
	MOVL         $0x3ab60b61, AX // 1/720
	VPBROADCASTD AX, Z16
	MOVL         $0xc2ae0000, AX // -87
	VPBROADCASTD AX, Z17
	MOVL         $0x3f800000, AX // 1
	VPBROADCASTD AX, Z18
	VXORPS       Z0, Z0, Z0

exploop:
	CMPQ         CX, $16
	JB           expdone
	VMOVUPS      (SI), Z1
	VSUBPS       Z8, Z1, Z1
	VMAXPS       Z17, Z1, Z1
	VMULPS       Z9, Z1, Z2
	VRNDSCALEPS  $0, Z2, Z2
	VFNMADD231PS Z10, Z2, Z1
	VFNMADD231PS Z11, Z2, Z1
	VMOVAPS      Z16, Z3
	VFMADD213PS  Z15, Z1, Z3
	VFMADD213PS  Z14, Z1, Z3
	VFMADD213PS  Z13, Z1, Z3
	VFMADD213PS  Z12, Z1, Z3
	VFMADD213PS  Z18, Z1, Z3
	VFMADD213PS  Z18, Z1, Z3
	VSCALEFPS    Z2, Z3, Z3
	VMOVUPS      Z3, (SI)
	VADDPS       Z3, Z0, Z0
	ADDQ         $64, SI
	SUBQ         $16, CX
	JMP          exploop

expdone:
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VPERMILPS     $0x4E, X0, X1
	VADDPS        X1, X0, X0
	VPERMILPS     $0xB1, X0, X1
	VADDSS        X1, X0, X0
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// func swigluAVX512(gate, up *float32, n int)
// gate[i] = gate[i]·σ(gate[i])·up[i] for i < n (a multiple of 16), with
// σ(g) = 1/(1+e^(-g)) and e^t as in attnExp (t clamped to [-87, 87]).
TEXT ·swigluAVX512(SB), NOSPLIT, $0-24
	MOVQ         gate+0(FP), SI
	MOVQ         up+8(FP), DI
	MOVQ         n+16(FP), CX
	MOVL         $0x3fb8aa3b, AX
	VPBROADCASTD AX, Z9
	MOVL         $0x3f317200, AX
	VPBROADCASTD AX, Z10
	MOVL         $0x35bfbe8e, AX
	VPBROADCASTD AX, Z11
	MOVL         $0x3f000000, AX
	VPBROADCASTD AX, Z12
	MOVL         $0x3e2aaaab, AX
	VPBROADCASTD AX, Z13
	MOVL         $0x3d2aaaab, AX
	VPBROADCASTD AX, Z14
	MOVL         $0x3c088889, AX
	VPBROADCASTD AX, Z15
	MOVL         $0x3ab60b61, AX
	VPBROADCASTD AX, Z16
	MOVL         $0xc2ae0000, AX // -87
	VPBROADCASTD AX, Z17
	MOVL         $0x3f800000, AX // 1
	VPBROADCASTD AX, Z18
	MOVL         $0x42ae0000, AX // 87
	VPBROADCASTD AX, Z19
	MOVL         $0x80000000, AX // sign bit
	VPBROADCASTD AX, Z20

sloop:
	CMPQ         CX, $16
	JB           sdone
	VMOVUPS      (SI), Z0      // g
	VPXORD       Z20, Z0, Z1   // -g
	VMAXPS       Z17, Z1, Z1
	VMINPS       Z19, Z1, Z1
	VMULPS       Z9, Z1, Z2
	VRNDSCALEPS  $0, Z2, Z2
	VFNMADD231PS Z10, Z2, Z1
	VFNMADD231PS Z11, Z2, Z1
	VMOVAPS      Z16, Z3
	VFMADD213PS  Z15, Z1, Z3
	VFMADD213PS  Z14, Z1, Z3
	VFMADD213PS  Z13, Z1, Z3
	VFMADD213PS  Z12, Z1, Z3
	VFMADD213PS  Z18, Z1, Z3
	VFMADD213PS  Z18, Z1, Z3
	VSCALEFPS    Z2, Z3, Z3    // e^-g
	VADDPS       Z18, Z3, Z3   // 1 + e^-g
	VMULPS       (DI), Z0, Z0  // g·up
	VDIVPS       Z3, Z0, Z0    // g·up / (1 + e^-g)
	VMOVUPS      Z0, (SI)
	ADDQ         $64, SI
	ADDQ         $64, DI
	SUBQ         $16, CX
	JMP          sloop

sdone:
	VZEROUPPER
	RET

// func attnWsumG(p *float32, ps, nh int, v *float32, n, hd int, out *float32, os int, acc bool)
//
// For each head h < nh (1 to 4): out[h·os : h·os+hd] (= 0, or its current
// value when acc) += Σ_j p[h·ps + j]·v[j·hd : (j+1)·hd] over j < n, one
// FMA per key and element in key order: the same arithmetic whatever nh,
// and a call over keys [0, a) then one with acc over [a, n) gives what one
// call over [0, n) gives. hd is a multiple of 64.
TEXT ·attnWsumG(SB), NOSPLIT, $0-65
	MOVQ    p+0(FP), SI
	MOVQ    ps+8(FP), R13
	SHLQ    $2, R13
	MOVQ    nh+16(FP), R14
	MOVQ    v+24(FP), DI
	MOVQ    hd+40(FP), DX
	SHLQ    $2, DX
	MOVQ    out+48(FP), R8
	MOVQ    os+56(FP), R15
	SHLQ    $2, R15
	MOVBLZX acc+64(FP), R12
	XORQ    BX, BX // column offset in bytes

wblock:
	CMPQ BX, DX
	JAE  wgdone
	// Accumulators: head h in Z(8+4h) .. Z(11+4h).
	LEAQ (R8)(BX*1), AX // out of head 0, this column block
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TESTQ  R12, R12
	JZ     wkeys
	VMOVUPS (AX), Z8
	VMOVUPS 64(AX), Z9
	VMOVUPS 128(AX), Z10
	VMOVUPS 192(AX), Z11
	CMPQ    R14, $2
	JB      wkeys
	ADDQ    R15, AX
	VMOVUPS (AX), Z12
	VMOVUPS 64(AX), Z13
	VMOVUPS 128(AX), Z14
	VMOVUPS 192(AX), Z15
	CMPQ    R14, $3
	JB      wkeys
	ADDQ    R15, AX
	VMOVUPS (AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19
	CMPQ    R14, $4
	JB      wkeys
	ADDQ    R15, AX
	VMOVUPS (AX), Z20
	VMOVUPS 64(AX), Z21
	VMOVUPS 128(AX), Z22
	VMOVUPS 192(AX), Z23

wkeys:
	LEAQ (DI)(BX*1), R10 // value row j, this column block
	MOVQ SI, R9          // p of head 0, key j
	MOVQ n+32(FP), CX

wkey:
	TESTQ        CX, CX
	JZ           wstore
	VMOVUPS      (R10), Z0
	VMOVUPS      64(R10), Z1
	VMOVUPS      128(R10), Z2
	VMOVUPS      192(R10), Z3
	VBROADCASTSS (R9), Z4
	VFMADD231PS  Z0, Z4, Z8
	VFMADD231PS  Z1, Z4, Z9
	VFMADD231PS  Z2, Z4, Z10
	VFMADD231PS  Z3, Z4, Z11
	CMPQ         R14, $2
	JB           wnext
	VBROADCASTSS (R9)(R13*1), Z5
	VFMADD231PS  Z0, Z5, Z12
	VFMADD231PS  Z1, Z5, Z13
	VFMADD231PS  Z2, Z5, Z14
	VFMADD231PS  Z3, Z5, Z15
	CMPQ         R14, $3
	JB           wnext
	VBROADCASTSS (R9)(R13*2), Z6
	VFMADD231PS  Z0, Z6, Z16
	VFMADD231PS  Z1, Z6, Z17
	VFMADD231PS  Z2, Z6, Z18
	VFMADD231PS  Z3, Z6, Z19
	CMPQ         R14, $4
	JB           wnext
	LEAQ         (R9)(R13*2), AX
	VBROADCASTSS (AX)(R13*1), Z7
	VFMADD231PS  Z0, Z7, Z20
	VFMADD231PS  Z1, Z7, Z21
	VFMADD231PS  Z2, Z7, Z22
	VFMADD231PS  Z3, Z7, Z23

wnext:
	ADDQ $4, R9
	ADDQ DX, R10
	DECQ CX
	JMP  wkey

wstore:
	LEAQ    (R8)(BX*1), AX
	VMOVUPS Z8, (AX)
	VMOVUPS Z9, 64(AX)
	VMOVUPS Z10, 128(AX)
	VMOVUPS Z11, 192(AX)
	CMPQ    R14, $2
	JB      wnextblock
	ADDQ    R15, AX
	VMOVUPS Z12, (AX)
	VMOVUPS Z13, 64(AX)
	VMOVUPS Z14, 128(AX)
	VMOVUPS Z15, 192(AX)
	CMPQ    R14, $3
	JB      wnextblock
	ADDQ    R15, AX
	VMOVUPS Z16, (AX)
	VMOVUPS Z17, 64(AX)
	VMOVUPS Z18, 128(AX)
	VMOVUPS Z19, 192(AX)
	CMPQ    R14, $4
	JB      wnextblock
	ADDQ    R15, AX
	VMOVUPS Z20, (AX)
	VMOVUPS Z21, 64(AX)
	VMOVUPS Z22, 128(AX)
	VMOVUPS Z23, 192(AX)

wnextblock:
	ADDQ $256, BX
	JMP  wblock

wgdone:
	VZEROUPPER
	RET

// func attnMax(x *float32, n int) float32
// The largest of x[0:n] (-Inf for n = 0); the tail is a masked load, so
// nothing past x[n-1] is read.
TEXT ·attnMax(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0xff800000, AX
	VPBROADCASTD AX, Z0

maxloop:
	CMPQ    CX, $16
	JB      maxtail
	VMAXPS  (SI), Z0, Z0
	ADDQ    $64, SI
	SUBQ    $16, CX
	JMP     maxloop

maxtail:
	TESTQ  CX, CX
	JZ     maxreduce
	MOVL   $1, AX
	SHLL   CX, AX
	DECL   AX
	KMOVW  AX, K1
	VMAXPS (SI), Z0, K1, Z0

maxreduce:
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VMAXPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VMAXSS        X1, X0, X0
	VMOVSS        X0, ret+16(FP)
	VZEROUPPER
	RET

// func rmsNormAVX512(dst, src, w *float32, d int, eps float32)
// dst = src·r ⊙ w, r = 1/√(Σsrc²/d + eps), for one row of d (a multiple of
// 16). The sum of squares runs in two interleaved accumulators (16-element
// chunks alternate), so each row's arithmetic is fixed by d alone.
TEXT ·rmsNormAVX512(SB), NOSPLIT, $0-36
	MOVQ   dst+0(FP), DI
	MOVQ   src+8(FP), SI
	MOVQ   w+16(FP), DX
	MOVQ   d+24(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	XORQ   BX, BX
	MOVQ   CX, R8
	SHLQ   $2, R8 // bytes

sq2:
	LEAQ        128(BX), AX
	CMPQ        AX, R8
	JA          sq1
	VMOVUPS     (SI)(BX*1), Z2
	VMOVUPS     64(SI)(BX*1), Z3
	VFMADD231PS Z2, Z2, Z0
	VFMADD231PS Z3, Z3, Z1
	MOVQ        AX, BX
	JMP         sq2

sq1:
	CMPQ        BX, R8
	JAE         sqdone
	VMOVUPS     (SI)(BX*1), Z2
	VFMADD231PS Z2, Z2, Z0

sqdone:
	VADDPS        Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VPERMILPS     $0x4e, X0, X1
	VADDPS        X1, X0, X0
	VPERMILPS     $0xb1, X0, X1
	VADDSS        X1, X0, X0
	VCVTSI2SSQ    CX, X1, X1
	VDIVSS        X1, X0, X0
	VADDSS        eps+32(FP), X0, X0
	VSQRTSS       X0, X0, X0
	MOVL          $0x3f800000, AX
	VMOVD         AX, X1
	VDIVSS        X0, X1, X0
	VBROADCASTSS  X0, Z0
	XORQ          BX, BX

scale:
	CMPQ    BX, R8
	JAE     normdone
	VMULPS  (SI)(BX*1), Z0, Z2
	VMULPS  (DX)(BX*1), Z2, Z2
	VMOVUPS Z2, (DI)(BX*1)
	ADDQ    $64, BX
	JMP     scale

normdone:
	VZEROUPPER
	RET

// func addAVX512(x, y *float32, n int)
// x[i] += y[i] for i < n (a multiple of 16).
TEXT ·addAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ n+16(FP), CX
	SHLQ $2, CX
	XORQ BX, BX

addloop:
	CMPQ    BX, CX
	JAE     adddone
	VMOVUPS (DI)(BX*1), Z0
	VADDPS  (SI)(BX*1), Z0, Z0
	VMOVUPS Z0, (DI)(BX*1)
	ADDQ    $64, BX
	JMP     addloop

adddone:
	VZEROUPPER
	RET


// func widenF16(dst *float32, src *uint16, n int)
// dst[i] = float32(src[i]) (exact) for i < n, a multiple of 16.
TEXT ·widenF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   widendone

widenloop:
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       widenloop

widendone:
	VZEROUPPER
	RET

// func narrowF16(dst *uint16, src *float32, n int)
// dst[i] = float16(src[i]), rounded to nearest even, for i < n, a multiple
// of 16.
TEXT ·narrowF16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   narrowdone

narrowloop:
	VMOVUPS   (SI), Z0
	VCVTPS2PH $0, Z0, Y1
	VMOVDQU   Y1, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       narrowloop

narrowdone:
	VZEROUPPER
	RET

// func attnFold(out, o *float32, n int, a, b float32)
// out[i] = fma(out[i], a, o[i]·b) for i < n (a multiple of 16).
TEXT ·attnFold(SB), NOSPLIT, $0-32
	MOVQ         out+0(FP), DI
	MOVQ         o+8(FP), SI
	MOVQ         n+16(FP), CX
	SHLQ         $2, CX
	VBROADCASTSS a+24(FP), Z2
	VBROADCASTSS b+28(FP), Z3
	XORQ         BX, BX

foldloop:
	CMPQ        BX, CX
	JAE         folddone
	VMULPS      (SI)(BX*1), Z3, Z0
	VFMADD231PS (DI)(BX*1), Z2, Z0
	VMOVUPS     Z0, (DI)(BX*1)
	ADDQ        $64, BX
	JMP         foldloop

folddone:
	VZEROUPPER
	RET
