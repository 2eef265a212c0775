//go:build amd64 && !purego

#include "textflag.h"

// func mxfp4TileAVX2(out *byte, line int, blocks *byte, bstride int, scales *[32]byte, scratch *[512]byte, lut *[mxfp4LUTSize]byte, f32 bool)
//
// The 16 bytes of each of 32 rows, blocks+i*bstride, are transposed to
// 16 vectors of the 32 rows' byte k (rows 0-15 in the low lane, 16-31 in
// the high one: two 16x16 byte transposes at once, by unpacks of bytes,
// words, doublewords and quadwords, the halfway vectors in scratch); the
// low and high nibbles of byte k are codes 2k and 2k+1, whose BF16 bits
// at scale 127 come from two byte shuffles (lut's low and high bytes),
// and the row's exponent, (scale-127)<<7, is added to every code but ±0.
// Output row c, 32 values, is written at out+c*line: BF16, or with f32
// the float32 values, whose bits are the BF16 ones followed by 16 zeros.
TEXT ·mxfp4TileAVX2(SB), NOSPLIT, $0-57
	MOVQ out+0(FP), DI
	MOVQ line+8(FP), DX
	MOVQ blocks+16(FP), SI
	MOVQ bstride+24(FP), BX
	MOVQ scales+32(FP), R8
	MOVQ scratch+40(FP), R9
	MOVQ lut+48(FP), R10
	MOVBQZX f32+56(FP), R13

	// Rows 0-15 from SI, 16-31 from R11.
	MOVQ BX, R11
	SHLQ $4, R11
	ADDQ SI, R11

	MOVQ $4, CX
	MOVQ R9, R12
rows:
	VMOVDQU (SI), X0
	VINSERTI128 $1, (R11), Y0, Y0
	ADDQ BX, SI
	ADDQ BX, R11
	VMOVDQU (SI), X1
	VINSERTI128 $1, (R11), Y1, Y1
	ADDQ BX, SI
	ADDQ BX, R11
	VMOVDQU (SI), X2
	VINSERTI128 $1, (R11), Y2, Y2
	ADDQ BX, SI
	ADDQ BX, R11
	VMOVDQU (SI), X3
	VINSERTI128 $1, (R11), Y3, Y3
	ADDQ BX, SI
	ADDQ BX, R11
	VPUNPCKLBW Y1, Y0, Y4
	VPUNPCKHBW Y1, Y0, Y5
	VPUNPCKLBW Y3, Y2, Y6
	VPUNPCKHBW Y3, Y2, Y7
	VPUNPCKLWD Y6, Y4, Y0 // bytes 0-3 of the 4 rows
	VPUNPCKHWD Y6, Y4, Y1 // 4-7
	VPUNPCKLWD Y7, Y5, Y2 // 8-11
	VPUNPCKHWD Y7, Y5, Y3 // 12-15
	VMOVDQU Y0, 0(R12)
	VMOVDQU Y1, 128(R12)
	VMOVDQU Y2, 256(R12)
	VMOVDQU Y3, 384(R12)
	ADDQ $32, R12
	DECQ CX
	JNZ rows

	// The constants, and each row's exponent as words, in the order of
	// the words that the byte unpacks below give: rows 0-7 and 16-23
	// (Y12), 8-15 and 24-31 (Y13).
	VMOVDQU 0(R10), Y8   // low bytes of the codes' bits
	VMOVDQU 32(R10), Y9  // high bytes
	VMOVDQU 64(R10), Y10 // 0x0f bytes
	VMOVDQU 96(R10), Y11 // 0x7fff words
	VMOVDQU 128(R10), Y14 // 127 words
	VMOVDQU (R8), Y0
	VPXOR Y15, Y15, Y15
	VPUNPCKLBW Y15, Y0, Y12
	VPUNPCKHBW Y15, Y0, Y13
	VPSUBW Y14, Y12, Y12
	VPSUBW Y14, Y13, Y13
	VPSLLW $7, Y12, Y12
	VPSLLW $7, Y13, Y13

// DECODE leaves the BF16 bits of the codes N (bytes, rows 0-31) in Y14
// (rows 0-7, 16-23) and Y15 (rows 8-15, 24-31).
#define DECODE(N) \
	VPSHUFB N, Y8, Y6 \
	VPSHUFB N, Y9, Y7 \
	VPUNPCKLBW Y7, Y6, Y14 \
	VPUNPCKHBW Y7, Y6, Y15 \
	VPAND Y11, Y14, Y6 \
	VPSIGNW Y6, Y12, Y6 \
	VPADDW Y6, Y14, Y14 \
	VPAND Y11, Y15, Y7 \
	VPSIGNW Y7, Y13, Y7 \
	VPADDW Y7, Y15, Y15

