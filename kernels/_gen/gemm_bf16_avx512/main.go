// Command gemm_bf16_avx512 generates kernels/gemm_bf16_avx512_amd64.s:
// AVX512-BF16 micro-kernels for C = bf16(A) x bf16(W)^T with W packed in
// panels of NR columns of bf16 pairs (PackedBF16), one kernel per row count
// 1...MR of each tile shape, the row packer that rounds A to bf16
// (cvtBF16Row), and a Go table of the kernels. VDPBF16PS, which the Go
// assembler cannot spell, is written as its EVEX bytes (shared.VDPBF16PS);
// every vector register is therefore a physical one.
//
// Run from kernels/_gen:
//
//	go run ./gemm_bf16_avx512 -out ../gemm_bf16_avx512_amd64.s -stubs ../gemm_bf16_avx512_stub_amd64.go -pkg kernels -table ../gemm_bf16_avx512_table_amd64.go
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

// tileShape is one register tile: NR columns (NR/16 accumulators a row)
// and up to MR rows. Each row's pair of A is broadcast into one of two
// spare registers (VPBROADCASTD), then multiplied with every B vector.
type tileShape struct{ MR, NR int }

// tileShapes: MR*NR/16 accumulators + NR/16 B vectors + 2 broadcasts fit
// the 32 zmm registers.
var tileShapes = []tileShape{
	{6, 64},
	{8, 48},
	{14, 32},
}

var zmm, kregs = shared.Zmm, shared.ColMasks

func kernName(f tileShape, mr int) string { return fmt.Sprintf("gemmBF16k%dx%d", mr, f.NR) }

func kernel(f tileShape, mr int) {
	nv := f.NR / 16
	name := kernName(f, mr)
	TEXT(name, NOSPLIT, "func(kp int, a *uint16, lda int, b *uint16, c *float32, ldc int, mask uint64, accum int)")
	Doc(fmt.Sprintf("%s computes a %dx%d tile: for i < %d, j < %d with mask bit j set,", name, mr, f.NR, mr, f.NR),
		"",
		"\tacc := 0, or c[i*ldc+j] when accum != 0",
		"\tfor q < kp: acc = (acc + a[i*lda+2q+1]*b[(2q+1)*"+fmt.Sprint(f.NR)+"+2j+1]) + a[i*lda+2q]*b[2q*"+fmt.Sprint(f.NR)+"+2j]",
		"\tc[i*ldc+j] = acc",
		"",
		"with a and b bf16 (VDPBF16PS, byte-encoded: float32 sums, subnormals as",
		"zero), lda in uint16 elements (even). b is kp pairs of one PackedBF16",
		"panel. Starting from c keeps one summation chain across K slabs. It",
		"needs AVX512F and AVX512BF16.")
	acc := func(r, v int) int { return r*nv + v }
	bv := func(v int) int { return 31 - v }
	tmp := func(r int) int { return 31 - nv - r%2 }

	// The column masks, one per vector.
	Load(Param("mask"), reg.RAX)
	KMOVQ(reg.RAX, kregs[0])
	for v := 1; v < nv; v++ {
		KSHIFTRQ(U8(16*v), kregs[0], kregs[v])
	}
	// C's rows.
	cb := []reg.GPPhysical{reg.R11, reg.R13, reg.R14}
	lc, lc3 := reg.R12, reg.RBX
	Load(Param("c"), cb[0])
	Load(Param("ldc"), lc)
	SHLQ(U8(2), lc)
	LEAQ(Mem{Base: lc, Index: lc, Scale: 2}, lc3)
	shared.RowBases(cb, lc, mr)
	Load(Param("accum"), reg.RAX)
	TESTQ(reg.RAX, reg.RAX)
	JZ(LabelRef(name + "_zero"))
	for r := 0; r < mr; r++ {
		for v := 0; v < nv; v++ {
			VMOVUPS_Z(shared.RowAddr(cb, lc, lc3, r, v*64), kregs[v], zmm(acc(r, v)))
		}
	}
	JMP(LabelRef(name + "_start"))
	Label(name + "_zero")
	for r := 0; r < mr; r++ {
		for v := 0; v < nv; v++ {
			VPXORD(zmm(acc(r, v)), zmm(acc(r, v)), zmm(acc(r, v)))
		}
	}
	Label(name + "_start")
	kc := reg.RCX
	Load(Param("kp"), kc)
	ab := []reg.GPPhysical{reg.RSI, reg.R9, reg.R10}
	l, l3 := reg.RDX, reg.R8
	Load(Param("a"), ab[0])
	Load(Param("lda"), l)
	SHLQ(U8(1), l)
	LEAQ(Mem{Base: l, Index: l, Scale: 2}, l3)
	shared.RowBases(ab, l, mr)
	bp := reg.RDI
	Load(Param("b"), bp)

	step := func(u int) {
		for v := 0; v < nv; v++ {
			VMOVUPS(Mem{Base: bp, Disp: u*f.NR*4 + v*64}, zmm(bv(v)))
		}
		for r := 0; r < mr; r++ {
			VPBROADCASTD(shared.RowAddr(ab, l, l3, r, u*4), zmm(tmp(r)))
			for v := 0; v < nv; v++ {
				shared.VDPBF16PS(acc(r, v), tmp(r), bv(v))
			}
		}
	}
	advance := func(u int) {
		shared.AdvanceRows(ab, mr, 4*u)
		ADDQ(U32(4*u*f.NR), bp)
	}
	shared.KLoop(name, kc, 4, step, advance, nil, 0)

	Label(name + "_store")
	for r := 0; r < mr; r++ {
		for v := 0; v < nv; v++ {
			VMOVUPS(zmm(acc(r, v)), kregs[v], shared.RowAddr(cb, lc, lc3, r, v*64))
		}
	}
	VZEROUPPER()
	RET()
}

