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
DATA bf16QuietHigh<>+0(SB)/4, $0x00400000
GLOBL bf16QuietHigh<>(SB), RODATA|NOPTR, $4

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

// The float32 to 16-bit kernels take 32 elements, 128 bytes, at a time and
// write each 64-byte result with non-temporal stores when stream is true:
// the Go side asks for that only on large conversions, with dst aligned to
// 64 bytes, so that the result goes to memory without first reading it into
// the cache. STORE64 writes X4-X7 to 0-63(DI).
#define STORE64(stream, plain, done) \
	TESTB    stream, stream \
	JZ       plain          \
	VMOVNTDQ X4, (DI)       \
	VMOVNTDQ X5, 16(DI)     \
	VMOVNTDQ X6, 32(DI)     \
	VMOVNTDQ X7, 48(DI)     \
	JMP      done           \
plain:                      \
	VMOVDQU  X4, (DI)       \
	VMOVDQU  X5, 16(DI)     \
	VMOVDQU  X6, 32(DI)     \
	VMOVDQU  X7, 48(DI)     \
done:

// STORE64Y is STORE64 for a result in Y_a and Y_b.
#define STORE64Y(a, b, stream, plain, done) \
	TESTB    stream, stream \
	JZ       plain          \
	VMOVNTDQ a, (DI)        \
	VMOVNTDQ b, 32(DI)      \
	JMP      done           \
plain:                      \
	VMOVDQU  a, (DI)        \
	VMOVDQU  b, 32(DI)      \
done:

// LOAD128 loads the 32 float32s at SI into Y0-Y3.
#define LOAD128 \
	VMOVDQU (SI), Y0   \
	VMOVDQU 32(SI), Y1 \
	VMOVDQU 64(SI), Y2 \
	VMOVDQU 96(SI), Y3

// PACK16 keeps the low words of the dwords in Y_a and Y_b, which fit in 16
// bits, in order in Y_a.
#define PACK16(a, b) \
	VPACKUSDW b, a, a \
	VPERMQ    $0xd8, a, a

// func f32ToF16NearestAVX2(dst, src unsafe.Pointer, n int, stream bool)
TEXT ·f32ToF16NearestAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB stream+24(FP), R8
	SHRQ $5, CX
	JZ   nearestdone

nearestloop:
	LOAD128
	VCVTPS2PH $0, Y0, X4 // imm 0: round to nearest even
	VCVTPS2PH $0, Y1, X5
	VCVTPS2PH $0, Y2, X6
	VCVTPS2PH $0, Y3, X7
	STORE64(R8, nearestplain, nearestnext)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  nearestloop

nearestdone:
	SFENCE
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

// func f32ToF16TruncAVX2(dst, src unsafe.Pointer, n int, stream bool)
TEXT ·f32ToF16TruncAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB stream+24(FP), R8
	VPBROADCASTD absMask<>(SB), Y10
	VPBROADCASTD f16Over<>(SB), Y11
	VPBROADCASTD f32InfPlus1<>(SB), Y12
	VPBROADCASTD signMask<>(SB), Y13
	VPBROADCASTD f32Inf<>(SB), Y14
	SHRQ $5, CX
	JZ   truncdone

truncloop:
	LOAD128
	// Only blocks with a magnitude of 2^16 or more, NaN included, need
	// TRUNC16; the others convert as they are.
	VPAND    Y10, Y0, Y4
	VPAND    Y10, Y1, Y5
	VPAND    Y10, Y2, Y6
	VPAND    Y10, Y3, Y7
	VPMAXUD  Y5, Y4, Y4
	VPMAXUD  Y7, Y6, Y6
	VPMAXUD  Y6, Y4, Y4
	VPCMPGTD Y11, Y4, Y4
	VPTEST   Y4, Y4
	JNZ      truncbig
	VCVTPS2PH $3, Y0, X4
	VCVTPS2PH $3, Y1, X5
	VCVTPS2PH $3, Y2, X6
	VCVTPS2PH $3, Y3, X7
	JMP      truncstore

truncbig:
	TRUNC16(Y0, Y8, Y9, X4)
	TRUNC16(Y1, Y8, Y9, X5)
	TRUNC16(Y2, Y8, Y9, X6)
	TRUNC16(Y3, Y8, Y9, X7)

truncstore:
	STORE64(R8, truncplain, truncnext)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  truncloop

truncdone:
	SFENCE
	VZEROUPPER
	RET

// ANYNAN sets Y4 to all ones in the lanes where one of Y0-Y3 holds a NaN,
// and the flags for JNZ if there is one.
#define ANYNAN \
	VCMPPS $3, Y1, Y0, Y4 \ // unordered
	VCMPPS $3, Y3, Y2, Y5 \
	VPOR   Y5, Y4, Y4     \
	VPTEST Y4, Y4

// QUIET sets the quiet bit, Y14, of the NaNs in Y_x; Y_t is scratch.
#define QUIET(x, t) \
	VCMPPS $3, x, x, t \
	VPAND  Y14, t, t   \
	VPOR   t, x, x

// ROUNDBF16 rounds the float32 in Y_x, not a NaN, to nearest even in its
// top 16 bits and shifts them down: x + 0x7fff + (x>>16)&1, then >> 16.
// Y12 holds 0x7fff and Y13 one; Y_t is scratch.
#define ROUNDBF16(x, t) \
	VPSRLD $16, x, t \
	VPAND  Y13, t, t \
	VPADDD Y12, t, t \
	VPADDD x, t, x   \
	VPSRLD $16, x, x

