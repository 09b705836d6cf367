// Command gemm_f32_avx2 generates kernels/gemm_f32_avx2_amd64.s: AVX2 + FMA3
// micro-kernels for C = A x W^T with W packed in panels of 16 columns
// (PackedF32, NR = 16), one kernel per row count 1...6 of a 6x16 tile (12
// accumulators in ymm registers), and the fused epilogue of whole 16-column
// groups (bias, ReLU, the rational GELU, residual), for CPUs without
// AVX-512 (and for attention there, which has no oneDNN fallback).
//
// Run from kernels/_gen:
//
//	go run ./gemm_f32_avx2 -out ../gemm_f32_avx2_amd64.s -stubs ../gemm_f32_avx2_stub_amd64.go -pkg kernels
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

// mrMax x 16 is the register tile: 2*mrMax accumulators, 2 B vectors and 2
// broadcast registers of the 16 ymm registers.
const mrMax = 6

// pfLines is the number of cache lines of the next B slab each kernel
// prefetches per 4 k steps (f32PFLines in gemm_f32_amd64.go).
const pfLines = 2

var ymm = shared.Ymm

func kernName(mr int) string { return fmt.Sprintf("gemmF32a%dx16", mr) }

func kernel(mr int) {
	name := kernName(mr)
	kc, a, l, l3, bp := shared.F32Kernel(name, mr, 16, true,
		"b is kc rows of one PackedF32 panel (NR = 16). When pf is not nil, the kernel",
		fmt.Sprintf("also prefetches %d cache lines per 4 k steps from pf on into L2 (a share of", pfLines),
		"the next panel slab). When res is not nil it prefetches the residual tile",
		"res[i*ldr+j] of the epilogue into L2. It needs AVX2 and FMA3.")
	bases := []reg.GPPhysical{a, reg.R9}
	shared.RowBases(bases, l, mr)
	acc := func(r, v int) reg.VecPhysical { return ymm(2*r + v) }
	bv := func(v int) reg.VecPhysical { return ymm(12 + v) }
	tmp := func(r int) reg.VecPhysical { return ymm(14 + r%2) }
	for r := 0; r < mr; r++ {
		for v := 0; v < 2; v++ {
			VXORPS(acc(r, v), acc(r, v), acc(r, v))
		}
	}
	shared.PrefetchTiles(name, mr, 16*4, []reg.GPPhysical{reg.R11, reg.R13}, reg.R12, reg.RBX)
	step := func(u int) {
		for v := 0; v < 2; v++ {
			VMOVUPS(Mem{Base: bp, Disp: (u*16 + v*8) * 4}, bv(v))
		}
		for r := 0; r < mr; r++ {
			VBROADCASTSS(shared.RowAddr(bases, l, l3, r, u*4), tmp(r))
			for v := 0; v < 2; v++ {
				VFMADD231PS(bv(v), tmp(r), acc(r, v))
			}
		}
	}
	advance := func(u int) {
		shared.AdvanceRows(bases, mr, 4*u)
		ADDQ(U32(4*u*16), bp)
	}
	pf := reg.RAX
	Load(Param("pf"), pf)
	shared.KLoop(name, kc, 4, step, advance, pf, pfLines)

	Label(name + "_store")
	Load(Param("c"), reg.R11)
	Load(Param("ldc"), reg.R12)
	lc := reg.R12
	SHLQ(U8(2), lc)
	lc3 := reg.RBX
	LEAQ(Mem{Base: lc, Index: lc, Scale: 2}, lc3)
	cb := []reg.GPPhysical{reg.R11, reg.R9}
	shared.RowBases(cb, lc, mr)
	Load(Param("accum"), reg.R14)
	Load(Param("mask"), reg.R13)
	CMPQ(reg.R13, U32(0xffff))
	JNE(LabelRef(name + "_masked"))
	TESTQ(reg.R14, reg.R14)
	JZ(LabelRef(name + "_put"))
	for r := 0; r < mr; r++ {
		for v := 0; v < 2; v++ {
			VADDPS(shared.RowAddr(cb, lc, lc3, r, v*32), acc(r, v), acc(r, v))
		}
	}
	Label(name + "_put")
	for r := 0; r < mr; r++ {
		for v := 0; v < 2; v++ {
			VMOVUPS(acc(r, v), shared.RowAddr(cb, lc, lc3, r, v*32))
		}
	}
	VZEROUPPER()
	RET()

	// Partial panel: lane masks from the bits of mask (lane j of vector v
	// is bit 8v+j), VMASKMOVPS loads and stores (masked-off lanes are
	// neither read nor written).
	Label(name + "_masked")
	bits := maskBits()
	mv := []reg.VecPhysical{ymm(12), ymm(13)}
	MOVQ(reg.R13, reg.X14)
	VPBROADCASTD(reg.X14, ymm(14))
	for v := 0; v < 2; v++ {
		VPAND(bits.Offset(32*v), ymm(14), mv[v])
		VPCMPEQD(bits.Offset(32*v), mv[v], mv[v])
	}
	TESTQ(reg.R14, reg.R14)
	JZ(LabelRef(name + "_mput"))
	for r := 0; r < mr; r++ {
		for v := 0; v < 2; v++ {
			VMASKMOVPS(shared.RowAddr(cb, lc, lc3, r, v*32), mv[v], ymm(15))
			VADDPS(ymm(15), acc(r, v), acc(r, v))
		}
	}
	Label(name + "_mput")
	for r := 0; r < mr; r++ {
		for v := 0; v < 2; v++ {
			VMASKMOVPS(acc(r, v), mv[v], shared.RowAddr(cb, lc, lc3, r, v*32))
		}
	}
	VZEROUPPER()
	RET()
}

