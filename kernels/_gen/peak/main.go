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
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

// accs is the number of independent accumulators per loop iteration: enough
// to cover a 4-6 cycle latency on two or more vector pipes.
const accs = 24

var (
	zmm = shared.Zmm
	ymm = shared.Ymm
)

// loop emits name, func(n int): the registers zeroed by clear, then n
// iterations (none for n <= 0) of body(u) for u < units.
func loop(name string, doc []string, clear func(), units int, body func(u int)) {
	TEXT(name, NOSPLIT, "func(n int)")
	Doc(doc...)
	n := Load(Param("n"), reg.RCX)
	clear()
	TESTQ(n, n)
	JLE(LabelRef(name + "_done"))
	Label(name + "_loop")
	for u := 0; u < units; u++ {
		body(u)
	}
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// zeroZmm and zeroYmm clear the first k zmm registers (EVEX VPXORD) or
// ymm registers (VEX VPXOR, for CPUs without AVX-512).
func zeroZmm(k int) func() {
	return func() {
		for i := 0; i < k; i++ {
			VPXORD(zmm(i), zmm(i), zmm(i))
		}
	}
}

func zeroYmm(k int) func() {
	return func() {
		for i := 0; i < k; i++ {
			VPXOR(ymm(i), ymm(i), ymm(i))
		}
	}
}

// peakLoop emits a peak loop on zmm registers: accs instructions body(acc)
// an iteration, Z0...Z25 zeroed first; doc is its comment's lines.
func peakLoop(name, doc string, body func(acc int)) {
	loop(name, strings.Split(doc, "\n"), zeroZmm(26), accs, body)
}

// peakLoop256 is peakLoop for CPUs without AVX-512: 256-bit registers,
// zeroed with VEX instructions, accs instructions per iteration.
func peakLoop256(name, doc string, body func(i int)) {
	loop(name, strings.Split(doc, "\n"), zeroYmm(16), accs, body)
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
		func(a int) { shared.VDPBF16PS(a, 24, 25) })

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

	schemes()

	peakLoop("peakMADDWD512", fmt.Sprintf(
		"peakMADDWD512 runs n iterations of %d independent VPMADDWD zmm (Z0...Z%d = Z24.Z25 in", accs, accs-1)+
		"\n"+fmt.Sprintf("int16 pairs): %d*64 ops per iteration, 32 multiply-adds each as the exact", accs)+
		"\nAVX-512 u8 x s8 kernels without VNNI count them. It needs AVX512BW.",
		func(a int) { VPMADDWD(reg.Z25, reg.Z24, zmm(a)) })

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
		shared.VDPBF16PS(d, s1, s2)
		VMOVUPS(zmm(d), Mem{Base: pacc})
		VZEROUPPER()
		RET()
	}
	dp("dpbf16psHigh", 17, 9, 30)
	dp("dpbf16psLow", 2, 5, 6)

	Generate()
}

// schemeUnits is the number of units (products) per iteration of a
// scheme loop: enough independent chains to fill the vector pipes.
const schemeUnits = 24

// schemeLoop emits a loop of schemeUnits units of body, registers
// zeroed first (ymm loops need only AVX2; zmm ones AVX512F).
func schemeLoop(name string, doc []string, zmmRegs bool, body func(u int)) {
	clear := zeroYmm(16)
	if zmmRegs {
		clear = zeroZmm(32)
	}
	loop(name, doc, clear, schemeUnits, body)
}

