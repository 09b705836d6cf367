// Command eltwise_avx2 generates kernels/eltwise_avx2_amd64.s: the AVX2 + FMA3
// passes of the scaled softmax (attention's), for CPUs without AVX-512.
// Each works on whole groups of 16 floats and keeps 16 lane accumulators
// (two ymm registers, lanes 0-7 and 8-15) exactly as the Go twins
// (eltMaxMaskScaleGeneric, eltExpSumGeneric, eltScaleGeneric) keep
// acc[j%16]; the caller adds the tail and reduces the lanes in Go, so the
// results are those of the twins bit for bit.
//
// Run from kernels/_gen:
//
//	go run ./eltwise_avx2 -out ../eltwise_avx2_amd64.s -stubs ../eltwise_avx2_stub_amd64.go -pkg kernels
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// paramMem is the memory operand of the float32 parameter name, for a
// VEX instruction to read it: avo's Load would emit a legacy-SSE MOVSS,
// which after 256-bit code costs a state transition or a false
// dependency on Intel cores.
func paramMem(name string) Op {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// Constants of eltExp (eltwise_generic.go), each as 8 equal lanes.
var (
	expMin = float32(-104)
	log2e  = float32(1.44269504088896341)
	ln2Hi  = float32(0.693359375)
	ln2Lo  = float32(-2.12194440e-4)
	expP   = []float32{1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1}
	nMax   = float32(128) // the largest 2^n the two-step scaling takes
)

var cnames []string
var ctab Mem

func defineConsts() {
	var vals []uint32
	add := func(name string, bits uint32) {
		cnames = append(cnames, name)
		vals = append(vals, bits)
	}
	f := math.Float32bits
	add("min", f(expMin))
	add("log2e", f(log2e))
	add("ln2hi", f(ln2Hi))
	add("ln2lo", f(ln2Lo))
	for i, c := range expP {
		add("p"+string(rune('0'+i)), f(c))
	}
	add("one", f(1))
	add("nmax", f(nMax))
	add("bias", 127)
	add("absmask", 0x7fffffff)
	add("qlo", f(-128))
	add("qhi", f(127))
	add("i128", 128)
	add("zero", 0)
	add("u8hi", f(255))
	// VPERMD indices that put the dwords of two VPACKSSDW + VPACKUSWB
	// rounds back in element order (see pack32).
	ctab = GLOBL("eltAVX2Const", RODATA|NOPTR)
	nb := len(cnames) // broadcast constants; the permutation follows
	for i, v := range vals[:nb] {
		for lane := 0; lane < 8; lane++ {
			DATA(32*i+4*lane, U32(v))
		}
	}
	for lane, idx := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(32*nb+4*lane, U32(idx))
	}
	cnames = append(cnames, "perm")
}

func cst(name string) Mem {
	for i, n := range cnames {
		if n == name {
			return ctab.Offset(32 * i)
		}
	}
	panic(name)
}

// loadLanes loads the 16 lane accumulators at accp (lanes 0-7 and 8-15).
func loadLanes(accp reg.Register) []reg.VecVirtual {
	acc := []reg.VecVirtual{YMM(), YMM()}
	VMOVUPS(Mem{Base: accp}, acc[0])
	VMOVUPS(Mem{Base: accp, Disp: 32}, acc[1])
	return acc
}

// storeLanes stores them back.
func storeLanes(acc []reg.VecVirtual, accp reg.Register) {
	VMOVUPS(acc[0], Mem{Base: accp})
	VMOVUPS(acc[1], Mem{Base: accp, Disp: 32})
}

