// Command peak generates kernels/peak/peak_amd64.s: long unrolled loops of
// independent VFMADD231PS, VPDPBUSD and VDPBF16PS on zmm registers (and
// VFMADD231PS, VPMADDWD and the VEX VPDPBUSD of AVX-VNNI on ymm), used to
// measure one core's arithmetic peak, and a one-shot VDPBF16PS for testing
// its byte encoding.
//
// Run from kernels/_gen:
//
//	go run ./peak -out ../peak/peak_amd64.s -stubs ../peak/peak_stub_amd64.go -pkg peak
package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

// accs is the number of independent accumulators per loop iteration: enough
// to cover a 4-6 cycle latency on two or more vector pipes.
const accs = 24

func zmm(i int) reg.VecPhysical {
	return []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7,
		reg.Z8, reg.Z9, reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15,
		reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23,
		reg.Z24, reg.Z25, reg.Z26, reg.Z27, reg.Z28, reg.Z29, reg.Z30, reg.Z31}[i]
}

// vdpbf16ps returns the EVEX encoding of VDPBF16PS zmm(dst), zmm(src1),
// zmm(src2) (Intel operand order: dst += dot(src1, src2)), which is
// EVEX.512.F3.0F38.W0 52 /r with register operands only:
//
//	62 | R X B R' 0 m m m | W v v v v 1 p p | z L'L b V' a a a | 52 | 11 reg rm
//
// R, X, B, R', vvvv and V' are stored inverted; reg = dst, vvvv = src1,
// rm = src2 (X extends rm to 32 registers); mmm = 010 (0F38), pp = 10 (F3),
// W = 0, L'L = 10 (512 bits), z = b = 0, aaa = 000 (no mask).
func vdpbf16ps(dst, src1, src2 int) []byte {
	inv := func(v, bit int) byte { return byte(^(v >> bit) & 1) }
	p0 := inv(dst, 3)<<7 | inv(src2, 4)<<6 | inv(src2, 3)<<5 | inv(dst, 4)<<4 | 0b010
	p1 := byte(0)<<7 | byte(^src1&15)<<3 | 1<<2 | 0b10
	p2 := byte(0)<<7 | 0b10<<5 | 0<<4 | inv(src1, 4)<<3 | 0b000
	modrm := byte(0b11<<6) | byte(dst&7)<<3 | byte(src2&7)
	return []byte{0x62, p0, p1, p2, 0x52, modrm}
}

func emitBytes(comment string, bs []byte) {
	Comment(comment)
	for _, b := range bs {
		Instruction(&ir.Instruction{Opcode: "BYTE", Operands: []Op{U8(b)}})
	}
}

