package main

// This file generates the quantization of rows to u8: dynamic (with the
// absolute maximum of eltAbsMaxA) and static, and the steps the
// quantizing LayerNorm (eltNormQA) shares with them. A pre nil is the
// plain variant of a *Pre twin, x[j] times nothing.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// absLanes returns the 8 lane maxima of the bits of |x| at accp and the
// mask 0x7fffffff of those bits, loaded.
func absLanes(accp reg.Register) (a, mask reg.VecVirtual) {
	a, mask = YMM(), YMM()
	VMOVDQU(Mem{Base: accp}, a)
	VMOVDQU(cst("absmask"), mask)
	return a, mask
}

// accAbs raises a to bits(v) & 0x7fffffff (as uint32), the bits through
// b (v itself, or a new register to keep v).
func accAbs(v, mask, b, a reg.VecVirtual) {
	VPAND(mask, v, b)
	VPMAXUD(b, a, a)
}

// absMax: acc[j%8] = max(acc[j%8], bits(x[j]*pre[j]) & 0x7fffffff) as
// uint32 over 8*groups8 floats (pre nil: x[j] itself).
func absMax() {
	kernel("eltAbsMaxA", "func(x, pre *float32, groups8 int, acc *uint32)",
		"eltAbsMaxA raises acc[j%8] to the bits of |x[j]| (|x[j]*pre[j]| rounded to",
		"float32 when pre is not nil) over 8*groups8 floats, as eltAbsMaxGeneric and",
		"eltAbsMaxPreGeneric compare them (unsigned, so a NaN is above +Inf). AVX2.")
	x, pre, n, accp := arg("x"), arg("pre"), arg("groups8"), arg("acc")
	a, mask := absLanes(accp)
	groupsOpt("am", "pre", "plain", n, pre, func(withPre bool) {
		v := YMM()
		if withPre {
			VMOVUPS(Mem{Base: x}, v)
			VMULPS(Mem{Base: pre}, v, v)
			accAbs(v, mask, v, a)
			advance(32, x, pre)
		} else {
			VPAND(Mem{Base: x}, mask, v) // the operand in memory goes first
			VPMAXUD(v, a, a)
			advance(32, x)
		}
	})
	VMOVDQU(a, Mem{Base: accp})
	ret()
}

// clampRound sets v to the int32 of eltRound(eltClamp(v, lo, hi)): VMAXPS
// with the bound second (a NaN v becomes lo), VMINPS, VCVTPS2DQ (half to
// even under the default MXCSR).
func clampRound(v reg.VecVirtual, lo, hi Mem) {
	VMAXPS(lo, v, v)
	VMINPS(hi, v, v)
	VCVTPS2DQ(v, v)
}

// toU8 sets v to the int32 of clamp(roundHalfEven(v*inv + zp), 0, 255),
// the static u8 quantization (v*inv rounded, then zp added).
func toU8(v, inv, zp reg.VecVirtual) {
	VMULPS(inv, v, v)
	VADDPS(zp, v, v)
	clampRound(v, cst("zero"), cst("u8hi"))
}

// pack32 stores 32 int32 (v[0] elements 0-7 ... v[3] 24-31), in [0, 255]
// or (signed) in [-128, 127], as bytes at dst in order: VPACKSSDW
// interleaves per 128-bit lane, VPACKUSWB (VPACKSSWB) again, and VPERMD
// puts the dwords back in order. The values are in range: no saturation.
func pack32(v []reg.VecVirtual, dst Mem, signed bool) {
	VPACKSSDW(v[1], v[0], v[0]) // 0-3 8-11 | 4-7 12-15
	VPACKSSDW(v[3], v[2], v[2]) // 16-19 24-27 | 20-23 28-31
	if signed {
		VPACKSSWB(v[2], v[0], v[0]) // 0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31
	} else {
		VPACKUSWB(v[2], v[0], v[0])
	}
	idx := YMM()
	VMOVDQU(cst("perm"), idx)
	VPERMD(v[0], idx, v[0])
	VMOVDQU(v[0], dst)
}

