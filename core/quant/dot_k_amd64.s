//go:build amd64 && !noasm

#include "textflag.h"

// K-quant × Q8_K kernels (AVX-512 VNNI), one 256-element super-block per
// iteration, 64 elements (one ZMM of activations) per VPDPBUSD.
//
// Q4_K: a 32-byte qs group holds sub-block 2g in its low nibbles and 2g+1 in
// its high nibbles, so broadcasting the group to both ZMM halves, shifting
// the upper half's qwords by 4 and masking gives the 64 quants in element
// order, matching 64 contiguous Q8_K activations. VPDPBUSD lanes 0-7 then
// belong to sub-block 2g and 8-15 to 2g+1; an integer multiply by the
// sub-block scales (spread by VPERMD) and an add keep the whole super-block
// in int32 until one convert and FMA with d·d_x. The mins never touch the
// quants: Σ_j m_j·Σx_j comes from Q8_K's 16-element sums with one VPMADDWD.
// The 6-bit scales/mins are unpacked with 32-bit scalar ops:
//   sc[0:4] = b0 & 0x3f3f3f3f           m[0:4] = b1 & 0x3f3f3f3f
//   sc[4:8] = b2 & 0x0f0f0f0f | (b0>>2) & 0x30303030
//   m[4:8]  = (b2>>4) & 0x0f0f0f0f | (b1>>2) & 0x30303030
// (b0,b1,b2 the three little-endian words of the 12-byte field).
//
// Q6_K: per 128-element half, ql[0:64] read as one ZMM gives in its low
// nibbles elements 0..63 and in its high nibbles 64..127, in order; the two
// high bits of element l+32k are bits 2k,2k+1 of qh[l], moved to bits 4,5
// by per-qword shifts of the broadcast qh. The −32 offset is applied once
// per super-block as 32·Σ sc_i·bsum_i (VPMADDWD on the 16 sums).

// VPERMD indices for Q4_K: group g takes scale 2g in lanes 0-7 and 2g+1 in 8-15.
#define IDX2(name, a, b) \
	DATA name+0(SB)/8, $(a<<32|a) \
	DATA name+8(SB)/8, $(a<<32|a) \
	DATA name+16(SB)/8, $(a<<32|a) \
	DATA name+24(SB)/8, $(a<<32|a) \
	DATA name+32(SB)/8, $(b<<32|b) \
	DATA name+40(SB)/8, $(b<<32|b) \
	DATA name+48(SB)/8, $(b<<32|b) \
	DATA name+56(SB)/8, $(b<<32|b) \
	GLOBL name(SB), RODATA|NOPTR, $64

IDX2(k4g0<>, 0, 1)
IDX2(k4g1<>, 2, 3)
IDX2(k4g2<>, 4, 5)
IDX2(k4g3<>, 6, 7)

// VPERMD indices for Q6_K: quarter k of the 16 scales, each repeated 4×.
#define IDX4(name, a) \
	DATA name+0(SB)/8, $(a<<32|a) \
	DATA name+8(SB)/8, $(a<<32|a) \
	DATA name+16(SB)/8, $((a+1)<<32|(a+1)) \
	DATA name+24(SB)/8, $((a+1)<<32|(a+1)) \
	DATA name+32(SB)/8, $((a+2)<<32|(a+2)) \
	DATA name+40(SB)/8, $((a+2)<<32|(a+2)) \
	DATA name+48(SB)/8, $((a+3)<<32|(a+3)) \
	DATA name+56(SB)/8, $((a+3)<<32|(a+3)) \
	GLOBL name(SB), RODATA|NOPTR, $64

IDX4(k6s0<>, 0)
IDX4(k6s1<>, 4)
IDX4(k6s2<>, 8)
IDX4(k6s3<>, 12)

