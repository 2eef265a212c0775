//go:build amd64 && !purego

#include "textflag.h"

// GROUP compares the four float32 values at off(SI) (a) with those at
// off(DI) (b) in float64, as compareFinite does: it counts the lanes where
// a != b in Y11 and those where !(d <= atol + rtol*|b|) in Y10 (subtracting
// each compare's -1), d = |a - b|; keeps the largest d of each lane in MAX;
// sets the lanes of Y5 where d is NaN or infinite; and leaves in AX the
// lanes where d > threshold*|b| (Y6), which may hold a new largest d/|b|,
// with d in Y3 and |b| in Y1 for the caller to divide.
#define GROUP(off, MAX) \
	VCVTPS2PD off(SI), Y0; \
	VCVTPS2PD off(DI), Y1; \
	VCMPPD    $0x04, Y1, Y0, Y2; \
	VPSUBQ    Y2, Y11, Y11; \
	VSUBPD    Y1, Y0, Y3; \
	VANDPD    Y15, Y3, Y3; \
	VANDPD    Y15, Y1, Y1; \
	VMULPD    Y14, Y1, Y2; \
	VADDPD    Y13, Y2, Y2; \
	VCMPPD    $0x06, Y2, Y3, Y2; \
	VPSUBQ    Y2, Y10, Y10; \
	VMAXPD    MAX, Y3, MAX; \
	VCMPPD    $0x06, Y12, Y3, Y2; \
	VPOR      Y2, Y5, Y5; \
	VMULPD    Y6, Y1, Y4; \
	VCMPPD    $0x1E, Y4, Y3, Y4; \
	VMOVMSKPD Y4, AX; \
	TESTL     AX, AX

// RELATIVE keeps the largest d/|b| of each lane in Y7 (a lane's 0/0, NaN,
// leaves it as it was) and sets the threshold Y6 to Y7 * relMargin.
#define RELATIVE \
	VDIVPD       Y1, Y3, Y4; \
	VMAXPD       Y7, Y4, Y7; \
	MOVQ         $0x3fefffffffffe000, AX; \
	MOVQ         AX, X0; \
	VPBROADCASTQ X0, Y0; \
	VMULPD       Y0, Y7, Y6

// SUM stores the sum of the four 64-bit lanes of Y (X its low half) at
// off(R8).
#define SUM(Y, X, off) \
	VEXTRACTI128 $1, Y, X0; \
	VPADDQ       X0, X, X0; \
	VPSHUFD      $0x4e, X0, X1; \
	VPADDQ       X1, X0, X0; \
	VMOVQ        X0, off(R8)

// LARGEST stores the largest of the four float64 lanes of Y (X its low
// half) at off(R8).
#define LARGEST(Y, X, off) \
	VEXTRACTF128 $1, Y, X0; \
	VMAXPD       X0, X, X0; \
	VPERMILPD    $1, X0, X1; \
	VMAXPD       X1, X0, X0; \
	VMOVSD       X0, off(R8)

// func compareFloat32sAVX2(a, b unsafe.Pointer, n int, atol, rtol float64, t *avx2Tally)
TEXT ·compareFloat32sAVX2(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ t+40(FP), R8
	SHRQ $3, CX

	MOVQ         $0x7fffffffffffffff, AX // the sign cleared
	MOVQ         AX, X15
	VPBROADCASTQ X15, Y15
	VBROADCASTSD rtol+32(FP), Y14
	VBROADCASTSD atol+24(FP), Y13
	MOVQ         $0x7fefffffffffffff, AX // the largest finite float64
	MOVQ         AX, X12
	VPBROADCASTQ X12, Y12
	VPXOR        Y11, Y11, Y11 // unequal
	VPXOR        Y10, Y10, Y10 // differing
	VPXOR        Y9, Y9, Y9    // largest d, even groups
	VPXOR        Y8, Y8, Y8    // largest d, odd groups
	VBROADCASTSD 24(R8), Y7    // largest d/|b|, t.maxRel to start with
	MOVQ         $0x3fefffffffffe000, AX // relMargin
	MOVQ         AX, X0
	VPBROADCASTQ X0, Y0
	VMULPD       Y0, Y7, Y6    // threshold
	VPXOR        Y5, Y5, Y5    // d not finite
	TESTQ        CX, CX
	JZ           done

loop:
	GROUP(0, Y9)
	JNZ rel0

back0:
	GROUP(16, Y8)
	JNZ rel1

back1:
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
	JMP  done

rel0:
	RELATIVE
	JMP back0

rel1:
	RELATIVE
	JMP back1

done:
	SUM(Y11, X11, 0)
	SUM(Y10, X10, 8)
	VMAXPD  Y8, Y9, Y9
	LARGEST(Y9, X9, 16)
	LARGEST(Y7, X7, 24)
	XORQ    AX, AX
	VPTEST  Y5, Y5
	SETNE   AL
	MOVQ    AX, 32(R8)
	VZEROUPPER
	RET
