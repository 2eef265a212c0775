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

// func mxLookupAVX2(dst *byte, src *byte, groups int, scales *byte, tabs *uint32, f32 bool)
//
// Writes, for each group g of 32 bytes of src, tabs[scales[g]*256+b] for
// each byte b of the group: the entries' low 16 bits, little-endian, or
// with f32 all 32; eight entries gathered at a time.
TEXT ·mxLookupAVX2(SB), NOSPLIT, $0-41
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ groups+16(FP), CX
	MOVQ scales+24(FP), DX
	MOVQ tabs+32(FP), R10
	MOVBQZX f32+40(FP), R9
	TESTQ CX, CX
	JZ mxdone
	TESTQ R9, R9
	JNZ mxwide
mx16:
	MOVBQZX (DX), AX
	SHLQ $10, AX
	LEAQ (R10)(AX*1), R8 // the group's table
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPMOVZXBD 16(SI), Y6
	VPMOVZXBD 24(SI), Y7
	VPCMPEQD Y4, Y4, Y4
	VPCMPEQD Y5, Y5, Y5
	VPGATHERDD Y4, (R8)(Y0*4), Y2
	VPGATHERDD Y5, (R8)(Y1*4), Y3
	VPCMPEQD Y4, Y4, Y4
	VPCMPEQD Y5, Y5, Y5
	VPGATHERDD Y4, (R8)(Y6*4), Y8
	VPGATHERDD Y5, (R8)(Y7*4), Y9
	VPACKUSDW Y3, Y2, Y2
	VPERMQ $0xd8, Y2, Y2
	VPACKUSDW Y9, Y8, Y8
	VPERMQ $0xd8, Y8, Y8
	VMOVDQU Y2, (DI)
	VMOVDQU Y8, 32(DI)
	INCQ DX
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ mx16
	JMP mxdone
mxwide:
	MOVBQZX (DX), AX
	SHLQ $10, AX
	LEAQ (R10)(AX*1), R8
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPMOVZXBD 16(SI), Y6
	VPMOVZXBD 24(SI), Y7
	VPCMPEQD Y4, Y4, Y4
	VPCMPEQD Y5, Y5, Y5
	VPGATHERDD Y4, (R8)(Y0*4), Y2
	VPGATHERDD Y5, (R8)(Y1*4), Y3
	VPCMPEQD Y4, Y4, Y4
	VPCMPEQD Y5, Y5, Y5
	VPGATHERDD Y4, (R8)(Y6*4), Y8
	VPGATHERDD Y5, (R8)(Y7*4), Y9
	VMOVDQU Y2, (DI)
	VMOVDQU Y3, 32(DI)
	VMOVDQU Y8, 64(DI)
	VMOVDQU Y9, 96(DI)
	INCQ DX
	ADDQ $32, SI
	ADDQ $128, DI
	DECQ CX
	JNZ mxwide
mxdone:
	VZEROUPPER
	RET

// nibbleSplit gathers byte k of four little-endian words into the
// k-th word: bytes 0,4,8,12, 1,5,9,13, 2,6,10,14, 3,7,11,15.
DATA nibbleSplit<>+0(SB)/8, $0x0d0905010c080400
DATA nibbleSplit<>+8(SB)/8, $0x0f0b07030e0a0602
GLOBL nibbleSplit<>(SB), RODATA|NOPTR, $16

// nibbleMask is 32 bytes 0x0f.
DATA nibbleMask<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbleMask<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbleMask<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nibbleMask<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nibbleMask<>(SB), RODATA|NOPTR, $32

