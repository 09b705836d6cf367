package main

// This file generates LayerNorm's row primitives: the sums of the statistics and the
// normalization, with or without the static quantization of its output.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func addSum() {
	TEXT("eltAddSum", NOSPLIT, "func(dst, x, r []float32) float32")
	Doc("eltAddSum stores dst[j] = x[j] + r[j] for j < len(dst) and returns",
		"their sum in 16 lanes reduced as a tree (see eltAddSumGeneric).")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	rp := Load(Param("r").Base(), GP64())
	acc := ZMM()
	VXORPS(acc, acc, acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		w := load(f32At(rp, i), k)
		VADDPS(w, v, v)
		store(v, f32At(d, i), k)
		accAdd(v, acc, k)
	})
	storeF32(reduceSum(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

func sum() {
	TEXT("eltSum", NOSPLIT, "func(x []float32) float32")
	Doc("eltSum returns the sum of x in 16 lanes reduced as a tree (see eltSumGeneric).")
	n := Load(Param("x").Len(), GP64())
	xp := Load(Param("x").Base(), GP64())
	acc := ZMM()
	VXORPS(acc, acc, acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		accAdd(load(f32At(xp, i), k), acc, k)
	})
	storeF32(reduceSum(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

func sumSqDev() {
	TEXT("eltSumSqDev", NOSPLIT, "func(x []float32, mean float32) float32")
	Doc("eltSumSqDev returns the sum of (x[j]-mean)*(x[j]-mean), each product",
		"rounded, in 16 lanes reduced as a tree (see eltSumSqDevGeneric).")
	n := Load(Param("x").Len(), GP64())
	xp := Load(Param("x").Base(), GP64())
	mean := scalar("mean")
	acc := ZMM()
	VXORPS(acc, acc, acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VSUBPS(mean, v, v)
		VMULPS(v, v, v)
		accAdd(v, acc, k)
	})
	storeF32(reduceSum(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
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

func norm() {
	TEXT("eltNorm", NOSPLIT, "func(dst, x, gamma, beta []float32, mean, rstd float32)")
	Doc("eltNorm stores, for j < len(dst),",
		"",
		"\tdst[j] = ((x[j]-mean)*rstd)*gamma[j] + beta[j]",
		"",
		"rounding each step to float32 (see eltNormGeneric).")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	g := Load(Param("gamma").Base(), GP64())
	b := Load(Param("beta").Base(), GP64())
	mean, rstd := scalar("mean"), scalar("rstd")
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		store(normVec(xp, g, b, i, k, mean, rstd), f32At(d, i), k)
	})
	VZEROUPPER()
	RET()
}

func normQ() {
	TEXT("eltNormQ", NOSPLIT, "func(dst []float32, q []uint8, x, gamma, beta, pre []float32, mean, rstd, inv, zp float32)")
	Doc("eltNormQ is eltNorm that also stores the static quantization of dst:",
		"",
		"\ty := ((x[j]-mean)*rstd)*gamma[j] + beta[j]",
		"\tdst[j] = y",
		"\tp := y*pre[j] (if len(pre) > 0)",
		"\tq[j] = uint8(roundHalfEven(clamp(p*inv + zp, 0, 255)))",
		"",
		"rounding each step to float32 (see eltNormQGeneric).")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	qp := Load(Param("q").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	g := Load(Param("gamma").Base(), GP64())
	b := Load(Param("beta").Base(), GP64())
	pp := Load(Param("pre").Base(), GP64())
	npre := Load(Param("pre").Len(), GP64())
	mean, rstd := scalar("mean"), scalar("rstd")
	inv, zp := scalar("inv"), scalar("zp")
	body := func(withPre bool) func(i reg.GPVirtual, k reg.Register) {
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
	}
	TESTQ(npre, npre)
	JZ(LabelRef("nopre"))
	rowLoop(n, body(true))
	VZEROUPPER()
	RET()
	Label("nopre")
	rowLoop(n, body(false))
	VZEROUPPER()
	RET()
}