// maxMaskScale: dst[j] = float32(x[j]*s) (+ mask[j]); acc[j%16] =
// max(acc[j%16], dst[j]) as VMAXPS(src1 acc, src2 dst).
func maxMaskScale() {
	TEXT("eltMaxMaskScaleA", NOSPLIT, "func(dst, x, mask *float32, groups int, s float32, acc *float32)")
	Pragma("noescape")
	Doc("eltMaxMaskScaleA is the first pass of the scaled softmax on 16*groups floats:",
		"dst[j] = x[j]*s (+ mask[j] when mask is not nil), and acc[j%16] becomes the",
		"maximum of acc[j%16] and dst[j] as eltMaxMaskScaleGeneric takes it. AVX2.")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	mask := Load(Param("mask"), GP64())
	n := Load(Param("groups"), GP64())
	accp := Load(Param("acc"), GP64())
	s := YMM()
	VBROADCASTSS(paramMem("s"), s)
	acc := loadLanes(accp)
	TESTQ(n, n)
	JZ(LabelRef("mms_done"))
	TESTQ(mask, mask)
	JZ(LabelRef("mms_nomask"))
	Label("mms_mask")
	for h := 0; h < 2; h++ {
		v := YMM()
		VMULPS(Mem{Base: x, Disp: 32 * h}, s, v)
		VADDPS(Mem{Base: mask, Disp: 32 * h}, v, v)
		VMOVUPS(v, Mem{Base: dst, Disp: 32 * h})
		VMAXPS(v, acc[h], acc[h])
	}
	ADDQ(U8(64), x)
	ADDQ(U8(64), mask)
	ADDQ(U8(64), dst)
	DECQ(n)
	JNZ(LabelRef("mms_mask"))
	JMP(LabelRef("mms_done"))
	Label("mms_nomask")
	for h := 0; h < 2; h++ {
		v := YMM()
		VMULPS(Mem{Base: x, Disp: 32 * h}, s, v)
		VMOVUPS(v, Mem{Base: dst, Disp: 32 * h})
		VMAXPS(v, acc[h], acc[h])
	}
	ADDQ(U8(64), x)
	ADDQ(U8(64), dst)
	DECQ(n)
	JNZ(LabelRef("mms_nomask"))
	Label("mms_done")
	storeLanes(acc, accp)
	VZEROUPPER()
	RET()
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
	TEXT("eltExpSumA", NOSPLIT, "func(dst, x *float32, groups int, m float32, acc *float32)")
	Pragma("noescape")
	Doc("eltExpSumA is the second pass of softmax on 16*groups floats: dst[j] =",
		"eltExp(x[j] - m) and acc[j%16] += dst[j], as eltExpSumGeneric (arguments",
		"x[j] - m <= 88 or NaN, as softmax's are). AVX2 and FMA3.")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("groups"), GP64())
	accp := Load(Param("acc"), GP64())
	m := YMM()
	VBROADCASTSS(paramMem("m"), m)
	acc := loadLanes(accp)
	TESTQ(n, n)
	JZ(LabelRef("es_done"))
	Label("es_loop")
	for h := 0; h < 2; h++ {
		v := YMM()
		VMOVUPS(Mem{Base: x, Disp: 32 * h}, v)
		VSUBPS(m, v, v)
		exp(v)
		VMOVUPS(v, Mem{Base: dst, Disp: 32 * h})
		VADDPS(v, acc[h], acc[h])
	}
	ADDQ(U8(64), x)
	ADDQ(U8(64), dst)
	DECQ(n)
	JNZ(LabelRef("es_loop"))
	Label("es_done")
	storeLanes(acc, accp)
	VZEROUPPER()
	RET()
}

// scale: x[j] *= s over 8*groups8 floats.
func scale() {
	TEXT("eltScaleA", NOSPLIT, "func(x *float32, groups8 int, s float32)")
	Pragma("noescape")
	Doc("eltScaleA multiplies 8*groups8 floats of x by s in place. AVX2.")
	x := Load(Param("x"), GP64())
	n := Load(Param("groups8"), GP64())
	s := YMM()
	VBROADCASTSS(paramMem("s"), s)
	TESTQ(n, n)
	JZ(LabelRef("sc_done"))
	Label("sc_loop")
	v := YMM()
	VMULPS(Mem{Base: x}, s, v)
	VMOVUPS(v, Mem{Base: x})
	ADDQ(U8(32), x)
	DECQ(n)
	JNZ(LabelRef("sc_loop"))
	Label("sc_done")
	VZEROUPPER()
	RET()
}

