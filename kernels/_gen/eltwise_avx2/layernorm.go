package main

// This file generates LayerNorm's row passes: its three 16-lane sums
// (eltAddSumA, eltSumA, eltSumSqDevA, acc[j%16] as the Go twins) and the
// normalization, with (eltNormQA) or without (eltNormA) the static u8
// quantization of its output.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// addSum: dst = x + r, acc += dst.
func addSum() {
	kernel("eltAddSumA", "func(dst, x, r *float32, groups int, acc *float32)",
		"eltAddSumA sets dst[j] = x[j] + r[j] and adds it to acc[j%16] over 16*groups",
		"floats, as eltAddSumGeneric. AVX2.")
	dst, x, r, n, accp := arg("dst"), arg("x"), arg("r"), arg("groups"), arg("acc")
	laneLoop("as", n, accp, func(h int, acc reg.VecVirtual) {
		v := YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * h}, v)
		VADDPS(Mem{Base: r, Disp: 32 * h}, v, v)
		VMOVUPS(v, Mem{Base: dst, Disp: 32 * h})
		VADDPS(v, acc, acc)
	}, x, r, dst)
}

// sum: acc += x.
func sum() {
	kernel("eltSumA", "func(x *float32, groups int, acc *float32)",
		"eltSumA adds x[j] to acc[j%16] over 16*groups floats, as eltSumGeneric. AVX2.")
	x, n, accp := arg("x"), arg("groups"), arg("acc")
	laneLoop("su", n, accp, func(h int, acc reg.VecVirtual) {
		VADDPS(Mem{Base: x, Disp: 32 * h}, acc, acc)
	}, x)
}

// sumSqDev: d = x - mean, acc += float32(d*d).
func sumSqDev() {
	kernel("eltSumSqDevA", "func(x *float32, groups int, mean float32, acc *float32)",
		"eltSumSqDevA adds float32(d*d), d = x[j] - mean, to acc[j%16] over 16*groups",
		"floats, as eltSumSqDevGeneric (the product rounded, then added). AVX2.")
	x, n, accp := arg("x"), arg("groups"), arg("acc")
	mean := scalar("mean")
	laneLoop("sq", n, accp, func(h int, acc reg.VecVirtual) {
		d := YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * h}, d)
		VSUBPS(mean, d, d)
		VMULPS(d, d, d)
		VADDPS(d, acc, acc)
	}, x)
}

// normStep sets v (x[j] loaded) to float32(float32((x-mean)*rstd)*gamma) +
// beta, eltNormGeneric's steps (no fused multiply-add).
func normStep(v reg.VecVirtual, mean, rstd reg.VecVirtual, gamma, beta Mem) {
	VSUBPS(mean, v, v)
	VMULPS(rstd, v, v)
	VMULPS(gamma, v, v)
	VADDPS(beta, v, v)
}

// norm emits eltNormA, LayerNorm's normalization over 8*groups8 floats,
// or with quant eltNormQA: the same over 32*groups32 floats, plus the
// static u8 quantization of eltNormQGeneric.
func norm(quant bool) {
	if quant {
		kernel("eltNormQA", "func(dst *float32, q *uint8, x, gamma, beta, pre *float32, groups32 int, mean, rstd, inv, zp float32)",
			"eltNormQA is eltNormA over 32*groups32 floats that also quantizes each",
			"result y as eltNormQGeneric: q[j] = clamp(roundHalfEven(float32(y*pre[j])*inv",
			"+ zp), 0, 255), pre nil meaning no product. AVX2.")
	} else {
		kernel("eltNormA", "func(dst, x, gamma, beta *float32, groups8 int, mean, rstd float32)",
			"eltNormA sets dst[j] = (x[j]-mean)*rstd*gamma[j] + beta[j] over 8*groups8",
			"floats, each step rounded as eltNormGeneric. AVX2.")
	}
	// A group is u vectors of 8 floats.
	id, u, groupsArg := "nm", 1, "groups8"
	if quant {
		id, u, groupsArg = "nq", 4, "groups32"
	}
	dst := arg("dst")
	var q, pre reg.Register
	if quant {
		q = arg("q")
	}
	x, gamma, beta := arg("x"), arg("gamma"), arg("beta")
	if quant {
		pre = arg("pre")
	}
	n := arg(groupsArg)
	mean, rstd := scalar("mean"), scalar("rstd")
	var inv, zp reg.VecVirtual
	if quant {
		inv, zp = scalar("inv"), scalar("zp")
	}
	groups(id, n, func() {
		v := make([]reg.VecVirtual, u)
		for h := range v {
			v[h] = YMM()
		}
		for h := range v {
			VMOVUPS(Mem{Base: x, Disp: 32 * h}, v[h])
			normStep(v[h], mean, rstd, Mem{Base: gamma, Disp: 32 * h}, Mem{Base: beta, Disp: 32 * h})
			VMOVUPS(v[h], Mem{Base: dst, Disp: 32 * h})
		}
		if quant {
			timesPre(v, pre, id+"_nopre")
			for h := range v {
				toU8(v[h], inv, zp)
			}
			pack32(v, Mem{Base: q}, false)
		}
		advance(32*u, x, gamma, beta, dst)
		if quant {
			advance(32, q)
		}
	})
	ret()
}