func peakLoop(name, doc string, body func(acc int)) {
	TEXT(name, NOSPLIT, "func(n int)")
	Doc(strings.Split(doc, "\n")...)
	n := Load(Param("n"), reg.RCX)
	for i := 0; i < 26; i++ {
		VPXORD(zmm(i), zmm(i), zmm(i))
	}
	TESTQ(n, n)
	JLE(LabelRef(name + "_done"))
	Label(name + "_loop")
	for a := 0; a < accs; a++ {
		body(a)
	}
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// ymm returns Y0 ... Y15.
func ymm(i int) reg.VecPhysical {
	return []reg.VecPhysical{reg.Y0, reg.Y1, reg.Y2, reg.Y3, reg.Y4, reg.Y5, reg.Y6, reg.Y7,
		reg.Y8, reg.Y9, reg.Y10, reg.Y11, reg.Y12, reg.Y13, reg.Y14, reg.Y15}[i]
}

// peakLoop256 is peakLoop for CPUs without AVX-512: 256-bit registers,
// zeroed with VEX instructions, accs instructions per iteration.
func peakLoop256(name, doc string, body func(i int)) {
	TEXT(name, NOSPLIT, "func(n int)")
	Doc(strings.Split(doc, "\n")...)
	n := Load(Param("n"), reg.RCX)
	for i := 0; i < 16; i++ {
		VPXOR(ymm(i), ymm(i), ymm(i))
	}
	TESTQ(n, n)
	JLE(LabelRef(name + "_done"))
	Label(name + "_loop")
	for a := 0; a < accs; a++ {
		body(a)
	}
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

func main() {
	ConstraintExpr("amd64,gc,!purego,!noasm") // amd64 && gc && !purego && !noasm

	peakLoop("peakFMA", fmt.Sprintf(
		"peakFMA runs n iterations of %d independent VFMADD231PS zmm (Z0...Z%d += Z24*Z25):", accs, accs-1)+
		"\n"+fmt.Sprintf("%d*32 flops per iteration. It needs AVX512F.", accs),
		func(a int) { VFMADD231PS(reg.Z24, reg.Z25, zmm(a)) })
	peakLoop("peakVNNI", fmt.Sprintf(
		"peakVNNI runs n iterations of %d independent VPDPBUSD zmm (Z0...Z%d += u8(Z24).s8(Z25)):", accs, accs-1)+
		"\n"+fmt.Sprintf("%d*128 ops per iteration. It needs AVX512VNNI.", accs),
		func(a int) { VPDPBUSD(reg.Z25, reg.Z24, zmm(a)) })
	peakLoop("peakBF16", fmt.Sprintf(
		"peakBF16 runs n iterations of %d independent VDPBF16PS zmm (Z0...Z%d += bf16(Z24).bf16(Z25),", accs, accs-1)+
		"\n"+fmt.Sprintf("byte-encoded): %d*64 flops per iteration. It needs AVX512BF16.", accs),
		func(a int) { emitBytes(fmt.Sprintf("VDPBF16PS Z%d, Z24, Z25 (Intel order)", a), vdpbf16ps(a, 24, 25)) })

	peakLoop256("peakFMA256", fmt.Sprintf(
		"peakFMA256 runs n iterations of %d VFMADD231PS ymm on 12 accumulators (Y0...Y11 +=", accs)+
		"\n"+fmt.Sprintf("Y14*Y15): %d*16 flops per iteration. It needs AVX2 and FMA3.", accs),
		func(a int) { VFMADD231PS(reg.Y14, reg.Y15, ymm(a%12)) })
	peakLoop256("peakMADDWD256", fmt.Sprintf(
		"peakMADDWD256 runs n iterations of %d independent VPMADDWD ymm (Y0...Y11 = Y14.Y15 in", accs)+
		"\n"+fmt.Sprintf("int16 pairs): %d*32 ops per iteration, 16 multiply-adds each as the exact", accs)+
		"\nAVX2 u8 x s8 kernels count them. It needs AVX2.",
		func(a int) { VPMADDWD(reg.Y15, reg.Y14, ymm(a%12)) })
	peakLoop256("peakAVXVNNI256", fmt.Sprintf(
		"peakAVXVNNI256 runs n iterations of %d VEX VPDPBUSD ymm (AVX-VNNI, byte-encoded) on 12", accs)+
		"\n"+fmt.Sprintf("accumulators (Y0...Y11 += u8(Y14).s8(Y15)): %d*64 ops per iteration. It needs", accs)+
		"\nAVX2 and AVX-VNNI.",
		func(a int) { shared.VPDPBUSDY(a%12, 14, 15) })

	// One VDPBF16PS each through two register assignments, so that the
	// test covers the high-register bits (R', V', X) and the low ones.
	dp := func(name string, d, s1, s2 int) {
		TEXT(name, NOSPLIT, "func(acc *[16]float32, a *[32]uint16, b *[32]uint16)")
		Doc(name+" computes, as VDPBF16PS does (byte-encoded), for i in 0...15:",
			"",
			"\tacc[i] += float32(a[2i+1])*float32(b[2i+1]) + float32(a[2i])*float32(b[2i])",
			"",
			fmt.Sprintf("with a, b bfloat16 bits, in Z%d += Z%d.Z%d. It needs AVX512BF16.", d, s1, s2))
		pacc := Load(Param("acc"), reg.RAX)
		pa := Load(Param("a"), reg.RBX)
		pb := Load(Param("b"), reg.RCX)
		VMOVUPS(Mem{Base: pacc}, zmm(d))
		VMOVUPS(Mem{Base: pa}, zmm(s1))
		VMOVUPS(Mem{Base: pb}, zmm(s2))
		emitBytes(fmt.Sprintf("VDPBF16PS Z%d, Z%d, Z%d (Intel order)", d, s1, s2), vdpbf16ps(d, s1, s2))
		VMOVUPS(zmm(d), Mem{Base: pacc})
		VZEROUPPER()
		RET()
	}
	dp("dpbf16psHigh", 17, 9, 30)
	dp("dpbf16psLow", 2, 5, 6)

	Generate()
}
