package main

// This file generates LayerNorm's row primitives: the sums of its
// statistics and the normalization, with (normQ) or without the static
// quantization of its output.

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/reg"
)

func addSum() {
	addReduce(sumOf, "eltAddSum", "func(dst, x, r []float32) float32", "r",
		"eltAddSum stores dst[j] = x[j] + r[j] for j < len(dst) and returns",
		"their sum in 16 lanes reduced as a tree (see eltAddSumGeneric).")
}

func sum() {
	reduceX(sumOf, "eltSum",
		"eltSum returns the sum of x in 16 lanes reduced as a tree (see eltSumGeneric).")
}

func sumSqDev() {
	kernel("eltSumSqDev", "func(x []float32, mean float32) float32",
		"eltSumSqDev returns the sum of (x[j]-mean)*(x[j]-mean), each product",
		"rounded, in 16 lanes reduced as a tree (see eltSumSqDevGeneric).")
	n, xp := length("x"), base("x")
	mean := scalar("mean")
	reduceRow(sumOf, n, func(i reg.GPVirtual, k reg.Register) reg.VecVirtual {
		v := load(f32At(xp, i), k)
		VSUBPS(mean, v, v)
		VMULPS(v, v, v)
		return v
	})
}

// normVec returns ((x[i]-mean)*rstd)*gamma[i] + beta[i].
func normVec(xp, g, b reg.Register, i reg.GPVirtual, k reg.Register, mean, rstd reg.VecVirtual) reg.VecVirtual {
	v := load(f32At(xp, i), k)
	VSUBPS(mean, v, v)
	VMULPS(rstd, v, v)
	VMULPS(load(f32At(g, i), k), v, v)
	VADDPS(load(f32At(b, i), k), v, v)
	return v
}

// norm emits eltNorm or, with quant, eltNormQ.
func norm(quant bool) {
	if quant {
		kernel("eltNormQ", "func(dst []float32, q []uint8, x, gamma, beta, pre []float32, mean, rstd, inv, zp float32)",
			"eltNormQ is eltNorm that also stores the static quantization of dst:",
			"",
			"\ty := ((x[j]-mean)*rstd)*gamma[j] + beta[j]",
			"\tdst[j] = y",
			"\tp := y*pre[j] (if len(pre) > 0)",
			"\tq[j] = uint8(roundHalfEven(clamp(p*inv + zp, 0, 255)))",
			"",
			"rounding each step to float32 (see eltNormQGeneric).")
	} else {
		kernel("eltNorm", "func(dst, x, gamma, beta []float32, mean, rstd float32)",
			"eltNorm stores, for j < len(dst),",
			"",
			"\tdst[j] = ((x[j]-mean)*rstd)*gamma[j] + beta[j]",
			"",
			"rounding each step to float32 (see eltNormGeneric).")
	}
	n, d := length("dst"), base("dst")
	var qp, pp, npre reg.Register
	if quant {
		qp = base("q")
	}
	xp, g, b := base("x"), base("gamma"), base("beta")
	if quant {
		pp, npre = base("pre"), length("pre")
	}
	mean, rstd := scalar("mean"), scalar("rstd")
	if !quant {
		rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
			store(normVec(xp, g, b, i, k, mean, rstd), f32At(d, i), k)
		})
		ret()
		return
	}
	inv, zp := scalar("inv"), scalar("zp")
	withOpt(npre, n, "nopre", func(withPre bool) func(i reg.GPVirtual, k reg.Register) {
		return func(i reg.GPVirtual, k reg.Register) {
			y := normVec(xp, g, b, i, k, mean, rstd)
			store(y, f32At(d, i), k)
			p := ZMM()
			if withPre {
				VMULPS(load(f32At(pp, i), k), y, p)
				VMULPS(inv, p, p)
			} else {
				VMULPS(inv, y, p)
			}
			VADDPS(zp, p, p)
			clampRound(p, "zero", "u8max")
			storeBytes(p, u8At(qp, i), k)
		}
	}, ret)
}
