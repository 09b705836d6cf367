// Command gemm_u8s8_avx2 generates the AVX2 u8 x s8 -> s32 GEMM micro-kernels of
// package kernels (gemm_u8s8_avx2_amd64.s and its stubs).
//
// AVX2 has no VPDPBUSD, and VPMADDUBSW saturates its int16 pair sums on
// full-range u8 x s8 data (oneDNN's AVX2 int8 path does exactly that). These
// kernels stay exact: bytes are widened to int16 (u8 zero-, s8 sign-extended)
// and multiplied with VPMADDWD, whose int32 pair sums cannot overflow
// (2*255*128 < 2^31).
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

func main() {
	ConstraintExpr("amd64,gc,!purego,!noasm")
	for _, mr := range []int{1, 2} {
		kernel(mr)
	}
	for mr := 1; mr <= 6; mr++ {
		wideKernel8(mr)
	}
	for mr := 1; mr <= zmmRows; mr++ {
		wideKernelZ(mr)
	}
	widen("widenU8AVX2", "uint8", "zero", VPMOVZXBW)
	widen("widenS8AVX2", "int8", "sign", VPMOVSXBW)
	epilogue()
	Generate()
}

// kernel emits gemmAVX2_{mr}x16: an mr x 16 tile over kgroups groups of 4.
func kernel(mr int) {
	name := fmt.Sprintf("gemmAVX2_%dx16", mr)
	a, lda, b, n := shared.GroupKernel(name, "func(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int)", mr, 16,
		"b is one 16-column panel of a PackedS8 (NR = 16).")
	c, ldc := shared.LoadC()

	acc := zeroAccs(mr, 4)
	rows := shared.RowPtrs(a, lda, mr)
	w := make([]reg.VecVirtual, 4)
	for v := range w {
		w[v] = YMM()
	}
	x := XMM()
	ab := YMM()
	prod := YMM()

	Label(name + "_loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	for v := 0; v < 4; v++ {
		VPMOVSXBW(Mem{Base: b, Disp: 16 * v}, w[v])
	}
	for i, r := range rows {
		// VMOVD, never the legacy-SSE MOVD: an SSE instruction while the
		// upper halves of the YMM registers are dirty costs AMD Zen 2 and
		// Zen 3 a micro-fault of about 100 cycles in each direction (AMD's
		// optimization guide, "Mixing AVX and SSE"), which made this loop
		// some 90 times slower there than on Zen 4 and 5.
		VMOVD(Mem{Base: r}, x)
		VPMOVZXBW(x, x)
		VPBROADCASTQ(x, ab)
		for v := 0; v < 4; v++ {
			VPMADDWD(w[v], ab, prod)
			VPADDD(prod, acc[i][v], acc[i][v])
		}
		ADDQ(U8(4), r)
	}
	ADDQ(U8(64), b)
	DECQ(n)
	JMP(LabelRef(name + "_loop"))

	Label(name + "_done")
	shared.StoreRows(c, ldc, mr, func(i int) {
		// acc[i][v] holds, per column 4v+j, two partial sums side by side;
		// add the pairs and restore column order across the 128-bit lanes.
		for h := 0; h < 2; h++ {
			pairSums(acc[i][2*h+1], acc[i][2*h], Mem{Base: c, Disp: 32 * h})
		}
	})
}

// zeroAccs returns mr rows of nv new ymm accumulators, each zeroed.
func zeroAccs(mr, nv int) [][]reg.VecVirtual {
	return shared.ZeroAccs(mr, nv, YMM, func(z reg.VecVirtual) { VPXOR(z, z, z) })
}

// pairSums stores the 8 int32 column sums of hi and lo, whose dwords hold
// two partial sums of a column side by side (VPMADDWD's pairs): the pairs
// added (VPHADDD) and the columns put back in order across the 128-bit
// lanes (VPERMQ).
func pairSums(hi, lo reg.VecVirtual, m Mem) {
	s := YMM()
	VPHADDD(hi, lo, s)
	VPERMQ(U8(0xD8), s, s)
	VMOVDQU(s, m)
}

