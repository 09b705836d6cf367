// Command eltavx2 generates kernels/eltwise_avx2_amd64.s: the AVX2 + FMA3
// passes of the scaled softmax (attention's), for CPUs without AVX-512.
// Each works on whole groups of 16 floats and keeps 16 lane accumulators
// (two ymm registers, lanes 0-7 and 8-15) exactly as the Go twins
// (eltMaxMaskScaleGeneric, eltExpSumGeneric, eltScaleGeneric) keep
// acc[j%16]; the caller adds the tail and reduces the lanes in Go, so the
// results are those of the twins bit for bit.
//
// Run from kernels/_gen:
//
//	go run ./eltavx2 -out ../eltwise_avx2_amd64.s -stubs ../eltwise_avx2_stub_amd64.go -pkg kernels
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

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
	ctab = GLOBL("eltAVX2Const", RODATA|NOPTR)
	for i, v := range vals {
		for lane := 0; lane < 8; lane++ {
			DATA(32*i+4*lane, U32(v))
		}
	}
}

func cst(name string) Mem {
	for i, n := range cnames {
		if n == name {
			return ctab.Offset(32 * i)
		}
	}
	panic(name)
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
	VBROADCASTSS(Load(Param("s"), XMM()), s)
	a0, a1 := YMM(), YMM()
	VMOVUPS(Mem{Base: accp}, a0)
	VMOVUPS(Mem{Base: accp, Disp: 32}, a1)
	acc := []reg.VecVirtual{a0, a1}
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
	VMOVUPS(a0, Mem{Base: accp})
	VMOVUPS(a1, Mem{Base: accp, Disp: 32})
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
	VBROADCASTSS(Load(Param("m"), XMM()), m)
	a0, a1 := YMM(), YMM()
	VMOVUPS(Mem{Base: accp}, a0)
	VMOVUPS(Mem{Base: accp, Disp: 32}, a1)
	acc := []reg.VecVirtual{a0, a1}
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
	VMOVUPS(a0, Mem{Base: accp})
	VMOVUPS(a1, Mem{Base: accp, Disp: 32})
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
	VBROADCASTSS(Load(Param("s"), XMM()), s)
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
	Generate()
}
