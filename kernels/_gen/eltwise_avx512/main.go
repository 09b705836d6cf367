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
// GELU and Softmax's exp (the twin's fma32 rounds each once, as VFMADD),
// VMAXPS/VMINPS operand order chosen so NaN behaves as the twin says.
//
// main.go holds the constant table, the order of the routines in the output
// and the helpers they share: the frame of a routine, the row loops, loads
// and stores, lane arithmetic and reductions. Each kernel group has its
// file: layernorm.go, softmax.go, gelu.go, quant.go, attn.go (INT8
// attention) and transpose.go. A variant is its base's generator called
// with a parameter, not a copy: eltNormQ is norm(true), eltAbsMaxPre and
// eltQuantRowPre are absMax(true) and quantRow(true), eltSum and eltMax
// are reduceX of the sum and of the maximum.
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
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
	{"u8expmin", f(-24)},
	{"u8maxi", 255},
	// u8perm is VPERMD's order of the packed bytes of four vectors:
	// after VPACKSSDW and VPACKUSWB, 128-bit lane L holds the L-th dword
	// of bytes of each vector in turn.
	{"u8perm", 0}, {"u8perm1", 4}, {"u8perm2", 8}, {"u8perm3", 12},
	{"u8perm4", 1}, {"u8perm5", 5}, {"u8perm6", 9}, {"u8perm7", 13},
	{"u8perm8", 2}, {"u8perm9", 6}, {"u8perm10", 10}, {"u8perm11", 14},
	{"u8perm12", 3}, {"u8perm13", 7}, {"u8perm14", 11}, {"u8perm15", 15},
	{"u8e0", f(2.5500065613e+02)},
	{"u8e1", f(1.7671597290e+02)},
	{"u8e2", f(6.1567901611e+01)},
	{"u8e3", f(1.3262922287e+01)},
	{"u8e4", f(3.4512128830e+00)},
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

// scalar broadcasts the float32 parameter name into a new ZMM register,
// from its stack slot (see shared.Addr).
func scalar(name string) reg.VecVirtual {
	z := ZMM()
	VBROADCASTSS(shared.Addr(Param(name)), z)
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
	norm(false)
	norm(true)
	maxMask()
	maxMaskScale()
	maxRow()
	expSum()
	softmaxRows()
	scale()
	gelu()
	absMax(false)
	quantRow(false)
	absMax(true)
	quantRow(true)
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

// The frame of a routine: its start, arguments and results.

// kernel starts the routine name of Go signature sig with its doc comment
// (the loop it computes).
func kernel(name, sig string, doc ...string) {
	TEXT(name, NOSPLIT, sig)
	Doc(doc...)
}

// base, length and arg load slice parameter name's pointer, its length and
// the integer parameter name.
func base(name string) reg.Register   { return Load(Param(name).Base(), GP64()) }
func length(name string) reg.Register { return Load(Param(name).Len(), GP64()) }
func arg(name string) reg.Register    { return Load(Param(name), GP64()) }

// ret ends a routine: VZEROUPPER (the upper halves are dirty) and RET.
func ret() {
	VZEROUPPER()
	RET()
}

// retF32 and retU32 return the float32 in x's low lane or the 32 bits in r
// as the routine's result.
func retF32(x reg.VecVirtual) {
	storeF32(x, ReturnIndex(0))
	ret()
}

func retU32(r reg.Register) {
	Store(r, ReturnIndex(0))
	ret()
}

// storeF32 stores the float32 in x's low lane to the result c with a VEX
// VMOVSS (see shared.Addr).
func storeF32(x reg.VecVirtual, c gotypes.Component) { VMOVSS(x, shared.Addr(c)) }

// storeZeroU32 stores 32 zero bits as the result c.
func storeZeroU32(c gotypes.Component) {
	zr := GP32()
	XORL(zr, zr)
	Store(zr, c)
}

// Row loops. Labels take a new id (newID) per loop.

var loopID int

func newID() string {
	loopID++
	return string(rune('a'+loopID/26)) + string(rune('a'+loopID%26))
}

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
	id := newID()
	stepLoop(i, n, 1, I8(16), "full_"+id, "tail_"+id, func(i reg.GPVirtual) { body(i, nil) })
	_, k := tailMask(n, i, "done_"+id)
	body(i, k)
	Label("done_" + id)
}

