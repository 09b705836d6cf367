package main

// This file generates the float32 softmax: the masked, scaled row maxima,
// the vector exp and its row sums, and the whole softmax of a head's rows
// in one call.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func maxMask() {
	addReduce(maxOf, "eltMaxMask", "func(dst, x, mask []float32) float32", "mask",
		"eltMaxMask stores dst[j] = x[j] + mask[j] for j < len(dst) and returns",
		"their maximum (16 lanes, acc = acc > v ? acc : v; see eltMaxMaskGeneric).")
}

// scaleMask is v = v*s (+ mask(), unless mask is nil), stored to at and
// folded into the maximum acc (lanes in k): a value of softmax's pass 1.
func scaleMask(v, s reg.VecVirtual, mask func() reg.VecVirtual, at Mem, acc reg.VecVirtual, k reg.Register) {
	VMULPS(s, v, v)
	if mask != nil {
		VADDPS(mask(), v, v)
	}
	store(v, at, k)
	accMax(v, acc, k)
}

func maxMaskScale() {
	kernel("eltMaxMaskScale", "func(dst, x, mask []float32, s float32) float32",
		"eltMaxMaskScale stores dst[j] = x[j]*s + mask[j] (the product rounded to",
		"float32; mask empty: + 0 is skipped) for j < len(dst) and returns their",
		"maximum (16 lanes, acc = acc > v ? acc : v; see eltMaxMaskScaleGeneric).")
	n, d, xp, mp, nm := length("dst"), base("dst"), base("x"), base("mask"), length("mask")
	sc := scalar("s")
	acc := negInfs()
	withOpt(nm, n, "nomask", func(withMask bool) func(i reg.GPVirtual, k reg.Register) {
		return func(i reg.GPVirtual, k reg.Register) {
			var mask func() reg.VecVirtual
			if withMask {
				mask = func() reg.VecVirtual { return load(f32At(mp, i), k) }
			}
			scaleMask(load(f32At(xp, i), k), sc, mask, f32At(d, i), acc, k)
		}
	}, func() { retF32(reduceMax(acc)) })
}

func maxRow() {
	reduceX(maxOf, "eltMax",
		"eltMax returns the maximum of x (16 lanes, acc = acc > v ? acc : v;",
		"see eltMaxGeneric); -Inf when x is empty.")
}

// expVecs replaces each x of xs by exp(x) (see eltExp), the vectors'
// instructions interleaved: x = max(x, -104) (x as src2, so NaN stays NaN),
// n = roundHalfEven(x*log2e), r = x - n*ln2hi (exact) - n*ln2lo and the
// polynomial by FMA (one rounding each, as fma32 in the twin), then
// VSCALEFPS by n.
func expVecs(xs []reg.VecVirtual, lo reg.VecVirtual) {
	u := len(xs)
	n, p, z := make([]reg.VecVirtual, u), make([]reg.VecVirtual, u), make([]reg.VecVirtual, u)
	for j := range xs {
		n[j], p[j], z[j] = ZMM(), ZMM(), ZMM()
		VMAXPS(xs[j], lo, xs[j])
	}
	for j := range xs {
		VMULPS_BCST(c("log2e"), xs[j], n[j])
	}
	for j := range xs {
		VRNDSCALEPS(U8(0), n[j], n[j])
	}
	for j := range xs {
		VFNMADD231PS_BCST(c("ln2hi"), n[j], xs[j]) // r = x - n*ln2hi
	}
	for j := range xs {
		VFNMADD231PS_BCST(c("ln2lo"), n[j], xs[j]) // r -= n*ln2lo
	}
	for j := range xs {
		VBROADCASTSS(c("e0"), p[j])
	}
	for _, e := range []string{"e1", "e2", "e3", "e4", "e5"} {
		for j := range xs {
			VFMADD213PS_BCST(c(e), xs[j], p[j]) // p = p*r + e
		}
	}
	for j := range xs {
		VMULPS(xs[j], xs[j], z[j])
	}
	for j := range xs {
		VFMADD213PS(xs[j], z[j], p[j]) // y = p*z + r
	}
	for j := range xs {
		VADDPS_BCST(c("one"), p[j], p[j])
	}
	for j := range xs {
		VSCALEFPS(n[j], p[j], xs[j])
	}
}

// expUnroll is how many vectors the main softmax exp loop interleaves.
const expUnroll = 4

func expSum() {
	kernel("eltExpSum", "func(dst, x []float32, m float32) float32",
		"eltExpSum stores dst[j] = exp(x[j] - m) for j < len(dst) with the vector",
		"exp of eltExp and returns their sum in 16 lanes reduced as a tree",
		"(see eltExpSumGeneric).")
	n, d, xp := length("dst"), base("dst"), base("x")
	m := scalar("m")
	lo := bcast("expmin")
	retF32(reduceSum(expSumRow(d, xp, n, m, lo)))
}

