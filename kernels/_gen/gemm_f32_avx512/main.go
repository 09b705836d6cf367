// Command gemm_f32_avx512 generates kernels/gemm_f32_avx512_amd64.s: AVX-512 FMA micro-kernels
// for C = A x W^T with W packed in panels of NR columns (PackedF32), one
// kernel per row count 1...MR of each tile shape, the fused epilogue (bias,
// GELU erf, ReLU, residual), and a Go table of the kernels.
//
// Run from kernels/_gen:
//
//	go run ./gemm_f32_avx512 -out ../gemm_f32_avx512_amd64.s -stubs ../gemm_f32_avx512_stub_amd64.go -pkg kernels -table ../gemm_f32_avx512_table_amd64.go
package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

// tileShape is one register tile: NR columns (NR/16 vectors) and up to
// MR rows. With bcastReg the A element is broadcast into a register once
// per row (2 spare registers), else every FMA broadcasts it from memory.
type tileShape struct {
	MR, NR   int
	bcastReg bool
}

// tileShapes are listed fastest first on BERT's shapes (one thread). Each
// broadcasts A into a register (bcastReg): folding the broadcast into the
// FMA (bcastReg false, e.g. 15x32) is slower.
var tileShapes = []tileShape{
	{6, 64, true},
	{8, 48, true},
	{14, 32, true},
}

// pfLines is the number of cache lines of the next B slab each kernel
// prefetches per 4 k steps (kc*16*pfLines bytes per call), so that the
// row tiles of one panel share the prefetch of the next.
const pfLines = 2

var zmm, kregs = shared.Zmm, shared.ColMasks

func kernName(f tileShape, mr int) string {
	s := fmt.Sprintf("gemmF32k%dx%d", mr, f.NR)
	if !f.bcastReg {
		s += "m"
	}
	return s
}

func kernel(f tileShape, mr int) {
	nv := f.NR / 16
	name := kernName(f, mr)
	kc, p0, l, l3, bp := shared.F32Kernel(name, mr, f.NR, false,
		"b is kc rows of one PackedF32 panel. When pf is not nil, the kernel also",
		fmt.Sprintf("prefetches %d cache lines per 4 k steps from pf on into L2 (a share of the", pfLines),
		"next panel slab). When res is not nil it prefetches the residual tile",
		"res[i*ldr+j] of the epilogue into L2. It needs AVX512F and AVX512BW.")
	bases := []reg.GPPhysical{p0, reg.R9, reg.R10}
	shared.RowBases(bases, l, mr)
	acc := func(r, v int) reg.VecPhysical { return zmm(r*nv + v) }
	bv := func(v int) reg.VecPhysical { return zmm(31 - v) }
	tmp := func(r int) reg.VecPhysical { return zmm(31 - nv - r%2) }
	for r := 0; r < mr; r++ {
		for v := 0; v < nv; v++ {
			VPXORD(acc(r, v), acc(r, v), acc(r, v))
		}
	}
	shared.PrefetchTiles(name, mr, f.NR*4, []reg.GPPhysical{reg.R11, reg.R13, reg.R14}, reg.R12, reg.RBX)
	step := func(u int) {
		for v := 0; v < nv; v++ {
			VMOVUPS(Mem{Base: bp, Disp: (u*f.NR + v*16) * 4}, bv(v))
		}
		for r := 0; r < mr; r++ {
			am := shared.RowAddr(bases, l, l3, r, u*4)
			if f.bcastReg {
				VBROADCASTSS(am, tmp(r))
				for v := 0; v < nv; v++ {
					VFMADD231PS(bv(v), tmp(r), acc(r, v))
				}
			} else {
				for v := 0; v < nv; v++ {
					VFMADD231PS_BCST(am, bv(v), acc(r, v))
				}
			}
		}
	}
	advance := func(u int) {
		shared.AdvanceRows(bases, mr, 4*u)
		ADDQ(U32(4*u*f.NR), bp)
	}
	pf := reg.RAX
	Load(Param("pf"), pf)
	shared.KLoop(name, kc, 4, step, advance, pf, pfLines)

	Label(name + "_store")
	Load(Param("c"), reg.R11)
	cp := reg.R11
	Load(Param("ldc"), reg.R12)
	lc := reg.R12
	SHLQ(U8(2), lc)
	lc3 := reg.RBX
	LEAQ(Mem{Base: lc, Index: lc, Scale: 2}, lc3)
	Load(Param("mask"), reg.R13)
	m := reg.R13
	KMOVQ(m, kregs[0])
	for v := 1; v < nv; v++ {
		KSHIFTRQ(U8(16*v), kregs[0], kregs[v])
	}
	cbases := []reg.GPPhysical{cp, reg.R9, reg.R10}
	shared.RowBases(cbases, lc, mr)
	Load(Param("accum"), reg.R14)
	accum := reg.R14
	TESTQ(accum, accum)
	JZ(LabelRef(name + "_put"))
	for r := 0; r < mr; r++ {
		for v := 0; v < nv; v++ {
			VADDPS_Z(shared.RowAddr(cbases, lc, lc3, r, v*64), acc(r, v), kregs[v], acc(r, v))
		}
	}
	Label(name + "_put")
	for r := 0; r < mr; r++ {
		for v := 0; v < nv; v++ {
			VMOVUPS(acc(r, v), kregs[v], shared.RowAddr(cbases, lc, lc3, r, v*64))
		}
	}
	VZEROUPPER()
	RET()
}

