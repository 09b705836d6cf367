package shared

import "fmt"

// VDPBF16PSZ returns the EVEX encoding of VDPBF16PS zmm(dst), zmm(src1),
// zmm(src2) (Intel operand order: dst += dot(src1, src2), 16 lanes of two
// bf16 products each), which is EVEX.512.F3.0F38.W0 52 /r with register
// operands only:
//
//	62 | R X B R' 0 m m m | W v v v v 1 p p | z L'L b V' a a a | 52 | 11 reg rm
//
// R, X, B, R', vvvv and V' are stored inverted; reg = dst, vvvv = src1,
// rm = src2 (X extends rm to 32 registers); mmm = 010 (0F38), pp = 10 (F3),
// W = 0, L'L = 10 (512 bits), z = b = 0, aaa = 000 (no mask). The Go
// assembler has no AVX512-BF16 mnemonics. Registers are 0 ... 31.
func VDPBF16PSZ(dst, src1, src2 int) []byte {
	for _, r := range []int{dst, src1, src2} {
		if r < 0 || r > 31 {
			panic(fmt.Sprintf("vdpbf16ps: register zmm%d out of range 0...31", r))
		}
	}
	inv := func(v, bit int) byte { return byte(^(v >> bit) & 1) }
	p0 := inv(dst, 3)<<7 | inv(src2, 4)<<6 | inv(src2, 3)<<5 | inv(dst, 4)<<4 | 0b010
	p1 := byte(0)<<7 | byte(^src1&15)<<3 | 1<<2 | 0b10
	p2 := byte(0)<<7 | 0b10<<5 | 0<<4 | inv(src1, 4)<<3 | 0b000
	modrm := byte(0b11<<6) | byte(dst&7)<<3 | byte(src2&7)
	return []byte{0x62, p0, p1, p2, 0x52, modrm}
}

// VDPBF16PS emits VDPBF16PS zmm(dst), zmm(src1), zmm(src2) (Intel order)
// as its EVEX bytes (VDPBF16PSZ).
func VDPBF16PS(dst, src1, src2 int) {
	EmitBytes(fmt.Sprintf("VDPBF16PS Z%d, Z%d, Z%d (Intel order)", dst, src1, src2), VDPBF16PSZ(dst, src1, src2))
}
