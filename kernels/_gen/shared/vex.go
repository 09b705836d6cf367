package shared

import (
	"fmt"
	"log"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
)

// VPDPBUSDVEX256 returns the VEX encoding (AVX-VNNI) of
//
//	VPDPBUSD ymm(dst), ymm(src1), ymm(src2)   (Intel operand order)
//
// dst += the sums of 4 products u8(src1) x s8(src2) per dword, for register
// numbers 0 ... 15. The Go assembler knows only the EVEX form (AVX512-VNNI
// with AVX512-VL), which a CPU with AVX-VNNI but no AVX-512 cannot run, so
// the kernels write these bytes. The instruction is VEX.256.66.0F38.W0 50 /r
// in the three-byte VEX prefix (the two-byte one cannot name map 0F38):
//
//	C4 | ~R ~X ~B m-mmmm | W ~vvvv L pp | 50 | 11 reg rm
//
// with m-mmmm = 00010 (0F38), W = 0, L = 1 (256 bits), pp = 01 (66),
// reg = dst (R its bit 3), vvvv = src1, rm = src2 (B its bit 3); X is
// unused (no index) and stays 1. It returns an error for a register
// outside 0 ... 15 (the VEX form cannot reach ymm16 ... ymm31).
func VPDPBUSDVEX256(dst, src1, src2 int) ([]byte, error) {
	for _, r := range []int{dst, src1, src2} {
		if r < 0 || r > 15 {
			return nil, fmt.Errorf("vpdpbusd vex: register ymm%d out of range 0...15", r)
		}
	}
	inv := func(v, bit int) byte { return byte(^(v >> bit) & 1) }
	b1 := inv(dst, 3)<<7 | 1<<6 | inv(src2, 3)<<5 | 0b00010
	b2 := byte(0)<<7 | byte(^src1&15)<<3 | 1<<2 | 0b01
	modrm := byte(0b11<<6) | byte(dst&7)<<3 | byte(src2&7)
	return []byte{0xC4, b1, b2, 0x50, modrm}, nil
}

// EmitBytes writes bs as BYTE directives after the comment (the
// instruction they encode, for a reader of the assembly).
func EmitBytes(comment string, bs []byte) {
	Comment(comment)
	for _, b := range bs {
		Instruction(&ir.Instruction{Opcode: "BYTE", Operands: []Op{U8(b)}})
	}
}

// VPDPBUSDY emits VPDPBUSD ymm(dst), ymm(src1), ymm(src2) (Intel order:
// dst += u8(src1) . s8(src2)) as its VEX bytes; a register out of range
// stops the generator with the error (a bug in the generator).
func VPDPBUSDY(dst, src1, src2 int) {
	bs, err := VPDPBUSDVEX256(dst, src1, src2)
	if err != nil {
		log.Fatalf("generator: %v", err)
	}
	EmitBytes(fmt.Sprintf("{vex} VPDPBUSD Y%d, Y%d, Y%d (Intel order: Y%d += u8(Y%d).s8(Y%d))", dst, src1, src2, dst, src1, src2), bs)
}
