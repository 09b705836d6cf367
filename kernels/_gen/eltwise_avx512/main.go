// Command eltwise_avx512 generates the AVX-512 element-wise kernels of package
// kernels (eltwise_avx512_amd64.s and its Go stubs): the per-row primitives of
// LayerNorm, Softmax, GELU and the quantize / dequantize steps.
//
//	cd kernels/_gen && go run ./eltwise_avx512 -out ../eltwise_avx512_amd64.s -stubs ../eltwise_avx512_stub_amd64.go -pkg kernels
//
// Every kernel walks its row 16 floats at a time and finishes with one
// k-masked step (zeroing loads, masked stores and masked accumulation), so it
// never touches memory past its slices. Each one performs exactly the float32
// operations of its Go twin in kernels/eltwise_generic.go, in the same order:
// 16 lane accumulators reduced as a tree (lane i += lane i+w, w = 8, 4, 2, 1),
// constants broadcast from one table, no FMA except the exact split of a*a in
// GELU and Softmax's exp (the twin's fma32 rounds each once, as VFMADD), VMAXPS/VMINPS operand order chosen so NaN behaves as the twin says.
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Constants (must equal those of eltwise_generic.go).
var consts = []struct {
	name string
	bits uint32
}{
	{"log2e", f(1.44269504088896341)},
	{"ln2hi", f(0.693359375)},
	{"ln2lo", f(-2.12194440e-4)},
	{"expmin", f(-104)},
	{"expmax", f(88)},
	{"e0", f(1.9875691500e-4)},
	{"e1", f(1.3981999507e-3)},
	{"e2", f(8.3334519073e-3)},
	{"e3", f(4.1665795894e-2)},
	{"e4", f(1.6666665459e-1)},
	{"e5", f(5.0000001201e-1)},
	{"one", f(1)},
	{"ln2", f(0.69314718055994530942)},
	{"u8expmin", f(-16)},
	{"rndmagic", f(12582912)},
	{"u8maxi", 255},
	{"u8e0", f(2.5499981167e+02)},
	{"u8e1", f(2.5499066824e+02)},
	{"u8e2", f(1.2751111459e+02)},
	{"u8e3", f(4.2816813399e+01)},
	{"u8e4", f(1.0571945088e+01)},
	{"half", f(0.5)},
	{"zero", f(0)},
	{"u8max", f(255)},
	{"s8min", f(-128)},
	{"s8max", f(127)},
	{"i128", 128},
	{"absmask", 0x7fffffff},
	{"u8mask", 0xff},
	{"signmask", 0x80000000},
	{"invsqrt2", f(0.70710678118654752440)},
	{"geluabsmax", f(14.5)},
	{"geluzerolt", f(-14)},
	{"erfck", f(-1.26551223)},
	{"p0", f(0.17087277)},
	{"p1", f(-0.82215223)},
	{"p2", f(1.48851587)},
	{"p3", f(-1.13520398)},
	{"p4", f(0.27886807)},
	{"p5", f(-0.18628806)},
	{"p6", f(0.09678418)},
	{"p7", f(0.37409196)},
	{"p8", f(1.00002368)},
}

func f(x float64) uint32 { return math.Float32bits(float32(x)) }

var table Mem
var offsets = map[string]int{}

// c returns the table entry name (a 32-bit memory operand for broadcasts).
func c(name string) Mem {
	off, ok := offsets[name]
	if !ok {
		panic("no constant " + name)
	}
	return table.Offset(off)
}

// bcast loads constant name into a new ZMM register.
func bcast(name string) reg.VecVirtual {
	z := ZMM()
	VBROADCASTSS(c(name), z)
	return z
}

// storeF32 stores the float32 in x's low lane to the result c with a VEX
// VMOVSS: avo's Store would emit a legacy-SSE MOVSS, which with the upper
// halves of the registers dirty costs a state transition (Haswell) or a
// false dependency (later Intel cores).
func storeF32(x reg.VecVirtual, c gotypes.Component) {
	b, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	VMOVSS(x, b.Addr)
}

// scalar broadcasts the float32 parameter name into a new ZMM register.
func scalar(name string) reg.VecVirtual {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	// Broadcast from memory: avo's Load would emit a legacy-SSE MOVSS.
	z := ZMM()
	VBROADCASTSS(b.Addr, z)
	return z
}

func main() {
	ConstraintExpr("amd64,gc,!purego,!noasm")
	table = GLOBL("eltconst", RODATA|NOPTR)
	for i, k := range consts {
		DATA(4*i, U32(k.bits))
		offsets[k.name] = 4 * i
	}
	addSum()
	sum()
	sumSqDev()
	norm()
	normQ()
	maxMask()
	maxMaskScale()
	maxRow()
	expSum()
	softmaxRows()
	scale()
	gelu()
	absMax()
	quantRow()
	absMaxPre()
	quantRowPre()
	quantStatic("eltQuantU8", "func(dst []uint8, x []float32, inv, zp float32) uint32", "zero", "u8max", "uint8")
	expQuantU8()
	softmaxU8Rows()
	packQuantKRow()
	packQuantVT4()
	qkvToken()
	quantStatic("eltQuantS8", "func(dst []int8, x []float32, inv, zp float32) uint32", "s8min", "s8max", "int8")
	dequantU8()
	dequantS32()
	transpose16()
	Generate()
}

var loopID int

// rowLoop emits a loop over n elements: body(i, nil) for each full vector of
// 16 at element index i, then body(i, k) once for the remaining n%16 elements
// with k holding their mask.
func rowLoop(n reg.Register, body func(i reg.GPVirtual, k reg.Register)) {
	i := GP64()
	XORQ(i, i)
	rowLoopFrom(i, n, body)
}

// rowLoopFrom is rowLoop starting at element i (a multiple of 16).
func rowLoopFrom(i reg.GPVirtual, n reg.Register, body func(i reg.GPVirtual, k reg.Register)) {
	loopID++
	id := string(rune('a'+loopID/26)) + string(rune('a'+loopID%26))
	full := GP64()
	MOVQ(n, full)
	ANDQ(I32(-16), full)
	Label("full_" + id)
	CMPQ(i, full)
	JAE(LabelRef("tail_" + id))
	body(i, nil)
	ADDQ(I8(16), i)
	JMP(LabelRef("full_" + id))
	Label("tail_" + id)
	_, k := tailMask(n, i, "done_"+id)
	body(i, k)
	Label("done_" + id)
}

// tailMask computes rem = n - i, jumps to done when it is 0, and returns
// rem and a mask register of its low rem lanes.
func tailMask(n, i reg.Register, done string) (reg.GPVirtual, reg.Register) {
	rem := GP64()
	MOVQ(n, rem)
	SUBQ(i, rem)
	JZ(LabelRef(done))
	MOVQ(rem, reg.RCX)
	m := GP32()
	MOVL(U32(1), m)
	SHLL(reg.CL, m)
	DECL(m)
	k := K()
	KMOVW(m, k)
	return rem, k
}

// reduceAddI32 returns the sum of z's 16 int32 lanes in a GP register.
func reduceAddI32(z reg.VecVirtual) reg.GPVirtual { return reduceLanes32(z, VPADDD) }

