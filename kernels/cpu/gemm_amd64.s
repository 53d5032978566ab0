//go:build amd64 && !purego

#include "textflag.h"

// func kern6x16(k int, a, b, c *float32, ldc int)
//
// c[r*ldc+j] += Σ_{p<k} a[p*6+r]·b[p*16+j] for r < 6, j < 16, each sum
// accumulated in p order with fused multiply-adds (AVX2 + FMA3), then added
// to c once.
// ROW multiplies row r of the a panel (broadcast from off(SI) into bc)
// with the b row in Y12:Y13 into accumulators lo:hi.
#define ROW(off, bc, lo, hi) \
	VBROADCASTSS off(SI), bc; \
	VFMADD231PS  Y12, bc, lo; \
	VFMADD231PS  Y13, bc, hi

// STORE adds accumulators lo:hi to the 16 floats at (DX) and stores them.
#define STORE(lo, hi) \
	VADDPS  (DX), lo, lo; \
	VMOVUPS lo, (DX); \
	VADDPS  32(DX), hi, hi; \
	VMOVUPS hi, 32(DX)

TEXT ·kern6x16(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
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
	TESTQ CX, CX
	JEQ store

loop:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	ROW(0, Y14, Y0, Y1)
	ROW(4, Y15, Y2, Y3)
	ROW(8, Y14, Y4, Y5)
	ROW(12, Y15, Y6, Y7)
	ROW(16, Y14, Y8, Y9)
	ROW(20, Y15, Y10, Y11)
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JNE  loop

store:
	STORE(Y0, Y1)
	ADDQ R8, DX
	STORE(Y2, Y3)
	ADDQ R8, DX
	STORE(Y4, Y5)
	ADDQ R8, DX
	STORE(Y6, Y7)
	ADDQ R8, DX
	STORE(Y8, Y9)
	ADDQ R8, DX
	STORE(Y10, Y11)
	VZEROUPPER
	RET