// cvtRow generates cvtBF16Row, the row packer: ToBF16 (round half to
// even, NaN kept quiet: bits>>16 | 0x40) in integer steps, then subnormal
// results flushed to a signed zero, 16 floats a step, the tail masked.
func cvtRow() {
	consts := []uint32{1, 0x7fff, 0x7fffffff, 0x7f800000, 0x40, 0x7f80, 0x8000}
	t := GLOBL("cvtBF16Const", RODATA|NOPTR)
	for i, c := range consts {
		DATA(4*i, U32(c))
	}
	TEXT("cvtBF16Row", NOSPLIT, "func(n int, src *float32, dst *uint16)")
	Doc("cvtBF16Row rounds src[0...n-1] to bf16 into dst[0...n-1]: for each x,",
		"",
		"\th := ToBF16(x); if h&0x7f80 == 0 { h &= 0x8000 }; dst[i] = h",
		"",
		"(bf16DAZ, bit for bit). It needs AVX512F and AVX512BW.")
	one, rnd, abs, inf, qnan, expo, sign := reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22
	for i, z := range []reg.VecPhysical{one, rnd, abs, inf, qnan, expo, sign} {
		VPBROADCASTD(t.Offset(4*i), z)
	}
	n, src, dst := reg.RCX, reg.RSI, reg.RDI
	Load(Param("n"), n)
	Load(Param("src"), src)
	Load(Param("dst"), dst)
	// body converts Z0 into Z3 (Z1, Z2, Z4 scratch; K2, K3).
	body := func() {
		VPSRLD(U8(16), reg.Z0, reg.Z1)      // t = x >> 16
		VPANDD(one, reg.Z1, reg.Z2)         // lsb of t
		VPADDD(rnd, reg.Z0, reg.Z3)         // x + 0x7fff
		VPADDD(reg.Z2, reg.Z3, reg.Z3)      // + lsb
		VPSRLD(U8(16), reg.Z3, reg.Z3)      // rounded
		VPANDD(abs, reg.Z0, reg.Z4)         // |x|
		VPCMPUD(U8(6), inf, reg.Z4, reg.K2) // |x| > inf: NaN
		VPORD(qnan, reg.Z1, reg.K2, reg.Z3) // NaN: t | 0x40
		VPTESTNMD(expo, reg.Z3, reg.K3)     // exponent zero: subnormal or zero
		VPANDD(sign, reg.Z3, reg.K3, reg.Z3)
	}
	CMPQ(n, U8(16))
	JL(LabelRef("cvtBF16Row_tail"))
	Label("cvtBF16Row_loop")
	VMOVDQU32(Mem{Base: src}, reg.Z0)
	body()
	VPMOVDW(reg.Z3, Mem{Base: dst})
	ADDQ(U8(64), src)
	ADDQ(U8(32), dst)
	SUBQ(U8(16), n)
	CMPQ(n, U8(16))
	JGE(LabelRef("cvtBF16Row_loop"))
	Label("cvtBF16Row_tail")
	TESTQ(n, n)
	JZ(LabelRef("cvtBF16Row_done"))
	MOVL(U32(1), reg.EAX)
	SHLL(reg.CL, reg.EAX)
	DECL(reg.EAX)
	KMOVW(reg.EAX, reg.K1)
	VMOVDQU32_Z(Mem{Base: src}, reg.K1, reg.Z0)
	body()
	VPMOVDW(reg.Z3, reg.K1, Mem{Base: dst})
	Label("cvtBF16Row_done")
	VZEROUPPER()
	RET()
}

func main() {
	var tiles []shared.Tile
	for _, f := range tileShapes {
		emit, name := func(mr int) { kernel(f, mr) }, func(mr int) string { return kernName(f, mr) }
		tiles = append(tiles, shared.Tile{MR: f.MR, Fields: fmt.Sprintf("mr: %d, nr: %d", f.MR, f.NR), Emit: emit, Name: name})
	}
	shared.GenerateTiles("gemm_bf16_avx512", "bf16Drivers lists the generated AVX512-BF16 register tiles; kern[mr] computes mr rows.",
		"var bf16Drivers = []bf16Driver", "bf16Kern", tiles, cvtRow)
}