var maskBitsMem *Mem

// maskBits defines (once) the per-lane bits 1, 2, 4, ... 1<<15 of two
// 8-lane vectors.
func maskBits() Mem {
	if maskBitsMem == nil {
		m := GLOBL("f32aMaskBits", RODATA|NOPTR)
		for j := 0; j < 16; j++ {
			DATA(4*j, U32(1<<j))
		}
		maskBitsMem = &m
	}
	return *maskBitsMem
}

func epilogue() {
	cst := shared.GELU8ConstsAVX2("epiF32aConst")
	TEXT("epiF32a", NOSPLIT, "func(rows int, nfull int, c *float32, ldc int, bias *float32, res *float32, ldr int, act int)")
	Pragma("noescape")
	Doc("epiF32a applies the fused epilogue to rows x 16*nfull floats of c:",
		"",
		"\ty := c[i*ldc+j]",
		"\tif bias != nil { y += bias[j] }",
		"\tif act == 2 { y = max(y, 0) } else if act == 3 { y = geluQ8F32(y) }",
		"\tif res != nil { y += res[i*ldr+j] }",
		"\tc[i*ldc+j] = y",
		"",
		"(the rational GELU bit for bit as geluQ8F32). It needs AVX2 and FMA3.")
	rows, cp, ldc, bias, res, ldr, act := reg.RCX, reg.RSI, reg.RDX, reg.RDI, reg.R9, reg.R10, reg.R11
	Load(Param("rows"), rows)
	Load(Param("c"), cp)
	Load(Param("ldc"), ldc)
	Load(Param("bias"), bias)
	Load(Param("res"), res)
	Load(Param("ldr"), ldr)
	Load(Param("act"), act)
	SHLQ(U8(2), ldc)
	SHLQ(U8(2), ldr)
	zero := ymm(15)
	VXORPS(zero, zero, zero)
	TESTQ(rows, rows)
	JLE(LabelRef("epia_done"))
	Label("epia_row")
	off, cnt := reg.RAX, reg.RBX
	XORQ(off, off)
	Load(Param("nfull"), cnt)
	TESTQ(cnt, cnt)
	JZ(LabelRef("epia_next"))
	Label("epia_vec")
	xs := []reg.VecPhysical{ymm(0), ymm(1)}
	mem := func(b reg.GPPhysical, l int) Mem { return Mem{Base: b, Index: off, Scale: 1, Disp: 32 * l} }
	for l, x := range xs {
		VMOVUPS(mem(cp, l), x)
	}
	TESTQ(bias, bias)
	JZ(LabelRef("epia_nobias"))
	for l, x := range xs {
		VADDPS(mem(bias, l), x, x)
	}
	Label("epia_nobias")
	CMPQ(act, U8(2))
	JNE(LabelRef("epia_norelu"))
	for _, x := range xs {
		VMAXPS(x, zero, x) // max(0, x): a NaN x (the second operand) stays NaN
	}
	JMP(LabelRef("epia_noact"))
	Label("epia_norelu")
	CMPQ(act, U8(3))
	JNE(LabelRef("epia_noact"))
	shared.GELU8AVX2(xs, cst)
	Label("epia_noact")
	TESTQ(res, res)
	JZ(LabelRef("epia_nores"))
	for l, x := range xs {
		VADDPS(mem(res, l), x, x)
	}
	Label("epia_nores")
	for l, x := range xs {
		VMOVUPS(x, mem(cp, l))
	}
	ADDQ(U8(64), off)
	DECQ(cnt)
	JNZ(LabelRef("epia_vec"))
	Label("epia_next")
	ADDQ(ldc, cp)
	TESTQ(res, res)
	JZ(LabelRef("epia_resok"))
	ADDQ(ldr, res)
	Label("epia_resok")
	DECQ(rows)
	JNZ(LabelRef("epia_row"))
	Label("epia_done")
	VZEROUPPER()
	RET()
}

func main() {
	ConstraintExpr("amd64,gc,!purego,!noasm")
	for mr := 1; mr <= mrMax; mr++ {
		kernel(mr)
	}
	epilogue()
	Generate()
}
