// The body of the scores-with-keys-on-lanes kernels (scores_t_amd64.s),
// included once per key type: LOADK(src, y) loads 8 keys' values of one
// dimension into y as float32, KHALF is the byte offset of the next 8,
// KSHIFT the log2 of a key value's bytes (so 2·KHALF is the bytes of 16).
// Each dimension's row is prefetched two blocks of 16 keys ahead: the rows
// of a block lie a page apart, too many streams for the hardware
// prefetchers to follow.
	MOVQ q+0(FP), SI
	MOVQ qs+16(FP), R8
	SHLQ $2, R8         // query row stride in bytes
	MOVQ hd+48(FP), R12
	LEAQ (SI)(R12*4), R12 // the end of query row 0
	MOVQ kt+24(FP), R10 // this block's first key, dimension 0
	MOVQ ks+32(FP), DX
	SHLQ $KSHIFT, DX    // dimension stride of kt in bytes
	MOVQ nk+40(FP), R13
	SHRQ $4, R13        // blocks of 16 keys
	MOVQ out+64(FP), DI
	MOVQ os+72(FP), R9
	SHLQ $2, R9         // output row stride in bytes
	LEAQ (DI)(R9*1), BX // output row 1
	MOVQ ng+8(FP), AX
	CMPQ AX, $6
	JEQ  blk6
	CMPQ AX, $3
	JEQ  blk3

blk1:
	TESTQ  R13, R13
	JZ     done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ   R10, AX
	MOVQ   SI, CX

d1:
	VBROADCASTSS (CX), Y14
	LOADK((AX), Y12)
	LOADK(KHALF(AX), Y13)
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	PREFETCHT0   (4*KHALF)(AX)
	ADDQ         DX, AX
	ADDQ         $4, CX
	CMPQ         CX, R12
	JB           d1

	VBROADCASTSS scale+56(FP), Y14
	VMULPS       Y14, Y0, Y0
	VMULPS       Y14, Y1, Y1
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	ADDQ         $(2*KHALF), R10
	ADDQ         $64, DI
	DECQ         R13
	JMP          blk1

blk3:
	TESTQ  R13, R13
	JZ     done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	MOVQ   R10, AX
	MOVQ   SI, CX

d3:
	LOADK((AX), Y12)
	LOADK(KHALF(AX), Y13)
	VBROADCASTSS (CX), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (CX)(R8*1), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS (CX)(R8*2), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	PREFETCHT0   (4*KHALF)(AX)
	ADDQ         DX, AX
	ADDQ         $4, CX
	CMPQ         CX, R12
	JB           d3

	VBROADCASTSS scale+56(FP), Y14
	VMULPS       Y14, Y0, Y0
	VMULPS       Y14, Y1, Y1
	VMULPS       Y14, Y2, Y2
	VMULPS       Y14, Y3, Y3
	VMULPS       Y14, Y4, Y4
	VMULPS       Y14, Y5, Y5
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, (BX)
	VMOVUPS      Y3, 32(BX)
	VMOVUPS      Y4, (DI)(R9*2)
	VMOVUPS      Y5, 32(DI)(R9*2)
	ADDQ         $(2*KHALF), R10
	ADDQ         $64, DI
	ADDQ         $64, BX
	DECQ         R13
	JMP          blk3

blk6:
	TESTQ  R13, R13
	JZ     done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	MOVQ   R10, AX
	MOVQ   SI, CX          // query rows 0, 2, 4 at dimension d
	LEAQ   (SI)(R8*1), R11 // query rows 1, 3, 5 at dimension d

d6:
	LOADK((AX), Y12)
	LOADK(KHALF(AX), Y13)
	VBROADCASTSS (CX), Y14
	VFMADD231PS  Y12, Y14, Y0
	VFMADD231PS  Y13, Y14, Y1
	VBROADCASTSS (R11), Y15
	VFMADD231PS  Y12, Y15, Y2
	VFMADD231PS  Y13, Y15, Y3
	VBROADCASTSS (CX)(R8*2), Y14
	VFMADD231PS  Y12, Y14, Y4
	VFMADD231PS  Y13, Y14, Y5
	VBROADCASTSS (R11)(R8*2), Y15
	VFMADD231PS  Y12, Y15, Y6
	VFMADD231PS  Y13, Y15, Y7
	VBROADCASTSS (CX)(R8*4), Y14
	VFMADD231PS  Y12, Y14, Y8
	VFMADD231PS  Y13, Y14, Y9
	VBROADCASTSS (R11)(R8*4), Y15
	VFMADD231PS  Y12, Y15, Y10
	VFMADD231PS  Y13, Y15, Y11
	PREFETCHT0   (4*KHALF)(AX)
	ADDQ         DX, AX
	ADDQ         $4, CX
	ADDQ         $4, R11
	CMPQ         CX, R12
	JB           d6

	VBROADCASTSS scale+56(FP), Y14
	VMULPS       Y14, Y0, Y0
	VMULPS       Y14, Y1, Y1
	VMULPS       Y14, Y2, Y2
	VMULPS       Y14, Y3, Y3
	VMULPS       Y14, Y4, Y4
	VMULPS       Y14, Y5, Y5
	VMULPS       Y14, Y6, Y6
	VMULPS       Y14, Y7, Y7
	VMULPS       Y14, Y8, Y8
	VMULPS       Y14, Y9, Y9
	VMULPS       Y14, Y10, Y10
	VMULPS       Y14, Y11, Y11
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, (BX)
	VMOVUPS      Y3, 32(BX)
	VMOVUPS      Y4, (DI)(R9*2)
	VMOVUPS      Y5, 32(DI)(R9*2)
	VMOVUPS      Y6, (BX)(R9*2)
	VMOVUPS      Y7, 32(BX)(R9*2)
	VMOVUPS      Y8, (DI)(R9*4)
	VMOVUPS      Y9, 32(DI)(R9*4)
	VMOVUPS      Y10, (BX)(R9*4)
	VMOVUPS      Y11, 32(BX)(R9*4)
	ADDQ         $(2*KHALF), R10
	ADDQ         $64, DI
	ADDQ         $64, BX
	DECQ         R13
	JMP          blk6

done:
	VZEROUPPER
	RET