func f32At(base reg.Register, i reg.GPVirtual) Mem { return Mem{Base: base, Index: i, Scale: 4} }
func u8At(base reg.Register, i reg.GPVirtual) Mem  { return Mem{Base: base, Index: i, Scale: 1} }

// load reads 16 float32 (or int32) at m, zeroing the lanes off in k.
func load(m Mem, k reg.Register) reg.VecVirtual {
	z := ZMM()
	if k == nil {
		VMOVUPS(m, z)
	} else {
		VMOVUPS_Z(m, k, z)
	}
	return z
}

func store(z reg.VecVirtual, m Mem, k reg.Register) {
	if k == nil {
		VMOVUPS(z, m)
	} else {
		VMOVUPS(z, k, m)
	}
}

// storeBytes narrows the 16 int32 lanes of z to bytes (truncating) and
// stores those under k.
func storeBytes(z reg.VecVirtual, m Mem, k reg.Register) {
	x := XMM()
	VPMOVDB(z, x)
	if k == nil {
		VMOVDQU(x, m)
	} else {
		VMOVDQU8(x, k, m)
	}
}

// accAdd adds v into acc (only the lanes in k).
func accAdd(v, acc reg.VecVirtual, k reg.Register) {
	if k == nil {
		VADDPS(v, acc, acc)
	} else {
		VADDPS(v, acc, k, acc)
	}
}

// accMax is acc = acc > v ? acc : v (VMAXPS with acc as src1), lanes in k.
func accMax(v, acc reg.VecVirtual, k reg.Register) {
	if k == nil {
		VMAXPS(v, acc, acc)
	} else {
		VMAXPS(v, acc, k, acc)
	}
}

// reduceSum returns the tree sum of z's 16 lanes in an XMM register.
func reduceSum(z reg.VecVirtual) reg.VecVirtual {
	y := YMM()
	VEXTRACTF64X4(U8(1), z, y)
	VADDPS(y, z.AsY(), y)
	x := XMM()
	VEXTRACTF128(U8(1), y, x)
	VADDPS(x, y.AsX(), x)
	x2 := XMM()
	VMOVHLPS(x, x, x2)
	VADDPS(x2, x, x)
	VMOVSHDUP(x, x2)
	VADDSS(x2, x, x)
	return x
}

// reduceMax returns the tree max (lower lane as src1) of z's 16 lanes.
func reduceMax(z reg.VecVirtual) reg.VecVirtual {
	y := YMM()
	VEXTRACTF64X4(U8(1), z, y)
	VMAXPS(y, z.AsY(), y)
	x := XMM()
	VEXTRACTF128(U8(1), y, x)
	VMAXPS(x, y.AsX(), x)
	x2 := XMM()
	VMOVHLPS(x, x, x2)
	VMAXPS(x2, x, x)
	VMOVSHDUP(x, x2)
	VMAXSS(x2, x, x)
	return x
}

func reduceMaxU32(z reg.VecVirtual) reg.GPVirtual { return reduceLanes32(z, VPMAXUD) }

// reduceLanes32 folds z's 16 32-bit lanes with op (VPADDD, VPMAXUD) as a
// tree and returns the result in a GP register.
func reduceLanes32(z reg.VecVirtual, op func(...Op)) reg.GPVirtual {
	y := YMM()
	VEXTRACTI64X4(U8(1), z, y)
	op(y, z.AsY(), y)
	x := XMM()
	VEXTRACTI128(U8(1), y, x)
	op(x, y.AsX(), x)
	x2 := XMM()
	VPSHUFD(U8(0x4e), x, x2)
	op(x2, x, x)
	VPSHUFD(U8(0xb1), x, x2)
	op(x2, x, x)
	r := GP32()
	VMOVD(x, r)
	return r
}

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