// Constants of the epilogue, one float32 (or bit pattern) each.
var consts = []struct {
	name string
	bits uint32
}{}

func f32c(name string, v float64) {
	consts = append(consts, struct {
		name string
		bits uint32
	}{name, math.Float32bits(float32(v))})
}

// f32b adds a constant given as a float32 (no rounding through float64).
func f32b(name string, v float32) {
	consts = append(consts, struct {
		name string
		bits uint32
	}{name, math.Float32bits(v)})
}

func constIndex(name string) int {
	for i, c := range consts {
		if c.name == name {
			return i
		}
	}
	panic(name)
}

// erfc(z) = t*exp(-z*z + P(t)), t = 1/(1+z/2), fractional error < 1.2e-7
// (Numerical Recipes' erfcc, Chebyshev fit); P's coefficients from t^9 down.
var erfcP = []float64{0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
	-0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223}

func setupConsts() Mem {
	consts = append(consts, struct {
		name string
		bits uint32
	}{"abs", 0x7fffffff})
	f32c("clamp", 16)
	f32c("rsqrt2", 1/math.Sqrt2)
	f32c("half", 0.5)
	f32c("one", 1)
	for i, c := range erfcP {
		f32c(fmt.Sprint("p", i), c)
	}
	f32c("log2e", math.Log2E)
	f32c("ln2hi", 0.693359375)
	f32c("ln2lo", math.Ln2-0.693359375)
	fact := 1.0
	for k := 0; k <= 7; k++ {
		if k > 0 {
			fact *= float64(k)
		}
		f32c(fmt.Sprint("f", k), 1/fact) // exp's Taylor coefficients 1/k!
	}
	f32b("q8lo", -shared.GELU8Clamp)
	f32b("q8hi", shared.GELU8Clamp)
	f32b("zero", 0)
	for i, c := range shared.GELU8P {
		f32b(fmt.Sprint("q8p", i), c)
	}
	for i, c := range shared.GELU8Q {
		f32b(fmt.Sprint("q8q", i), c)
	}
	t := GLOBL("epiF32Const", RODATA|NOPTR)
	for i, c := range consts {
		DATA(4*i, U32(c.bits))
	}
	return t
}