#define STORE16 \
	VMOVDQU X14, 0(DI) \
	VMOVDQU X15, 16(DI) \
	VEXTRACTI128 $1, Y14, 32(DI) \
	VEXTRACTI128 $1, Y15, 48(DI) \
	ADDQ DX, DI

#define STORE32 \
	VPMOVZXWD X14, Y6 \
	VPSLLD $16, Y6, Y6 \
	VMOVDQU Y6, 0(DI) \
	VPMOVZXWD X15, Y7 \
	VPSLLD $16, Y7, Y7 \
	VMOVDQU Y7, 32(DI) \
	VEXTRACTI128 $1, Y14, X6 \
	VPMOVZXWD X6, Y6 \
	VPSLLD $16, Y6, Y6 \
	VMOVDQU Y6, 64(DI) \
	VEXTRACTI128 $1, Y15, X7 \
	VPMOVZXWD X7, Y7 \
	VPSLLD $16, Y7, Y7 \
	VMOVDQU Y7, 96(DI) \
	ADDQ DX, DI

#define BYTE16(X) \
	VPAND Y10, X, Y4 \
	VPSRLW $4, X, Y5 \
	VPAND Y10, Y5, Y5 \
	DECODE(Y4) \
	STORE16 \
	DECODE(Y5) \
	STORE16

#define BYTE32(X) \
	VPAND Y10, X, Y4 \
	VPSRLW $4, X, Y5 \
	VPAND Y10, Y5, Y5 \
	DECODE(Y4) \
	STORE32 \
	DECODE(Y5) \
	STORE32

	MOVQ $4, CX
	MOVQ R9, R12
bytes:
	VMOVDQU 0(R12), Y0  // rows 0-3, bytes 4j..4j+3
	VMOVDQU 32(R12), Y1 // rows 4-7
	VMOVDQU 64(R12), Y2 // rows 8-11
	VMOVDQU 96(R12), Y3 // rows 12-15
	VPUNPCKLDQ Y1, Y0, Y4
	VPUNPCKHDQ Y1, Y0, Y5
	VPUNPCKLDQ Y3, Y2, Y6
	VPUNPCKHDQ Y3, Y2, Y7
	VPUNPCKLQDQ Y6, Y4, Y0 // byte 4j of rows 0-15
	VPUNPCKHQDQ Y6, Y4, Y1 // 4j+1
	VPUNPCKLQDQ Y7, Y5, Y2 // 4j+2
	VPUNPCKHQDQ Y7, Y5, Y3 // 4j+3
	TESTQ R13, R13
	JNZ wide
	BYTE16(Y0)
	BYTE16(Y1)
	BYTE16(Y2)
	BYTE16(Y3)
	JMP next
wide:
	BYTE32(Y0)
	BYTE32(Y1)
	BYTE32(Y2)
	BYTE32(Y3)
next:
	ADDQ $128, R12
	DECQ CX
	JNZ bytes

	VZEROUPPER
	RET

// func fp8LookupAVX2(dst *byte, src *byte, n int, lut *[256]uint32, f32 bool)
//
// Writes lut[src[i]] for the n bytes of src (a multiple of 16), as 16-bit
// values (the entries' low halves) or, with f32, 32-bit ones: eight
// entries gathered at a time.
TEXT ·fp8LookupAVX2(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ lut+24(FP), R8
	MOVBQZX f32+32(FP), R9
	SHRQ $4, CX
	JZ done
	TESTQ R9, R9
	JNZ wide32
loop16:
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPCMPEQD Y4, Y4, Y4
	VPCMPEQD Y5, Y5, Y5
	VPGATHERDD Y4, (R8)(Y0*4), Y2
	VPGATHERDD Y5, (R8)(Y1*4), Y3
	VPACKUSDW Y3, Y2, Y2
	VPERMQ $0xd8, Y2, Y2
	VMOVDQU Y2, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ loop16
	JMP done
wide32:
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPCMPEQD Y4, Y4, Y4
	VPCMPEQD Y5, Y5, Y5
	VPGATHERDD Y4, (R8)(Y0*4), Y2
	VPGATHERDD Y5, (R8)(Y1*4), Y3
	VMOVDQU Y2, (DI)
	VMOVDQU Y3, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JNZ wide32
done:
	VZEROUPPER
	RET