// smRow is one row of a softmax group: its dst and x pointers.
type smRow struct{ d, x reg.Register }

// expSumRow stores d[j] = exp(x[j] - m) for j < n (expUnroll vectors at a
// time, then one at a time with a masked tail) and returns the 16-lane sums,
// accumulated in element order.
func expSumRow(d, xp, n reg.Register, m, lo reg.VecVirtual) reg.VecVirtual {
	return expSumRows([]smRow{{d, xp}}, n, []reg.VecVirtual{m}, lo)[0]
}

// expSumRows is expSumRow for several rows of n at once (row r: d = x =
// rows[r].x, maximum ms[r]), their vectors interleaved: expUnroll/len(rows)
// vectors of each row per step.
func expSumRows(rows []smRow, n reg.Register, ms []reg.VecVirtual, lo reg.VecVirtual) []reg.VecVirtual {
	nr := len(rows)
	per := expUnroll / nr
	accs := make([]reg.VecVirtual, nr)
	for r := range accs {
		accs[r] = zeroed(VXORPS)
	}
	i := unrolledLoop(n, per, "unrolled_", "rest_", func(i reg.GPVirtual) {
		xs := make([][]reg.VecVirtual, nr)
		var all []reg.VecVirtual
		for r := range rows {
			xs[r] = loadVecs(rows[r].x, i, per)
			all = append(all, xs[r]...)
		}
		for r := range rows {
			subAll(ms[r], xs[r])
		}
		expVecs(all, lo)
		for r := range rows {
			storeVecs(xs[r], rows[r].d, i)
		}
		for r := range rows {
			for _, x := range xs[r] { // in element order, as the twin
				VADDPS(x, accs[r], accs[r])
			}
		}
	})
	rowLoopFrom(i, n, func(i reg.GPVirtual, k reg.Register) {
		vs := make([]reg.VecVirtual, nr)
		for r := range rows {
			vs[r] = load(f32At(rows[r].x, i), k)
			VSUBPS(ms[r], vs[r], vs[r])
		}
		expVecs(vs, lo)
		for r := range rows {
			store(vs[r], f32At(rows[r].d, i), k)
			accAdd(vs[r], accs[r], k)
		}
	})
	return accs
}

// smRet returns (rows - left + r, m, sum) from eltSoftmaxRows.
func smRet(left reg.Register, r int, m, sum reg.VecVirtual) {
	idx := arg("rows")
	SUBQ(left, idx)
	if r > 0 {
		ADDQ(U8(r), idx)
	}
	Store(idx, ReturnIndex(0))
	storeF32(m, ReturnIndex(1))
	storeF32(sum, ReturnIndex(2))
	ret()
}

// smScale multiplies row d (n floats) by 1/sum.
func smScale(d, n reg.Register, sum reg.VecVirtual) {
	inv := XMM()
	VMOVSS(c("one"), inv)
	VDIVSS(sum, inv, inv)
	iz := ZMM()
	VBROADCASTSS(inv, iz)
	scaleRow(d, n, iz)
}

// scaleRow multiplies the n floats at d by every lane of s.
func scaleRow(d, n reg.Register, s reg.VecVirtual) {
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(d, i), k)
		VMULPS(s, v, v)
		store(v, f32At(d, i), k)
	})
}

// jumpIfNonFinite jumps to l when the float32 in x is NaN or infinite.
func jumpIfNonFinite(x reg.VecVirtual, l string) {
	bits := GP32()
	VMOVD(x, bits)
	ANDL(U32(0x7fffffff), bits)
	CMPL(bits, U32(0x7f800000))
	JAE(LabelRef(l))
}