// func nibblesAVX2(dst *byte, src *byte, n int, lut *[16]uint32, f32 bool)
//
// Writes lut[c] for the codes c of the n bytes of src (a multiple of 16),
// two a byte, the low nibble first: the entries' low 16 bits, little-
// endian, or with f32 all 32. The table's bytes k (of its 16 entries) are
// transposed into Yk, each a byte shuffle's table: 32 codes a step, in
// order in a vector, looked up by two shuffles (four for f32) whose bytes
// are then interleaved into the entries.
TEXT ·nibblesAVX2(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ lut+24(FP), R8
	MOVBQZX f32+32(FP), R9
	VMOVDQU 0(R8), X0
	VMOVDQU 16(R8), X1
	VMOVDQU 32(R8), X2
	VMOVDQU 48(R8), X3
	VMOVDQU nibbleSplit<>(SB), X4
	VPSHUFB X4, X0, X0 // words: byte 0 of entries 0-3, byte 1, 2, 3
	VPSHUFB X4, X1, X1 // of entries 4-7
	VPSHUFB X4, X2, X2 // 8-11
	VPSHUFB X4, X3, X3 // 12-15
	VPUNPCKLDQ X1, X0, X4
	VPUNPCKHDQ X1, X0, X5
	VPUNPCKLDQ X3, X2, X6
	VPUNPCKHDQ X3, X2, X7
	VPUNPCKLQDQ X6, X4, X0 // byte 0 of the 16 entries
	VPUNPCKHQDQ X6, X4, X1 // byte 1
	VPUNPCKLQDQ X7, X5, X2 // byte 2
	VPUNPCKHQDQ X7, X5, X3 // byte 3
	VINSERTI128 $1, X0, Y0, Y0
	VINSERTI128 $1, X1, Y1, Y1
	VINSERTI128 $1, X2, Y2, Y2
	VINSERTI128 $1, X3, Y3, Y3
	VMOVDQU nibbleMask<>(SB), Y15
	SHRQ $4, CX
	JZ nibdone
	TESTQ R9, R9
	JNZ nibwide

// CODES leaves the 32 codes of the 16 bytes at SI in Y10, in order.
#define CODES \
	VMOVDQU (SI), X8 \
	VPSRLW $4, X8, X9 \
	VPAND X15, X8, X8 \
	VPAND X15, X9, X9 \
	VPUNPCKLBW X9, X8, X10 \
	VPUNPCKHBW X9, X8, X11 \
	VINSERTI128 $1, X11, Y10, Y10

nib16:
	CODES
	VPSHUFB Y10, Y0, Y12
	VPSHUFB Y10, Y1, Y13
	VPUNPCKLBW Y13, Y12, Y8 // codes 0-7 | 16-23
	VPUNPCKHBW Y13, Y12, Y9 // 8-15 | 24-31
	VPERM2I128 $0x20, Y9, Y8, Y10
	VPERM2I128 $0x31, Y9, Y8, Y11
	VMOVDQU Y10, 0(DI)
	VMOVDQU Y11, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JNZ nib16
	JMP nibdone
nibwide:
	CODES
	VPSHUFB Y10, Y0, Y4
	VPSHUFB Y10, Y1, Y5
	VPSHUFB Y10, Y2, Y6
	VPSHUFB Y10, Y3, Y7
	VPUNPCKLBW Y5, Y4, Y8   // low words, codes 0-7 | 16-23
	VPUNPCKHBW Y5, Y4, Y9   // 8-15 | 24-31
	VPUNPCKLBW Y7, Y6, Y11  // high words
	VPUNPCKHBW Y7, Y6, Y12
	VPUNPCKLWD Y11, Y8, Y4  // codes 0-3 | 16-19
	VPUNPCKHWD Y11, Y8, Y5  // 4-7 | 20-23
	VPUNPCKLWD Y12, Y9, Y6  // 8-11 | 24-27
	VPUNPCKHWD Y12, Y9, Y7  // 12-15 | 28-31
	VPERM2I128 $0x20, Y5, Y4, Y8
	VPERM2I128 $0x20, Y7, Y6, Y9
	VPERM2I128 $0x31, Y5, Y4, Y11
	VPERM2I128 $0x31, Y7, Y6, Y12
	VMOVDQU Y8, 0(DI)
	VMOVDQU Y9, 32(DI)
	VMOVDQU Y11, 64(DI)
	VMOVDQU Y12, 96(DI)
	ADDQ $16, SI
	ADDQ $128, DI
	DECQ CX
	JNZ nibwide
nibdone:
	VZEROUPPER
	RET

// BF16ROUND leaves in R the BF16 bits of the float32 values X, rounded
// to nearest even (0xffff for a NaN), in the low halves of its words; T
// is a temporary, Y4 ones, Y5 0x7fff words.
#define BF16ROUND(X, R, T) \
	VPSRLD $16, X, R \
	VPAND Y4, R, R \
	VPADDD Y5, R, R \
	VPADDD X, R, R \
	VPSRLD $16, R, R \
	VCMPPS $3, X, X, T \
	VPSRLD $16, T, T \
	VPOR T, R, R

// func bf16TableAVX2(tab *uint32, codes *float32, n int, s float32, z float32, shift uint64)
//
// Sets tab[i], for the n codes (a multiple of 8), to the BF16 bits of
// codes[i]-z rounded to BF16, times s, rounded to BF16 (bf16Bits), shifted
// left by shift bits: ctTable's rule for a BF16 scale.
TEXT ·bf16TableAVX2(SB), NOSPLIT, $0-40
	MOVQ tab+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS s+24(FP), Y0
	VBROADCASTSS z+28(FP), Y1
	VMOVQ shift+32(FP), X2
	VPCMPEQD Y3, Y3, Y3
	VPSRLD $31, Y3, Y4 // 1
	VPSRLD $17, Y3, Y5 // 0x7fff
	SHRQ $3, CX
	JZ tabdone
tabloop:
	VMOVUPS (SI), Y6
	VSUBPS Y1, Y6, Y6
	BF16ROUND(Y6, Y7, Y8)
	VPSLLD $16, Y7, Y6
	VMULPS Y0, Y6, Y6
	BF16ROUND(Y6, Y7, Y8)
	VPSLLD X2, Y7, Y7
	VMOVDQU Y7, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ tabloop
tabdone:
	VZEROUPPER
	RET

// NGTABLES loads the bytes K (at K*16) of the tables of the scales AX and
// BX (offsets in R10's tables of 64 bytes) into the low and high lanes of R.
#define NGTABLES(K, R, X) \
	VMOVDQU K(R10)(AX*1), X \
	VINSERTI128 $1, K(R10)(BX*1), R, R

// NGSCALES sets AX and BX to the offsets of the tables of the step's two
// groups of 8 bytes (the same for a group of 16), and moves DX on.
#define NGSCALES \
	MOVBQZX (DX), AX \
	MOVBQZX (DX)(R11*1), BX \
	LEAQ 1(DX)(R11*1), DX \
	SHLQ $6, AX \
	SHLQ $6, BX

// func nibbleGroupsAVX2(dst *byte, src *byte, steps int, scales *byte, second int, luts *byte, f32 bool)
//
// nibblesAVX2 for steps of 16 bytes of src whose halves each have their
// own table: the first's of scale scales[0], the second's of scale
// scales[second] (second 1 for groups of 8 bytes, 0 for groups of 16),
// scales moving on by second+1 a step. Scale e's table is the 64 bytes
// luts[64*e:], bytes k of its 16 entries at 16*k.
TEXT ·nibbleGroupsAVX2(SB), NOSPLIT, $0-49
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ steps+16(FP), CX
	MOVQ scales+24(FP), DX
	MOVQ second+32(FP), R11
	MOVQ luts+40(FP), R10
	MOVBQZX f32+48(FP), R9
	VMOVDQU nibbleMask<>(SB), Y15
	TESTQ CX, CX
	JZ ngdone
	TESTQ R9, R9
	JNZ ngwide
ng16:
	NGSCALES
	NGTABLES(0, Y0, X0)
	NGTABLES(16, Y1, X1)
	CODES
	VPSHUFB Y10, Y0, Y12
	VPSHUFB Y10, Y1, Y13
	VPUNPCKLBW Y13, Y12, Y8
	VPUNPCKHBW Y13, Y12, Y9
	VPERM2I128 $0x20, Y9, Y8, Y10
	VPERM2I128 $0x31, Y9, Y8, Y11
	VMOVDQU Y10, 0(DI)
	VMOVDQU Y11, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JNZ ng16
	JMP ngdone
ngwide:
	NGSCALES
	NGTABLES(0, Y0, X0)
	NGTABLES(16, Y1, X1)
	NGTABLES(32, Y2, X2)
	NGTABLES(48, Y3, X3)
	CODES
	VPSHUFB Y10, Y0, Y4
	VPSHUFB Y10, Y1, Y5
	VPSHUFB Y10, Y2, Y6
	VPSHUFB Y10, Y3, Y7
	VPUNPCKLBW Y5, Y4, Y8
	VPUNPCKHBW Y5, Y4, Y9
	VPUNPCKLBW Y7, Y6, Y11
	VPUNPCKHBW Y7, Y6, Y12
	VPUNPCKLWD Y11, Y8, Y4
	VPUNPCKHWD Y11, Y8, Y5
	VPUNPCKLWD Y12, Y9, Y6
	VPUNPCKHWD Y12, Y9, Y7
	VPERM2I128 $0x20, Y5, Y4, Y8
	VPERM2I128 $0x20, Y7, Y6, Y9
	VPERM2I128 $0x31, Y5, Y4, Y11
	VPERM2I128 $0x31, Y7, Y6, Y12
	VMOVDQU Y8, 0(DI)
	VMOVDQU Y9, 32(DI)
	VMOVDQU Y11, 64(DI)
	VMOVDQU Y12, 96(DI)
	ADDQ $16, SI
	ADDQ $128, DI
	DECQ CX
	JNZ ngwide
ngdone:
	VZEROUPPER
	RET

// sixOffsets and sixShifts place the 6-bit codes of 6 bytes, two
// little-endian words of 24 bits: code k is at bit 6k of the first word
// (bytes 0-2), at bit 8+6(k-4) of bytes 2-5 for the second word's.
DATA sixOffsets<>+0(SB)/8, $0
DATA sixOffsets<>+8(SB)/8, $0
DATA sixOffsets<>+16(SB)/8, $0x0000000200000002
DATA sixOffsets<>+24(SB)/8, $0x0000000200000002
GLOBL sixOffsets<>(SB), RODATA|NOPTR, $32
DATA sixShifts<>+0(SB)/8, $0x0000000600000000
DATA sixShifts<>+8(SB)/8, $0x000000120000000c
DATA sixShifts<>+16(SB)/8, $0x0000000e00000008
DATA sixShifts<>+24(SB)/8, $0x0000001a00000014
GLOBL sixShifts<>(SB), RODATA|NOPTR, $32

// func mx6LookupAVX2(dst *byte, src *byte, groups int, scales *byte, tabs *uint32, f32 bool)
//
// Writes, for each group g of 24 bytes of src (32 codes of 6 bits, four
// in three bytes, little-endian), tabs[scales[g]*64+c] for each code c:
// the entries' low 16 bits, little-endian, or with f32 all 32. Eight
// codes a step: their words gathered from 6 bytes, shifted, masked, and
// their entries gathered.
TEXT ·mx6LookupAVX2(SB), NOSPLIT, $0-41
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ groups+16(FP), CX
	MOVQ scales+24(FP), DX
	MOVQ tabs+32(FP), R10
	MOVBQZX f32+40(FP), R9
	VMOVDQU sixOffsets<>(SB), Y12
	VMOVDQU sixShifts<>(SB), Y13
	VPCMPEQD Y14, Y14, Y14
	VPSRLD $26, Y14, Y14 // 63
	TESTQ CX, CX
	JZ m6done
m6group:
	MOVBQZX (DX), AX
	SHLQ $8, AX
	LEAQ (R10)(AX*1), R8 // the group's table
	MOVQ $4, BX
m6step:
	VPCMPEQD Y4, Y4, Y4
	VPGATHERDD Y4, (SI)(Y12*1), Y0
	VPSRLVD Y13, Y0, Y0
	VPAND Y14, Y0, Y0
	VPCMPEQD Y5, Y5, Y5
	VPGATHERDD Y5, (R8)(Y0*4), Y1
	TESTQ R9, R9
	JNZ m6wide
	VPACKUSDW Y1, Y1, Y1
	VPERMQ $0xd8, Y1, Y1
	VMOVDQU X1, (DI)
	ADDQ $16, DI
	JMP m6next
m6wide:
	VMOVDQU Y1, (DI)
	ADDQ $32, DI
m6next:
	ADDQ $6, SI
	DECQ BX
	JNZ m6step
	INCQ DX
	DECQ CX
	JNZ m6group
m6done:
	VZEROUPPER
	RET
