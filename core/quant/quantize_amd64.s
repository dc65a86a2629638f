//go:build amd64 && !noasm

#include "textflag.h"

// func quantQ8AVX512(x *float32, nb int, dst *byte, stride, qoff int, q81 bool) int
//
// Quantizes nb 32-element blocks of x to Q8_0 (stride 34, qoff 2) or Q8_1
// (stride 36, qoff 4, q81 set: s = f16(d·Σq) at dst+2), bit-identical to
// QuantizeQ8_0/QuantizeQ8_1's generic code:
//
//	amax = max |x|                  (integer max of the |x| bit patterns)
//	h    = f16(amax/127), d = f32(h) (VCVTPS2PH round-to-nearest-even)
//	id   = 1/d (0 when d = 0)
//	q    = clamp(round(x·id), ±127) where round is math.Round (half away
//	       from zero): trunc(y + copysign(0.5-2⁻²⁵, y)) is exactly that for
//	       |y| < 2²³ in round-to-nearest-even float32 arithmetic.
//
// It returns the number of blocks done: it stops at the first block whose
// |x| bit pattern reaches 2²² (amax ≥ 4194304, ±Inf or NaN), which the
// caller quantizes with the generic code (f16 overflow and NaN semantics).
TEXT ·quantQ8AVX512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVQ stride+24(FP), R8
	MOVQ qoff+32(FP), R9
	MOVBLZX q81+40(FP), R10
	XORQ R11, R11 // blocks done

	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z31 // |.| mask
	MOVL         $0x80000000, AX
	VPBROADCASTD AX, Z30 // sign mask
	MOVL         $0x3effffff, AX
	VPBROADCASTD AX, Z29 // 0.5 - 2^-25
	MOVL         $127, AX
	VPBROADCASTD AX, Z28
	MOVL         $-127, AX
	VPBROADCASTD AX, Z27
	MOVL         $0x42fe0000, AX // 127.0
	VMOVD        AX, X26
	MOVL         $0x3f800000, AX // 1.0
	VMOVD        AX, X25

loop:
	CMPQ R11, CX
	JAE  done
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VPANDD  Z31, Z0, Z2
	VPANDD  Z31, Z1, Z3
	VPMAXUD Z3, Z2, Z2
	VEXTRACTI64X4 $1, Z2, Y3
	VPMAXUD Y3, Y2, Y2
	VEXTRACTI128 $1, Y2, X3
	VPMAXUD X3, X2, X2
	VPSHUFD $0x4e, X2, X3
	VPMAXUD X3, X2, X2
	VPSHUFD $0xb1, X2, X3
	VPMAXUD X3, X2, X2
	VMOVD   X2, AX
	CMPL    AX, $0x4a800000
	JAE     done

	VDIVSS    X26, X2, X4 // amax/127
	VCVTPS2PH $0, X4, X5  // h
	VMOVD     X5, AX
	MOVW      AX, (DI)
	TESTL     $0xffff, AX
	JZ        zero
	VCVTPH2PS X5, X6      // d
	VDIVSS    X6, X25, X7 // id = 1/d
	VBROADCASTSS X7, Z7
	VMULPS  Z7, Z0, Z0
	VMULPS  Z7, Z1, Z1
	VPANDD  Z30, Z0, Z8
	VPANDD  Z30, Z1, Z9
	VPORD   Z29, Z8, Z8
	VPORD   Z29, Z9, Z9
	VADDPS  Z8, Z0, Z0
	VADDPS  Z9, Z1, Z1
	VCVTTPS2DQ Z0, Z0
	VCVTTPS2DQ Z1, Z1
	VPMINSD Z28, Z0, Z0
	VPMINSD Z28, Z1, Z1
	VPMAXSD Z27, Z0, Z0
	VPMAXSD Z27, Z1, Z1
	VPMOVDB Z0, (DI)(R9*1)
	VPMOVDB Z1, 16(DI)(R9*1)
	TESTQ   R10, R10
	JZ      next
	VPADDD  Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD  Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD  X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDD  X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPADDD  X1, X0, X0
	VCVTDQ2PS X0, X0
	VMULSS  X6, X0, X0 // d·Σq
	VCVTPS2PH $0, X0, X0
	VMOVD   X0, AX
	MOVW    AX, 2(DI)

next:
	ADDQ $128, SI
	ADDQ R8, DI
	INCQ R11
	JMP  loop