// widen emits name(dst *int16, src *T, n int): dst[i] = int16(src[i]) for
// i < n, n a multiple of 16 (64 bytes of source per loop iteration, then
// 16 at a time).
func widen(name, typ, ext string, ins func(ops ...operand.Op)) {
	TEXT(name, NOSPLIT, fmt.Sprintf("func(dst *int16, src *%s, n int)", typ))
	Doc(
		fmt.Sprintf("%s sets dst[i] = int16(src[i]) (%s-extended) for i < n; n must be", name, ext),
		"a multiple of 16.",
	)
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	SHRQ(U8(4), n)
	JZ(LabelRef(name + "_done"))
	x := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
	Label(name + "_loop4")
	CMPQ(n, U8(4))
	JB(LabelRef(name + "_loop1"))
	for v := range x {
		ins(Mem{Base: src, Disp: 16 * v}, x[v])
	}
	for v := range x {
		VMOVDQU(x[v], Mem{Base: dst, Disp: 32 * v})
	}
	ADDQ(U8(64), src)
	ADDQ(U32(128), dst)
	SUBQ(U8(4), n)
	JMP(LabelRef(name + "_loop4"))
	Label(name + "_loop1")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	ins(Mem{Base: src}, x[0])
	VMOVDQU(x[0], Mem{Base: dst})
	ADDQ(U8(16), src)
	ADDQ(U8(32), dst)
	DECQ(n)
	JMP(LabelRef(name + "_loop1"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// epilogue emits avx2Epilogue16: vnniEpilogueGo's float32 steps on rows x
// 16 sums (a tile of the AVX2 drivers, row stride 16), with the operands
// of a fused VNNI kernel's epilogue (a *vnniEpArgs at the tile), 8 lanes
// at a time: the same bits as the Go twin, like the VNNI assembly.
func epilogue() {
	cst := shared.GELU8ConstsAVX2("avx2EpiConst")
	TEXT("avx2Epilogue16", NOSPLIT, "func(acc *int32, rows int, ep *byte)")
	Pragma("noescape")
	Doc("avx2Epilogue16 applies the epilogue described by ep (a *vnniEpArgs for",
		"the tile's top-left element) to rows x 16 int32 sums at acc (row stride",
		"16), as vnniEpilogueGo does:",
		"",
		"\tvnniEpilogueGo(e.dst, e.ldd/esize, acc, 16, rows, 16, e.colSum, e.zp, e.rowScale,",
		"\t\te.scale, e.colScale, e.bias, e.res, e.ldres/4, e.flags, e.invOut, e.outZP, e.lo, e.hi)",
		"",
		"(esize: 4 for f32, 1 for u8 and s8) with GELU only as flags&vnniGELU8",
		"(the rational GELU); flags&vnniGELU (the erfc form) is not handled. It",
		"needs AVX2 and FMA3.")
	acc, rows, ep := reg.RAX, reg.RCX, reg.RDX
	dst, res, rs, cs, csc, bias, flags := reg.RDI, reg.R9, reg.R10, reg.R11, reg.R12, reg.R13, reg.R14
	Load(Param("acc"), acc)
	Load(Param("rows"), rows)
	Load(Param("ep"), ep)
	at := func(off int) Mem { return Mem{Base: ep, Disp: off} }
	TESTQ(rows, rows)
	JLE(LabelRef("avx2epi_done"))
	MOVQ(at(shared.EpDst), dst)
	MOVQ(at(shared.EpRes), res)
	MOVQ(at(shared.EpRowScale), rs)
	MOVQ(at(shared.EpColSum), cs)
	MOVQ(at(shared.EpColScale), csc)
	MOVQ(at(shared.EpBias), bias)
	MOVQ(at(shared.EpFlags), flags)
	y := []reg.VecPhysical{reg.Y0, reg.Y1}
	s, zp, t, zero := reg.Y10, reg.Y11, reg.Y12, reg.Y14
	VPBROADCASTD(at(shared.EpZP), zp)
	VXORPS(zero, zero, zero)

	Label("avx2epi_row")
	// s: RowScale[i], else scale.
	TESTQ(rs, rs)
	JZ(LabelRef("avx2epi_scalar"))
	VBROADCASTSS(Mem{Base: rs}, s)
	ADDQ(U8(4), rs)
	JMP(LabelRef("avx2epi_scaled"))
	Label("avx2epi_scalar")
	VBROADCASTSS(at(shared.EpScale), s)
	Label("avx2epi_scaled")
	for h, v := range y {
		VMOVDQU(Mem{Base: acc, Disp: 32 * h}, v)
	}
	TESTQ(cs, cs)
	JZ(LabelRef("avx2epi_nocomp"))
	for h, v := range y {
		VPMULLD(Mem{Base: cs, Disp: 32 * h}, zp, t)
		VPSUBD(t, v, v)
	}
	Label("avx2epi_nocomp")
	for _, v := range y {
		VCVTDQ2PS(v, v)
		VMULPS(s, v, v)
	}
	TESTQ(csc, csc)
	JZ(LabelRef("avx2epi_nocolscale"))
	for h, v := range y {
		VMULPS(Mem{Base: csc, Disp: 32 * h}, v, v)
	}
	Label("avx2epi_nocolscale")
	TESTQ(bias, bias)
	JZ(LabelRef("avx2epi_nobias"))
	for h, v := range y {
		VADDPS(Mem{Base: bias, Disp: 32 * h}, v, v)
	}
	Label("avx2epi_nobias")
	TESTQ(U32(shared.EpGELU8), flags)
	JZ(LabelRef("avx2epi_nogelu"))
	shared.GELU8AVX2(y, cst)
	Label("avx2epi_nogelu")
	TESTQ(U32(shared.EpReLU), flags)
	JZ(LabelRef("avx2epi_norelu"))
	for _, v := range y {
		VMAXPS(zero, v, v) // as the VNNI epilogue: a NaN gives 0
	}
	Label("avx2epi_norelu")
	TESTQ(res, res)
	JZ(LabelRef("avx2epi_nores"))
	for h, v := range y {
		VADDPS(Mem{Base: res, Disp: 32 * h}, v, v)
	}
	ADDQ(at(shared.EpLdres), res)
	Label("avx2epi_nores")
	TESTQ(U32(shared.EpU8|shared.EpS8), flags)
	JNZ(LabelRef("avx2epi_quant"))
	for h, v := range y {
		VMOVUPS(v, Mem{Base: dst, Disp: 32 * h})
	}
	JMP(LabelRef("avx2epi_next"))

	// q = y*invOut + outZP; NaN -> outZP; clamp to [lo, hi]; round to
	// nearest even (VCVTPS2DQ under the default MXCSR); pack to bytes.
	Label("avx2epi_quant")
	nan := []reg.VecPhysical{reg.Y2, reg.Y3}
	VBROADCASTSS(at(shared.EpInvOut), t)
	for _, v := range y {
		VMULPS(t, v, v)
	}
	VBROADCASTSS(at(shared.EpOutZP), t)
	for h, v := range y {
		VADDPS(t, v, v)
		VCMPPS(U8(3), v, v, nan[h]) // unordered: NaN
	}
	VBROADCASTSS(at(shared.EpLo), t)
	for _, v := range y {
		VMAXPS(t, v, v)
	}
	VBROADCASTSS(at(shared.EpHi), t)
	for _, v := range y {
		VMINPS(t, v, v)
	}
	VPBROADCASTD(at(shared.EpOutZPi), t)
	for h, v := range y {
		VCVTPS2DQ(v, v)
		VPBLENDVB(nan[h], t, v, v)
	}
	// 16 int32 in [-128, 255] -> int16 in order -> bytes.
	VPACKSSDW(y[1], y[0], y[0])
	VPERMQ(U8(0xD8), y[0], y[0])
	VEXTRACTI128(U8(1), y[0], reg.X1)
	TESTQ(U32(shared.EpU8), flags)
	JZ(LabelRef("avx2epi_s8"))
	VPACKUSWB(reg.X1, reg.X0, reg.X0)
	JMP(LabelRef("avx2epi_put8"))
	Label("avx2epi_s8")
	VPACKSSWB(reg.X1, reg.X0, reg.X0)
	Label("avx2epi_put8")
	VMOVDQU(reg.X0, Mem{Base: dst})

	Label("avx2epi_next")
	ADDQ(at(shared.EpLdd), dst)
	ADDQ(U8(64), acc)
	DECQ(rows)
	JNZ(LabelRef("avx2epi_row"))
	Label("avx2epi_done")
	VZEROUPPER()
	RET()
}

// wideKernel8 emits gemmAVX2w_{mr}x8: the tile of gemmAVX2_{mr}x16's
// first or second 8 columns from rows of A and a panel both widened to
// int16 beforehand (widenU8AVX2, widenS8AVX2; b points at the half's first
// 4-column vector, the groups of 4 k 128 bytes apart), so that a group
// costs its two B vectors, one broadcast load per row and two VPMADDWD +
// VPADDD per row: none of gemmAVX2_2x16's per-group widening, and with up
// to 6 rows 12 accumulators, 2 B, the broadcast and a product fill the 16
// registers (2 + mr loads for 2*mr VPMADDWD, against 3 + 12 loads for 12
// with 3 rows x 16 columns and B from memory). Two groups
// per loop iteration, one index register for the rows of A.
func wideKernel8(mr int) {
	name := fmt.Sprintf("gemmAVX2w_%dx8", mr)
	a, lda, b, n := shared.GroupKernel(name, wideSig, mr, 8,
		"a holds rows of u8 values widened to int16 (lda in elements), b the first",
		"or second half of a 16-column panel widened to int16 (widenS8AVX2), its",
		"groups of 4 k 64 elements apart.",
	)
	SHLQ(U8(1), lda)
	rows := shared.RowPtrs(a, lda, mr)
	off := GP64()
	XORQ(off, off)
	acc := zeroAccs(mr, 2)
	bv := []reg.VecVirtual{YMM(), YMM()}
	ab := YMM()
	prod := YMM()
	group := func(g int) {
		for v := range bv {
			VMOVDQU(Mem{Base: b, Disp: 128*g + 32*v}, bv[v])
		}
		for i, r := range rows {
			VPBROADCASTQ(Mem{Base: r, Index: off, Scale: 1, Disp: 8 * g}, ab)
			for v := range bv {
				VPMADDWD(bv[v], ab, prod)
				VPADDD(prod, acc[i][v], acc[i][v])
			}
		}
	}
	shared.GroupPairs(name, n, group, func() {
		ADDQ(U8(16), off)
		ADDQ(U32(256), b)
	})
	c, ldc := shared.LoadC()
	shared.StoreRows(c, ldc, mr, func(i int) { pairSums(acc[i][1], acc[i][0], Mem{Base: c}) })
}

// wideSig is the Go signature of the kernels on widened operands.
const wideSig = "func(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int)"

// zmmRows is the most rows of gemmAVX512w: 2 accumulators a row, 24 in
// all, with 2 B vectors, 2 broadcasts and 4 products in the other 8 of
// the 32 zmm registers.
const zmmRows = 12

// wideKernelZ emits gemmAVX512w_{mr}x16: the int16 scheme of
// gemmAVX2w_{mr}x8 on zmm, for AVX-512 CPUs without VNNI, whose ymm
// kernels use half the vector width. A group of 4 k of the widened panel
// (16 columns x 4 int16, 128 bytes) is two zmm; a row's 4 widened
// activations are broadcast as one qword (VPBROADCASTQ), so that VPMADDWD
// leaves in dword 2j and 2j+1 of a row's accumulator the two pair sums of
// column j (8 columns per register), added at the end by a shift, an add
// and a truncating store (VPMOVQD). Per group: 2 B loads, mr broadcast
// loads, 2*mr VPMADDWD and 2*mr VPADDD. Physical registers: Z0...Z23
// accumulators (row i: Z2i, Z2i+1), Z24, Z25 B, Z26, Z27 broadcasts,
// Z28...Z31 products. Rows are addressed from one base per 3 rows plus
// lda and 2*lda, the bases advanced per two groups.
func wideKernelZ(mr int) {
	name := fmt.Sprintf("gemmAVX512w_%dx16", mr)
	a, lda, b, n := shared.GroupKernel(name, wideSig, mr, 16,
		"a holds rows of u8 values widened to int16 (lda in elements), b a",
		"16-column panel widened to int16 (widenS8AVX2). It needs AVX512F and",
		"AVX512BW.",
	)
	SHLQ(U8(1), lda)
	bases := []reg.Register{a}
	for q := 1; q*3 < mr; q++ {
		r := GP64()
		LEAQ(Mem{Base: bases[q-1], Index: lda, Scale: 2}, r)
		ADDQ(lda, r)
		bases = append(bases, r)
	}
	row := func(i, disp int) Mem {
		m := Mem{Base: bases[i/3], Disp: disp}
		if k := i % 3; k > 0 {
			m.Index, m.Scale = lda, uint8(k)
		}
		return m
	}
	z := shared.Zmm
	for i := 0; i < 2*mr; i++ {
		VPXORD(z(i), z(i), z(i))
	}
	// Registers past the accumulators: 2 B, then broadcasts and
	// products sharing what is left (at least one each).
	free := 32 - 2*zmmRows - 2
	nbc := max(1, free/3)
	bq, bcq, pq := 2*zmmRows, 2*zmmRows+2, 2*zmmRows+2+nbc
	np := 32 - pq
	group := func(g int) {
		VMOVDQU64(Mem{Base: b, Disp: 128 * g}, z(bq))
		VMOVDQU64(Mem{Base: b, Disp: 128*g + 64}, z(bq+1))
		for i := 0; i < mr; i++ {
			bc := z(bcq + i%nbc)
			VPBROADCASTQ(row(i, 8*g), bc)
			for v := 0; v < 2; v++ {
				p := z(pq + (2*i+v)%np)
				VPMADDWD(z(bq+v), bc, p)
				VPADDD(p, z(2*i+v), z(2*i+v))
			}
		}
	}
	shared.GroupPairs(name, n, group, func() {
		for _, r := range bases {
			ADDQ(U8(16), r)
		}
		ADDQ(U32(256), b)
	})
	c, ldc := shared.LoadC()
	shared.StoreRows(c, ldc, mr, func(i int) {
		for v := 0; v < 2; v++ {
			acc, t := z(2*i+v), z(28+v)
			VPSRLQ(U8(32), acc, t)
			VPADDD(t, acc, acc)
			VPMOVQD(acc, Mem{Base: c, Disp: 32 * v})
		}
	})
}
