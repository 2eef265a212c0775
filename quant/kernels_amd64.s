//go:build amd64 && !purego

#include "textflag.h"

// func maxAbsBitsAVX2(x unsafe.Pointer, n int) uint32
TEXT ·maxAbsBitsAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	MOVL         $0x7fffffff, AX
	MOVQ         AX, X8
	VPBROADCASTD X8, Y8
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	TESTQ CX, CX
	JZ   reduce

maxloop:
	// Four chains of lane-wise maxima of the bits, signs cleared: for
	// non-negative floats the order of the bits is that of the values.
	VPAND   (SI), Y8, Y4
	VPAND   32(SI), Y8, Y5
	VPAND   64(SI), Y8, Y6
	VPAND   96(SI), Y8, Y7
	VPMAXUD Y4, Y0, Y0
	VPMAXUD Y5, Y1, Y1
	VPMAXUD Y6, Y2, Y2
	VPMAXUD Y7, Y3, Y3
	ADDQ    $128, SI
	DECQ    CX
	JNZ     maxloop

reduce:
	VPMAXUD      Y1, Y0, Y0
	VPMAXUD      Y3, Y2, Y2
	VPMAXUD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPMAXUD      X1, X0, X0
	VMOVD        X0, AX
	VZEROUPPER
	MOVL         AX, ret+16(FP)
	RET

// packOrder is the order of the 32-bit groups VPERMD gathers after two
// VPACKSSDW and a VPACKSSWB, which interleave the 128-bit lanes.
DATA packOrder<>+0(SB)/4, $0
DATA packOrder<>+4(SB)/4, $4
DATA packOrder<>+8(SB)/4, $1
DATA packOrder<>+12(SB)/4, $5
DATA packOrder<>+16(SB)/4, $2
DATA packOrder<>+20(SB)/4, $6
DATA packOrder<>+24(SB)/4, $3
DATA packOrder<>+28(SB)/4, $7
GLOBL packOrder<>(SB), RODATA|NOPTR, $32

// BROADCAST puts the 32-bit constant v in every lane of Y, through X (the
// low half of Y).
#define BROADCAST(v, X, Y) \
	MOVL         $v, AX; \
	MOVQ         AX, X; \
	VPBROADCASTD X, Y

// START loads the arguments q (DI), x (SI), n / 32 (CX, jumping to done if
// 0) and the float32 argument named arg (Y15, in every lane) of a loop
// that writes int8 values, and its constants: packOrder (Y9), 127.0 (Y14),
// -128.0 (Y13).
#define START(arg, done) \
	MOVQ         q+0(FP), DI; \
	MOVQ         x+8(FP), SI; \
	MOVQ         n+16(FP), CX; \
	SHRQ         $5, CX; \
	JZ           done; \
	VBROADCASTSS arg+24(FP), Y15; \
	VMOVDQU      packOrder<>(SB), Y9; \
	BROADCAST(0x42fe0000, X14, Y14); \
	BROADCAST(0xc3000000, X13, Y13)

// LOAD4 loads the 32 float32 values at SI into Y0..Y3.
#define LOAD4 \
	VMOVUPS (SI), Y0; \
	VMOVUPS 32(SI), Y1; \
	VMOVUPS 64(SI), Y2; \
	VMOVUPS 96(SI), Y3

// CLAMP clamps the float32 values of Y to [-128, 127], held in Y13 and
// Y14, so that any finite value converts to an int32 in range.
#define CLAMP(Y) \
	VMINPS Y14, Y, Y; \
	VMAXPS Y13, Y, Y

// CONVERT4 clamps the float32 values of Y0..Y3 and converts them to int32,
// rounding half to even (the rounding mode Go keeps in MXCSR).
#define CONVERT4 \
	CLAMP(Y0); \
	CLAMP(Y1); \
	CLAMP(Y2); \
	CLAMP(Y3); \
	VCVTPS2DQ Y0, Y0; \
	VCVTPS2DQ Y1, Y1; \
	VCVTPS2DQ Y2, Y2; \
	VCVTPS2DQ Y3, Y3

