#include "textflag.h"

// func readHalfWrite(dst, src unsafe.Pointer, n int, stream bool)
TEXT ·readHalfWrite(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB stream+24(FP), R8
	SHRQ $5, CX
	JZ   done

loop:
	VMOVDQU (SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VPOR    Y1, Y0, Y0
	VPOR    Y3, Y2, Y2
	TESTB   R8, R8
	JZ      plain
	VMOVNTDQ Y0, (DI)
	VMOVNTDQ Y2, 32(DI)
	JMP     next

plain:
	VMOVDQU Y0, (DI)
	VMOVDQU Y2, 32(DI)

next:
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop

done:
	SFENCE
	VZEROUPPER
	RET

// func readHalfWrite512(dst, src unsafe.Pointer, n int, stream bool)
TEXT ·readHalfWrite512(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVB stream+24(FP), R8
	SHRQ $5, CX
	JZ   done512

loop512:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VPORQ     Z1, Z0, Z0
	TESTB     R8, R8
	JZ        plain512
	VMOVNTDQ  Z0, (DI)
	JMP       next512

plain512:
	VMOVDQU64 Z0, (DI)

next512:
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop512

done512:
	SFENCE
	VZEROUPPER
	RET
