package main

// This file generates the quantization of rows to u8 and s8 (dynamic, with
// their absolute maximum, and static) and the dequantization of u8 and s32.
// The *Pre variants are the same loops of x[j]*pre[j] (pre the per-channel
// smoothing factors), made by the parameter pre.

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/reg"
)

// rowX returns the loader of x's vector at element i (lanes in k): x[i],
// or with pre x[i]*pre[i] (the product rounded to float32), pre's base
// loaded now.
func rowX(xp reg.Register, pre bool) func(i reg.GPVirtual, k reg.Register) reg.VecVirtual {
	var pp reg.Register
	if pre {
		pp = base("pre")
	}
	return func(i reg.GPVirtual, k reg.Register) reg.VecVirtual {
		v := load(f32At(xp, i), k)
		if pre {
			VMULPS(load(f32At(pp, i), k), v, v)
		}
		return v
	}
}

// absMax emits eltAbsMax or, with pre, eltAbsMaxPre.
func absMax(pre bool) {
	if pre {
		kernel("eltAbsMaxPre", "func(x, pre []float32) uint32",
			"eltAbsMaxPre returns the largest math.Float32bits(x[j]*pre[j]) & 0x7fffffff",
			"for j < len(x), each product rounded to float32: the bits of",
			"max|x[j]*pre[j]|, >= 0x7f800000 when a product is NaN or infinite.")
	} else {
		kernel("eltAbsMax", "func(x []float32) uint32",
			"eltAbsMax returns the largest math.Float32bits(x[j]) & 0x7fffffff: the",
			"bits of max|x[j]|, >= 0x7f800000 when x holds a NaN or an infinity.")
	}
	n := length("x")
	x := rowX(base("x"), pre)
	acc := zeroed(VPXORD)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := x(i, k)
		accAbsMax(v, v, acc)
	})
	retU32(reduceMaxU32(acc))
}

// quantRow emits eltQuantRow or, with pre, eltQuantRowPre.
func quantRow(pre bool) {
	if pre {
		kernel("eltQuantRowPre", "func(dst []uint8, x, pre []float32, inv float32)",
			"eltQuantRowPre is eltQuantRow of x[j]*pre[j]: for j < len(dst),",
			"",
			"\tp := x[j]*pre[j]*inv   (each product rounded to float32)",
			"\tdst[j] = uint8(roundHalfEven(clamp(p, -128, 127)) + 128)")
	} else {
		kernel("eltQuantRow", "func(dst []uint8, x []float32, inv float32)",
			"eltQuantRow stores, for j < len(dst), the symmetric s8 quantization",
			"shifted to u8:",
			"",
			"\tdst[j] = uint8(roundHalfEven(clamp(x[j]*inv, -128, 127)) + 128)")
	}
	n, d := length("dst"), base("dst")
	x := rowX(base("x"), pre)
	inv := scalar("inv")
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := x(i, k)
		VMULPS(inv, v, v)
		clampRound(v, "s8min", "s8max")
		VPADDD_BCST(c("i128"), v, v)
		storeBytes(v, u8At(d, i), k)
	})
	ret()
}

// quantStatic emits name (eltQuantU8, eltQuantS8): the static quantization
// to typ, clamped to the constants lo and hi.
func quantStatic(name, sig, lo, hi, typ string) {
	kernel(name, sig, name+" stores, for j < len(dst),",
		"",
		"\tdst[j] = "+typ+"(roundHalfEven(clamp(x[j]*inv + zp, "+map[string]string{"zero": "0", "s8min": "-128"}[lo]+", "+map[string]string{"u8max": "255", "s8max": "127"}[hi]+")))",
		"",
		"and returns the bits of max|x[j]| as eltAbsMax (NaN/Inf check).")
	n, d, xp := length("dst"), base("dst"), base("x")
	inv, zp := scalar("inv"), scalar("zp")
	acc := zeroed(VPXORD)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		accAbsMax(v, ZMM(), acc)
		VMULPS(inv, v, v)
		VADDPS(zp, v, v)
		clampRound(v, lo, hi)
		storeBytes(v, u8At(d, i), k)
	})
	retU32(reduceMaxU32(acc))
}

func dequantU8() {
	kernel("eltDequantU8", "func(dst []float32, q []uint8, scale, zp float32)",
		"eltDequantU8 stores dst[j] = (float32(q[j]) - zp) * scale for j < len(dst).")
	n, d, qp := length("dst"), base("dst"), base("q")
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
	ret()
}

func dequantS32() {
	kernel("eltDequantS32", "func(dst []float32, acc []int32, rs float32, cs []float32)",
		"eltDequantS32 stores, for j < len(dst),",
		"",
		"\tdst[j] = float32(acc[j]) * rs * cs[j]   (cs empty: * 1)",
		"",
		"rounding each product to float32.")
	n, d, ap := length("dst"), base("dst"), base("acc")
	cp, ncs := base("cs"), length("cs")
	rs := scalar("rs")
	withOpt(ncs, n, "nocs", func(withCS bool) func(i reg.GPVirtual, k reg.Register) {
		return func(i reg.GPVirtual, k reg.Register) {
			v := load(f32At(ap, i), k)
			VCVTDQ2PS(v, v)
			VMULPS(rs, v, v)
			if withCS {
				VMULPS(load(f32At(cp, i), k), v, v)
			}
			store(v, f32At(d, i), k)
		}
	}, ret)
}