// clampRound clamps p to [lo, hi] with p as src1 (NaN becomes lo) and
// converts it to int32 with round half to even.
func clampRound(p reg.VecVirtual, lo, hi string) {
	VMAXPS_BCST(c(lo), p, p)
	VMINPS_BCST(c(hi), p, p)
	VCVTPS2DQ(p, p)
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

func maxMask() {
	TEXT("eltMaxMask", NOSPLIT, "func(dst, x, mask []float32) float32")
	Doc("eltMaxMask stores dst[j] = x[j] + mask[j] for j < len(dst) and returns",
		"their maximum (16 lanes, acc = acc > v ? acc : v; see eltMaxMaskGeneric).")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	mp := Load(Param("mask").Base(), GP64())
	acc := ZMM()
	negInf(acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VADDPS(load(f32At(mp, i), k), v, v)
		store(v, f32At(d, i), k)
		accMax(v, acc, k)
	})
	storeF32(reduceMax(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

func maxMaskScale() {
	TEXT("eltMaxMaskScale", NOSPLIT, "func(dst, x, mask []float32, s float32) float32")
	Doc("eltMaxMaskScale stores dst[j] = x[j]*s + mask[j] (the product rounded to",
		"float32; mask empty: + 0 is skipped) for j < len(dst) and returns their",
		"maximum (16 lanes, acc = acc > v ? acc : v; see eltMaxMaskScaleGeneric).")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	mp := Load(Param("mask").Base(), GP64())
	nm := Load(Param("mask").Len(), GP64())
	sc := scalar("s")
	acc := ZMM()
	negInf(acc)
	body := func(withMask bool) func(i reg.GPVirtual, k reg.Register) {
		return func(i reg.GPVirtual, k reg.Register) {
			v := load(f32At(xp, i), k)
			VMULPS(sc, v, v)
			if withMask {
				VADDPS(load(f32At(mp, i), k), v, v)
			}
			store(v, f32At(d, i), k)
			accMax(v, acc, k)
		}
	}
	TESTQ(nm, nm)
	JZ(LabelRef("nomask"))
	rowLoop(n, body(true))
	storeF32(reduceMax(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
	Label("nomask")
	rowLoop(n, body(false))
	storeF32(reduceMax(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// negInf sets every lane of z to -Inf.
func negInf(z reg.VecVirtual) {
	r := GP32()
	MOVL(U32(0xff800000), r)
	VPBROADCASTD(r, z)
}

func maxRow() {
	TEXT("eltMax", NOSPLIT, "func(x []float32) float32")
	Doc("eltMax returns the maximum of x (16 lanes, acc = acc > v ? acc : v;",
		"see eltMaxGeneric); -Inf when x is empty.")
	n := Load(Param("x").Len(), GP64())
	xp := Load(Param("x").Base(), GP64())
	acc := ZMM()
	negInf(acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		accMax(load(f32At(xp, i), k), acc, k)
	})
	storeF32(reduceMax(acc), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// expTails turns each reduced argument r[j] into exp(r[j])*2^n[j], in
// place, the vectors' instructions interleaved.
func expTails(r, n []reg.VecVirtual) {
	p, z := make([]reg.VecVirtual, len(r)), make([]reg.VecVirtual, len(r))
	for j := range r {
		p[j], z[j] = ZMM(), ZMM()
		VBROADCASTSS(c("e0"), p[j])
	}
	for _, e := range []string{"e1", "e2", "e3", "e4", "e5"} {
		for j := range r {
			VMULPS(r[j], p[j], p[j])
		}
		for j := range r {
			VADDPS_BCST(c(e), p[j], p[j])
		}
	}
	for j := range r {
		VMULPS(r[j], r[j], z[j])
	}
	for j := range r {
		VMULPS(z[j], p[j], p[j])
	}
	for j := range r {
		VADDPS(r[j], p[j], p[j])
	}
	for j := range r {
		VADDPS_BCST(c("one"), p[j], p[j])
	}
	for j := range r {
		VSCALEFPS(n[j], p[j], r[j])
	}
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

// expVecsU8 replaces each x of xs by 255*exp(x) to the precision P's u8
// needs (see eltExpU8; docs/DESIGN.md section 3.10), the vectors'
// instructions interleaved: x = max(x, -16) (x as src2, so NaN stays NaN),
// n = roundHalfEven(x*log2e), r = x - n*ln2 in one FMA, the degree-4
// polynomial (255 folded into its coefficients) by FMA, then VSCALEFPS by n.
func expVecsU8(xs []reg.VecVirtual, lo reg.VecVirtual) {
	n, p := make([]reg.VecVirtual, len(xs)), make([]reg.VecVirtual, len(xs))
	for j := range xs {
		n[j], p[j] = ZMM(), ZMM()
		VMAXPS(xs[j], lo, xs[j])
	}
	// n = roundHalfEven(x*log2e) by the magic add (one FMA and one
	// subtraction, where VMULPS and VRNDSCALEPS are three uops on Intel).
	for j := range xs {
		VBROADCASTSS(c("rndmagic"), n[j])
	}
	for j := range xs {
		VFMADD231PS_BCST(c("log2e"), xs[j], n[j])
	}
	for j := range xs {
		VSUBPS_BCST(c("rndmagic"), n[j], n[j])
	}
	for j := range xs {
		VFNMADD231PS_BCST(c("ln2"), n[j], xs[j]) // r = x - n*ln2
	}
	for j := range xs {
		VBROADCASTSS(c("u8e4"), p[j])
	}
	for _, e := range []string{"u8e3", "u8e2", "u8e1", "u8e0"} {
		for j := range xs {
			VFMADD213PS_BCST(c(e), xs[j], p[j]) // p = p*r + e
		}
	}
	for j := range xs {
		VSCALEFPS(n[j], p[j], xs[j])
	}
}

// expUnroll is how many vectors the main softmax exp loop interleaves.
const expUnroll = 4

func expSum() {
	TEXT("eltExpSum", NOSPLIT, "func(dst, x []float32, m float32) float32")
	Doc("eltExpSum stores dst[j] = exp(x[j] - m) for j < len(dst) with the vector",
		"exp of eltExp and returns their sum in 16 lanes reduced as a tree",
		"(see eltExpSumGeneric).")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	m := scalar("m")
	lo := bcast("expmin")
	storeF32(reduceSum(expSumRow(d, xp, n, m, lo)), ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// smRow is one row of a softmax group: its dst and x pointers.
type smRow struct{ d, x reg.Register }

func newID() string {
	loopID++
	return string(rune('a'+loopID/26)) + string(rune('a'+loopID%26))
}

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
	id := newID()
	nr := len(rows)
	per := expUnroll / nr
	accs := make([]reg.VecVirtual, nr)
	for r := range accs {
		accs[r] = ZMM()
		VXORPS(accs[r], accs[r], accs[r])
	}
	i := GP64()
	XORQ(i, i)
	big := GP64()
	MOVQ(n, big)
	ANDQ(I32(-16*per), big)
	Label("unrolled_" + id)
	CMPQ(i, big)
	JAE(LabelRef("rest_" + id))
	xs := make([]reg.VecVirtual, nr*per)
	for r := range rows {
		for j := 0; j < per; j++ {
			xs[r*per+j] = ZMM()
			VMOVUPS(f32At(rows[r].x, i).Offset(64*j), xs[r*per+j])
		}
	}
	for r := range rows {
		for j := 0; j < per; j++ {
			VSUBPS(ms[r], xs[r*per+j], xs[r*per+j])
		}
	}
	expVecs(xs, lo)
	for r := range rows {
		for j := 0; j < per; j++ {
			VMOVUPS(xs[r*per+j], f32At(rows[r].d, i).Offset(64*j))
		}
	}
	for r := range rows {
		for j := 0; j < per; j++ { // in element order, as the twin
			VADDPS(xs[r*per+j], accs[r], accs[r])
		}
	}
	ADDQ(U32(16*per), i)
	JMP(LabelRef("unrolled_" + id))
	Label("rest_" + id)
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
	idx := Load(Param("rows"), GP64())
	SUBQ(left, idx)
	if r > 0 {
		ADDQ(U8(r), idx)
	}
	Store(idx, ReturnIndex(0))
	storeF32(m, ReturnIndex(1))
	storeF32(sum, ReturnIndex(2))
	VZEROUPPER()
	RET()
}

// smScale multiplies row d (n floats) by 1/sum.
func smScale(d, n reg.Register, sum reg.VecVirtual) {
	inv := XMM()
	VMOVSS(c("one"), inv)
	VDIVSS(sum, inv, inv)
	iz := ZMM()
	VBROADCASTSS(inv, iz)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(d, i), k)
		VMULPS(iz, v, v)
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
		accs[r] = ZMM()
		negInf(accs[r])
	}
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		var mv reg.VecVirtual
		if withMask {
			mv = load(f32At(mp, i), k)
		}
		for r := range rows {
			v := load(f32At(rows[r].x, i), k)
			VMULPS(sc, v, v)
			if withMask {
				VADDPS(mv, v, v)
			}
			store(v, f32At(rows[r].d, i), k)
			accMax(v, accs[r], k)
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
	TEXT("eltSoftmaxRows", NOSPLIT, "func(dst, x, mask []float32, rows, n int, s float32) (i int, m, sum float32)")
	Doc("eltSoftmaxRows is the scaled softmax of rows rows of n floats (dst and x",
		"hold rows*n, mask n or none), in pairs of rows and a last single row,",
		"exactly as eltSoftmaxRowsGeneric: it returns rows, 0, 0, or the first row",
		"whose values are in error with its maximum and sum.")
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	mp := Load(Param("mask").Base(), GP64())
	nm := Load(Param("mask").Len(), GP64())
	left := Load(Param("rows"), GP64())
	n := Load(Param("n"), GP64())
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
	idx := Load(Param("rows"), GP64())
	Store(idx, ReturnIndex(0))
	z := XMM()
	VXORPS(z, z, z)
	storeF32(z, ReturnIndex(1))
	storeF32(z, ReturnIndex(2))
	VZEROUPPER()
	RET()
}

func scale() {
	TEXT("eltScale", NOSPLIT, "func(x []float32, s float32)")
	Doc("eltScale multiplies every x[j] by s.")
	n := Load(Param("x").Len(), GP64())
	xp := Load(Param("x").Base(), GP64())
	s := scalar("s")
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VMULPS(s, v, v)
		store(v, f32At(xp, i), k)
	})
	VZEROUPPER()
	RET()
}

// geluVecs returns GELU(x) as eltGELU1 computes it for each of xs, the
// vectors' instructions interleaved so that their long dependency chains
// overlap.
func geluVecs(xs []reg.VecVirtual, ones, zero, m14 reg.VecVirtual) []reg.VecVirtual {
	u := len(xs)
	vs := func() []reg.VecVirtual {
		r := make([]reg.VecVirtual, u)
		for j := range r {
			r[j] = ZMM()
		}
		return r
	}
	each := func(f func(j int)) {
		for j := 0; j < u; j++ {
			f(j)
		}
	}
	ax, t, q, x2, lo, a, s, n, h, phi, y := vs(), vs(), vs(), vs(), vs(), vs(), vs(), vs(), vs(), vs(), vs()
	each(func(j int) { VPANDD_BCST(c("absmask"), xs[j], ax[j]) })
	each(func(j int) { VMINPS_BCST(c("geluabsmax"), ax[j], ax[j]) })
	each(func(j int) { VMULPS_BCST(c("invsqrt2"), ax[j], t[j]) }) // z
	each(func(j int) { VMULPS_BCST(c("half"), t[j], t[j]) })
	each(func(j int) { VADDPS(ones, t[j], t[j]) })
	each(func(j int) { VDIVPS(t[j], ones, t[j]) }) // t = 1/(z/2 + 1)
	each(func(j int) { VBROADCASTSS(c("p0"), q[j]) })
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"} {
		each(func(j int) { VMULPS(t[j], q[j], q[j]) })
		each(func(j int) { VADDPS_BCST(c(p), q[j], q[j]) })
	}
	each(func(j int) { VMULPS(t[j], q[j], q[j]) })
	each(func(j int) { VADDPS_BCST(c("erfck"), q[j], q[j]) })
	each(func(j int) { VMULPS(ax[j], ax[j], x2[j]) })
	each(func(j int) { VMOVAPS(x2[j], lo[j]) })
	each(func(j int) { VFMSUB231PS(ax[j], ax[j], lo[j]) }) // lo = ax*ax - x2, exact
	each(func(j int) { VMULPS_BCST(c("half"), lo[j], lo[j]) })
	each(func(j int) { VSUBPS(lo[j], q[j], q[j]) })              // b = q - lo
	each(func(j int) { VMULPS_BCST(c("half"), x2[j], a[j]) })    // hi
	each(func(j int) { VPXORD_BCST(c("signmask"), a[j], a[j]) }) // a = -hi
	// exp(a + b), as eltExp2.
	each(func(j int) { VADDPS(q[j], a[j], s[j]) })
	each(func(j int) { VMULPS_BCST(c("log2e"), s[j], n[j]) })
	each(func(j int) { VRNDSCALEPS(U8(0), n[j], n[j]) })
	each(func(j int) { VMULPS_BCST(c("ln2hi"), n[j], s[j]) })
	each(func(j int) { VSUBPS(s[j], a[j], a[j]) })
	each(func(j int) { VADDPS(q[j], a[j], a[j]) })
	each(func(j int) { VMULPS_BCST(c("ln2lo"), n[j], s[j]) })
	each(func(j int) { VSUBPS(s[j], a[j], a[j]) })
	expTails(a, n) // a = exp
	each(func(j int) { VMULPS(a[j], t[j], h[j]) })
	each(func(j int) { VMULPS_BCST(c("half"), h[j], h[j]) })
	each(func(j int) { VSUBPS(h[j], ones, phi[j]) })
	for j := 0; j < u; j++ {
		kneg := K()
		VCMPPS(U8(1), zero, xs[j], kneg) // x < 0
		VMOVAPS(h[j], kneg, phi[j])
		VMULPS(phi[j], xs[j], y[j])
		ksmall := K()
		VCMPPS(U8(1), m14, xs[j], ksmall) // x < -14
		VPXORD(y[j], y[j], ksmall, y[j])
	}
	return y
}

// geluUnroll is how many vectors the main GELU loop interleaves.
const geluUnroll = 4

func gelu() {
	TEXT("eltGELU", NOSPLIT, "func(dst, x []float32)")
	Doc("eltGELU stores dst[j] = eltGELU1(x[j]) for j < len(x): the erf GELU",
		"x*Phi(x) through a relative-accurate erfc (see eltGELU1).")
	n := Load(Param("x").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	ones, m14 := bcast("one"), bcast("geluzerolt")
	zero := ZMM()
	VXORPS(zero, zero, zero)
	i := GP64()
	XORQ(i, i)
	big := GP64()
	MOVQ(n, big)
	ANDQ(I32(-16*geluUnroll), big)
	Label("unrolled")
	CMPQ(i, big)
	JAE(LabelRef("rest"))
	xs := make([]reg.VecVirtual, geluUnroll)
	for j := range xs {
		xs[j] = ZMM()
		VMOVUPS(f32At(xp, i).Offset(64*j), xs[j])
	}
	for j, y := range geluVecs(xs, ones, zero, m14) {
		VMOVUPS(y, f32At(d, i).Offset(64*j))
	}
	ADDQ(U32(16*geluUnroll), i)
	JMP(LabelRef("unrolled"))
	Label("rest")
	rowLoopFrom(i, n, func(i reg.GPVirtual, k reg.Register) {
		store(geluVecs([]reg.VecVirtual{load(f32At(xp, i), k)}, ones, zero, m14)[0], f32At(d, i), k)
	})
	VZEROUPPER()
	RET()
}

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

// expQuantU8 is INT8 attention's softmax numerator in one pass
// (docs/DESIGN.md section 3.10): a low-degree 255*exp, the rounding to u8
// and the row sum without writing the exponentials out.
func expQuantU8() {
	TEXT("eltExpQuantU8", NOSPLIT, "func(dst []uint8, x []float32, m float32) (sum, bits uint32)")
	Doc("eltExpQuantU8 stores, for j < len(dst),",
		"",
		"\tdst[j] = uint8(roundHalfEven(clamp(e255(x[j] - m), 0, 255)))",
		"",
		"with e255 the degree-4 255*exp of eltExpU8 (relative error under",
		"2.6e-6; NaN takes 255), and returns the sum of dst and bits:",
		"0x7f800000 when some e255 is NaN or infinite, else 0, bit for bit its",
		"twin eltExpQuantU8Generic. m must be at least max(x) - 32 (SoftmaxU8",
		"passes the maximum): the exponentials' float sum is then finite",
		"exactly when each of them is.")
	n := Load(Param("dst").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	sum, bits := expQuantU8Row(n, d, xp, scalar("m"), bcast("u8expmin"))
	Store(sum, ReturnIndex(0))
	Store(bits, ReturnIndex(1))
	VZEROUPPER()
	RET()
}

// expQuantU8Row emits eltExpQuantU8's loop over the n scores at xp (their
// bytes to d) with the row maximum m broadcast, and returns the byte sum
// and the bits of the largest |e255| in GP registers.
func expQuantU8Row(n, d, xp reg.Register, m, lo reg.VecVirtual) (reg.GPVirtual, reg.GPVirtual) {
	acc := ZMM()
	VPXORD(acc, acc, acc)
	// fs are float sums of the exponentials, one per unrolled vector (an
	// addition's latency a step): only whether they are finite is used.
	fs := make([]reg.VecVirtual, expUnroll)
	for j := range fs {
		fs[j] = ZMM()
		VPXORD(fs[j], fs[j], fs[j])
	}
	top := bcast("u8maxi")
	// finish takes exponentials to u8 under k (nil: all lanes): the float
	// sum, the rounding, the unsigned minimum with 255 (the exponentials
	// are >= 0, so that is the clamp; too large or NaN converts to
	// 0x80000000, which it takes to 255 too), the sum and the store.
	finish := func(v, f reg.VecVirtual, at Mem, k reg.Register) {
		if k == nil {
			VADDPS(v, f, f)
		} else {
			VADDPS(v, f, k, f)
		}
		VCVTPS2DQ(v, v)
		VPMINUD(top, v, v)
		if k == nil {
			VPADDD(v, acc, acc)
		} else {
			VPADDD(v, acc, k, acc)
		}
		storeBytes(v, at, k)
	}
	i := unrolledLoop(n, expUnroll, "unrolled_", "rest_", func(i reg.GPVirtual) {
		xs := make([]reg.VecVirtual, expUnroll)
		for j := range xs {
			xs[j] = ZMM()
			VMOVUPS(f32At(xp, i).Offset(64*j), xs[j])
		}
		for j := range xs {
			VSUBPS(m, xs[j], xs[j])
		}
		expVecsU8(xs, lo)
		for j := range xs {
			finish(xs[j], fs[j], u8At(d, i).Offset(16*j), nil)
		}
	})
	rowLoopFrom(i, n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VSUBPS(m, v, v)
		expVecsU8([]reg.VecVirtual{v}, lo)
		finish(v, fs[0], u8At(d, i), k)
	})
	for _, f := range fs[1:] {
		VADDPS(f, fs[0], fs[0])
	}
	// bits: 0x7f800000 when the float sum is not finite, else 0.
	bits := GP32()
	VMOVD(reduceSum(fs[0]), bits)
	ANDL(U32(0x7fffffff), bits)
	lim := GP32()
	MOVL(U32(0x7f800000), lim)
	zero := GP32()
	XORL(zero, zero)
	CMPL(bits, lim)
	CMOVLCS(zero, lim) // below the limit: finite
	return reduceAddI32(acc), lim
}

// maxUnroll is how many vectors (and accumulators) a step of maxLoop4
// takes: one accumulator made a row's maximum a chain of VMAXPS latencies
// (4 cycles a vector on Intel cores) instead of a stream of loads.
const maxUnroll = 4

// maxLoop4 emits a loop over the n floats of a row, maxUnroll vectors a
// step (body called with the byte offset of each and its accumulator),
// then the remaining vectors and the masked tail one at a time into
// accs[0] (see eltMaxLanes4Generic).
func maxLoop4(n reg.Register, accs []reg.VecVirtual, body func(i reg.GPVirtual, off int, k reg.Register, acc reg.VecVirtual)) {
	i := unrolledLoop(n, maxUnroll, "max4_", "max1_", func(i reg.GPVirtual) {
		for j := range accs {
			body(i, 64*j, nil, accs[j])
		}
	})
	rowLoopFrom(i, n, func(i reg.GPVirtual, k reg.Register) { body(i, 0, k, accs[0]) })
}

// unrolledLoop emits a loop of step(i) over the first n&^(16u-1) elements
// of a row, u vectors of 16 a step (labels loop and next with a new id),
// and returns i, the element where the rest begins (for rowLoopFrom).
func unrolledLoop(n reg.Register, u int, loop, next string, step func(i reg.GPVirtual)) reg.GPVirtual {
	id := newID()
	i := GP64()
	XORQ(i, i)
	big := GP64()
	MOVQ(n, big)
	ANDQ(I32(-16*u), big)
	Label(loop + id)
	CMPQ(i, big)
	JAE(LabelRef(next + id))
	step(i)
	ADDQ(U32(16*u), i)
	JMP(LabelRef(loop + id))
	Label(next + id)
	return i
}

// softmaxU8Rows is SoftmaxU8's loop over a head's rows in one call
// (docs/DESIGN.md section 3.10): each row's masked maximum, its bytes and
// its scale, leaving a row whose maximum is -Inf or whose values are not
// finite to the caller.
func softmaxU8Rows() {
	TEXT("eltSoftmaxU8Rows", NOSPLIT, "func(dst []uint8, ldd int, scales, x []float32, n int, mask []float32) (row int, bits uint32)")
	Doc("eltSoftmaxU8Rows runs, for each row i < len(scales) of x (n floats, row",
		"stride n; its bytes at dst[i*ldd:]), what SoftmaxU8 does with the",
		"AVX-512 functions: with mask, x_i += mask; m = the maximum of x_i in",
		"four accumulators (eltMaxLanes4Generic); then sum, bits =",
		"eltExpQuantU8(dst_i, x_i, m)",
		"and scales[i] = 1/float32(sum). It stops at the first row whose m is",
		"-Inf (bits 0) or whose bits are >= 0x7f800000 (a NaN or an infinity),",
		"that row's scale unwritten, and returns its index (len(scales) when",
		"every row is done). Its twin is eltSoftmaxU8RowsGeneric.")
	rows := Load(Param("scales").Len(), GP64())
	sp := Load(Param("scales").Base(), GP64())
	dp := Load(Param("dst").Base(), GP64())
	ldd := Load(Param("ldd"), GP64())
	xp := Load(Param("x").Base(), GP64())
	n := Load(Param("n"), GP64())
	mp := Load(Param("mask").Base(), GP64())
	nm := Load(Param("mask").Len(), GP64())
	lo := bcast("u8expmin")
	id := newID()
	r := GP64()
	XORQ(r, r)
	Label("row_" + id)
	CMPQ(r, rows)
	JAE(LabelRef("done_" + id))
	accs := make([]reg.VecVirtual, maxUnroll)
	for j := range accs {
		accs[j] = ZMM()
		negInf(accs[j])
	}
	acc := accs[0]
	TESTQ(nm, nm)
	JZ(LabelRef("nomask_" + id))
	maxLoop4(n, accs, func(i reg.GPVirtual, off int, k reg.Register, acc reg.VecVirtual) {
		at := f32At(xp, i).Offset(off)
		v := load(at, k)
		VADDPS(load(f32At(mp, i).Offset(off), k), v, v)
		store(v, at, k)
		accMax(v, acc, k)
	})
	JMP(LabelRef("max_" + id))
	Label("nomask_" + id)
	maxLoop4(n, accs, func(i reg.GPVirtual, off int, k reg.Register, acc reg.VecVirtual) {
		accMax(load(f32At(xp, i).Offset(off), k), acc, k)
	})
	Label("max_" + id)
	for _, a := range accs[1:] {
		VMAXPS(a, acc, acc) // acc = acc > a ? acc : a, in order
	}
	mx := reduceMax(acc)
	mb := GP32()
	VMOVD(mx, mb)
	CMPL(mb, U32(0xff800000))
	JE(LabelRef("neginf_" + id))
	m := ZMM()
	VBROADCASTSS(mx, m)
	sum, bits := expQuantU8Row(n, dp, xp, m, lo)
	CMPL(bits, U32(0x7f800000))
	JAE(LabelRef("bad_" + id))
	f := XMM()
	VCVTSI2SSL(sum, f, f)
	one := XMM()
	VMOVSS(c("one"), one)
	VDIVSS(f, one, one)
	VMOVSS(one, Mem{Base: sp, Index: r, Scale: 4})
	INCQ(r)
	ADDQ(ldd, dp)
	LEAQ(Mem{Base: xp, Index: n, Scale: 4}, xp)
	JMP(LabelRef("row_" + id))
	Label("neginf_" + id)
	XORL(bits, bits)
	Label("bad_" + id)
	Store(r, ReturnIndex(0))
	Store(bits, ReturnIndex(1))
	VZEROUPPER()
	RET()
	Label("done_" + id)
	Store(r, ReturnIndex(0))
	zr := GP32()
	XORL(zr, zr)
	Store(zr, ReturnIndex(1))
	VZEROUPPER()
	RET()
}

// packQuantKRow quantizes one key of INT8 attention's K into its packed
// panel in one call (docs/DESIGN.md section 3.10, kernels.PackQuantS8Into).
func packQuantKRow() {
	TEXT("eltPackQuantKRow", NOSPLIT, "func(dst []int8, x []float32, stride int) (scale float32, colsum int32, bits uint32)")
	Doc("eltPackQuantKRow quantizes x (k = len(x) values) to s8 with one scale,",
		"",
		"	bits = max_j math.Float32bits(x[j]) & 0x7fffffff (as eltAbsMax)",
		"	scale = math.Float32frombits(bits) / 127, or 1 where that is 0",
		"	q[j] = int8(roundHalfEven(clamp(x[j]*(1/scale), -128, 127)))",
		"",
		"and stores q in words of 4 (zero past k) at dst[g*stride:] for g <",
		"(k+3)/4; colsum is the sum of q. With bits >= 0x7f800000 (a NaN or an",
		"infinity) it stores nothing and returns bits alone. Its twin is",
		"eltPackQuantKRowGeneric.")
	n := Load(Param("x").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	st := Load(Param("stride"), GP64())
	id := newID()
	acc := ZMM()
	VPXORD(acc, acc, acc)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VPANDD_BCST(c("absmask"), v, v)
		VPMAXUD(v, acc, acc)
	})
	b := reduceMaxU32(acc)
	Store(b, ReturnIndex(2))
	CMPL(b, U32(0x7f800000))
	JAE(LabelRef("nonfinite_" + id))
	sc := XMM()
	VMOVD(b, sc)
	VDIVSS(c("s8max"), sc, sc)
	zero := XMM()
	VXORPS(zero, zero, zero)
	VUCOMISS(zero, sc)
	JNE(LabelRef("scaled_" + id))
	VMOVSS(c("one"), sc)
	Label("scaled_" + id)
	storeF32(sc, ReturnIndex(0))
	inv := XMM()
	VMOVSS(c("one"), inv)
	VDIVSS(sc, inv, inv)
	invZ := ZMM()
	VBROADCASTSS(inv, invZ)
	sum := ZMM()
	VPXORD(sum, sum, sum)
	st3 := GP64()
	LEAQ(Mem{Base: st, Index: st, Scale: 2}, st3)
	st4 := GP64()
	MOVQ(st, st4)
	SHLQ(U8(2), st4)
	p := GP64()
	MOVQ(d, p)
	i := GP64()
	XORQ(i, i)
	full := GP64()
	MOVQ(n, full)
	ANDQ(I32(-16), full)
	quant := func(v reg.VecVirtual) reg.VecVirtual {
		VMULPS(invZ, v, v)
		clampRound(v, "s8min", "s8max")
		VPADDD(v, sum, sum)
		x := XMM()
		VPMOVDB(v, x)
		return x
	}
	Label("full_" + id)
	CMPQ(i, full)
	JAE(LabelRef("tail_" + id))
	{
		v := ZMM()
		VMOVUPS(f32At(xp, i), v)
		x := quant(v)
		VMOVD(x, Mem{Base: p})
		VPEXTRD(U8(1), x, Mem{Base: p, Index: st, Scale: 1})
		VPEXTRD(U8(2), x, Mem{Base: p, Index: st, Scale: 2})
		VPEXTRD(U8(3), x, Mem{Base: p, Index: st3, Scale: 1})
		ADDQ(st4, p)
		ADDQ(U8(16), i)
		JMP(LabelRef("full_" + id))
	}
	Label("tail_" + id)
	rem, k := tailMask(n, i, "sum_"+id)
	{
		v := ZMM()
		VMOVUPS_Z(f32At(xp, i), k, v)
		x := quant(v)
		VMOVD(x, Mem{Base: p})
		CMPQ(rem, I8(4))
		JBE(LabelRef("sum_" + id))
		VPEXTRD(U8(1), x, Mem{Base: p, Index: st, Scale: 1})
		CMPQ(rem, I8(8))
		JBE(LabelRef("sum_" + id))
		VPEXTRD(U8(2), x, Mem{Base: p, Index: st, Scale: 2})
		CMPQ(rem, I8(12))
		JBE(LabelRef("sum_" + id))
		VPEXTRD(U8(3), x, Mem{Base: p, Index: st3, Scale: 1})
	}
	Label("sum_" + id)
	Store(reduceAddI32(sum), ReturnIndex(1))
	VZEROUPPER()
	RET()
	Label("nonfinite_" + id)
	z := XMM()
	VXORPS(z, z, z)
	storeF32(z, ReturnIndex(0))
	zr := GP32()
	XORL(zr, zr)
	Store(zr, ReturnIndex(1))
	VZEROUPPER()
	RET()
}

// qkvToken quantizes one token's fused QKV row for every head of 64 in
// one call (docs/DESIGN.md section 3.10, kernels.QKVQuant.Rows): the
// absolute maxima per head and part, the scales of up to 16 heads as
// vectors (one division for all instead of two scalar ones per head and
// part), then Q's u8 and K's s8 words with their sums. The products need
// no clamp: with s = max/127 and inv = 1/s each rounded once, |x*inv| is
// at most 127 by a few units in the last place, under 127.5, so the
// rounding gives what the twin's clamp to [-128, 127] does.
func qkvToken() {
	TEXT("eltQKVToken", NOSPLIT, "func(tmp []uint32, q []uint8, kd []int8, x []float32, heads, kh, nr4 int, qmul float32) uint32")
	Doc("eltQKVToken takes x, one token's fused QKV row of heads <= 16 heads of",
		"64 (Q's 64*heads floats, then K's, then V's), and stores in tmp",
		"(128 words): [0:16] the bits of each head's max|Q| (as eltAbsMax),",
		"[16:32] max|K|'s, [32:48] max|V|'s; unless one of those is >= 0x7f800000",
		"(returned then, nothing else written), with s = bits/127 (1 where 0):",
		"[48:64] Q's s*qmul, [64:80] K's s, [80:96] Q's 1/s, [96:112] K's 1/s",
		"(float32 bits), [112:128] K's column sums; Q's bytes as eltQuantRow at",
		"q[h*64:], K's s8 as eltPackQuantKRow in words of 4 at",
		"kd[h*kh + g*nr4:] (g < 16). It returns the largest bits. Its twin is",
		"eltQKVTokenGeneric.")
	tp := Load(Param("tmp").Base(), GP64())
	qp := Load(Param("q").Base(), GP64())
	kd := Load(Param("kd").Base(), GP64())
	xp := Load(Param("x").Base(), GP64())
	heads := Load(Param("heads"), GP64())
	kh := Load(Param("kh"), GP64())
	nr4 := Load(Param("nr4"), GP64())
	id := newID()
	// part is the byte distance from a head's Q to its K (and K to V).
	part := GP64()
	MOVQ(heads, part)
	SHLQ(U8(8), part) // heads*64 floats
	absmask := bcast("absmask")
	h := GP64()
	XORQ(h, h)
	px := GP64()
	MOVQ(xp, px)
	Label("absmax_" + id)
	CMPQ(h, heads)
	JAE(LabelRef("scales_" + id))
	base := GP64()
	MOVQ(px, base)
	for pi := 0; pi < 3; pi++ {
		acc := ZMM()
		VPANDD(Mem{Base: base}, absmask, acc)
		for v := 1; v < 4; v++ {
			a := ZMM()
			VPANDD(Mem{Base: base, Disp: 64 * v}, absmask, a)
			VPMAXUD(a, acc, acc)
		}
		b := reduceMaxU32(acc)
		MOVL(b, Mem{Base: tp, Index: h, Scale: 4, Disp: 64 * pi})
		if pi < 2 {
			ADDQ(part, base)
		}
	}
	ADDQ(U32(256), px)
	INCQ(h)
	JMP(LabelRef("absmax_" + id))

	Label("scales_" + id)
	// km: the lanes of the heads.
	km := K()
	{
		m := GP32()
		MOVL(U32(1), m)
		MOVQ(heads, reg.RCX)
		SHLL(reg.CL, m)
		DECL(m)
		KMOVW(m, km)
	}
	bq, bk, bv := ZMM(), ZMM(), ZMM()
	VMOVDQU32_Z(Mem{Base: tp}, km, bq)
	VMOVDQU32_Z(Mem{Base: tp, Disp: 64}, km, bk)
	VMOVDQU32_Z(Mem{Base: tp, Disp: 128}, km, bv)
	all := ZMM()
	VPMAXUD(bq, bk, all)
	VPMAXUD(bv, all, all)
	top := reduceMaxU32(all)
	CMPL(top, U32(0x7f800000))
	JAE(LabelRef("ret_" + id))
	one, zero := bcast("one"), ZMM()
	VXORPS(zero, zero, zero)
	for pi, b := range []reg.VecVirtual{bq, bk} {
		VDIVPS_BCST(c("s8max"), b, b) // s = max/127
		kz := K()
		VCMPPS(U8(0), zero, b, kz) // s == 0
		VMOVAPS(one, kz, b)
		inv := ZMM()
		VDIVPS(b, one, inv)
		if pi == 0 {
			sq := ZMM()
			VMULPS(scalar("qmul"), b, sq)
			VMOVUPS(sq, Mem{Base: tp, Disp: 192})
			VMOVUPS(inv, Mem{Base: tp, Disp: 320})
		} else {
			VMOVUPS(b, Mem{Base: tp, Disp: 256})
			VMOVUPS(inv, Mem{Base: tp, Disp: 384})
		}
	}

	// The bytes, head by head.
	XORQ(h, h)
	MOVQ(xp, px)
	qo := GP64()
	MOVQ(qp, qo)
	ko := GP64()
	MOVQ(kd, ko)
	nr12 := GP64()
	LEAQ(Mem{Base: nr4, Index: nr4, Scale: 2}, nr12)
	nr16 := GP64()
	MOVQ(nr4, nr16)
	SHLQ(U8(2), nr16)
	Label("bytes_" + id)
	CMPQ(h, heads)
	JAE(LabelRef("ret_" + id))
	{
		iq := ZMM()
		VBROADCASTSS(Mem{Base: tp, Index: h, Scale: 4, Disp: 320}, iq)
		for v := 0; v < 4; v++ {
			x := ZMM()
			VMULPS(Mem{Base: px, Disp: 64 * v}, iq, x)
			VCVTPS2DQ(x, x) // |x| <= 127 by the scale: no clamp
			VPADDD_BCST(c("i128"), x, x)
			b := XMM()
			VPMOVDB(x, b)
			VMOVDQU(b, Mem{Base: qo, Disp: 16 * v})
		}
		ik := ZMM()
		VBROADCASTSS(Mem{Base: tp, Index: h, Scale: 4, Disp: 384}, ik)
		kx := GP64()
		LEAQ(Mem{Base: px, Index: part, Scale: 1}, kx)
		sum := ZMM()
		VPXORD(sum, sum, sum)
		w := GP64()
		MOVQ(ko, w)
		for v := 0; v < 4; v++ {
			x := ZMM()
			VMULPS(Mem{Base: kx, Disp: 64 * v}, ik, x)
			VCVTPS2DQ(x, x) // |x| <= 127 by the scale: no clamp
			VPADDD(x, sum, sum)
			b := XMM()
			VPMOVDB(x, b)
			VMOVD(b, Mem{Base: w})
			VPEXTRD(U8(1), b, Mem{Base: w, Index: nr4, Scale: 1})
			VPEXTRD(U8(2), b, Mem{Base: w, Index: nr4, Scale: 2})
			VPEXTRD(U8(3), b, Mem{Base: w, Index: nr12, Scale: 1})
			if v < 3 {
				ADDQ(nr16, w)
			}
		}
		cs := reduceAddI32(sum)
		MOVL(cs, Mem{Base: tp, Index: h, Scale: 4, Disp: 448})
	}
	ADDQ(U32(256), px)
	ADDQ(U8(64), qo)
	ADDQ(kh, ko)
	INCQ(h)
	JMP(LabelRef("bytes_" + id))

	Label("ret_" + id)
	Store(top, ReturnIndex(0))
	VZEROUPPER()
	RET()
}

// packQuantVT4 quantizes four keys of INT8 attention's V into one group
// of words of the packed Vᵀ (docs/DESIGN.md section 3.10,
// kernels.PackQuantS8TInto).
func packQuantVT4() {
	TEXT("eltPackQuantVT4", NOSPLIT, "func(dst []int8, r0, r1, r2, r3 []float32, inv float32, nr, panel int)")
	Doc("eltPackQuantVT4 quantizes the four rows r0...r3 (n = len(r0) channels",
		"each) to s8, q = int8(roundHalfEven(clamp(r*inv, -128, 127))), and",
		"stores channel j's four bytes (r0's lowest) as one word at",
		"dst[(j/nr)*panel + (j%nr)*4:]; nr is a multiple of 16. Its twin is",
		"eltPackQuantVT4Generic.")
	n := Load(Param("r0").Len(), GP64())
	d := Load(Param("dst").Base(), GP64())
	rs := []reg.Register{
		Load(Param("r0").Base(), GP64()), Load(Param("r1").Base(), GP64()),
		Load(Param("r2").Base(), GP64()), Load(Param("r3").Base(), GP64()),
	}
	nrr := Load(Param("nr"), GP64())
	pan := Load(Param("panel"), GP64())
	inv := scalar("inv")
	mask := bcast("u8mask")
	id := newID()
	// base is the panel's words, jj the channel within it.
	base := GP64()
	MOVQ(d, base)
	jj := GP64()
	XORQ(jj, jj)
	i := GP64()
	XORQ(i, i)
	full := GP64()
	MOVQ(n, full)
	ANDQ(I32(-16), full)
	body := func(k reg.Register, next string) {
		var acc reg.VecVirtual
		for r, rp := range rs {
			v := load(f32At(rp, i), k)
			VMULPS(inv, v, v)
			clampRound(v, "s8min", "s8max")
			VPANDD(mask, v, v)
			if r > 0 {
				VPSLLD(U8(8*r), v, v)
				VPORD(v, acc, acc)
			} else {
				acc = v
			}
		}
		at := Mem{Base: base, Index: jj, Scale: 4}
		if k == nil {
			VMOVDQU32(acc, at)
		} else {
			VMOVDQU32(acc, k, at)
		}
		ADDQ(U8(16), jj)
		CMPQ(jj, nrr)
		JB(LabelRef(next))
		XORQ(jj, jj)
		ADDQ(pan, base)
	}
	Label("full_" + id)
	CMPQ(i, full)
	JAE(LabelRef("tail_" + id))
	body(nil, "fnext_"+id)
	Label("fnext_" + id)
	ADDQ(U8(16), i)
	JMP(LabelRef("full_" + id))
	Label("tail_" + id)
	_, k := tailMask(n, i, "done_"+id)
	body(k, "done_"+id)
	Label("done_" + id)
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

func transpose16() {
	TEXT("packT16", NOSPLIT, "func(dst, w []float32, nblk, ldw, ldd int)")
	Doc("packT16 stores the transpose of the 16 x 16*nblk block of w (rows",
		"ldw apart) into dst (rows ldd apart), 16x16 blocks in registers:",
		"",
		"	dst[q*ldd+r] = w[r*ldw+q]   for r < 16, q < 16*nblk",
		"",
		"It only moves bits. The caller checks len(w) >= 15*ldw+16*nblk and",
		"len(dst) >= (16*nblk-1)*ldd+16 (see packT16Generic).")
	d := Load(Param("dst").Base(), GP64())
	wp := Load(Param("w").Base(), GP64())
	nblk := Load(Param("nblk"), GP64())
	ldw := Load(Param("ldw"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), ldw)
	SHLQ(U8(2), ldd)
	// w3 = 3*ldw bytes, for rows r = 4g+0..3 at base + g*4*ldw.
	w3 := GP64()
	LEAQ(Mem{Base: ldw, Index: ldw, Scale: 2}, w3)
	d3 := GP64()
	LEAQ(Mem{Base: ldd, Index: ldd, Scale: 2}, d3)
	TESTQ(nblk, nblk)
	JZ(LabelRef("t16_done"))
	Label("t16_blk")
	// Load the 16 rows (16 floats each) of this block.
	a := make([]reg.VecVirtual, 16)
	rp := GP64()
	MOVQ(wp, rp)
	for g := 0; g < 4; g++ {
		if g > 0 {
			LEAQ(Mem{Base: rp, Index: ldw, Scale: 4}, rp)
		}
		for r := 0; r < 4; r++ {
			a[4*g+r] = ZMM()
			var m Mem
			switch r {
			case 0:
				m = Mem{Base: rp}
			case 1:
				m = Mem{Base: rp, Index: ldw, Scale: 1}
			case 2:
				m = Mem{Base: rp, Index: ldw, Scale: 2}
			case 3:
				m = Mem{Base: rp, Index: w3, Scale: 1}
			}
			VMOVUPS(m, a[4*g+r])
		}
	}
	// Stage 1: per 128-bit lane l, t[2i] = [a0[4l] a1[4l] a0[4l+1] a1[4l+1]]
	// (rows 2i, 2i+1), t[2i+1] the same for columns 4l+2, 4l+3.
	t := make([]reg.VecVirtual, 16)
	for i := 0; i < 8; i++ {
		t[2*i], t[2*i+1] = ZMM(), ZMM()
		VUNPCKLPS(a[2*i+1], a[2*i], t[2*i])
		VUNPCKHPS(a[2*i+1], a[2*i], t[2*i+1])
	}
	// Stage 2: u[4g+c] lane l = rows 4g..4g+3 at column 4l+c.
	u := make([]reg.VecVirtual, 16)
	for g := 0; g < 4; g++ {
		for c := 0; c < 4; c++ {
			u[4*g+c] = ZMM()
		}
		VUNPCKLPD(t[4*g+2], t[4*g], u[4*g])
		VUNPCKHPD(t[4*g+2], t[4*g], u[4*g+1])
		VUNPCKLPD(t[4*g+3], t[4*g+1], u[4*g+2])
		VUNPCKHPD(t[4*g+3], t[4*g+1], u[4*g+3])
	}
	// Stage 3: v[c] = (g0 l0, g0 l2, g1 l0, g1 l2), v[c+4] = (g0 l1, g0 l3,
	// g1 l1, g1 l3), v[c+8], v[c+12] the same for groups 2, 3.
	v := make([]reg.VecVirtual, 16)
	for c := 0; c < 4; c++ {
		v[c], v[c+4], v[c+8], v[c+12] = ZMM(), ZMM(), ZMM(), ZMM()
		VSHUFF32X4(U8(0x88), u[4+c], u[c], v[c])
		VSHUFF32X4(U8(0xdd), u[4+c], u[c], v[c+4])
		VSHUFF32X4(U8(0x88), u[12+c], u[8+c], v[c+8])
		VSHUFF32X4(U8(0xdd), u[12+c], u[8+c], v[c+12])
	}
	// Stage 4: column 4l+c = groups 0..3 of lane l.
	o := make([]reg.VecVirtual, 16)
	for c := 0; c < 4; c++ {
		o[c], o[8+c], o[4+c], o[12+c] = ZMM(), ZMM(), ZMM(), ZMM()
		VSHUFF32X4(U8(0x88), v[c+8], v[c], o[c])
		VSHUFF32X4(U8(0xdd), v[c+8], v[c], o[8+c])
		VSHUFF32X4(U8(0x88), v[c+12], v[c+4], o[4+c])
		VSHUFF32X4(U8(0xdd), v[c+12], v[c+4], o[12+c])
	}
	for g := 0; g < 4; g++ {
		for r := 0; r < 4; r++ {
			var m Mem
			switch r {
			case 0:
				m = Mem{Base: d}
			case 1:
				m = Mem{Base: d, Index: ldd, Scale: 1}
			case 2:
				m = Mem{Base: d, Index: ldd, Scale: 2}
			case 3:
				m = Mem{Base: d, Index: d3, Scale: 1}
			}
			VMOVUPS(o[4*g+r], m)
		}
		LEAQ(Mem{Base: d, Index: ldd, Scale: 4}, d)
	}
	ADDQ(U8(64), wp)
	DECQ(nblk)
	JNZ(LabelRef("t16_blk"))
	Label("t16_done")
	VZEROUPPER()
	RET()
}