func epilogue() {
	tab := setupConsts()
	cst := func(name string) Mem { return tab.Offset(4 * constIndex(name)) }
	TEXT("epiF32", NOSPLIT, "func(rows int, nfull int, tail uint64, c *float32, ldc int, bias *float32, res *float32, ldr int, act int)")
	Doc("epiF32 applies the fused epilogue to rows x (16*nfull + popcount(tail)) floats of c:",
		"",
		"\ty := c[i*ldc+j]",
		"\tif bias != nil { y += bias[j] }",
		"\tif act == 1 { y = 0.5*y*(1+erf(y/sqrt 2)) } else if act == 2 { y = max(y, 0) }",
		"\tif act == 3 { y = geluQ8F32(y) } // the rational GELU, bit for bit",
		"\tif res != nil { y += res[i*ldr+j] }",
		"\tc[i*ldc+j] = y",
		"",
		"tail is the lane mask of the last, partial vector (0: none). It needs AVX512F.")
	rows, cp, ldc, bias, res, ldr, act, tail := reg.RCX, reg.RSI, reg.RDX, reg.RDI, reg.R9, reg.R10, reg.R11, reg.R12
	Load(Param("rows"), rows)
	Load(Param("c"), cp)
	Load(Param("ldc"), ldc)
	Load(Param("bias"), bias)
	Load(Param("res"), res)
	Load(Param("ldr"), ldr)
	Load(Param("act"), act)
	Load(Param("tail"), tail)
	SHLQ(U8(2), ldc)
	SHLQ(U8(2), ldr)
	KMOVQ(tail, reg.K2)
	zero := reg.Z31
	VPXORD(zero, zero, zero)
	TESTQ(rows, rows)
	JLE(LabelRef("epi_done"))
	Label("epi_row")
	off := reg.RAX
	cnt := reg.RBX
	XORQ(off, off)
	Load(Param("nfull"), cnt)
	// body handles len(xs) vectors at off, off+64, ...; masked: one
	// vector under K2. GELU runs the vectors interleaved (13 registers
	// each) for instruction-level parallelism.
	body := func(sfx string, lanes int, masked bool) {
		xs := []reg.VecPhysical{reg.Z0, reg.Z16}[:lanes]
		mem := func(b reg.GPPhysical, l int) Mem { return Mem{Base: b, Index: off, Scale: 1, Disp: 64 * l} }
		for l, x := range xs {
			if masked {
				VMOVUPS_Z(mem(cp, l), reg.K2, x)
			} else {
				VMOVUPS(mem(cp, l), x)
			}
		}
		TESTQ(bias, bias)
		JZ(LabelRef("epi_nobias" + sfx))
		for l, x := range xs {
			if masked {
				VADDPS_Z(mem(bias, l), x, reg.K2, x)
			} else {
				VADDPS(mem(bias, l), x, x)
			}
		}
		Label("epi_nobias" + sfx)
		CMPQ(act, U8(1))
		JNE(LabelRef("epi_nogelu" + sfx))
		gelu(xs, cst, zero)
		JMP(LabelRef("epi_noact" + sfx))
		Label("epi_nogelu" + sfx)
		CMPQ(act, U8(3))
		JNE(LabelRef("epi_nogelu8" + sfx))
		gelu8(xs, cst)
		JMP(LabelRef("epi_noact" + sfx))
		Label("epi_nogelu8" + sfx)
		CMPQ(act, U8(2))
		JNE(LabelRef("epi_noact" + sfx))
		for _, x := range xs {
			VMAXPS(x, zero, x) // NaN stays NaN
		}
		Label("epi_noact" + sfx)
		TESTQ(res, res)
		JZ(LabelRef("epi_nores" + sfx))
		for l, x := range xs {
			if masked {
				VADDPS_Z(mem(res, l), x, reg.K2, x)
			} else {
				VADDPS(mem(res, l), x, x)
			}
		}
		Label("epi_nores" + sfx)
		for l, x := range xs {
			if masked {
				VMOVUPS(x, reg.K2, mem(cp, l))
			} else {
				VMOVUPS(x, mem(cp, l))
			}
		}
	}
	CMPQ(cnt, U8(2))
	JL(LabelRef("epi_one"))
	Label("epi_vec2")
	body("_2", 2, false)
	ADDQ(U8(128), off)
	SUBQ(U8(2), cnt)
	CMPQ(cnt, U8(2))
	JGE(LabelRef("epi_vec2"))
	Label("epi_one")
	TESTQ(cnt, cnt)
	JZ(LabelRef("epi_tail"))
	body("_1", 1, false)
	ADDQ(U8(64), off)
	Label("epi_tail")
	TESTQ(tail, tail)
	JZ(LabelRef("epi_next"))
	body("_t", 1, true)
	Label("epi_next")
	ADDQ(ldc, cp)
	TESTQ(res, res)
	JZ(LabelRef("epi_resok"))
	ADDQ(ldr, res)
	Label("epi_resok")
	DECQ(rows)
	JNZ(LabelRef("epi_row"))
	Label("epi_done")
	VZEROUPPER()
	RET()
}

// gelu8 replaces each x by geluQ8F32(x) (gemm_u8s8_vnni.go), the same float32
// steps as gelu8 of _gen/gemm_u8s8_vnni: within 3e-7*max(1, |x|) of the float64 GELU
// in 16 instructions. xs are Z0 and/or Z16; lane l uses Z(16l+1)...Z(16l+4).
func gelu8(xs []reg.VecPhysical, cst func(string) Mem) {
	type regs struct{ x, xc, s, p, q reg.VecPhysical }
	var L []regs
	for l, x := range xs {
		b := 16 * l
		L = append(L, regs{x, zmm(b + 1), zmm(b + 2), zmm(b + 3), zmm(b + 4)})
	}
	each := func(f func(r regs)) {
		for _, r := range L {
			f(r)
		}
	}
	each(func(r regs) { VMAXPS_BCST(cst("q8lo"), r.x, r.xc) })
	each(func(r regs) { VMINPS_BCST(cst("q8hi"), r.xc, r.xc) })
	each(func(r regs) { VMULPS(r.xc, r.xc, r.s) })
	each(func(r regs) { VBROADCASTSS(cst("q8p6"), r.p) })
	each(func(r regs) { VBROADCASTSS(cst("q8q3"), r.q) })
	for k := 5; k >= 0; k-- {
		each(func(r regs) { VFMADD213PS_BCST(cst(fmt.Sprint("q8p", k)), r.s, r.p) })
		if k >= 3 {
			each(func(r regs) { VFMADD213PS_BCST(cst(fmt.Sprint("q8q", k-3)), r.s, r.q) })
		}
	}
	each(func(r regs) { VDIVPS(r.q, r.p, r.p) })                    // P/Q
	each(func(r regs) { VFMADD213PS_BCST(cst("half"), r.xc, r.p) }) // xc*P/Q + 1/2
	each(func(r regs) { VMAXPS_BCST(cst("zero"), r.p, r.p) })
	each(func(r regs) { VMULPS(r.p, r.x, r.x) })
}