// qword shift counts: low ZMM half by a, high half by b
#define SH2(name, a, b) \
	DATA name+0(SB)/8, $a \
	DATA name+8(SB)/8, $a \
	DATA name+16(SB)/8, $a \
	DATA name+24(SB)/8, $a \
	DATA name+32(SB)/8, $b \
	DATA name+40(SB)/8, $b \
	DATA name+48(SB)/8, $b \
	DATA name+56(SB)/8, $b \
	GLOBL name(SB), RODATA|NOPTR, $64

SH2(sh04<>, 0, 4)
SH2(sh42<>, 4, 2)
SH2(sh02<>, 0, 2)

#define HSUM16(zacc, yacc, xacc, ytmp, xtmp) \
	VEXTRACTF64X4 $1, zacc, ytmp \
	VADDPS        ytmp, yacc, yacc \
	VEXTRACTF32X4 $1, yacc, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVHLPS      xacc, xtmp, xtmp \
	VADDPS        xtmp, xacc, xacc \
	VMOVSHDUP     xacc, xtmp \
	VADDSS        xtmp, xacc, xacc

// One Q4_K group g: quants of qs[32g:32g+32] against x[64g:64g+64].
#define Q4K_GROUP(g, zidx) \
	VBROADCASTI64X4 16+32*g(SI), Z0 \
	VPSRLVQ         Z30, Z0, Z0 \
	VPANDD          Z31, Z0, Z0 \
	VPXORD          Z1, Z1, Z1 \
	VPDPBUSD        4+64*g(DI), Z0, Z1 \
	VPERMD          Z10, zidx, Z2 \
	VPMULLD         Z2, Z1, Z1 \
	VPADDD          Z1, Z3, Z3

// Q5_K group: as Q4_K (qs at 48) plus the fifth bits: Z24 holds qh
// broadcast to both halves, the upper half pre-shifted by 1, so bit 2g of
// each byte (sub-block 2g, low half) and bit 2g+1 (sub-block 2g+1, high
// half) both sit at bit 2g; shifting left by 4−2g moves them to bit 4.
#define Q5K_GROUP(g, zidx) \
	VBROADCASTI64X4 48+32*g(SI), Z0 \
	VPSRLVQ         Z30, Z0, Z0 \
	VPANDD          Z31, Z0, Z0 \
	VPSRLQ          $(2*g), Z24, Z25 \
	VPSLLQ          $4, Z25, Z25 \
	VPTERNLOGD      $0xf8, Z26, Z25, Z0 \
	VPXORD          Z1, Z1, Z1 \
	VPDPBUSD        4+64*g(DI), Z0, Z1 \
	VPERMD          Z10, zidx, Z2 \
	VPMULLD         Z2, Z1, Z1 \
	VPADDD          Z1, Z3, Z3

// K45_SCALES: the shared Q4_K/Q5_K per-super-block prologue (scales into
// Z10, mins·bsums folded into Y9, d·d_x into Z15).
#define K45_SCALES \
	MOVL 4(SI), AX \
	MOVL 8(SI), BX \
	MOVL 12(SI), DX \
	MOVL AX, R8 \
	ANDL $0x3f3f3f3f, R8 \
	MOVL BX, R9 \
	ANDL $0x3f3f3f3f, R9 \
	MOVL DX, R10 \
	ANDL $0x0f0f0f0f, R10 \
	SHRL $2, AX \
	ANDL $0x30303030, AX \
	ORL  AX, R10 \
	SHRL $4, DX \
	ANDL $0x0f0f0f0f, DX \
	SHRL $2, BX \
	ANDL $0x30303030, BX \
	ORL  BX, DX \
	VMOVD   R8, X10 \
	VPINSRD $1, R10, X10, X10 \
	VMOVD   R9, X11 \
	VPINSRD $1, DX, X11, X11 \
	VPMOVZXBD X10, Z10 \
	VPMOVZXBD X11, Y11 \
	VPSLLD    $16, Y11, Y12 \
	VPORD     Y12, Y11, Y11 \
	VPMADDWD  260(DI), Y11, Y11 \
	VCVTDQ2PS Y11, Y11 \
	VMOVD         (SI), X13 \
	VCVTPH2PS     X13, X13 \
	VBROADCASTSS  (DI), X14 \
	VMULPS        X14, X13, X13 \
	VBROADCASTSS  X13, Z15 \
	VMOVSHDUP     X13, X14 \
	VBROADCASTSS  X14, Y16 \
	VFMADD231PS   Y11, Y16, Y9