// stepLoop emits the loop of step(i) while i < n&^(16u-1), i += inc (16u)
// a step, at label loop; label next follows it.
func stepLoop(i reg.GPVirtual, n reg.Register, u int, inc Op, loop, next string, step func(i reg.GPVirtual)) {
	big := GP64()
	MOVQ(n, big)
	ANDQ(I32(-16*u), big)
	Label(loop)
	CMPQ(i, big)
	JAE(LabelRef(next))
	step(i)
	ADDQ(inc, i)
	JMP(LabelRef(loop))
	Label(next)
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

// unrolledLoop emits a loop of step(i) over the first n&^(16u-1) elements
// of a row, u vectors of 16 a step (labels loop and next with a new id),
// and returns i, the element where the rest begins (for rowLoopFrom).
func unrolledLoop(n reg.Register, u int, loop, next string, step func(i reg.GPVirtual)) reg.GPVirtual {
	id := newID()
	return unrolledLoopAt(n, u, loop+id, next+id, step)
}

// unrolledLoopAt is unrolledLoop at the labels loop and next as they are.
func unrolledLoopAt(n reg.Register, u int, loop, next string, step func(i reg.GPVirtual)) reg.GPVirtual {
	i := GP64()
	XORQ(i, i)
	stepLoop(i, n, u, U32(16*u), loop, next, step)
	return i
}

// withOpt emits rowLoop(n, body(true)) when the length nopt of an optional
// slice is non-zero and rowLoop(n, body(false)) (at label none) when it is
// 0, each loop followed by end.
func withOpt(nopt, n reg.Register, none string, body func(with bool) func(i reg.GPVirtual, k reg.Register), end func()) {
	TESTQ(nopt, nopt)
	JZ(LabelRef(none))
	rowLoop(n, body(true))
	end()
	Label(none)
	rowLoop(n, body(false))
	end()
}

// Loads and stores; under is the masked form of an instruction.

func f32At(base reg.Register, i reg.GPVirtual) Mem { return Mem{Base: base, Index: i, Scale: 4} }
func u8At(base reg.Register, i reg.GPVirtual) Mem  { return Mem{Base: base, Index: i, Scale: 1} }

// strided is the address of row r < 4 of rows st bytes apart from p (st3
// = 3*st).
func strided(p, st, st3 reg.Register, r int) Mem {
	return []Mem{{Base: p}, {Base: p, Index: st, Scale: 1}, {Base: p, Index: st, Scale: 2}, {Base: p, Index: st3, Scale: 1}}[r]
}

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

// loadVecs returns u new vectors holding the 16u floats at element i of p.
func loadVecs(p reg.Register, i reg.GPVirtual, u int) []reg.VecVirtual {
	xs := make([]reg.VecVirtual, u)
	for j := range xs {
		xs[j] = ZMM()
		VMOVUPS(f32At(p, i).Offset(64*j), xs[j])
	}
	return xs
}

// store writes the lanes of z in k (all with k nil) to m.
func store(z reg.VecVirtual, m Mem, k reg.Register) { under(k, VMOVUPS, z, m) }

// storeVecs stores xs to the 16*len(xs) floats at element i of p.
func storeVecs(xs []reg.VecVirtual, p reg.Register, i reg.GPVirtual) {
	for j, x := range xs {
		VMOVUPS(x, f32At(p, i).Offset(64*j))
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

// under emits op(ops...), its destination (the last operand) merge-masked
// by k unless k is nil.
func under(k reg.Register, op func(...Op), ops ...Op) {
	if k != nil {
		last := len(ops) - 1
		ops = append(append(ops[:last:last], k), ops[last])
	}
	op(ops...)
}

// Lane arithmetic.

// zeroed returns a new ZMM register cleared by xor (VXORPS or VPXORD).
func zeroed(xor func(...Op)) reg.VecVirtual {
	z := ZMM()
	xor(z, z, z)
	return z
}

// negInf sets every lane of z to -Inf.
func negInf(z reg.VecVirtual) {
	r := GP32()
	MOVL(U32(0xff800000), r)
	VPBROADCASTD(r, z)
}

// negInfs returns a new ZMM register of -Inf in every lane.
func negInfs() reg.VecVirtual {
	z := ZMM()
	negInf(z)
	return z
}

// subAll is x -= m for each x of xs.
func subAll(m reg.VecVirtual, xs []reg.VecVirtual) {
	for _, x := range xs {
		VSUBPS(m, x, x)
	}
}

// clampRound clamps p to [lo, hi] with p as src1 (NaN becomes lo) and
// converts it to int32 with round half to even.
func clampRound(p reg.VecVirtual, lo, hi string) {
	VMAXPS_BCST(c(lo), p, p)
	VMINPS_BCST(c(hi), p, p)
	VCVTPS2DQ(p, p)
}

// accAdd adds v into acc (only the lanes in k).
func accAdd(v, acc reg.VecVirtual, k reg.Register) { under(k, VADDPS, v, acc, acc) }

// accMax is acc = acc > v ? acc : v (VMAXPS with acc as src1), lanes in k.
func accMax(v, acc reg.VecVirtual, k reg.Register) { under(k, VMAXPS, v, acc, acc) }

// accAbsMax is acc = max(acc, bits(v) & 0x7fffffff) (as uint32), the
// absolute value through a (v itself, or a new register to keep v).
func accAbsMax(v, a, acc reg.VecVirtual) {
	VPANDD_BCST(c("absmask"), v, a)
	VPMAXUD(a, acc, acc)
}

// Reductions of 16 lanes, and the routines that are a row's reduction.

// reduceSum returns the tree sum of z's 16 lanes in an XMM register.
func reduceSum(z reg.VecVirtual) reg.VecVirtual { return reduceF32(z, VADDPS, VADDSS) }

// reduceMax returns the tree max (lower lane as src1) of z's 16 lanes.
func reduceMax(z reg.VecVirtual) reg.VecVirtual { return reduceF32(z, VMAXPS, VMAXSS) }

// reduceF32 folds z's 16 float32 lanes with op (its scalar form ss for the
// last step) as a tree: lane i op= lane i+w for w = 8, 4, 2, 1.
func reduceF32(z reg.VecVirtual, op, ss func(...Op)) reg.VecVirtual {
	x := fold4(z, VEXTRACTF64X4, VEXTRACTF128, op)
	x2 := XMM()
	VMOVHLPS(x, x, x2)
	op(x2, x, x)
	VMOVSHDUP(x, x2)
	ss(x2, x, x)
	return x
}

// fold4 folds z's upper 256 bits onto its lower ones with op, then the
// upper 128 of those (extracted by ext256 and ext128), and returns the XMM
// register of the 4 lanes left.
func fold4(z reg.VecVirtual, ext256 func(...Op), ext128 func(i, y, mx Op), op func(...Op)) reg.VecVirtual {
	y := YMM()
	ext256(U8(1), z, y)
	op(y, z.AsY(), y)
	x := XMM()
	ext128(U8(1), y, x)
	op(x, y.AsX(), x)
	return x
}

// reduceAddI32 returns the sum of z's 16 int32 lanes in a GP register.
func reduceAddI32(z reg.VecVirtual) reg.GPVirtual { return reduceLanes32(z, VPADDD) }

func reduceMaxU32(z reg.VecVirtual) reg.GPVirtual { return reduceLanes32(z, VPMAXUD) }

// reduceLanes32 folds z's 16 32-bit lanes with op (VPADDD, VPMAXUD) as a
// tree and returns the result in a GP register.
func reduceLanes32(z reg.VecVirtual, op func(...Op)) reg.GPVirtual {
	x := fold4(z, VEXTRACTI64X4, VEXTRACTI128, op)
	x2 := XMM()
	VPSHUFD(U8(0x4e), x, x2)
	op(x2, x, x)
	VPSHUFD(U8(0xb1), x, x2)
	op(x2, x, x)
	r := GP32()
	VMOVD(x, r)
	return r
}

// reduction is a row's float32 reduction: the start of its 16 lane
// accumulators, the step acc = acc op v (lanes in k) and the tree of
// their lanes.
type reduction struct {
	start func() reg.VecVirtual
	step  func(v, acc reg.VecVirtual, k reg.Register)
	tree  func(z reg.VecVirtual) reg.VecVirtual
}

var (
	sumOf = reduction{func() reg.VecVirtual { return zeroed(VXORPS) }, accAdd, reduceSum}
	maxOf = reduction{negInfs, accMax, reduceMax}
)

// reduceRow emits the loop of red over the values elem(i, k) of a row of
// n and returns the reduced value.
func reduceRow(red reduction, n reg.Register, elem func(i reg.GPVirtual, k reg.Register) reg.VecVirtual) {
	acc := red.start()
	rowLoop(n, func(i reg.GPVirtual, k reg.Register) { red.step(elem(i, k), acc, k) })
	retF32(red.tree(acc))
}

// reduceX emits name, func(x []float32) float32: the reduction red of x.
func reduceX(red reduction, name string, doc ...string) {
	kernel(name, "func(x []float32) float32", doc...)
	n, xp := length("x"), base("x")
	reduceRow(red, n, func(i reg.GPVirtual, k reg.Register) reg.VecVirtual { return load(f32At(xp, i), k) })
}

// addReduce emits name: dst[j] = x[j] + y[j] (y the slice parameter y) for
// j < len(dst) and their reduction red.
func addReduce(red reduction, name, sig, y string, doc ...string) {
	kernel(name, sig, doc...)
	n, d, xp, yp := length("dst"), base("dst"), base("x"), base(y)
	reduceRow(red, n, func(i reg.GPVirtual, k reg.Register) reg.VecVirtual {
		v := load(f32At(xp, i), k)
		VADDPS(load(f32At(yp, i), k), v, v)
		store(v, f32At(d, i), k)
		return v
	})
}