// gelu replaces each x by x*Phi(x), Phi(x) = 0.5*erfc(-x/sqrt 2), computed
// as e = 0.5*erfc(|x|/sqrt 2) and Phi = e (x < 0) or 1-e (x >= 0); z*z/2 is
// split exactly (FMA) and exp uses Cody-Waite reduction, a degree-7
// polynomial and VSCALEFPS (gradual underflow), so that the relative error
// stays near 1e-7 even far in the negative tail. Both polynomials use
// Estrin's scheme (short dependency chains); the lanes run interleaved.
// xs are Z0 and/or Z16; lane l uses Z(16l+1)...Z(16l+14) and K(3+l).
func gelu(xs []reg.VecPhysical, cst func(string) Mem, zero reg.VecPhysical) {
	type regs struct{ x, a, t, q, p, h, lo, s, n, r, e, u1, u2, u3, u4 reg.VecPhysical }
	var L []regs
	for l, x := range xs {
		b := 16 * l
		L = append(L, regs{x, zmm(b + 1), zmm(b + 2), zmm(b + 3), zmm(b + 4), zmm(b + 5), zmm(b + 6),
			zmm(b + 7), zmm(b + 8), zmm(b + 9), zmm(b + 10), zmm(b + 11), zmm(b + 12), zmm(b + 13), zmm(b + 14)})
	}
	each := func(f func(r regs)) {
		for _, r := range L {
			f(r)
		}
	}
	// c(k) is P's coefficient of t^k (erfcP lists t^9 first).
	c := func(k int) Mem { return cst(fmt.Sprint("p", len(erfcP)-1-k)) }
	each(func(r regs) { VANDPS_BCST(cst("abs"), r.x, r.a) })
	each(func(r regs) { VMINPS_BCST(cst("clamp"), r.a, r.a) })
	// Exact split of z*z = a*a/2 = h + lo, independent of the rest.
	each(func(r regs) { VMULPS(r.a, r.a, r.h) })
	each(func(r regs) { VMOVAPS(r.h, r.lo) })
	each(func(r regs) { VFMSUB231PS(r.a, r.a, r.lo) }) // lo = a*a - h exactly
	each(func(r regs) { VMULPS_BCST(cst("half"), r.h, r.h) })
	each(func(r regs) { VMULPS_BCST(cst("half"), r.lo, r.lo) })
	// t = 1/(1 + z/2), z = a/sqrt 2.
	each(func(r regs) { VMULPS_BCST(cst("rsqrt2"), r.a, r.t) })
	each(func(r regs) { VBROADCASTSS(cst("half"), r.u1) })
	each(func(r regs) { VFMADD213PS_BCST(cst("one"), r.u1, r.t) }) // t = z/2 + 1
	each(func(r regs) { VBROADCASTSS(cst("one"), r.q) })
	each(func(r regs) { VDIVPS(r.t, r.q, r.t) }) // t = 1/t
	// P(t), Estrin: pairs q_i = c(2i) + c(2i+1) t, then t^2, t^4, t^8.
	each(func(r regs) { VMULPS(r.t, r.t, r.u1) }) // t2
	pair := func(dst func(regs) reg.VecPhysical, k int) {
		each(func(r regs) { VBROADCASTSS(c(k+1), dst(r)) })
		each(func(r regs) { VFMADD213PS_BCST(c(k), r.t, dst(r)) })
	}
	pair(func(r regs) reg.VecPhysical { return r.p }, 8)  // q4
	pair(func(r regs) reg.VecPhysical { return r.u2 }, 6) // q3
	pair(func(r regs) reg.VecPhysical { return r.u3 }, 4) // q2
	pair(func(r regs) reg.VecPhysical { return r.u4 }, 2) // q1
	pair(func(r regs) reg.VecPhysical { return r.e }, 0)  // q0
	each(func(r regs) { VFMADD213PS(r.u3, r.u1, r.u2) })  // r1 = q2 + q3 t2
	each(func(r regs) { VFMADD213PS(r.e, r.u1, r.u4) })   // r0 = q0 + q1 t2
	each(func(r regs) { VMULPS(r.u1, r.u1, r.u3) })       // t4
	each(func(r regs) { VMULPS(r.u3, r.u3, r.u1) })       // t8
	each(func(r regs) { VFMADD213PS(r.u4, r.u3, r.u2) })  // s0 = r0 + r1 t4
	each(func(r regs) { VFMADD213PS(r.u2, r.u1, r.p) })   // P = s0 + q4 t8
	// exp(P - z*z) = exp(r) * 2^n, r = (P - lo) - h - n*ln2.
	each(func(r regs) { VSUBPS(r.lo, r.p, r.s) }) // s = P(t) - lo
	each(func(r regs) { VSUBPS(r.h, r.s, r.n) })  // ~ -z*z + P(t)
	each(func(r regs) { VMULPS_BCST(cst("log2e"), r.n, r.n) })
	each(func(r regs) { VRNDSCALEPS(U8(8), r.n, r.n) }) // round to nearest even, no precision exception
	each(func(r regs) { VMOVAPS(r.h, r.r) })
	each(func(r regs) { VFMADD231PS_BCST(cst("ln2hi"), r.n, r.r) }) // r = h + n*ln2hi (exact)
	each(func(r regs) { VFMADD231PS_BCST(cst("ln2lo"), r.n, r.r) }) // r += n*ln2lo
	each(func(r regs) { VSUBPS(r.r, r.s, r.r) })                    // r = s - h - n*ln2
	// exp(r), Estrin on 1/k!.
	f := func(k int) Mem { return cst(fmt.Sprint("f", k)) }
	each(func(r regs) { VMULPS(r.r, r.r, r.u1) }) // r2
	epair := func(dst func(regs) reg.VecPhysical, k int) {
		each(func(r regs) { VBROADCASTSS(f(k+1), dst(r)) })
		each(func(r regs) { VFMADD213PS_BCST(f(k), r.r, dst(r)) })
	}
	epair(func(r regs) reg.VecPhysical { return r.e }, 0)  // 1 + r
	epair(func(r regs) reg.VecPhysical { return r.u2 }, 2) // 1/2 + r/6
	epair(func(r regs) reg.VecPhysical { return r.u3 }, 4)
	epair(func(r regs) reg.VecPhysical { return r.u4 }, 6)
	each(func(r regs) { VFMADD213PS(r.e, r.u1, r.u2) })  // s0
	each(func(r regs) { VFMADD213PS(r.u3, r.u1, r.u4) }) // s1
	each(func(r regs) { VMULPS(r.u1, r.u1, r.u1) })      // r4
	each(func(r regs) { VFMADD213PS(r.u2, r.u1, r.u4) }) // exp(r) = s0 + s1 r4
	each(func(r regs) { VSCALEFPS(r.n, r.u4, r.e) })     // e = exp(r) * 2^n
	each(func(r regs) { VMULPS(r.t, r.e, r.e) })         // erfc(z)
	each(func(r regs) { VMULPS_BCST(cst("half"), r.e, r.e) })
	each(func(r regs) { VSUBPS(r.e, r.q, r.q) }) // q = 1 - e (q held 1)
	for l, r := range L {
		k := []reg.OpmaskPhysical{reg.K3, reg.K4}[l]
		VCMPPS(U8(1), zero, r.x, k) // x < 0
		VMOVAPS(r.e, k, r.q)
	}
	each(func(r regs) { VMULPS(r.q, r.x, r.x) })
}

func main() {
	var tiles []shared.Tile
	for _, f := range tileShapes {
		emit, name := func(mr int) { kernel(f, mr) }, func(mr int) string { return kernName(f, mr) }
		tiles = append(tiles, shared.Tile{MR: f.MR, Fields: fmt.Sprintf("mr: %d, nr: %d, bcastReg: %v", f.MR, f.NR, f.bcastReg), Emit: emit, Name: name})
	}
	shared.GenerateTiles("gemm_f32_avx512", "f32Drivers lists the generated AVX-512 register tiles; kern[mr] computes mr rows.",
		"var f32Drivers = []f32Driver", "f32Kern", tiles, epilogue)
}