zero:
	// d = 0: every q is round(x·0) = 0 and s = f16(0·0) = 0.
	VPXORD  X0, X0, X0
	VMOVDQU X0, (DI)(R9*1)
	VMOVDQU X0, 16(DI)(R9*1)
	TESTQ   R10, R10
	JZ      next
	MOVW    $0, 2(DI)
	JMP     next

done:
	MOVQ R11, ret+48(FP)
	VZEROUPPER
	RET

// VPERMD order that undoes the lane interleave of VPACKSSDW/VPACKSSWB.
DATA q8perm<>+0(SB)/8, $0x0000000400000000
DATA q8perm<>+8(SB)/8, $0x0000000500000001
DATA q8perm<>+16(SB)/8, $0x0000000600000002
DATA q8perm<>+24(SB)/8, $0x0000000700000003
GLOBL q8perm<>(SB), RODATA|NOPTR, $32

// func quantQ8AVX2(x *float32, nb int, dst *byte, stride, qoff int, q81 bool) int
//
// quantQ8AVX512 for AVX2 CPUs: the same math, step for step (so the same
// bits), on four YMMs a block; the int32 quants are narrowed to bytes by
// saturating packs (exact: they are clamped to ±127 first) and a VPERMD
// that puts the packs' lane-interleaved dwords back in element order.
TEXT ·quantQ8AVX2(SB), NOSPLIT, $0-56
	MOVQ    x+0(FP), SI
	MOVQ    nb+8(FP), CX
	MOVQ    dst+16(FP), DI
	MOVQ    stride+24(FP), R8
	MOVQ    qoff+32(FP), R9
	MOVBLZX q81+40(FP), R10
	XORQ    R11, R11 // blocks done

	MOVL         $0x7fffffff, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15 // |.| mask
	MOVL         $0x80000000, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14 // sign mask
	MOVL         $0x3effffff, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13 // 0.5 - 2^-25
	MOVL         $127, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $-127, AX
	VMOVD        AX, X11
	VPBROADCASTD X11, Y11
	MOVL         $0x42fe0000, AX // 127.0
	VMOVD        AX, X10
	MOVL         $0x3f800000, AX // 1.0
	VMOVD        AX, X9
	VMOVDQU      q8perm<>(SB), Y8

q8loop:
	CMPQ    R11, CX
	JAE     q8done
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VPAND   Y15, Y0, Y4
	VPAND   Y15, Y1, Y5
	VPMAXUD Y5, Y4, Y4
	VPAND   Y15, Y2, Y5
	VPMAXUD Y5, Y4, Y4
	VPAND   Y15, Y3, Y5
	VPMAXUD Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPMAXUD X5, X4, X4
	VPSHUFD $0x4e, X4, X5
	VPMAXUD X5, X4, X4
	VPSHUFD $0xb1, X4, X5
	VPMAXUD X5, X4, X4
	VMOVD   X4, AX
	CMPL    AX, $0x4a800000
	JAE     q8done

	VDIVSS    X10, X4, X6 // amax/127
	VCVTPS2PH $0, X6, X7  // h
	VMOVD     X7, AX
	MOVW      AX, (DI)
	TESTL     $0xffff, AX
	JZ        q8zero
	VCVTPH2PS X7, X6      // d
	VDIVSS    X6, X9, X7  // id = 1/d
	VBROADCASTSS X7, Y7

#define Q8ROUND(y) \
	VMULPS     Y7, y, y \
	VPAND      Y14, y, Y5 \
	VPOR       Y13, Y5, Y5 \
	VADDPS     Y5, y, y \
	VCVTTPS2DQ y, y \
	VPMINSD    Y12, y, y \
	VPMAXSD    Y11, y, y

	Q8ROUND(Y0)
	Q8ROUND(Y1)
	Q8ROUND(Y2)
	Q8ROUND(Y3)
	TESTQ R10, R10
	JZ    q8pack
	VPADDD Y1, Y0, Y4
	VPADDD Y3, Y2, Y5
	VPADDD Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD  X5, X4, X4
	VPSHUFD $0x4e, X4, X5
	VPADDD  X5, X4, X4
	VPSHUFD $0xb1, X4, X5
	VPADDD  X5, X4, X4
	VCVTDQ2PS X4, X4
	VMULSS  X6, X4, X4 // d·Σq
	VCVTPS2PH $0, X4, X4
	VMOVD   X4, AX
	MOVW    AX, 2(DI)

q8pack:
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y8, Y0
	VMOVDQU   Y0, (DI)(R9*1)

q8next:
	ADDQ $128, SI
	ADDQ R8, DI
	INCQ R11
	JMP  q8loop