// schemes emits the inner-loop instruction mixes of the exact or
// range-limited u8 x s8 schemes for CPUs without VNNI, each on ymm (AVX2)
// and zmm (AVX512BW), so that their multiply-add rates can be compared on
// one CPU (peak.Schemes). A unit is one product vector of a GEMM tile:
//
//	int16 VPMADDWD + VPADDD on int16-widened operands (exact)
//	u7s8  VPMADDUBSW + VPMADDWD(ones) + VPADDD (exact for a in [0,127])
//	sign  s8 x s8 by |a| and sign(b, a): VPABSB per broadcast (two
//	      products share one), VPSIGNB per product on ymm, VPBLENDMB of b
//	      and -b under a VPMOVB2M mask on zmm (no EVEX VPSIGNB; -b once
//	      per B vector per 12 broadcasts), then as u7s8 (exact for b in
//	      [-127,127], activations shifted by 128)
//	u7s7  two VPMADDUBSW added by VPADDW, then VPMADDWD(ones) + VPADDD
//	      (a in [0,127], b in [-64,63])
func schemes() {
	// ymm: accumulators Y0..Y5, temporaries Y6..Y10, ones Y13, sources
	// Y11, Y12, Y14, Y15.
	y := ymm
	ys := schemeSet{
		width: "ymm", suffix: "Y", needs: "AVX2", ma: 16, zmm: false,
		acc:  func(u int) reg.VecPhysical { return y(u % 6) },
		tmp:  func(u int) reg.VecPhysical { return y(6 + u%5) },
		pair: func(u int) (reg.VecPhysical, reg.VecPhysical) { return y(6 + u%3), y(9 + u%2) },
		ones: y(13), b1: y(15), a1: y(14), b2: y(12), a2: y(11),
		sign: func(s schemeSet) {
			schemeLoop("schemeSignY", []string{
				fmt.Sprintf("schemeSignY runs n iterations of %d products of the sign trick on ymm: VPABSB", schemeUnits),
				"per two products, then VPSIGNB + VPMADDUBSW + VPMADDWD(ones) + VPADDD:",
				fmt.Sprintf("%d*32 multiply-adds per iteration. It needs AVX2.", schemeUnits)}, false,
				func(u int) {
					if u%2 == 0 {
						VPABSB(y(12), y(11))
					}
					VPSIGNB(y(12), y(14+u%2), s.tmp(u))
					s.u7s8(s.tmp(u), y(11), u)
				})
		},
	}
	// zmm: accumulators Z0..Z11, temporaries Z12..Z23, -b Z24, Z25,
	// |a| Z26, ones Z27, sources Z28..Z31.
	z := zmm
	zs := schemeSet{
		width: "zmm", suffix: "Z", needs: "AVX512BW", ma: 32, zmm: true,
		acc:  func(u int) reg.VecPhysical { return z(u % 12) },
		tmp:  func(u int) reg.VecPhysical { return z(12 + u%12) },
		pair: func(u int) (reg.VecPhysical, reg.VecPhysical) { return z(12 + u%6), z(18 + u%6) },
		ones: z(27), b1: z(31), a1: z(30), b2: z(29), a2: z(28),
		sign: func(s schemeSet) {
			schemeLoop("schemeSignZ", []string{
				fmt.Sprintf("schemeSignZ runs n iterations of %d products of the sign trick on zmm: VPABSB +", schemeUnits),
				"VPMOVB2M per two products, VPSUBB (-b) per B vector per 12 broadcasts, then",
				"VPBLENDMB(b, -b) + VPMADDUBSW + VPMADDWD(ones) + VPADDD per product:",
				fmt.Sprintf("%d*64 multiply-adds per iteration. It needs AVX512BW.", schemeUnits)}, true,
				func(u int) {
					if u == 0 {
						VPSUBB(z(28), z(31), z(24)) // 0 - b: z(31) is zero
						VPSUBB(z(29), z(31), z(25))
					}
					if u%2 == 0 {
						VPABSB(z(30), z(26))
						VPMOVB2M(z(30), reg.K1)
					}
					VPBLENDMB(z(24+u%2), z(28+u%2), reg.K1, s.tmp(u))
					s.u7s8(s.tmp(u), z(26), u)
				})
		},
	}
	for _, s := range []schemeSet{ys, zs} {
		schemeInt16(s)
		schemeU7S8(s)
		s.sign(s)
		schemeU7S7(s)
	}
}

// schemeSet is the register assignment of one width's scheme loops.
type schemeSet struct {
	width, suffix, needs string // "ymm", "Y" (of the names), "AVX2"
	ma                   int    // multiply-adds of one VPMADDWD
	zmm                  bool
	acc, tmp             func(u int) reg.VecPhysical // of unit u
	pair                 func(u int) (t1, t2 reg.VecPhysical)
	ones                 reg.VecPhysical   // int16 ones, for VPMADDWD
	b1, a1, b2, a2       reg.VecPhysical   // sources of the products
	sign                 func(s schemeSet) // the width's sign-trick loop
}

// u7s8 emits unit u of the u7s8 scheme: VPMADDUBSW(b, a) into tmp(u),
// VPMADDWD(ones), VPADDD into acc(u).
func (s schemeSet) u7s8(b, a reg.VecPhysical, u int) {
	t := s.tmp(u)
	VPMADDUBSW(b, a, t)
	VPMADDWD(s.ones, t, t)
	VPADDD(t, s.acc(u), s.acc(u))
}

func schemeInt16(s schemeSet) {
	schemeLoop("schemeInt16"+s.suffix, []string{
		fmt.Sprintf("schemeInt16%s runs n iterations of %d VPMADDWD + VPADDD %s: %d*%d", s.suffix, schemeUnits, s.width, schemeUnits, s.ma),
		"multiply-adds per iteration. It needs " + s.needs + "."}, s.zmm,
		func(u int) {
			VPMADDWD(s.b1, s.a1, s.tmp(u))
			VPADDD(s.tmp(u), s.acc(u), s.acc(u))
		})
}

func schemeU7S8(s schemeSet) {
	schemeLoop("schemeU7S8"+s.suffix, []string{
		fmt.Sprintf("schemeU7S8%s runs n iterations of %d VPMADDUBSW + VPMADDWD(ones) + VPADDD", s.suffix, schemeUnits),
		fmt.Sprintf("%s: %d*%d multiply-adds per iteration. It needs %s.", s.width, schemeUnits, 2*s.ma, s.needs)}, s.zmm,
		func(u int) { s.u7s8(s.b1, s.a1, u) })
}

func schemeU7S7(s schemeSet) {
	schemeLoop("schemeU7S7"+s.suffix, []string{
		fmt.Sprintf("schemeU7S7%s runs n iterations of %d units of two VPMADDUBSW + VPADDW +", s.suffix, schemeUnits),
		fmt.Sprintf("VPMADDWD(ones) + VPADDD %s: %d*%d multiply-adds per iteration. It needs %s.", s.width, schemeUnits, 4*s.ma, s.needs)}, s.zmm,
		func(u int) {
			t1, t2 := s.pair(u)
			VPMADDUBSW(s.b1, s.a1, t1)
			VPMADDUBSW(s.b2, s.a2, t2)
			VPADDW(t2, t1, t1)
			VPMADDWD(s.ones, t1, t1)
			VPADDD(t1, s.acc(u), s.acc(u))
		})
}