func main() {
	ConstraintExpr("amd64,gc,!purego,!noasm")
	defineConsts()
	maxMaskScale()
	expSum()
	scale()
	absMax()
	quantRow()
	sums()
	norm()
	normQ()
	quantU8()
	Generate()
}

// absMax: acc[j%8] = max(acc[j%8], bits(x[j]*pre[j]) & 0x7fffffff) as
// uint32 over 8*groups8 floats (pre nil: x[j] itself).
func absMax() {
	TEXT("eltAbsMaxA", NOSPLIT, "func(x, pre *float32, groups8 int, acc *uint32)")
	Pragma("noescape")
	Doc("eltAbsMaxA raises acc[j%8] to the bits of |x[j]| (|x[j]*pre[j]| rounded to",
		"float32 when pre is not nil) over 8*groups8 floats, as eltAbsMaxGeneric and",
		"eltAbsMaxPreGeneric compare them (unsigned, so a NaN is above +Inf). AVX2.")
	x := Load(Param("x"), GP64())
	pre := Load(Param("pre"), GP64())
	n := Load(Param("groups8"), GP64())
	accp := Load(Param("acc"), GP64())
	a, mask := YMM(), YMM()
	VMOVDQU(Mem{Base: accp}, a)
	VMOVDQU(cst("absmask"), mask)
	TESTQ(n, n)
	JZ(LabelRef("am_done"))
	TESTQ(pre, pre)
	JZ(LabelRef("am_plain"))
	Label("am_pre")
	v := YMM()
	VMOVUPS(Mem{Base: x}, v)
	VMULPS(Mem{Base: pre}, v, v)
	VPAND(mask, v, v)
	VPMAXUD(v, a, a)
	ADDQ(U8(32), x)
	ADDQ(U8(32), pre)
	DECQ(n)
	JNZ(LabelRef("am_pre"))
	JMP(LabelRef("am_done"))
	Label("am_plain")
	w := YMM()
	VPAND(Mem{Base: x}, mask, w)
	VPMAXUD(w, a, a)
	ADDQ(U8(32), x)
	DECQ(n)
	JNZ(LabelRef("am_plain"))
	Label("am_done")
	VMOVDQU(a, Mem{Base: accp})
	VZEROUPPER()
	RET()
}

// clampRound sets v to the int32 of eltRound(eltClamp(v, lo, hi)): VMAXPS
// with the bound second (a NaN v becomes lo), VMINPS, VCVTPS2DQ (half to
// even under the default MXCSR).
func clampRound(v reg.VecVirtual, lo, hi Mem) {
	VMAXPS(lo, v, v)
	VMINPS(hi, v, v)
	VCVTPS2DQ(v, v)
}

// pack32 stores 32 int32 in [0, 255] (v[0] elements 0-7 ... v[3] 24-31) as
// bytes at dst in order: VPACKSSDW interleaves per 128-bit lane, VPACKUSWB
// again, and VPERMD puts the dwords back in order.
func pack32(v []reg.VecVirtual, dst Mem) {
	VPACKSSDW(v[1], v[0], v[0]) // 0-3 8-11 | 4-7 12-15
	VPACKSSDW(v[3], v[2], v[2]) // 16-19 24-27 | 20-23 28-31
	VPACKUSWB(v[2], v[0], v[0]) // 0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31
	idx := YMM()
	VMOVDQU(cst("perm"), idx)
	VPERMD(v[0], idx, v[0])
	VMOVDQU(v[0], dst)
}

