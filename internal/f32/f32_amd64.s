//go:build amd64 && !purego

#include "textflag.h"

// func axpy8(y, x *float32, a float32, n int)
//
// y[i] += a·x[i] for i < n (a positive multiple of 8): VMULPS, then VADDPS,
// rounding twice as a Go loop does.
TEXT ·axpy8(SB), NOSPLIT, $0-32
	MOVQ         y+0(FP), DI
	MOVQ         x+8(FP), SI
	VBROADCASTSS a+16(FP), Y1
	MOVQ         n+24(FP), CX
	SHLQ         $2, CX
	XORQ         AX, AX

axpyloop:
	VMULPS  (SI)(AX*1), Y1, Y0
	VADDPS  (DI)(AX*1), Y0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ    $32, AX
	CMPQ    AX, CX
	JL      axpyloop
	VZEROUPPER
	RET

// func addRows8(acc, rows *float32, edges *uint64, n int, base int64, width int)
//
// For i < n, e = edges[i]: acc row uint32(e) += rows row (e>>32) − base,
// width floats (a positive multiple of 8) each. The accumulator rows of
// edge i+8 are prefetched (their first two cache lines) while edge i adds.
TEXT ·addRows8(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ rows+8(FP), SI
	MOVQ edges+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ base+32(FP), R10
	MOVQ width+40(FP), R11
	SHLQ $2, R11           // row bytes
	MOVQ R9, R13
	SUBQ $8, R13           // edges below this index have one 8 ahead
	XORQ CX, CX

edgeloop:
	CMPQ CX, R13
	JGE  noprefetch
	MOVQ 64(R8)(CX*8), BX
	MOVL BX, BX            // destination of edge i+8
	IMULQ R11, BX
	PREFETCHT0 (DI)(BX*1)
	PREFETCHT0 64(DI)(BX*1)

noprefetch:
	MOVQ  (R8)(CX*8), BX
	MOVQ  BX, DX
	SHRQ  $32, DX
	SUBQ  R10, DX
	IMULQ R11, DX          // source row's byte offset
	MOVL  BX, BX
	IMULQ R11, BX          // accumulator row's byte offset
	LEAQ  (DI)(BX*1), AX
	LEAQ  (SI)(DX*1), DX
	MOVQ  R11, R12

rowloop:
	VMOVUPS (DX), Y0
	VADDPS  (AX), Y0, Y0
	VMOVUPS Y0, (AX)
	ADDQ    $32, AX
	ADDQ    $32, DX
	SUBQ    $32, R12
	JNZ     rowloop
	INCQ    CX
	CMPQ    CX, R9
	JL      edgeloop
	VZEROUPPER
	RET