// BF16NAN is ROUNDBF16 for a Y_x that may hold NaNs: they keep their top
// half, made quiet, instead of being rounded, which could carry into the
// sign. Y_t and Y_u are scratch.
#define BF16NAN(x, t, u) \
	VCMPPS    $3, x, x, t \
	VPAND     Y14, t, u   \
	VPOR      x, u, u     \
	VPSRLD    $16, u, u   \
	ROUNDBF16(x, Y9)      \
	VPBLENDVB t, u, x, x

// func f32ToBF16NearestAVX2(dst, src unsafe.Pointer, n int, stream bool)
TEXT ·f32ToBF16NearestAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB stream+24(FP), R8
	VPBROADCASTD roundBias<>(SB), Y12
	VPBROADCASTD one<>(SB), Y13
	VPBROADCASTD bf16QuietHigh<>(SB), Y14
	SHRQ $5, CX
	JZ   bnearestdone

bnearestloop:
	LOAD128
	ANYNAN
	JNZ  bnearestnan
	ROUNDBF16(Y0, Y4)
	ROUNDBF16(Y1, Y5)
	ROUNDBF16(Y2, Y6)
	ROUNDBF16(Y3, Y7)

bnearestpack:
	PACK16(Y0, Y1)
	PACK16(Y2, Y3)
	STORE64Y(Y0, Y2, R8, bnearestplain, bnearestnext)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  bnearestloop

bnearestdone:
	SFENCE
	VZEROUPPER
	RET

bnearestnan:
	// A NaN keeps its top half, made quiet, instead of being rounded, which
	// could carry into its sign.
	BF16NAN(Y0, Y4, Y8)
	BF16NAN(Y1, Y5, Y8)
	BF16NAN(Y2, Y6, Y8)
	BF16NAN(Y3, Y7, Y8)
	JMP bnearestpack

// func f32ToBF16TruncAVX2(dst, src unsafe.Pointer, n int, stream bool)
TEXT ·f32ToBF16TruncAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB stream+24(FP), R8
	VPBROADCASTD bf16QuietHigh<>(SB), Y14
	SHRQ $5, CX
	JZ   btruncdone

btruncloop:
	LOAD128
	ANYNAN
	JZ   btruncshift
	QUIET(Y0, Y4)
	QUIET(Y1, Y5)
	QUIET(Y2, Y6)
	QUIET(Y3, Y7)

btruncshift:
	VPSRLD $16, Y0, Y0
	VPSRLD $16, Y1, Y1
	VPSRLD $16, Y2, Y2
	VPSRLD $16, Y3, Y3
	PACK16(Y0, Y1)
	PACK16(Y2, Y3)
	STORE64Y(Y0, Y2, R8, btruncplain, btruncnext)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  btruncloop

btruncdone:
	SFENCE
	VZEROUPPER
	RET

DATA subnormalMax<>+0(SB)/4, $0x007fffff
GLOBL subnormalMax<>(SB), RODATA|NOPTR, $4

// The assembler lacks VCVTNEPS2BF16 (AVX512_BF16): these are its EVEX
// encodings for Z0 into Y0 and Z1 into Y2.
#define VCVTNEPS2BF16_Z0_Y0 BYTE $0x62; BYTE $0xF2; BYTE $0x7E; BYTE $0x48; BYTE $0x72; BYTE $0xC0
#define VCVTNEPS2BF16_Z1_Y2 BYTE $0x62; BYTE $0xF2; BYTE $0x7E; BYTE $0x48; BYTE $0x72; BYTE $0xD1

// func f32ToBF16NearestAVX512(dst, src unsafe.Pointer, n int, stream bool)
//
// VCVTNEPS2BF16 rounds to nearest even and quiets NaNs as F32ToBF16 does,
// but treats subnormal inputs as zeros: the blocks that hold one take the
// AVX2 path. Z16-Z18 hold its constants, clear of the AVX2 path's Y12-Y14.
TEXT ·f32ToBF16NearestAVX512(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB stream+24(FP), R8
	VPBROADCASTD absMask<>(SB), Z16
	VPBROADCASTD one<>(SB), Z17
	VPBROADCASTD subnormalMax<>(SB), Z18
	VPBROADCASTD roundBias<>(SB), Y12
	VPBROADCASTD one<>(SB), Y13
	VPBROADCASTD bf16QuietHigh<>(SB), Y14
	SHRQ $5, CX
	JZ   z16done

z16loop:
	VMOVDQU32 (SI), Z0
	VMOVDQU32 64(SI), Z1
	// A subnormal lane: 1 <= |x| <= 0x7fffff, that is |x|-1 below 0x7fffff.
	VPANDD    Z16, Z0, Z4
	VPANDD    Z16, Z1, Z5
	VPSUBD    Z17, Z4, Z4
	VPSUBD    Z17, Z5, Z5
	VPCMPUD   $1, Z18, Z4, K1
	VPCMPUD   $1, Z18, Z5, K2
	KORTESTW  K1, K2
	JNZ       z16slow
	VCVTNEPS2BF16_Z0_Y0
	VCVTNEPS2BF16_Z1_Y2

z16store:
	STORE64Y(Y0, Y2, R8, z16plain, z16next)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  z16loop

z16done:
	SFENCE
	VZEROUPPER
	RET

z16slow:
	LOAD128
	BF16NAN(Y0, Y4, Y8)
	BF16NAN(Y1, Y5, Y8)
	BF16NAN(Y2, Y6, Y8)
	BF16NAN(Y3, Y7, Y8)
	PACK16(Y0, Y1)
	PACK16(Y2, Y3)
	JMP z16store
