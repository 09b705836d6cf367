package main

// This file generates the passes of the scaled softmax: the scaled (and
// masked) row with its maximum, exp with its sum, and the final scaling.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// maxMaskScale: dst[j] = float32(x[j]*s) (+ mask[j]); acc[j%16] =
// max(acc[j%16], dst[j]) as VMAXPS(src1 acc, src2 dst).
func maxMaskScale() {
	kernel("eltMaxMaskScaleA", "func(dst, x, mask *float32, groups int, s float32, acc *float32)",
		"eltMaxMaskScaleA is the first pass of the scaled softmax on 16*groups floats:",
		"dst[j] = x[j]*s (+ mask[j] when mask is not nil), and acc[j%16] becomes the",
		"maximum of acc[j%16] and dst[j] as eltMaxMaskScaleGeneric takes it. AVX2.")
	dst, x, mask, n, accp := arg("dst"), arg("x"), arg("mask"), arg("groups"), arg("acc")
	s := scalar("s")
	withLanes(accp, func(acc []reg.VecVirtual) {
		groupsOpt("mms", "mask", "nomask", n, mask, func(withMask bool) {
			halves(acc, func(h int, acc reg.VecVirtual) {
				v := YMM()
				VMULPS(Mem{Base: x, Disp: 32 * h}, s, v)
				if withMask {
					VADDPS(Mem{Base: mask, Disp: 32 * h}, v, v)
				}
				VMOVUPS(v, Mem{Base: dst, Disp: 32 * h})
				VMAXPS(v, acc, acc)
			})
			if withMask {
				advance(64, x, mask, dst)
			} else {
				advance(64, x, dst)
			}
		})
	})
}

// exp replaces v by eltExp(v) for v <= 88 or NaN (softmax's arguments:
// x - max): the same float32 steps, the final y*2^n as y*2^(n>>1) (exact)
// times 2^(n - n>>1), one rounding as VSCALEFPS.
func exp(v reg.VecVirtual) {
	nf, r, p, t := YMM(), YMM(), YMM(), YMM()
	lo := YMM()
	VMOVUPS(cst("min"), lo)
	VMAXPS(v, lo, v) // max(src1 -104, src2 v): a NaN v stays
	VMULPS(cst("log2e"), v, nf)
	VROUNDPS(U8(0), nf, nf) // to nearest, ties to even
	VMINPS(cst("nmax"), nf, nf)
	VMOVAPS(v, r)
	VFNMADD231PS(cst("ln2hi"), nf, r) // r = v - n*ln2hi
	VFNMADD231PS(cst("ln2lo"), nf, r) // r -= n*ln2lo
	VMOVUPS(cst("p0"), p)
	for i := 1; i < len(expP); i++ {
		VFMADD213PS(cst("p"+string(rune('0'+i))), r, p) // p = p*r + c
	}
	VMULPS(r, r, t)
	VFMADD213PS(r, t, p) // p = p*r^2 + r
	VADDPS(cst("one"), p, p)
	// 2^a and 2^b, a = n>>1, b = n - a, both in [-75, 64]: normal.
	ni, na, nb := YMM(), YMM(), YMM()
	VCVTTPS2DQ(nf, ni)
	VPSRAD(U8(1), ni, na)
	VPSUBD(na, ni, nb)
	VPADDD(cst("bias"), na, na)
	VPADDD(cst("bias"), nb, nb)
	VPSLLD(U8(23), na, na)
	VPSLLD(U8(23), nb, nb)
	VMULPS(na, p, p) // exact
	VMULPS(nb, p, v) // the one rounding
}

// expSum: dst[j] = eltExp(x[j] - m); acc[j%16] += dst[j].
func expSum() {
	kernel("eltExpSumA", "func(dst, x *float32, groups int, m float32, acc *float32)",
		"eltExpSumA is the second pass of softmax on 16*groups floats: dst[j] =",
		"eltExp(x[j] - m) and acc[j%16] += dst[j], as eltExpSumGeneric (arguments",
		"x[j] - m <= 88 or NaN, as softmax's are). AVX2 and FMA3.")
	dst, x, n, accp := arg("dst"), arg("x"), arg("groups"), arg("acc")
	m := scalar("m")
	laneLoop("es", n, accp, func(h int, acc reg.VecVirtual) {
		v := YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * h}, v)
		VSUBPS(m, v, v)
		exp(v)
		VMOVUPS(v, Mem{Base: dst, Disp: 32 * h})
		VADDPS(v, acc, acc)
	}, x, dst)
}

// scale: x[j] *= s over 8*groups8 floats.
func scale() {
	kernel("eltScaleA", "func(x *float32, groups8 int, s float32)",
		"eltScaleA multiplies 8*groups8 floats of x by s in place. AVX2.")
	x, n := arg("x"), arg("groups8")
	s := scalar("s")
	groups("sc", n, func() {
		v := YMM()
		VMULPS(Mem{Base: x}, s, v)
		VMOVUPS(v, Mem{Base: x})
		advance(32, x)
	})
	ret()
}