// smGroup emits the softmax of the rows of one group (see
// eltSoftmaxRowsGeneric): pass 1 of every row, then, when no maximum is
// -Inf, pass 2 of every row and, row by row, the check of its sum and pass
// 3; otherwise row by row the -Inf handling or passes 2 and 3.
func smGroup(rows []smRow, withMask bool, n, mp, left reg.Register, sc, lo reg.VecVirtual) {
	id := newID()
	accs := make([]reg.VecVirtual, len(rows))
	for r := range accs {
		accs[r] = negInfs()
	}
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		var mask func() reg.VecVirtual
		if withMask {
			mv := load(f32At(mp, i), k)
			mask = func() reg.VecVirtual { return mv }
		}
		for r := range rows {
			scaleMask(load(f32At(rows[r].x, i), k), sc, mask, f32At(rows[r].d, i), accs[r], k)
		}
	})
	ms := make([]reg.VecVirtual, len(rows))
	for r := range rows {
		ms[r] = reduceMax(accs[r])
	}
	bits := GP32()
	for r := range rows {
		VMOVD(ms[r], bits)
		CMPL(bits, U32(0xff800000))
		JE(LabelRef("slow_" + id))
	}
	mz := make([]reg.VecVirtual, len(rows))
	for r := range rows {
		mz[r] = ZMM()
		VBROADCASTSS(ms[r], mz[r])
	}
	dd := make([]smRow, len(rows))
	for r := range rows {
		dd[r] = smRow{rows[r].d, rows[r].d}
	}
	sums := expSumRows(dd, n, mz, lo)
	for r := range rows {
		s := reduceSum(sums[r])
		ok := "ok_" + id + string(rune('0'+r))
		bad := "bad_" + id + string(rune('0'+r))
		jumpIfNonFinite(s, bad)
		JMP(LabelRef(ok))
		Label(bad)
		smRet(left, r, ms[r], s)
		Label(ok)
		smScale(rows[r].d, n, s)
	}
	JMP(LabelRef("end_" + id))
	Label("slow_" + id)
	for r := range rows {
		sfx := id + string(rune('0'+r))
		VMOVD(ms[r], bits)
		CMPL(bits, U32(0xff800000))
		JNE(LabelRef("fin_" + sfx))
		// Maximum -Inf: an error if the row holds a NaN, else zeros.
		rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
			v := load(f32At(rows[r].d, i), k)
			kk := K()
			VCMPPS(U8(3), v, v, kk) // unordered: NaN
			KORTESTW(kk, kk)
			JNZ(LabelRef("nan_" + sfx))
		})
		z := ZMM()
		VXORPS(z, z, z)
		rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
			store(z, f32At(rows[r].d, i), k)
		})
		JMP(LabelRef("next_" + sfx))
		Label("nan_" + sfx)
		zx := XMM()
		VXORPS(zx, zx, zx)
		smRet(left, r, ms[r], zx)
		Label("fin_" + sfx)
		m1 := ZMM()
		VBROADCASTSS(ms[r], m1)
		s := reduceSum(expSumRow(rows[r].d, rows[r].d, n, m1, lo))
		jumpIfNonFinite(s, "sbad_"+sfx)
		smScale(rows[r].d, n, s)
		JMP(LabelRef("next_" + sfx))
		Label("sbad_" + sfx)
		smRet(left, r, ms[r], s)
		Label("next_" + sfx)
	}
	Label("end_" + id)
}

func softmaxRows() {
	kernel("eltSoftmaxRows", "func(dst, x, mask []float32, rows, n int, s float32) (i int, m, sum float32)",
		"eltSoftmaxRows is the scaled softmax of rows rows of n floats (dst and x",
		"hold rows*n, mask n or none), in pairs of rows and a last single row,",
		"exactly as eltSoftmaxRowsGeneric: it returns rows, 0, 0, or the first row",
		"whose values are in error with its maximum and sum.")
	d, xp, mp, nm := base("dst"), base("x"), base("mask"), length("mask")
	left, n := arg("rows"), arg("n")
	sc := scalar("s")
	lo := bcast("expmin")
	rowBytes := GP64()
	MOVQ(n, rowBytes)
	SHLQ(U8(2), rowBytes)
	TESTQ(nm, nm)
	JNZ(LabelRef("sm_mask"))
	for _, withMask := range []bool{false, true} {
		id := map[bool]string{true: "mask", false: "nomask"}[withMask]
		Label("sm_" + id)
		CMPQ(left, U8(2))
		JB(LabelRef("sm_one_" + id))
		db, xb := GP64(), GP64()
		LEAQ(Mem{Base: d, Index: rowBytes, Scale: 1}, db)
		LEAQ(Mem{Base: xp, Index: rowBytes, Scale: 1}, xb)
		smGroup([]smRow{{d, xp}, {db, xb}}, withMask, n, mp, left, sc, lo)
		LEAQ(Mem{Base: d, Index: rowBytes, Scale: 2}, d)
		LEAQ(Mem{Base: xp, Index: rowBytes, Scale: 2}, xp)
		SUBQ(U8(2), left)
		JMP(LabelRef("sm_" + id))
		Label("sm_one_" + id)
		TESTQ(left, left)
		JZ(LabelRef("sm_done"))
		smGroup([]smRow{{d, xp}}, withMask, n, mp, left, sc, lo)
		JMP(LabelRef("sm_done"))
	}
	Label("sm_done")
	Store(arg("rows"), ReturnIndex(0))
	z := XMM()
	VXORPS(z, z, z)
	storeF32(z, ReturnIndex(1))
	storeF32(z, ReturnIndex(2))
	ret()
}

func scale() {
	kernel("eltScale", "func(x []float32, s float32)", "eltScale multiplies every x[j] by s.")
	n, xp := length("x"), base("x")
	scaleRow(xp, n, scalar("s"))
	ret()
}
