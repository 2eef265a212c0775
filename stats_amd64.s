//go:build amd64 && !purego

#include "textflag.h"

// func f32MomentsAVX2(v unsafe.Pointer, n int, k float64, l *lanes, r *[2][8]float32)
//
// Eight values an iteration: their minimum and maximum into Y6 and Y7 as
// float32; then, four at a time widened to float64, d = x - k into the
// sums of Y2 and d*d (rounded, then added) into those of Y3, the lanes of
// the vectors being the lanes of momentsGo.
TEXT ·f32MomentsAVX2(SB), NOSPLIT, $0-40
	MOVQ         v+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSD k+16(FP), Y5
	MOVQ         l+24(FP), DI
	MOVQ         r+32(FP), DX
	VMOVUPD      0(DI), Y2
	VMOVUPD      32(DI), Y3
	VMOVUPS      0(DX), Y6
	VMOVUPS      32(DX), Y7
	SHRQ         $3, CX
	JZ           done

loop:
	VMOVUPS   (SI), Y4
	VMINPS    Y4, Y6, Y6
	VMAXPS    Y4, Y7, Y7
	VCVTPS2PD (SI), Y0
	VCVTPS2PD 16(SI), Y1
	VSUBPD    Y5, Y0, Y0
	VSUBPD    Y5, Y1, Y1
	VADDPD    Y0, Y2, Y2
	VMULPD    Y0, Y0, Y0
	VADDPD    Y0, Y3, Y3
	VADDPD    Y1, Y2, Y2
	VMULPD    Y1, Y1, Y1
	VADDPD    Y1, Y3, Y3
	ADDQ      $32, SI
	DECQ      CX
	JNZ       loop

done:
	VMOVUPD Y2, 0(DI)
	VMOVUPD Y3, 32(DI)
	VMOVUPS Y6, 0(DX)
	VMOVUPS Y7, 32(DX)
	VZEROUPPER
	RET
