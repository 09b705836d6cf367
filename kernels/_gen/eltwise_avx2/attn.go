package main

// This file generates the AVX2 passes of INT8 attention's element-wise
// steps (docs/DESIGN.md section 3.10): the u8 softmax's row maximum in
// four accumulators and its one pass from scores to bytes (the degree-4
// 255·exp of eltExpU8, the bytes and their sum), and the s8 quantization
// that packs K and V. They compute what the AVX-512 kernels compute, bit
// for bit (the same Go twins).

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Constants of eltExpU8 (eltwise_generic.go), defined by defineAttnConsts.
var (
	u8ExpMin  = float32(-24)
	u8ExpP    = []float32{2.5500065613e+02, 1.7671597290e+02, 6.1567901611e+01, 1.3262922287e+01, 3.4512128830e+00}
	u8ExpName = []string{"u8p0", "u8p1", "u8p2", "u8p3", "u8p4"}
)

// attnConsts are the broadcast constants of this file, for defineConsts.
func attnConsts(add func(name string, bits uint32)) {
	f := math.Float32bits
	add("u8expmin", f(u8ExpMin))
	for i, c := range u8ExpP {
		add(u8ExpName[i], f(c))
	}
}

// maxLanes4: the first pass of the u8 softmax (eltMaxLanes4Generic) over
// whole groups of 16 floats: groups&^3 of them in turn into four lane
// accumulators (two YMM each), the rest into the first; x += mask first,
// in place, when mask is not nil.
func maxLanes4() {
	kernel("eltMaxLanes4A", "func(x, mask *float32, groups int, acc *float32)",
		"eltMaxLanes4A is eltMaxLanes4Generic's loop over 16*groups floats: with",
		"mask not nil, x[j] += mask[j] in place; then acc[a*16 + j%16] =",
		"max(acc[a*16 + j%16], x[j]) as VMAXPS(src1 acc, src2 x[j]), where a =",
		"(j/16)%4 for the groups of four whole groups (j < 64*(groups/4)) and 0",
		"for the groups after them. AVX2.")
	x, mask, n, accp := arg("x"), arg("mask"), arg("groups"), arg("acc")
	accs := make([][]reg.VecVirtual, 4)
	for a := range accs {
		accs[a] = []reg.VecVirtual{YMM(), YMM()}
		for h := range accs[a] {
			VMOVUPS(Mem{Base: accp, Disp: 64*a + 32*h}, accs[a][h])
		}
	}
	// group emits the step of one group of 16 at byte offset off into
	// accumulator a.
	group := func(withMask bool, off, a int) {
		for h := 0; h < 2; h++ {
			v := YMM()
			at := Mem{Base: x, Disp: off + 32*h}
			VMOVUPS(at, v)
			if withMask {
				VADDPS(Mem{Base: mask, Disp: off + 32*h}, v, v)
				VMOVUPS(v, at)
			}
			VMAXPS(v, accs[a][h], accs[a][h])
		}
	}
	four, rest := GP64(), GP64()
	MOVQ(n, four)
	SHRQ(U8(2), four)
	MOVQ(n, rest)
	ANDQ(U8(3), rest)
	for _, withMask := range []bool{true, false} {
		id := "ml_nomask"
		if withMask {
			id = "ml_mask"
		}
		if withMask {
			TESTQ(mask, mask)
			JZ(LabelRef("ml_nomask"))
		} else {
			Label("ml_nomask")
		}
		groups(id+"4", four, func() {
			for a := 0; a < 4; a++ {
				group(withMask, 64*a, a)
			}
			ADDQ(U32(256), x) // past U8
			if withMask {
				ADDQ(U32(256), mask)
			}
		})
		groups(id+"1", rest, func() {
			group(withMask, 0, 0)
			if withMask {
				advance(64, x, mask)
			} else {
				advance(64, x)
			}
		})
		if withMask {
			JMP(LabelRef("ml_store"))
		}
	}
	Label("ml_store")
	for a := range accs {
		for h := range accs[a] {
			VMOVUPS(accs[a][h], Mem{Base: accp, Disp: 64*a + 32*h})
		}
	}
	ret()
}

// maxLanes4Reduce: the end of eltMaxLanes4Generic (eltMaxLanes4Reduce):
// the first accumulator takes the other three in order, then its 16 lanes
// fold as eltReduceMax's tree (lane i = max(lane i, lane i+w), w = 8, 4,
// 2, 1), every step VMAXPS(src1 lane i, src2 lane i+w). In Go each of its
// 63 steps is a data-dependent branch, most of a 512-key row's maximum.
func maxLanes4Reduce() {
	kernel("eltMaxLanes4RA", "func(acc *float32) float32",
		"eltMaxLanes4RA returns eltMaxLanes4Reduce of the four lane accumulators",
		"at acc (acc[a*16 + lane]): acc[lane] = max(acc[lane], acc[a*16 + lane])",
		"for a = 1, 2, 3, then lane i = max(lane i, lane i+w) for w = 8, 4, 2, 1,",
		"each as VMAXPS(src1 acc, src2 the other). AVX2.")
	maxReduce(4)
}

// maxReduce1: eltReduceMax of one accumulator of 16 lanes (the scaled
// softmax's row maximum, eltMaxMaskScaleAVX2): the tree of maxLanes4Reduce
// alone, its 15 branches in Go being a tenth of FP32 attention's softmax
// at 512 keys.
func maxReduce1() {
	kernel("eltReduceMaxA", "func(acc *float32) float32",
		"eltReduceMaxA returns eltReduceMax of the 16 lanes at acc: lane i =",
		"max(lane i, lane i+w) for w = 8, 4, 2, 1, each as VMAXPS(src1 lane i,",
		"src2 lane i+w). AVX2.")
	maxReduce(1)
}