SH2(sh01<>, 0, 1)

// func dotQ5_KQ8_KVNNI(w, x *byte, nb int) float32
TEXT ·dotQ5_KQ8_KVNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z26
	VMOVDQU64    sh04<>(SB), Z30
	VMOVDQU64    sh01<>(SB), Z17
	VMOVDQU64    k4g0<>(SB), Z20
	VMOVDQU64    k4g1<>(SB), Z21
	VMOVDQU64    k4g2<>(SB), Z22
	VMOVDQU64    k4g3<>(SB), Z23
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	TESTQ CX, CX
	JEQ   q5kdone

q5kloop:
	K45_SCALES
	VBROADCASTI64X4 16(SI), Z24
	VPSRLVQ         Z17, Z24, Z24
	VPXORD Z3, Z3, Z3
	Q5K_GROUP(0, Z20)
	Q5K_GROUP(1, Z21)
	Q5K_GROUP(2, Z22)
	Q5K_GROUP(3, Z23)
	VCVTDQ2PS   Z3, Z3
	VFMADD231PS Z3, Z15, Z8
	ADDQ $176, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q5kloop

q5kdone:
	VSUBPS Z9, Z8, Z8
	HSUM16(Z8, Y8, X8, Y9, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET

// func dotQ4_KQ8_KVNNI(w, x *byte, nb int) float32
TEXT ·dotQ4_KQ8_KVNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	VMOVDQU64    sh04<>(SB), Z30
	VMOVDQU64    k4g0<>(SB), Z20
	VMOVDQU64    k4g1<>(SB), Z21
	VMOVDQU64    k4g2<>(SB), Z22
	VMOVDQU64    k4g3<>(SB), Z23
	VPXORD Z8, Z8, Z8   // Σ d·d_x·sumi (16 lanes)
	VPXORD Z9, Z9, Z9   // Σ dmin·d_x·summ (8 lanes)
	TESTQ CX, CX
	JEQ   q4kdone

q4kloop:
	// scales and mins → X10 (8 scale bytes), X11 (8 min bytes)
	MOVL 4(SI), AX
	MOVL 8(SI), BX
	MOVL 12(SI), DX
	MOVL AX, R8
	ANDL $0x3f3f3f3f, R8
	MOVL BX, R9
	ANDL $0x3f3f3f3f, R9
	MOVL DX, R10
	ANDL $0x0f0f0f0f, R10
	SHRL $2, AX
	ANDL $0x30303030, AX
	ORL  AX, R10
	SHRL $4, DX
	ANDL $0x0f0f0f0f, DX
	SHRL $2, BX
	ANDL $0x30303030, BX
	ORL  BX, DX
	VMOVD   R8, X10
	VPINSRD $1, R10, X10, X10
	VMOVD   R9, X11
	VPINSRD $1, DX, X11, X11
	VPMOVZXBD X10, Z10
	// mins: words [m0,m0,m1,m1,...] · bsums → 8 int32 → float
	VPMOVZXBD X11, Y11
	VPSLLD    $16, Y11, Y12
	VPORD     Y12, Y11, Y11
	VPMADDWD  260(DI), Y11, Y11
	VCVTDQ2PS Y11, Y11
	// [d·d_x, dmin·d_x]
	VMOVD         (SI), X13
	VCVTPH2PS     X13, X13
	VBROADCASTSS  (DI), X14
	VMULPS        X14, X13, X13
	VBROADCASTSS  X13, Z15
	VMOVSHDUP     X13, X14
	VBROADCASTSS  X14, Y16
	VFMADD231PS   Y11, Y16, Y9
	VPXORD Z3, Z3, Z3
	Q4K_GROUP(0, Z20)
	Q4K_GROUP(1, Z21)
	Q4K_GROUP(2, Z22)
	Q4K_GROUP(3, Z23)
	VCVTDQ2PS   Z3, Z3
	VFMADD231PS Z3, Z15, Z8
	ADDQ $144, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q4kloop

q4kdone:
	VSUBPS Z9, Z8, Z8
	HSUM16(Z8, Y8, X8, Y9, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET

// One Q6_K half h (ql at SI+64h, qh at SI+128+32h, x at DI+4+128h).
#define Q6K_HALF(h, zidxlo, zidxhi) \
	VMOVDQU64       64*h(SI), Z0 \
	VBROADCASTI64X4 128+32*h(SI), Z4 \
	VPSRLW          $4, Z0, Z1 \
	VPANDD          Z31, Z0, Z0 \
	VPANDD          Z31, Z1, Z1 \
	VPSLLVQ         Z29, Z4, Z5 \
	VPSRLVQ         Z28, Z4, Z6 \
	VPTERNLOGD      $0xf8, Z27, Z5, Z0 \
	VPTERNLOGD      $0xf8, Z27, Z6, Z1 \
	VPXORD          Z2, Z2, Z2 \
	VPDPBUSD        4+128*h(DI), Z0, Z2 \
	VPERMD          Z10, zidxlo, Z7 \
	VPMULLD         Z7, Z2, Z2 \
	VPADDD          Z2, Z3, Z3 \
	VPXORD          Z2, Z2, Z2 \
	VPDPBUSD        4+128*h+64(DI), Z1, Z2 \
	VPERMD          Z10, zidxhi, Z7 \
	VPMULLD         Z7, Z2, Z2 \
	VPADDD          Z2, Z3, Z3

// func dotQ6_KQ8_KVNNI(w, x *byte, nb int) float32
TEXT ·dotQ6_KQ8_KVNNI(SB), NOSPLIT, $0-28
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVL         $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x30303030, AX
	VPBROADCASTD AX, Z27
	VMOVDQU64    sh42<>(SB), Z29
	VMOVDQU64    sh02<>(SB), Z28
	VMOVDQU64    k6s0<>(SB), Z20
	VMOVDQU64    k6s1<>(SB), Z21
	VMOVDQU64    k6s2<>(SB), Z22
	VMOVDQU64    k6s3<>(SB), Z23
	VPXORD Z8, Z8, Z8
	TESTQ CX, CX
	JEQ   q6kdone

q6kloop:
	VPMOVSXBD 192(SI), Z10       // 16 scales as int32
	VPMOVSXBW 192(SI), Y11       // and as int16
	VPMADDWD  260(DI), Y11, Y11  // sc_i·bsum_i, pairwise
	VPSLLD    $5, Y11, Y11
	VPXORD    Z3, Z3, Z3
	VPSUBD    Z11, Z3, Z3        // −32·Σ sc·bsum (upper lanes of Z11 are 0)
	Q6K_HALF(0, Z20, Z21)
	Q6K_HALF(1, Z22, Z23)
	// d·d_x
	MOVWLZX      208(SI), AX
	VMOVD        AX, X13
	VCVTPH2PS    X13, X13
	VMULSS       (DI), X13, X13
	VBROADCASTSS X13, Z15
	VCVTDQ2PS    Z3, Z3
	VFMADD231PS  Z3, Z15, Z8
	ADDQ $210, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q6kloop

q6kdone:
	HSUM16(Z8, Y8, X8, Y9, X9)
	VZEROUPPER
	MOVSS X8, ret+24(FP)
	RET