// NEXT saturates the 32 int32 values of Y0..Y3 to int8, puts them back in
// order (two VPACKSSDW and a VPACKSSWB interleave the 128-bit lanes, which
// VPERMD undoes), stores them at DI, and goes on to the next 32 values.
#define NEXT(loop) \
	VPACKSSDW Y1, Y0, Y0; \
	VPACKSSDW Y3, Y2, Y2; \
	VPACKSSWB Y2, Y0, Y0; \
	VPERMD    Y0, Y9, Y0; \
	VMOVDQU   Y0, (DI); \
	ADDQ      $128, SI; \
	ADDQ      $32, DI; \
	DECQ      CX; \
	JNZ       loop; \
	VZEROUPPER

// func quantF32DivAVX2(q, x unsafe.Pointer, n int, scale float32)
TEXT ·quantF32DivAVX2(SB), NOSPLIT, $0-28
	START(scale, divdone)

divloop:
	// The quotients, rounded to float32 as IEEE 754 divides.
	LOAD4
	VDIVPS Y15, Y0, Y0
	VDIVPS Y15, Y1, Y1
	VDIVPS Y15, Y2, Y2
	VDIVPS Y15, Y3, Y3
	CONVERT4
	NEXT(divloop)

divdone:
	RET

// ROUNDTO rounds the float32 values of Y to fewer mantissa bits, to nearest
// even, with integer arithmetic on their bits: u += bias + (u >> shift & 1),
// then u &= mask. X8 holds shift, Y7 1, Y6 bias, Y5 mask; T is a scratch
// register.
#define ROUNDTO(Y, T) \
	VPSRLD X8, Y, T; \
	VPAND  Y7, T, T; \
	VPADDD Y6, T, T; \
	VPADDD T, Y, Y; \
	VPAND  Y5, Y, Y

// func quantRoundDivAVX2(q, x unsafe.Pointer, n int, scale float32, shift, bias, mask uint32)
TEXT ·quantRoundDivAVX2(SB), NOSPLIT, $0-40
	START(scale, rounddone)
	MOVL shift+28(FP), AX
	MOVQ AX, X8
	BROADCAST(1, X7, Y7)
	MOVL bias+32(FP), AX
	MOVQ AX, X6
	VPBROADCASTD X6, Y6
	MOVL mask+36(FP), AX
	MOVQ AX, X5
	VPBROADCASTD X5, Y5

roundloop:
	// The quotients, rounded to float32 and then to the weight's dtype.
	LOAD4
	VDIVPS Y15, Y0, Y0
	VDIVPS Y15, Y1, Y1
	VDIVPS Y15, Y2, Y2
	VDIVPS Y15, Y3, Y3
	ROUNDTO(Y0, Y4)
	ROUNDTO(Y1, Y10)
	ROUNDTO(Y2, Y11)
	ROUNDTO(Y3, Y12)
	CONVERT4
	NEXT(roundloop)

rounddone:
	RET

// ROUNDAWAY rounds the float32 values of Y, which hold x * factor, to
// integers half away from zero, clamps them and converts them to int32:
// t = trunc(|y|) and |y| - t (exact) decide whether t goes up by one, and
// y's sign is put back. Y10 holds 0x7fffffff, Y11 0.5, Y12 1.0; A and T
// are scratch registers.
#define ROUNDAWAY(Y, A, T) \
	VANDPS     Y10, Y, A; \
	VROUNDPS   $3, A, T; \
	VSUBPS     T, A, A; \
	VCMPPS     $0x0d, Y11, A, A; \
	VANDPS     Y12, A, A; \
	VADDPS     A, T, T; \
	VANDNPS    Y, Y10, Y; \
	VORPS      T, Y, Y; \
	CLAMP(Y); \
	VCVTTPS2DQ Y, Y

// func roundAwayAVX2(q, x unsafe.Pointer, n int, factor float32)
TEXT ·roundAwayAVX2(SB), NOSPLIT, $0-28
	START(factor, awaydone)
	BROADCAST(0x7fffffff, X10, Y10)
	BROADCAST(0x3f000000, X11, Y11)
	BROADCAST(0x3f800000, X12, Y12)

awayloop:
	VMULPS (SI), Y15, Y0
	VMULPS 32(SI), Y15, Y1
	VMULPS 64(SI), Y15, Y2
	VMULPS 96(SI), Y15, Y3
	ROUNDAWAY(Y0, Y4, Y5)
	ROUNDAWAY(Y1, Y6, Y7)
	ROUNDAWAY(Y2, Y4, Y5)
	ROUNDAWAY(Y3, Y6, Y7)
	NEXT(awayloop)

awaydone:
	RET
