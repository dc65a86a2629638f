//go:build amd64 && !noasm

#include "textflag.h"

// The 8-row layout's record parts are a dword transpose of 8 rows: part p,
// lane r holds dword p of row r's field (packed8.go). These move whole
// fields of 8 rows at once; pack8 does the rest of a record in Go.

// func lanes8AVX2(dst, src *byte, wrb, n, nb, ss, ds int)
// For each of nb blocks (block j at src + j·ss and dst + j·ds), n ≥ 1
// chunks of 8 dwords: chunk i reads the 32 bytes at src + r·wrb + 32i of
// rows r = 0…7 and writes dword p of row r at dst + 256i + 32p + 4r.
TEXT ·lanes8AVX2(SB), NOSPLIT, $0-56
	MOVQ wrb+16(FP), BX
	LEAQ (BX)(BX*2), DX
	MOVQ nb+32(FP), R9
	MOVQ dst+0(FP), R10
	MOVQ src+8(FP), R11

lanes8block:
	MOVQ R10, DI
	MOVQ R11, SI
	LEAQ (SI)(BX*4), R8
	MOVQ n+24(FP), CX

lanes8loop:
	VMOVDQU (SI), Y0
	VMOVDQU (SI)(BX*1), Y1
	VMOVDQU (SI)(BX*2), Y2
	VMOVDQU (SI)(DX*1), Y3
	VMOVDQU (R8), Y4
	VMOVDQU (R8)(BX*1), Y5
	VMOVDQU (R8)(BX*2), Y6
	VMOVDQU (R8)(DX*1), Y7
	// Pairs of rows interleaved: rows 0, 1 → r0_0 r1_0 r0_1 r1_1 | r0_4 r1_4 r0_5 r1_5.
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	// Quads: rows 0–3 of dword k in the low lane, of dword k+4 in the high.
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	// Rows 0–3 beside rows 4–7: one part each.
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	VMOVDQU Y8, 0(DI)
	VMOVDQU Y9, 32(DI)
	VMOVDQU Y10, 64(DI)
	VMOVDQU Y11, 96(DI)
	VMOVDQU Y12, 128(DI)
	VMOVDQU Y13, 160(DI)
	VMOVDQU Y14, 192(DI)
	VMOVDQU Y15, 224(DI)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $256, DI
	DECQ CX
	JNZ  lanes8loop
	ADDQ ss+40(FP), R11
	ADDQ ds+48(FP), R10
	DECQ R9
	JNZ  lanes8block
	VZEROUPPER
	RET

// func lanes4AVX2(dst, src *byte, wrb, nb, ss, ds int)
// For each of nb blocks (block j at src + j·ss and dst + j·ds), one chunk
// of 4 dwords: the 16 bytes at src + r·wrb of rows r = 0…7, dword p of row
// r written at dst + 32p + 4r.
TEXT ·lanes4AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ wrb+16(FP), BX
	MOVQ nb+24(FP), CX
	LEAQ (BX)(BX*2), DX

lanes4block:
	LEAQ (SI)(BX*4), R8
	// Row r in the low lane, row r+4 in the high one.
	VMOVDQU     (SI), X0
	VINSERTI128 $1, (R8), Y0, Y0
	VMOVDQU     (SI)(BX*1), X1
	VINSERTI128 $1, (R8)(BX*1), Y1, Y1
	VMOVDQU     (SI)(BX*2), X2
	VINSERTI128 $1, (R8)(BX*2), Y2, Y2
	VMOVDQU     (SI)(DX*1), X3
	VINSERTI128 $1, (R8)(DX*1), Y3, Y3
	VUNPCKLPS   Y1, Y0, Y4
	VUNPCKHPS   Y1, Y0, Y5
	VUNPCKLPS   Y3, Y2, Y6
	VUNPCKHPS   Y3, Y2, Y7
	VSHUFPS     $0x44, Y6, Y4, Y0
	VSHUFPS     $0xEE, Y6, Y4, Y1
	VSHUFPS     $0x44, Y7, Y5, Y2
	VSHUFPS     $0xEE, Y7, Y5, Y3
	VMOVDQU     Y0, 0(DI)
	VMOVDQU     Y1, 32(DI)
	VMOVDQU     Y2, 64(DI)
	VMOVDQU     Y3, 96(DI)
	ADDQ        ss+32(FP), SI
	ADDQ        ds+40(FP), DI
	DECQ        CX
	JNZ         lanes4block
	VZEROUPPER
	RET