q8zero:
	// d = 0: every q is round(x·0) = 0 and s = f16(0·0) = 0.
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, (DI)(R9*1)
	TESTQ   R10, R10
	JZ      q8next
	MOVW    $0, 2(DI)
	JMP     q8next

q8done:
	MOVQ R11, ret+48(FP)
	VZEROUPPER
	RET

// func quantQ8KAVX2(x *float32, nb int, dst *byte) int
//
// QuantizeQ8_K's generic code on AVX2, bit for bit: per 256-element block
// d = amax/127 (float32), id = 1/d, q = clamp(round(x·id), ±127) with the
// same half-away-from-zero rounding as quantQ8AVX2, and the sixteen
// 16-element sums of q. It returns the blocks done, stopping at the first
// block whose |x| bit patterns reach +Inf/NaN or whose nonzero amax is
// below 2⁻⁹⁷ (1/d could overflow): the generic code takes those.
TEXT ·quantQ8KAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ dst+16(FP), DI
	XORQ R11, R11 // blocks done

	MOVL         $0x7fffffff, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $0x80000000, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x3effffff, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $127, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	MOVL         $-127, AX
	VMOVD        AX, X11
	VPBROADCASTD X11, Y11
	MOVL         $0x42fe0000, AX
	VMOVD        AX, X10
	MOVL         $0x3f800000, AX
	VMOVD        AX, X9
	VMOVDQU      q8perm<>(SB), Y8

kloop:
	CMPQ  R11, CX
	JAE   kdone
	VPXOR Y4, Y4, Y4
	XORQ  AX, AX

kmax:
	VPAND   (SI)(AX*1), Y15, Y5
	VPMAXUD Y5, Y4, Y4
	VPAND   32(SI)(AX*1), Y15, Y5
	VPMAXUD Y5, Y4, Y4
	VPAND   64(SI)(AX*1), Y15, Y5
	VPMAXUD Y5, Y4, Y4
	VPAND   96(SI)(AX*1), Y15, Y5
	VPMAXUD Y5, Y4, Y4
	ADDQ    $128, AX
	CMPQ    AX, $1024
	JB      kmax
	VEXTRACTI128 $1, Y4, X5
	VPMAXUD X5, X4, X4
	VPSHUFD $0x4e, X4, X5
	VPMAXUD X5, X4, X4
	VPSHUFD $0xb1, X4, X5
	VPMAXUD X5, X4, X4
	VMOVD   X4, AX
	TESTL   AX, AX
	JZ      kzero
	CMPL    AX, $0x7f800000
	JAE     kdone
	CMPL    AX, $0x0f000000
	JB      kdone

	VDIVSS X10, X4, X6 // d = amax/127
	VMOVSS X6, (DI)
	VDIVSS X6, X9, X7  // id = 1/d
	VBROADCASTSS X7, Y7
	XORQ   AX, AX      // byte offset in x
	XORQ   R12, R12    // byte offset of the quants
	XORQ   R13, R13    // byte offset of the sums

kq:
	VMOVUPS (SI)(AX*1), Y0
	VMOVUPS 32(SI)(AX*1), Y1
	VMOVUPS 64(SI)(AX*1), Y2
	VMOVUPS 96(SI)(AX*1), Y3
	Q8ROUND(Y0)
	Q8ROUND(Y1)
	Q8ROUND(Y2)
	Q8ROUND(Y3)
	// The two 16-element sums of this 32: [A, B, A, B] in X4.
	VPADDD  Y1, Y0, Y4
	VPADDD  Y3, Y2, Y5
	VPHADDD Y5, Y4, Y4
	VPHADDD Y4, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD  X5, X4, X4
	VPACKSSDW X4, X4, X4
	VMOVD   X4, BX
	MOVL    BX, 260(DI)(R13*1)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y8, Y0
	VMOVDQU   Y0, 4(DI)(R12*1)
	ADDQ $128, AX
	ADDQ $32, R12
	ADDQ $4, R13
	CMPQ AX, $1024
	JB   kq

knext:
	ADDQ $1024, SI
	ADDQ $292, DI
	INCQ R11
	JMP  kloop

kzero:
	// amax = 0: d = 0, id = 0, every q and sum is 0.
	VPXOR   Y0, Y0, Y0
	MOVL    $0, (DI)
	XORQ    AX, AX

kz:
	VMOVDQU Y0, 4(DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, $288
	JB      kz
	JMP     knext

kdone:
	MOVQ R11, ret+24(FP)
	VZEROUPPER
	RET