// maxReduce emits the body of maxLanes4Reduce over naccs accumulators.
func maxReduce(naccs int) {
	accp := arg("acc")
	lo, hi := YMM(), YMM()
	VMOVUPS(Mem{Base: accp}, lo)
	VMOVUPS(Mem{Base: accp, Disp: 32}, hi)
	for a := 1; a < naccs; a++ {
		VMAXPS(Mem{Base: accp, Disp: 64 * a}, lo, lo)
		VMAXPS(Mem{Base: accp, Disp: 64*a + 32}, hi, hi)
	}
	VMAXPS(hi, lo, lo) // w = 8
	x, y := XMM(), XMM()
	VEXTRACTF128(U8(1), lo, y)
	VMAXPS(y, lo.AsX(), x) // w = 4
	VMOVHLPS(x, x, y)
	VMAXPS(y, x, x) // w = 2
	VMOVSHDUP(x, y)
	VMAXSS(y, x, x) // w = 1
	VZEROUPPER()    // before the SSE store of the result
	Store(x, ReturnIndex(0))
	RET()
}

// expU8 replaces v (the exponent base 2, z = fma(x, a, c)) by its u8
// byte as an int32, roundHalfEven(eltExpU8(z)) with 255 for what is
// above, and adds eltExpU8(z) to the float lanes fsum: z = max(-24, z) (a
// NaN stays), fl = floor(z), f = z - fl (exact), p(f) by Horner, p·2^fl
// with 2^fl added to p's exponent bits (fl in [-24, 0] as the caller
// promises: the product is normal and exact, as VSCALEFPS's), then
// VCVTPS2DQ (a NaN or 2³¹ converts to 0x80000000, which the caller's
// signed packs take to 0).
func expU8(v, fsum reg.VecVirtual) {
	lo := YMM()
	VMOVUPS(cst("u8expmin"), lo)
	VMAXPS(v, lo, v) // -24 > v ? -24 : v; a NaN v stays
	fl := YMM()
	VROUNDPS(U8(9), v, fl) // floor, no precision exception
	VSUBPS(fl, v, v)       // f = z - fl, exact
	p := YMM()
	VMOVUPS(cst("u8p4"), p)
	for i := 3; i >= 0; i-- {
		VFMADD213PS(cst(u8ExpName[i]), v, p) // p = p*f + c_i
	}
	VCVTPS2DQ(fl, fl)
	VPSLLD(U8(23), fl, fl)
	VPADDD(fl, p, p) // p·2^fl, exact
	VADDPS(p, fsum, fsum)
	VCVTPS2DQ(p, v) // the packs saturate: 0x80000000 (NaN, 2³¹ up) to 0, above 255 to 255
}

// expQuantU8: the one pass of the u8 softmax over 32*groups32 floats: the
// bytes of eltExpU8(x[j] - m) (as eltExpQuantU8Generic), their sum in
// four qwords (VPSADBW) and the float sum of the exponentials in 8 lanes
// (not finite exactly when one of them is not).
func expQuantU8() {
	kernel("eltExpQuantU8A", "func(dst *uint8, x *float32, groups32 int, a, c float32, out *uint32)",
		"eltExpQuantU8A sets, over 32*groups32 floats, e = eltExpU8(fma(x[j], a, c)) and",
		"dst[j] = roundHalfEven(e) (255 when e >= 255.5, 0 when NaN or >= 2^31), as",
		"eltExpQuantU8Generic; it adds the bytes to the four uint64 at out[0:8]",
		"and e to the float32 lanes at out[8:16] (a lane is not finite exactly",
		"when one of its e is not). Arguments fma(x[j], a, c) <= 0 or NaN",
		"(a = s*log2e and c = -(m*a) with m at least the row's maximum, as",
		"SoftmaxU8 passes them). AVX2 and FMA3.")
	dst, x, n, outp := arg("dst"), arg("x"), arg("groups32"), arg("out")
	a, c := scalar("a"), scalar("c")
	sum, f0, f1 := YMM(), YMM(), YMM()
	VMOVDQU(Mem{Base: outp}, sum)
	VMOVUPS(Mem{Base: outp, Disp: 32}, f0)
	VXORPS(f1, f1, f1)
	groups("eq", n, func() {
		v := vecs4()
		for h := range v {
			VMOVUPS(Mem{Base: x, Disp: 32 * h}, v[h])
			VFMADD213PS(c, a, v[h]) // z = x*a + c
			fs := f0
			if h%2 == 1 {
				fs = f1
			}
			expU8(v[h], fs)
		}
		VPACKSSDW(v[1], v[0], v[0])
		VPACKSSDW(v[3], v[2], v[2])
		VPACKUSWB(v[2], v[0], v[0])
		idx := YMM()
		VMOVDQU(cst("perm"), idx)
		VPERMD(v[0], idx, v[0])
		VMOVDQU(v[0], Mem{Base: dst})
		z := YMM()
		VPXOR(z, z, z)
		VPSADBW(z, v[0], v[0])
		VPADDQ(v[0], sum, sum)
		advance(128, x)
		advance(32, dst)
	})
	VADDPS(f1, f0, f0)
	VMOVDQU(sum, Mem{Base: outp})
	VMOVUPS(f0, Mem{Base: outp, Disp: 32})
	ret()
}