// vecs4 returns 4 new YMM registers, a group of 32 floats.
func vecs4() []reg.VecVirtual { return []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()} }

// timesPre multiplies the 32 floats of v by those at pre when pre is not
// nil (label skip after it) and moves pre past them.
func timesPre(v []reg.VecVirtual, pre reg.Register, skip string) {
	TESTQ(pre, pre)
	JZ(LabelRef(skip))
	for h := range v {
		VMULPS(Mem{Base: pre, Disp: 32 * h}, v[h], v[h])
	}
	advance(128, pre)
	Label(skip)
}

// quantRow: dst[j] = uint8(eltRound(eltClamp(x[j]*pre[j]*inv, -128, 127)) +
// 128) over 32*groups32 floats (pre nil: x[j]*inv).
func quantRow() {
	kernel("eltQuantRowA", "func(dst *uint8, x, pre *float32, groups32 int, inv float32)",
		"eltQuantRowA quantizes 32*groups32 floats of x (times pre[j], rounded to",
		"float32, when pre is not nil) as eltQuantRowGeneric and",
		"eltQuantRowPreGeneric do: dst[j] = clamp(roundHalfEven(v*inv), -128, 127)",
		"+ 128. AVX2.")
	dst, x, pre, n := arg("dst"), arg("x"), arg("pre"), arg("groups32")
	inv := scalar("inv")
	groups("qr", n, func() {
		v := vecs4()
		for h := range v {
			VMOVUPS(Mem{Base: x, Disp: 32 * h}, v[h])
		}
		timesPre(v, pre, "qr_nopre")
		for h := range v {
			VMULPS(inv, v[h], v[h])
			clampRound(v[h], cst("qlo"), cst("qhi"))
			VPADDD(cst("i128"), v[h], v[h])
		}
		pack32(v, Mem{Base: dst}, false)
		advance(128, x)
		advance(32, dst)
	})
	ret()
}

// quantRows: static quantization of 32*groups32 floats with the absolute
// maximum's bits, to u8 (eltQuantU8A, as eltQuantU8Generic) or, signed,
// to s8 (eltQuantS8A, as eltQuantS8Generic): the same loop, only the
// clamp's bounds and the final pack differ.
func quantRows(signed bool) {
	name, generic, ptr, lo, hi, low, high, label := "eltQuantU8A", "eltQuantU8Generic", "uint8", "zero", "u8hi", "0", "255", "qu"
	if signed {
		name, generic, ptr, lo, hi, low, high, label = "eltQuantS8A", "eltQuantS8Generic", "int8", "qlo", "qhi", "-128", "127", "qs"
	}
	kernel(name, "func(dst *"+ptr+", x *float32, groups32 int, inv, zp float32, acc *uint32)",
		name+" sets dst[j] = clamp(roundHalfEven(float32(x[j]*inv) + zp), "+low+", "+high+")",
		"over 32*groups32 floats and raises acc[j%8] to the bits of |x[j]|, as",
		generic+". AVX2.")
	dst, x, n, accp := arg("dst"), arg("x"), arg("groups32"), arg("acc")
	inv, zp := scalar("inv"), scalar("zp")
	a, mask := absLanes(accp)
	groups(label, n, func() {
		v := vecs4()
		for h := range v {
			VMOVUPS(Mem{Base: x, Disp: 32 * h}, v[h])
			accAbs(v[h], mask, YMM(), a)
			VMULPS(inv, v[h], v[h])
			VADDPS(zp, v[h], v[h])
			clampRound(v[h], cst(lo), cst(hi))
		}
		pack32(v, Mem{Base: dst}, signed)
		advance(128, x)
		advance(32, dst)
	})
	VMOVDQU(a, Mem{Base: accp})
	ret()
}