// quantRow: dst[j] = uint8(eltRound(eltClamp(x[j]*pre[j]*inv, -128, 127)) +
// 128) over 32*groups32 floats (pre nil: x[j]*inv).
func quantRow() {
	TEXT("eltQuantRowA", NOSPLIT, "func(dst *uint8, x, pre *float32, groups32 int, inv float32)")
	Pragma("noescape")
	Doc("eltQuantRowA quantizes 32*groups32 floats of x (times pre[j], rounded to",
		"float32, when pre is not nil) as eltQuantRowGeneric and",
		"eltQuantRowPreGeneric do: dst[j] = clamp(roundHalfEven(v*inv), -128, 127)",
		"+ 128. AVX2.")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	pre := Load(Param("pre"), GP64())
	n := Load(Param("groups32"), GP64())
	inv := YMM()
	VBROADCASTSS(paramMem("inv"), inv)
	TESTQ(n, n)
	JZ(LabelRef("qr_done"))
	Label("qr_loop")
	v := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for h := range v {
		VMOVUPS(Mem{Base: x, Disp: 32 * h}, v[h])
	}
	TESTQ(pre, pre)
	JZ(LabelRef("qr_nopre"))
	for h := range v {
		VMULPS(Mem{Base: pre, Disp: 32 * h}, v[h], v[h])
	}
	ADDQ(U8(128), pre)
	Label("qr_nopre")
	for h := range v {
		VMULPS(inv, v[h], v[h])
		clampRound(v[h], cst("qlo"), cst("qhi"))
		VPADDD(cst("i128"), v[h], v[h])
	}
	pack32(v, Mem{Base: dst})
	ADDQ(U8(128), x)
	ADDQ(U8(32), dst)
	DECQ(n)
	JNZ(LabelRef("qr_loop"))
	Label("qr_done")
	VZEROUPPER()
	RET()
}

// sums emits LayerNorm's three 16-lane sums: eltAddSumA (dst = x + r, acc
// += dst), eltSumA (acc += x) and eltSumSqDevA (d = x - mean, acc +=
// float32(d*d)), each over 16*groups floats with acc[j%16] as the Go twins.
func sums() {
	TEXT("eltAddSumA", NOSPLIT, "func(dst, x, r *float32, groups int, acc *float32)")
	Pragma("noescape")
	Doc("eltAddSumA sets dst[j] = x[j] + r[j] and adds it to acc[j%16] over 16*groups",
		"floats, as eltAddSumGeneric. AVX2.")
	{
		dst := Load(Param("dst"), GP64())
		x := Load(Param("x"), GP64())
		r := Load(Param("r"), GP64())
		n := Load(Param("groups"), GP64())
		accp := Load(Param("acc"), GP64())
		acc := loadLanes(accp)
		TESTQ(n, n)
		JZ(LabelRef("as_done"))
		Label("as_loop")
		for h := 0; h < 2; h++ {
			v := YMM()
			VMOVUPS(Mem{Base: x, Disp: 32 * h}, v)
			VADDPS(Mem{Base: r, Disp: 32 * h}, v, v)
			VMOVUPS(v, Mem{Base: dst, Disp: 32 * h})
			VADDPS(v, acc[h], acc[h])
		}
		ADDQ(U8(64), x)
		ADDQ(U8(64), r)
		ADDQ(U8(64), dst)
		DECQ(n)
		JNZ(LabelRef("as_loop"))
		Label("as_done")
		storeLanes(acc, accp)
		VZEROUPPER()
		RET()
	}

	TEXT("eltSumA", NOSPLIT, "func(x *float32, groups int, acc *float32)")
	Pragma("noescape")
	Doc("eltSumA adds x[j] to acc[j%16] over 16*groups floats, as eltSumGeneric. AVX2.")
	{
		x := Load(Param("x"), GP64())
		n := Load(Param("groups"), GP64())
		accp := Load(Param("acc"), GP64())
		acc := loadLanes(accp)
		TESTQ(n, n)
		JZ(LabelRef("su_done"))
		Label("su_loop")
		for h := 0; h < 2; h++ {
			VADDPS(Mem{Base: x, Disp: 32 * h}, acc[h], acc[h])
		}
		ADDQ(U8(64), x)
		DECQ(n)
		JNZ(LabelRef("su_loop"))
		Label("su_done")
		storeLanes(acc, accp)
		VZEROUPPER()
		RET()
	}

	TEXT("eltSumSqDevA", NOSPLIT, "func(x *float32, groups int, mean float32, acc *float32)")
	Pragma("noescape")
	Doc("eltSumSqDevA adds float32(d*d), d = x[j] - mean, to acc[j%16] over 16*groups",
		"floats, as eltSumSqDevGeneric (the product rounded, then added). AVX2.")
	{
		x := Load(Param("x"), GP64())
		n := Load(Param("groups"), GP64())
		accp := Load(Param("acc"), GP64())
		mean := YMM()
		VBROADCASTSS(paramMem("mean"), mean)
		acc := loadLanes(accp)
		TESTQ(n, n)
		JZ(LabelRef("sq_done"))
		Label("sq_loop")
		for h := 0; h < 2; h++ {
			d := YMM()
			VMOVUPS(Mem{Base: x, Disp: 32 * h}, d)
			VSUBPS(mean, d, d)
			VMULPS(d, d, d)
			VADDPS(d, acc[h], acc[h])
		}
		ADDQ(U8(64), x)
		DECQ(n)
		JNZ(LabelRef("sq_loop"))
		Label("sq_done")
		storeLanes(acc, accp)
		VZEROUPPER()
		RET()
	}
}

