//go:build amd64 && !noasm

#include "textflag.h"

// Float dots (AVX-512F): 32 elements per iteration into two FMA
// accumulators (FMA latency 4, two chains keep the loop load-bound). F16 is
// widened with VCVTPH2PS, BF16 by zero-extending to 32 bits and shifting
// left 16 (a bfloat16 is the top half of a float32). n is a multiple of 32;
// the Go wrappers do the rest.

#define HSUM16(zacc, yacc, xacc, ytmp, xtmp) \
	VEXTRACTF64X4 $1, zacc, ytmp \
	VADDPS        ytmp, yacc, yacc \
	VEXTRACTF32X4 $1, yacc, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVHLPS      xacc, xtmp, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVSHDUP     xacc, xtmp \
	VADDSS        xtmp, xacc, xacc

// func dotF32AVX512(w, x *float32, n int) float32
TEXT ·dotF32AVX512(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	TESTQ CX, CX
	JEQ  f32done
f32loop:
	VMOVUPS     (SI), Z2
	VMOVUPS     64(SI), Z3
	VFMADD231PS (DI), Z2, Z0
	VFMADD231PS 64(DI), Z3, Z1
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  f32loop
f32done:
	VADDPS Z1, Z0, Z0
	HSUM16(Z0, Y0, X0, Y1, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotF16F32AVX512(w *byte, x *float32, n int) float32
TEXT ·dotF16F32AVX512(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	TESTQ CX, CX
	JEQ  f16done
f16loop:
	VCVTPH2PS   (SI), Z2
	VCVTPH2PS   32(SI), Z3
	VFMADD231PS (DI), Z2, Z0
	VFMADD231PS 64(DI), Z3, Z1
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  f16loop
f16done:
	VADDPS Z1, Z0, Z0
	HSUM16(Z0, Y0, X0, Y1, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotBF16F32AVX512(w *byte, x *float32, n int) float32
TEXT ·dotBF16F32AVX512(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	TESTQ CX, CX
	JEQ  bf16done
bf16loop:
	VPMOVZXWD   (SI), Z2
	VPMOVZXWD   32(SI), Z3
	VPSLLD      $16, Z2, Z2
	VPSLLD      $16, Z3, Z3
	VFMADD231PS (DI), Z2, Z0
	VFMADD231PS 64(DI), Z3, Z1
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  bf16loop
bf16done:
	VADDPS Z1, Z0, Z0
	HSUM16(Z0, Y0, X0, Y1, X1)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET
