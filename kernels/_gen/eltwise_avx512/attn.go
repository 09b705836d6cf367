package main

// This file generates INT8 attention's routines: the u8 softmax numerator
// and the quantization and packing of Q, K and V.

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// expVecsU8 replaces each z of zs (the exponent base 2) by 255*2^z to the
// precision P's u8 needs (see eltExpU8; docs/DESIGN.md section 3.10), the
// vectors' instructions interleaved: z = max(z, -24) (z as src2, so NaN
// stays NaN), f = z - floor(z) (exact, in [0, 1)), the degree-4
// polynomial in f (255 folded into its coefficients) by FMA, then
// VSCALEFPS by z, which scales by 2^floor(z).
func expVecsU8(zs []reg.VecVirtual, lo reg.VecVirtual) {
	f, p := make([]reg.VecVirtual, len(zs)), make([]reg.VecVirtual, len(zs))
	for j := range zs {
		f[j], p[j] = ZMM(), ZMM()
		VMAXPS(zs[j], lo, zs[j])
	}
	for j := range zs {
		VRNDSCALEPS(U8(9), zs[j], f[j]) // floor, no precision exception
	}
	for j := range zs {
		VSUBPS(f[j], zs[j], f[j]) // f = z - floor(z)
	}
	for j := range zs {
		VBROADCASTSS(c("u8e4"), p[j])
	}
	for _, e := range []string{"u8e3", "u8e2", "u8e1", "u8e0"} {
		for j := range zs {
			VFMADD213PS_BCST(c(e), f[j], p[j]) // p = p*f + e
		}
	}
	for j := range zs {
		VSCALEFPS(zs[j], p[j], zs[j])
	}
}

// expQuantU8 is INT8 attention's softmax numerator in one pass
// (docs/DESIGN.md section 3.10): a low-degree 255*exp, the rounding to u8
// and the row sum without writing the exponentials out.
func expQuantU8() {
	kernel("eltExpQuantU8", "func(dst []uint8, x []float32, a, c float32) (sum, bits uint32)",
		"eltExpQuantU8 stores, for j < len(dst),",
		"",
		"\tdst[j] = uint8(roundHalfEven(clamp(e255(fma(x[j], a, c)), 0, 255)))",
		"",
		"(0 where e255 is NaN or at least 2^31)",
		"",
		"with e255 the degree-4 255*2^z of eltExpU8 (relative error under",
		"2.6e-6), and returns the sum of dst and bits:",
		"0x7f800000 when some e255 is NaN or infinite, else 0, bit for bit its",
		"twin eltExpQuantU8Generic. fma(x[j], a, c) must be at most 46",
		"(SoftmaxU8 passes a and c of the row's maximum, eltExpU8Args): the",
		"exponentials' float sum is then finite exactly when each of them is.")
	n, d, xp := length("dst"), base("dst"), base("x")
	sum, bits := expQuantU8Row(n, d, xp, scalar("a"), scalar("c"), bcast("u8expmin"))
	Store(sum, ReturnIndex(0))
	Store(bits, ReturnIndex(1))
	ret()
}