// normStep sets v (x[j] loaded) to float32(float32((x-mean)*rstd)*gamma) +
// beta, eltNormGeneric's steps (no fused multiply-add).
func normStep(v reg.VecVirtual, mean, rstd reg.VecVirtual, gamma, beta Mem) {
	VSUBPS(mean, v, v)
	VMULPS(rstd, v, v)
	VMULPS(gamma, v, v)
	VADDPS(beta, v, v)
}

// norm: LayerNorm's normalization over 8*groups8 floats.
func norm() {
	TEXT("eltNormA", NOSPLIT, "func(dst, x, gamma, beta *float32, groups8 int, mean, rstd float32)")
	Pragma("noescape")
	Doc("eltNormA sets dst[j] = (x[j]-mean)*rstd*gamma[j] + beta[j] over 8*groups8",
		"floats, each step rounded as eltNormGeneric. AVX2.")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	gamma := Load(Param("gamma"), GP64())
	beta := Load(Param("beta"), GP64())
	n := Load(Param("groups8"), GP64())
	mean, rstd := YMM(), YMM()
	VBROADCASTSS(paramMem("mean"), mean)
	VBROADCASTSS(paramMem("rstd"), rstd)
	TESTQ(n, n)
	JZ(LabelRef("nm_done"))
	Label("nm_loop")
	v := YMM()
	VMOVUPS(Mem{Base: x}, v)
	normStep(v, mean, rstd, Mem{Base: gamma}, Mem{Base: beta})
	VMOVUPS(v, Mem{Base: dst})
	ADDQ(U8(32), x)
	ADDQ(U8(32), gamma)
	ADDQ(U8(32), beta)
	ADDQ(U8(32), dst)
	DECQ(n)
	JNZ(LabelRef("nm_loop"))
	Label("nm_done")
	VZEROUPPER()
	RET()
}

