//go:build !purego

#include "textflag.h"

// Attention kernels (AVX-512F). See attention_amd64.go.

// func attnScores(q, k *float32, n, hd int, scale float32, out *float32) float32
// out[j] = scale·dot(q, k[j·hd:(j+1)·hd]) for j < n; returns max(out) (-Inf
// for n = 0). hd is a multiple of 16.
TEXT ·attnScores(SB), NOSPLIT, $0-52
	MOVQ         q+0(FP), SI
	MOVQ         k+8(FP), DI
	MOVQ         n+16(FP), CX
	MOVQ         hd+24(FP), DX
	VBROADCASTSS scale+32(FP), Z7
	MOVQ         out+40(FP), R8
	MOVL         $0xff800000, AX
	VMOVD        AX, X6
	SHLQ         $2, DX

key:
	TESTQ  CX, CX
	JZ     keysdone
	VXORPS Z0, Z0, Z0
	XORQ   BX, BX

dim:
	VMOVUPS     (SI)(BX*1), Z1
	VFMADD231PS (DI)(BX*1), Z1, Z0
	ADDQ        $64, BX
	CMPQ        BX, DX
	JB          dim
	ADDQ        DX, DI

	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VPERMILPS     $0x4E, X0, X1
	VADDPS        X1, X0, X0
	VPERMILPS     $0xB1, X0, X1
	VADDSS        X1, X0, X0
	VMULSS        X7, X0, X0
	VMOVSS        X0, (R8)
	VMAXSS        X0, X6, X6
	ADDQ          $4, R8
	DECQ          CX
	JMP           key

keysdone:
	VMOVSS     X6, ret+48(FP)
	VZEROUPPER
	RET

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

// func attnWsum(p, v *float32, n, hd int, out *float32)
// out[0:hd] = Σ_j p[j]·v[j·hd:(j+1)·hd] for j < n; hd is a multiple of 64.
// Two value rows per step into two sets of four accumulators.
TEXT ·attnWsum(SB), NOSPLIT, $0-40
	MOVQ p+0(FP), SI
	MOVQ v+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ hd+24(FP), DX
	MOVQ out+32(FP), R8
	SHLQ $2, DX
	XORQ BX, BX

block:
	CMPQ   BX, DX
	JAE    wdone
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	MOVQ   SI, R9
	LEAQ   (DI)(BX*1), R10
	MOVQ   CX, R11

pair:
	CMPQ         R11, $2
	JB           single
	VBROADCASTSS (R9), Z4
	VBROADCASTSS 4(R9), Z9
	LEAQ         (R10)(DX*1), R12
	VFMADD231PS  (R10), Z4, Z0
	VFMADD231PS  64(R10), Z4, Z1
	VFMADD231PS  128(R10), Z4, Z2
	VFMADD231PS  192(R10), Z4, Z3
	VFMADD231PS  (R12), Z9, Z5
	VFMADD231PS  64(R12), Z9, Z6
	VFMADD231PS  128(R12), Z9, Z7
	VFMADD231PS  192(R12), Z9, Z8
	ADDQ         $8, R9
	LEAQ         (R12)(DX*1), R10
	SUBQ         $2, R11
	JMP          pair

single:
	TESTQ        R11, R11
	JZ           store
	VBROADCASTSS (R9), Z4
	VFMADD231PS  (R10), Z4, Z0
	VFMADD231PS  64(R10), Z4, Z1
	VFMADD231PS  128(R10), Z4, Z2
	VFMADD231PS  192(R10), Z4, Z3

store:
	VADDPS  Z5, Z0, Z0
	VADDPS  Z6, Z1, Z1
	VADDPS  Z7, Z2, Z2
	VADDPS  Z8, Z3, Z3
	VMOVUPS Z0, (R8)(BX*1)
	VMOVUPS Z1, 64(R8)(BX*1)
	VMOVUPS Z2, 128(R8)(BX*1)
	VMOVUPS Z3, 192(R8)(BX*1)
	ADDQ    $256, BX
	JMP     block

wdone:
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
