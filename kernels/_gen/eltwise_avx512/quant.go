package main

// This file generates the quantization of rows to u8 and s8 (dynamic, with its absolute
// maximum, and static) and the dequantization of u8 and s32.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func absMax() {
	TEXT("eltAbsMax", NOSPLIT, "func(x []float32) uint32")
	Doc("eltAbsMax returns the largest math.Float32bits(x[j]) & 0x7fffffff: the",
		"bits of max|x[j]|, >= 0x7f800000 when x holds a NaN or an infinity.")
	n := Load(Param("x").Len(), GP64())
	xp := Load(Param("x").Base(), GP64())
	acc := ZMM()
	VPXORD(acc, acc, acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VPANDD_BCST(c("absmask"), v, v)
		VPMAXUD(v, acc, acc)
	})
	Store(reduceMaxU32(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

func quantRow() {
	TEXT("eltQuantRow", NOSPLIT, "func(dst []uint8, x []float32, inv float32)")
	Doc("eltQuantRow stores, for j < len(dst), the symmetric s8 quantization",
		"shifted to u8:",
		"",
		"\tdst[j] = uint8(roundHalfEven(clamp(x[j]*inv, -128, 127)) + 128)")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	inv := scalar("inv")
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VMULPS(inv, v, v)
		clampRound(v, "s8min", "s8max")
		VPADDD_BCST(c("i128"), v, v)
		storeBytes(v, u8At(d, i), k)
	})
	VZEROUPPER()
	RET()
}

func absMaxPre() {
	TEXT("eltAbsMaxPre", NOSPLIT, "func(x, pre []float32) uint32")
	Doc("eltAbsMaxPre returns the largest math.Float32bits(x[j]*pre[j]) & 0x7fffffff",
		"for j < len(x), each product rounded to float32: the bits of",
		"max|x[j]*pre[j]|, >= 0x7f800000 when a product is NaN or infinite.")
	n := Load(Param("x").Len(), GP64())
	xp := Load(Param("x").Base(), GP64())
	pp := Load(Param("pre").Base(), GP64())
	acc := ZMM()
	VPXORD(acc, acc, acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VMULPS(load(f32At(pp, i), k), v, v)
		VPANDD_BCST(c("absmask"), v, v)
		VPMAXUD(v, acc, acc)
	})
	Store(reduceMaxU32(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

func quantRowPre() {
	TEXT("eltQuantRowPre", NOSPLIT, "func(dst []uint8, x, pre []float32, inv float32)")
	Doc("eltQuantRowPre is eltQuantRow of x[j]*pre[j]: for j < len(dst),",
		"",
		"	p := x[j]*pre[j]*inv   (each product rounded to float32)",
		"	dst[j] = uint8(roundHalfEven(clamp(p, -128, 127)) + 128)")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	pp := Load(Param("pre").Base(), GP64())
	inv := scalar("inv")
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VMULPS(load(f32At(pp, i), k), v, v)
		VMULPS(inv, v, v)
		clampRound(v, "s8min", "s8max")
		VPADDD_BCST(c("i128"), v, v)
		storeBytes(v, u8At(d, i), k)
	})
	VZEROUPPER()
	RET()
}

func quantStatic(name, sig, lo, hi, typ string) {
	TEXT(name, NOSPLIT, sig)
	Doc(name+" stores, for j < len(dst),",
		"",
		"\tdst[j] = "+typ+"(roundHalfEven(clamp(x[j]*inv + zp, "+map[string]string{"zero": "0", "s8min": "-128"}[lo]+", "+map[string]string{"u8max": "255", "s8max": "127"}[hi]+")))",
		"",
		"and returns the bits of max|x[j]| as eltAbsMax (NaN/Inf check).")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	inv, zp := scalar("inv"), scalar("zp")
	acc := ZMM()
	VPXORD(acc, acc, acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		a := ZMM()
		VPANDD_BCST(c("absmask"), v, a)
		VPMAXUD(a, acc, acc)
		VMULPS(inv, v, v)
		VADDPS(zp, v, v)
		clampRound(v, lo, hi)
		storeBytes(v, u8At(d, i), k)
	})
	Store(reduceMaxU32(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

func dequantU8() {
	TEXT("eltDequantU8", NOSPLIT, "func(dst []float32, q []uint8, scale, zp float32)")
	Doc("eltDequantU8 stores dst[j] = (float32(q[j]) - zp) * scale for j < len(dst).")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	qp := Load(Param("q").Base(), GP64())
	s, zp := scalar("scale"), scalar("zp")
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := ZMM()
		if k == nil {
			VPMOVZXBD(u8At(qp, i), v)
		} else {
			b := XMM()
			VMOVDQU8_Z(u8At(qp, i), k, b)
			VPMOVZXBD(b, v)
		}
		VCVTDQ2PS(v, v)
		VSUBPS(zp, v, v)
		VMULPS(s, v, v)
		store(v, f32At(d, i), k)
	})
	VZEROUPPER()
	RET()
}

func dequantS32() {
	TEXT("eltDequantS32", NOSPLIT, "func(dst []float32, acc []int32, rs float32, cs []float32)")
	Doc("eltDequantS32 stores, for j < len(dst),",
		"",
		"\tdst[j] = float32(acc[j]) * rs * cs[j]   (cs empty: * 1)",
		"",
		"rounding each product to float32.")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	ap := Load(Param("acc").Base(), GP64())
	cp := Load(Param("cs").Base(), GP64())
	ncs := Load(Param("cs").Len(), GP64())
	rs := scalar("rs")
	body := func(withCS bool) func(i reg.GPVirtual, k reg.Register) {
		return func(i reg.GPVirtual, k reg.Register) {
			v := load(f32At(ap, i), k)
			VCVTDQ2PS(v, v)
			VMULPS(rs, v, v)
			if withCS {
				VMULPS(load(f32At(cp, i), k), v, v)
			}
			store(v, f32At(d, i), k)
		}
	}
	TESTQ(ncs, ncs)
	JZ(LabelRef("nocs"))
	rowLoop(n, body(true))
	VZEROUPPER()
	RET()
	Label("nocs")
	rowLoop(n, body(false))
	VZEROUPPER()
	RET()
}
