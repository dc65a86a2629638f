//go:build amd64 && !noasm

#include "textflag.h"

// func maxAVX2(p *float32, n int) float32
// The largest of p[0:n] that is not NaN (−Inf if none), n a positive
// multiple of 32. VMAXPS returns its second source where either is NaN,
// so the data goes in as the first source and a NaN never replaces the
// running maximum.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MOVL $0xff800000, AX // −Inf
	MOVL AX, X0
	VBROADCASTSS X0, Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3

maxloop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMAXPS Y0, Y4, Y0
	VMAXPS Y1, Y5, Y1
	VMAXPS Y2, Y6, Y2
	VMAXPS Y3, Y7, Y3
	ADDQ $128, SI
	SUBQ $32, CX
	JNZ maxloop
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func firstEqualAVX2(p *float32, n int, v float32) int
// The index of the first of p[0:n] equal to v (an ordered compare: NaN
// equals nothing, −0 equals +0), or −1; n a positive multiple of 32.
TEXT ·firstEqualAVX2(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS v+16(FP), Y0
	XORQ DX, DX

eqloop:
	VCMPPS $0, (SI), Y0, Y1
	VCMPPS $0, 32(SI), Y0, Y2
	VCMPPS $0, 64(SI), Y0, Y3
	VCMPPS $0, 96(SI), Y0, Y4
	VORPS Y1, Y2, Y5
	VORPS Y3, Y4, Y6
	VORPS Y5, Y6, Y5
	VMOVMSKPS Y5, AX
	TESTL AX, AX
	JNZ eqfound
	ADDQ $128, SI
	ADDQ $32, DX
	CMPQ DX, CX
	JB eqloop
	MOVQ $-1, ret+24(FP)
	VZEROUPPER
	RET

eqfound:
	// The first of the four vectors with a match, then its first lane.
	VMOVMSKPS Y1, AX
	TESTL AX, AX
	JNZ eqlane
	ADDQ $8, DX
	VMOVMSKPS Y2, AX
	TESTL AX, AX
	JNZ eqlane
	ADDQ $8, DX
	VMOVMSKPS Y3, AX
	TESTL AX, AX
	JNZ eqlane
	ADDQ $8, DX
	VMOVMSKPS Y4, AX

eqlane:
	BSFL AX, AX
	ADDQ AX, DX
	MOVQ DX, ret+24(FP)
	VZEROUPPER
	RET