// normQ: norm, plus the static u8 quantization of eltNormQGeneric, over
// 32*groups32 floats.
func normQ() {
	TEXT("eltNormQA", NOSPLIT, "func(dst *float32, q *uint8, x, gamma, beta, pre *float32, groups32 int, mean, rstd, inv, zp float32)")
	Pragma("noescape")
	Doc("eltNormQA is eltNormA over 32*groups32 floats that also quantizes each",
		"result y as eltNormQGeneric: q[j] = clamp(roundHalfEven(float32(y*pre[j])*inv",
		"+ zp), 0, 255), pre nil meaning no product. AVX2.")
	dst := Load(Param("dst"), GP64())
	q := Load(Param("q"), GP64())
	x := Load(Param("x"), GP64())
	gamma := Load(Param("gamma"), GP64())
	beta := Load(Param("beta"), GP64())
	pre := Load(Param("pre"), GP64())
	n := Load(Param("groups32"), GP64())
	mean, rstd, inv, zp := YMM(), YMM(), YMM(), YMM()
	VBROADCASTSS(paramMem("mean"), mean)
	VBROADCASTSS(paramMem("rstd"), rstd)
	VBROADCASTSS(paramMem("inv"), inv)
	VBROADCASTSS(paramMem("zp"), zp)
	TESTQ(n, n)
	JZ(LabelRef("nq_done"))
	Label("nq_loop")
	v := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for h := range v {
		VMOVUPS(Mem{Base: x, Disp: 32 * h}, v[h])
		normStep(v[h], mean, rstd, Mem{Base: gamma, Disp: 32 * h}, Mem{Base: beta, Disp: 32 * h})
		VMOVUPS(v[h], Mem{Base: dst, Disp: 32 * h})
	}
	TESTQ(pre, pre)
	JZ(LabelRef("nq_nopre"))
	for h := range v {
		VMULPS(Mem{Base: pre, Disp: 32 * h}, v[h], v[h])
	}
	ADDQ(U8(128), pre)
	Label("nq_nopre")
	for h := range v {
		VMULPS(inv, v[h], v[h])
		VADDPS(zp, v[h], v[h])
		clampRound(v[h], cst("zero"), cst("u8hi"))
	}
	pack32(v, Mem{Base: q})
	ADDQ(U8(128), x)
	ADDQ(U8(128), gamma)
	ADDQ(U8(128), beta)
	ADDQ(U8(128), dst)
	ADDQ(U8(32), q)
	DECQ(n)
	JNZ(LabelRef("nq_loop"))
	Label("nq_done")
	VZEROUPPER()
	RET()
}

// quantU8: static u8 quantization of 32*groups32 floats with the absolute
// maximum's bits, as eltQuantU8Generic.
func quantU8() {
	TEXT("eltQuantU8A", NOSPLIT, "func(dst *uint8, x *float32, groups32 int, inv, zp float32, acc *uint32)")
	Pragma("noescape")
	Doc("eltQuantU8A sets dst[j] = clamp(roundHalfEven(float32(x[j]*inv) + zp), 0, 255)",
		"over 32*groups32 floats and raises acc[j%8] to the bits of |x[j]|, as",
		"eltQuantU8Generic. AVX2.")
	dst := Load(Param("dst"), GP64())
	x := Load(Param("x"), GP64())
	n := Load(Param("groups32"), GP64())
	accp := Load(Param("acc"), GP64())
	inv, zp, a, mask := YMM(), YMM(), YMM(), YMM()
	VBROADCASTSS(paramMem("inv"), inv)
	VBROADCASTSS(paramMem("zp"), zp)
	VMOVDQU(Mem{Base: accp}, a)
	VMOVDQU(cst("absmask"), mask)
	TESTQ(n, n)
	JZ(LabelRef("qu_done"))
	Label("qu_loop")
	v := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for h := range v {
		VMOVUPS(Mem{Base: x, Disp: 32 * h}, v[h])
		b := YMM()
		VPAND(mask, v[h], b)
		VPMAXUD(b, a, a)
		VMULPS(inv, v[h], v[h])
		VADDPS(zp, v[h], v[h])
		clampRound(v[h], cst("zero"), cst("u8hi"))
	}
	pack32(v, Mem{Base: dst})
	ADDQ(U8(128), x)
	ADDQ(U8(32), dst)
	DECQ(n)
	JNZ(LabelRef("qu_loop"))
	Label("qu_done")
	VMOVDQU(a, Mem{Base: accp})
	VZEROUPPER()
	RET()
}