// expQuantU8Row emits eltExpQuantU8's loop over the n scores at xp (their
// bytes to d) with its arguments a and cc broadcast, and returns the byte
// sum and the bits of the largest |e255| in GP registers.
func expQuantU8Row(n, d, xp reg.Register, a, cc, lo reg.VecVirtual) (reg.GPVirtual, reg.GPVirtual) {
	acc := zeroed(VPXORD)  // the tail's bytes, as int32 lanes
	qacc := zeroed(VPXORD) // the whole steps' bytes, as VPSADBW's qwords
	zero := zeroed(VPXORD)
	// fs are float sums of the exponentials, one per unrolled vector (an
	// addition's latency a step): only whether they are finite is used.
	fs := make([]reg.VecVirtual, expUnroll)
	for j := range fs {
		fs[j] = zeroed(VPXORD)
	}
	top := bcast("u8maxi")
	perm := ZMM()
	VMOVDQU32(c("u8perm"), perm)
	// A whole step's four vectors go to bytes by the saturating packs
	// (what does not convert, 0x80000000, is negative: 0; above 255:
	// 255), one VPERMD back to their order, one store and one VPSADBW for
	// the sum: where VPMINUD, VPMOVDB and VPADDD a vector were.
	i := unrolledLoop(n, expUnroll, "unrolled_", "rest_", func(i reg.GPVirtual) {
		xs := loadVecs(xp, i, expUnroll)
		for _, x := range xs {
			VFMADD213PS(cc, a, x) // z = x*a + c
		}
		expVecsU8(xs, lo)
		for j := range xs {
			VADDPS(xs[j], fs[j], fs[j])
			VCVTPS2DQ(xs[j], xs[j])
		}
		VPACKSSDW(xs[1], xs[0], xs[0])
		VPACKSSDW(xs[3], xs[2], xs[2])
		VPACKUSWB(xs[2], xs[0], xs[0])
		VPERMD(xs[0], perm, xs[0])
		VMOVDQU32(xs[0], u8At(d, i))
		VPSADBW(zero, xs[0], xs[0])
		VPADDQ(xs[0], qacc, qacc)
	})
	// The tail one vector at a time, to the same bytes: negative (what
	// did not convert) to 0 by VPMAXSD, then at most 255.
	rowLoopFrom(i, n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		VFMADD213PS(cc, a, v)
		expVecsU8([]reg.VecVirtual{v}, lo)
		under(k, VADDPS, v, fs[0], fs[0])
		VCVTPS2DQ(v, v)
		VPMAXSD(zero, v, v)
		VPMINUD(top, v, v)
		under(k, VPADDD, v, acc, acc)
		storeBytes(v, u8At(d, i), k)
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
	zr := GP32()
	XORL(zr, zr)
	CMPL(bits, lim)
	CMOVLCS(zr, lim) // below the limit: finite
	q := ZMM()
	VPMOVQD(qacc, q.AsY()) // each qword under 2^32; the upper half zeroed
	VPADDD(q, acc, acc)
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

// softmaxU8Rows is SoftmaxU8's loop over a head's rows in one call
// (docs/DESIGN.md section 3.10): each row's masked maximum, its bytes and
// its scale, leaving a row whose maximum is -Inf or whose values are not
// finite to the caller.
func softmaxU8Rows() {
	kernel("eltSoftmaxU8Rows", "func(dst []uint8, ldd int, scales, x []float32, n int, mask, xscale []float32) (row int, bits uint32)",
		"eltSoftmaxU8Rows runs, for each row i < len(scales) of x (n floats, row",
		"stride n; its bytes at dst[i*ldd:]), what SoftmaxU8 does with the",
		"AVX-512 functions: with mask, x_i += mask; m = the maximum of x_i in",
		"four accumulators (eltMaxLanes4Generic); then with s = xscale[i] (1",
		"where xscale is empty), a = s*log2e and c = -(m*a) (eltExpU8Args),",
		"sum, bits = eltExpQuantU8(dst_i, x_i, a, c)",
		"and scales[i] = 1/float32(sum). It stops at the first row whose m is",
		"-Inf (bits 0), whose c is not finite (bits 0x7f800000) or whose bits",
		"are >= 0x7f800000 (a NaN or an infinity),",
		"that row's scale unwritten, and returns its index (len(scales) when",
		"every row is done). Its twin is eltSoftmaxU8RowsGeneric.")
	rows, sp, dp, ldd := length("scales"), base("scales"), base("dst"), arg("ldd")
	xp, n, mp, nm := base("x"), arg("n"), base("mask"), length("mask")
	qp, nq := base("xscale"), length("xscale")
	lo := bcast("u8expmin")
	id := newID()
	r := GP64()
	XORQ(r, r)
	Label("row_" + id)
	CMPQ(r, rows)
	JAE(LabelRef("done_" + id))
	accs := make([]reg.VecVirtual, maxUnroll)
	for j := range accs {
		accs[j] = negInfs()
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
	// a = s*log2e, c = -(m*a) (one rounding: -(m*a) - 0), c finite.
	sx := XMM()
	TESTQ(nq, nq)
	JZ(LabelRef("noscale_" + id))
	VMOVSS(Mem{Base: qp, Index: r, Scale: 4}, sx)
	JMP(LabelRef("scale_" + id))
	Label("noscale_" + id)
	VMOVSS(c("one"), sx)
	Label("scale_" + id)
	VMULSS(c("log2e"), sx, sx)
	cs := XMM()
	VXORPS(cs, cs, cs)
	VFNMSUB231SS(sx, mx, cs) // cs = -(m*a) - 0
	cb := GP32()
	VMOVD(cs, cb)
	ANDL(U32(0x7fffffff), cb)
	CMPL(cb, U32(0x7f800000))
	JAE(LabelRef("badc_" + id))
	az, cz := ZMM(), ZMM()
	VBROADCASTSS(sx, az)
	VBROADCASTSS(cs, cz)
	sum, bits := expQuantU8Row(n, dp, xp, az, cz, lo)
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
	Label("badc_" + id)
	MOVL(U32(0x7f800000), bits)
	JMP(LabelRef("bad_" + id))
	Label("neginf_" + id)
	XORL(bits, bits)
	Label("bad_" + id)
	Store(r, ReturnIndex(0))
	Store(bits, ReturnIndex(1))
	ret()
	Label("done_" + id)
	Store(r, ReturnIndex(0))
	storeZeroU32(ReturnIndex(1))
	ret()
}

// packQuantKRow quantizes one key of INT8 attention's K into its packed
// panel in one call (docs/DESIGN.md section 3.10, kernels.PackQuantS8Into).
func packQuantKRow() {
	kernel("eltPackQuantKRow", "func(dst []int8, x []float32, stride int) (scale float32, colsum int32, bits uint32)",
		"eltPackQuantKRow quantizes x (k = len(x) values) to s8 with one scale,",
		"",
		"	bits = max_j math.Float32bits(x[j]) & 0x7fffffff (as eltAbsMax)",
		"	scale = math.Float32frombits(bits) / 127, or 1 where that is 0",
		"	q[j] = int8(roundHalfEven(clamp(x[j]*(1/scale), -128, 127)))",
		"",
		"and stores q in words of 4 (zero past k) at dst[g*stride:] for g <",
		"(k+3)/4; colsum is the sum of q. With bits >= 0x7f800000 (a NaN or an",
		"infinity) it stores nothing and returns bits alone. Its twin is",
		"eltPackQuantKRowGeneric.")
	n, d, xp, st := length("x"), base("dst"), base("x"), arg("stride")
	id := newID()
	acc := zeroed(VPXORD)
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) {
		v := load(f32At(xp, i), k)
		accAbsMax(v, v, acc)
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
	sum := zeroed(VPXORD)
	st3 := GP64()
	LEAQ(Mem{Base: st, Index: st, Scale: 2}, st3)
	st4 := GP64()
	MOVQ(st, st4)
	SHLQ(U8(2), st4)
	p := GP64()
	MOVQ(d, p)
	i := GP64()
	XORQ(i, i)
	quant := func(v reg.VecVirtual) reg.VecVirtual {
		VMULPS(invZ, v, v)
		clampRound(v, "s8min", "s8max")
		VPADDD(v, sum, sum)
		x := XMM()
		VPMOVDB(v, x)
		return x
	}
	stepLoop(i, n, 1, U8(16), "full_"+id, "tail_"+id, func(i reg.GPVirtual) {
		storeWords(quant(load(f32At(xp, i), nil)), p, st, st3, nil, "")
		ADDQ(st4, p)
	})
	rem, k := tailMask(n, i, "sum_"+id)
	storeWords(quant(load(f32At(xp, i), k)), p, st, st3, rem, "sum_"+id)
	Label("sum_" + id)
	Store(reduceAddI32(sum), ReturnIndex(1))
	ret()
	Label("nonfinite_" + id)
	z := XMM()
	VXORPS(z, z, z)
	storeF32(z, ReturnIndex(0))
	storeZeroU32(ReturnIndex(1))
	ret()
}

// storeWords stores the four words of x at p, p+st, p+2*st and p+st3 (st3
// = 3*st); with rem non-nil only those of its first rem bytes (then a jump
// to done).
func storeWords(x reg.VecVirtual, p, st, st3, rem reg.Register, done string) {
	VMOVD(x, strided(p, st, st3, 0))
	for w := 1; w < 4; w++ {
		if rem != nil {
			CMPQ(rem, I8(4*w))
			JBE(LabelRef(done))
		}
		VPEXTRD(U8(w), x, strided(p, st, st3, w))
	}
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
	kernel("eltQKVToken", "func(tmp []uint32, q []uint8, kd []int8, x []float32, heads, kh, nr4 int, qmul float32) uint32",
		"eltQKVToken takes x, one token's fused QKV row of heads <= 16 heads of",
		"64 (Q's 64*heads floats, then K's, then V's), and stores in tmp",
		"(128 words): [0:16] the bits of each head's max|Q| (as eltAbsMax),",
		"[16:32] max|K|'s, [32:48] max|V|'s; unless one of those is >= 0x7f800000",
		"(returned then, nothing else written), with s = bits/127 (1 where 0):",
		"[48:64] Q's s*qmul, [64:80] K's s, [80:96] Q's 1/s, [96:112] K's 1/s",
		"(float32 bits), [112:128] K's column sums; Q's bytes as eltQuantRow at",
		"q[h*64:], K's s8 as eltPackQuantKRow in words of 4 at",
		"kd[h*kh + g*nr4:] (g < 16). It returns the largest bits. Its twin is",
		"eltQKVTokenGeneric.")
	tp, qp, kd, xp := base("tmp"), base("q"), base("kd"), base("x")
	heads, kh, nr4 := arg("heads"), arg("kh"), arg("nr4")
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
		sum := zeroed(VPXORD)
		w := GP64()
		MOVQ(ko, w)
		for v := 0; v < 4; v++ {
			x := ZMM()
			VMULPS(Mem{Base: kx, Disp: 64 * v}, ik, x)
			VCVTPS2DQ(x, x) // |x| <= 127 by the scale: no clamp
			VPADDD(x, sum, sum)
			b := XMM()
			VPMOVDB(x, b)
			storeWords(b, w, nr4, nr12, nil, "")
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
	retU32(top)
}

// packQuantVT4 quantizes four keys of INT8 attention's V into one group
// of words of the packed Vᵀ (docs/DESIGN.md section 3.10,
// kernels.PackQuantS8TInto).
func packQuantVT4() {
	kernel("eltPackQuantVT4", "func(dst []int8, r0, r1, r2, r3 []float32, inv float32, nr, panel int)",
		"eltPackQuantVT4 quantizes the four rows r0...r3 (n = len(r0) channels",
		"each) to s8, q = int8(roundHalfEven(clamp(r*inv, -128, 127))), and",
		"stores channel j's four bytes (r0's lowest) as one word at",
		"dst[(j/nr)*panel + (j%nr)*4:]; nr is a multiple of 16. Its twin is",
		"eltPackQuantVT4Generic.")
	n, d := length("r0"), base("dst")
	rs := []reg.Register{base("r0"), base("r1"), base("r2"), base("r3")}
	nrr, pan := arg("nr"), arg("panel")
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
		under(k, VMOVDQU32, acc, at)
		ADDQ(U8(16), jj)
		CMPQ(jj, nrr)
		JB(LabelRef(next))
		XORQ(jj, jj)
		ADDQ(pan, base)
	}
	stepLoop(i, n, 1, U8(16), "full_"+id, "tail_"+id, func(reg.GPVirtual) {
		body(nil, "fnext_"+id)
		Label("fnext_" + id)
	})
	_, k := tailMask(n, i, "done_"+id)
	body(k, "done_"+id)
	Label("done_" + id)
	ret()
}
