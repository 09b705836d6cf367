// Hand-written, not generated: no generator in _gen writes this file, so
// edit it here (and keep amxTile32x32's Go declaration in
// gemm_u8s8_amx_amd64.go in step).

//go:build amd64 && gc && !purego && !noasm

// AMX u8 x s8 tile kernel: the Go assembler has no AMX
// mnemonics and avo cannot emit raw instruction bytes inside a function, so
// every AMX instruction is spelled out as its VEX encoding (BYTE lines, with
// the instruction in the comment). Only low registers (AX..DI) appear in
// AMX operands, so every VEX prefix is C4 E2 (R, X, B not extended; map 0F38).
// LDTILECFG ... TILERELEASE stay inside this one function (docs/DESIGN.md section 4.3).

#include "textflag.h"

// func amxTile32x32(a *uint8, lda int, b0 *int8, b1 *int8, kblocks int, c *int32, ldc int, cfg *byte)
TEXT ·amxTile32x32(SB), NOSPLIT, $0-64
	MOVQ cfg+56(FP), AX
	// LDTILECFG (AX)
	BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x00
	// TILEZERO tmm0..tmm3 (the four 16x16 int32 accumulators)
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD0
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD8

	MOVQ a+0(FP), SI
	MOVQ lda+8(FP), DX
	MOVQ DX, BX
	SHLQ $4, BX
	ADDQ SI, BX        // BX = a + 16*lda: rows 16..31
	MOVQ b0+16(FP), DI
	MOVQ b1+24(FP), CX
	MOVQ kblocks+32(FP), R8
	MOVQ $64, AX       // B tile row stride: 16 columns x 4 bytes
	TESTQ R8, R8
	JZ   store

loop:
	// TILELOADD tmm4, (SI)(DX*1)   A rows 0..15, 64 bytes of K
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x16
	// TILELOADD tmm5, (BX)(DX*1)   A rows 16..31
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x13
	// TILELOADD tmm6, (DI)(AX*1)   B panel 0: 16 k-groups x 16 columns
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x07
	// TILELOADD tmm7, (CX)(AX*1)   B panel 1
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x3C; BYTE $0x01
	// TDPBUSD tmm0, tmm4, tmm6
	BYTE $0xC4; BYTE $0xE2; BYTE $0x49; BYTE $0x5E; BYTE $0xC4
	// TDPBUSD tmm1, tmm4, tmm7
	BYTE $0xC4; BYTE $0xE2; BYTE $0x41; BYTE $0x5E; BYTE $0xCC
	// TDPBUSD tmm2, tmm5, tmm6
	BYTE $0xC4; BYTE $0xE2; BYTE $0x49; BYTE $0x5E; BYTE $0xD5
	// TDPBUSD tmm3, tmm5, tmm7
	BYTE $0xC4; BYTE $0xE2; BYTE $0x41; BYTE $0x5E; BYTE $0xDD
	ADDQ $64, SI
	ADDQ $64, BX
	ADDQ $1024, DI
	ADDQ $1024, CX
	DECQ R8
	JNZ  loop

store:
	MOVQ c+40(FP), SI
	MOVQ ldc+48(FP), DX
	SHLQ $2, DX        // C row stride in bytes
	LEAQ 64(SI), BX    // columns 16..31
	MOVQ DX, DI
	SHLQ $4, DI
	ADDQ SI, DI        // rows 16..31
	LEAQ 64(DI), CX
	// TILESTORED (SI)(DX*1), tmm0
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x16
	// TILESTORED (BX)(DX*1), tmm1
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x13
	// TILESTORED (DI)(DX*1), tmm2
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x14; BYTE $0x17
	// TILESTORED (CX)(DX*1), tmm3
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x1C; BYTE $0x11
	// TILERELEASE
	BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
	RET
