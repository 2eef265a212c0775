//go:build amd64 && !purego

#include "textflag.h"

// The bulk conversions with F16C and AVX2. Each function converts n
// elements, a multiple of 16, from src to dst; the Go wrappers in
// convert_amd64.go convert the rest. Loads and stores are unaligned.

DATA absMask<>+0(SB)/4, $0x7fffffff
GLOBL absMask<>(SB), RODATA|NOPTR, $4
DATA signMask<>+0(SB)/4, $0x80000000
GLOBL signMask<>(SB), RODATA|NOPTR, $4
DATA f32Inf<>+0(SB)/4, $0x7f800000
GLOBL f32Inf<>(SB), RODATA|NOPTR, $4
DATA f16Over<>+0(SB)/4, $0x477fffff
GLOBL f16Over<>(SB), RODATA|NOPTR, $4
DATA f32InfPlus1<>+0(SB)/4, $0x7f800001
GLOBL f32InfPlus1<>(SB), RODATA|NOPTR, $4
DATA roundBias<>+0(SB)/4, $0x00007fff
GLOBL roundBias<>(SB), RODATA|NOPTR, $4
DATA one<>+0(SB)/4, $0x00000001
GLOBL one<>(SB), RODATA|NOPTR, $4
DATA bf16Quiet<>+0(SB)/4, $0x00000040
GLOBL bf16Quiet<>(SB), RODATA|NOPTR, $4

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func f16ToF32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   f16done

f16loop:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       f16loop

f16done:
	VZEROUPPER
	RET

// func bf16ToF32AVX2(dst, src unsafe.Pointer, n int)
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   bf16done

bf16loop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       bf16loop

bf16done:
	VZEROUPPER
	RET

// func f32ToF16NearestAVX2(dst, src unsafe.Pointer, n int)
TEXT ·f32ToF16NearestAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   nearestdone

nearestloop:
	VMOVUPS   (SI), Y0
	VMOVUPS   32(SI), Y1
	VCVTPS2PH $0, Y0, (DI) // imm 0: round to nearest even
	VCVTPS2PH $0, Y1, 16(DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       nearestloop

nearestdone:
	VZEROUPPER
	RET

// TRUNC16 converts the 8 float32s in Y_in toward zero into X_out, after
// turning those that overflow F16 (2^16 and up, but not NaN) into
// infinities of their sign, since the instruction's round-toward-zero would
// saturate them at the largest finite F16 instead. Y10-Y14 hold the
// constants; Y_t1 and Y_t2 are scratch.
#define TRUNC16(in, t1, t2, out) \
	VPAND     Y10, in, t1  \ // |x|
	VPCMPGTD  Y11, t1, t2  \ // |x| > 0x477fffff
	VPCMPGTD  t1, Y12, t1  \ // 0x7f800001 > |x|
	VPAND     t1, t2, t2   \ // overflows
	VPAND     Y13, in, t1  \ // sign
	VPOR      Y14, t1, t1  \ // ±Inf
	VPBLENDVB t2, t1, in, in \
	VCVTPS2PH $3, in, out    // imm 3: toward zero

// func f32ToF16TruncAVX2(dst, src unsafe.Pointer, n int)
TEXT ·f32ToF16TruncAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTD absMask<>(SB), Y10
	VPBROADCASTD f16Over<>(SB), Y11
	VPBROADCASTD f32InfPlus1<>(SB), Y12
	VPBROADCASTD signMask<>(SB), Y13
	VPBROADCASTD f32Inf<>(SB), Y14
	SHRQ $4, CX
	JZ   truncdone

truncloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	TRUNC16(Y0, Y2, Y3, X4)
	TRUNC16(Y1, Y5, Y6, X7)
	VMOVDQU X4, (DI)
	VMOVDQU X7, 16(DI)
	ADDQ    $64, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     truncloop

truncdone:
	VZEROUPPER
	RET

// QUIETNAN replaces, in the 8 words-in-dwords of out, those whose float32 in
// Y_in is a NaN with the float32's top half and the quiet bit. Y10 holds
// the absolute-value mask, Y11 the bits of +Inf, Y14 the quiet bit.
#define QUIETNAN(in, out, t1, t2) \
	VPAND     Y10, in, t1   \
	VPCMPGTD  Y11, t1, t1   \ // NaN
	VPSRLD    $16, in, t2   \
	VPOR      Y14, t2, t2   \
	VPBLENDVB t1, t2, out, out

// func f32ToBF16NearestAVX2(dst, src unsafe.Pointer, n int)
TEXT ·f32ToBF16NearestAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTD absMask<>(SB), Y10
	VPBROADCASTD f32Inf<>(SB), Y11
	VPBROADCASTD roundBias<>(SB), Y12
	VPBROADCASTD one<>(SB), Y13
	VPBROADCASTD bf16Quiet<>(SB), Y14
	SHRQ $4, CX
	JZ   bnearestdone

bnearestloop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	// x + 0x7fff + (x>>16)&1, then >> 16
	VPSRLD  $16, Y0, Y2
	VPAND   Y13, Y2, Y2
	VPADDD  Y12, Y2, Y2
	VPADDD  Y0, Y2, Y2
	VPSRLD  $16, Y2, Y2
	VPSRLD  $16, Y1, Y3
	VPAND   Y13, Y3, Y3
	VPADDD  Y12, Y3, Y3
	VPADDD  Y1, Y3, Y3
	VPSRLD  $16, Y3, Y3
	QUIETNAN(Y0, Y2, Y4, Y5)
	QUIETNAN(Y1, Y3, Y6, Y7)
	VPACKUSDW Y3, Y2, Y2
	VPERMQ    $0xd8, Y2, Y2
	VMOVDQU   Y2, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       bnearestloop

bnearestdone:
	VZEROUPPER
	RET

// func f32ToBF16TruncAVX2(dst, src unsafe.Pointer, n int)
TEXT ·f32ToBF16TruncAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VPBROADCASTD absMask<>(SB), Y10
	VPBROADCASTD f32Inf<>(SB), Y11
	VPBROADCASTD bf16Quiet<>(SB), Y14
	SHRQ $4, CX
	JZ   btruncdone

btruncloop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VPSRLD  $16, Y0, Y2
	VPSRLD  $16, Y1, Y3
	QUIETNAN(Y0, Y2, Y4, Y5)
	QUIETNAN(Y1, Y3, Y6, Y7)
	VPACKUSDW Y3, Y2, Y2
	VPERMQ    $0xd8, Y2, Y2
	VMOVDQU   Y2, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       btruncloop

btruncdone:
	VZEROUPPER
	RET
