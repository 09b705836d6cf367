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
	TEXT(name, NOSPLIT, "func(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int)")
	Doc(
		fmt.Sprintf("%s computes, for i < %d and j < 16,", name, mr),
		"",
		"\tc[i*ldc+j] = sum over g < kgroups, t < 4 of a[i*lda+4g+t] * b[64g+4j+t]",
		"",
		"b is one 16-column panel of a PackedS8 (NR = 16).",
	)
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("kgroups"), GP64())
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())

	acc := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, 4)
		for v := range acc[i] {
			acc[i][v] = YMM()
			VPXOR(acc[i][v], acc[i][v], acc[i][v])
		}
	}
	rows := []reg.Register{a}
	if mr == 2 {
		a1 := GP64()
		LEAQ(Mem{Base: a, Index: lda, Scale: 1}, a1)
		rows = append(rows, a1)
	}
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
	SHLQ(U8(2), ldc)
	for i := 0; i < mr; i++ {
		// acc[i][v] holds, per column 4v+j, two partial sums side by side;
		// add the pairs and restore column order across the 128-bit lanes.
		for h := 0; h < 2; h++ {
			s := YMM()
			VPHADDD(acc[i][2*h+1], acc[i][2*h], s)
			VPERMQ(U8(0xD8), s, s)
			VMOVDQU(s, Mem{Base: c, Disp: 32 * h})
		}
		if i+1 < mr {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
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
	TEXT(name, NOSPLIT, "func(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int)")
	Doc(
		fmt.Sprintf("%s computes, for i < %d and j < 8,", name, mr),
		"",
		"\tc[i*ldc+j] = sum over g < kgroups, t < 4 of a[i*lda+4g+t] * b[64g+4j+t]",
		"",
		"a holds rows of u8 values widened to int16 (lda in elements), b the first",
		"or second half of a 16-column panel widened to int16 (widenS8AVX2), its",
		"groups of 4 k 64 elements apart.",
	)
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("kgroups"), GP64())
	SHLQ(U8(1), lda)
	rows := []reg.Register{a}
	for i := 1; i < mr; i++ {
		r := GP64()
		LEAQ(Mem{Base: rows[i-1], Index: lda, Scale: 1}, r)
		rows = append(rows, r)
	}
	off := GP64()
	XORQ(off, off)
	acc := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = []reg.VecVirtual{YMM(), YMM()}
		for _, v := range acc[i] {
			VPXOR(v, v, v)
		}
	}
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
	pairs := GP64()
	MOVQ(n, pairs)
	SHRQ(U8(1), pairs)
	JZ(LabelRef(name + "_odd"))
	Label(name + "_loop")
	group(0)
	group(1)
	ADDQ(U8(16), off)
	ADDQ(U32(256), b)
	DECQ(pairs)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_odd")
	TESTQ(U32(1), n)
	JZ(LabelRef(name + "_done"))
	group(0)

	Label(name + "_done")
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	for i := 0; i < mr; i++ {
		s := YMM()
		VPHADDD(acc[i][1], acc[i][0], s)
		VPERMQ(U8(0xD8), s, s)
		VMOVDQU(s, Mem{Base: c})
		if i+1 < mr {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}

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
	TEXT(name, NOSPLIT, "func(a *int16, lda int, b *int16, kgroups int, c *int32, ldc int)")
	Doc(
		fmt.Sprintf("%s computes, for i < %d and j < 16,", name, mr),
		"",
		"\tc[i*ldc+j] = sum over g < kgroups, t < 4 of a[i*lda+4g+t] * b[64g+4j+t]",
		"",
		"a holds rows of u8 values widened to int16 (lda in elements), b a",
		"16-column panel widened to int16 (widenS8AVX2). It needs AVX512F and",
		"AVX512BW.",
	)
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	b := Load(Param("b"), GP64())
	n := Load(Param("kgroups"), GP64())
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
	z := func(i int) reg.VecPhysical {
		return []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7,
			reg.Z8, reg.Z9, reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15,
			reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23,
			reg.Z24, reg.Z25, reg.Z26, reg.Z27, reg.Z28, reg.Z29, reg.Z30, reg.Z31}[i]
	}
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
	pairs := GP64()
	MOVQ(n, pairs)
	SHRQ(U8(1), pairs)
	JZ(LabelRef(name + "_odd"))
	Label(name + "_loop")
	group(0)
	group(1)
	for _, r := range bases {
		ADDQ(U8(16), r)
	}
	ADDQ(U32(256), b)
	DECQ(pairs)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_odd")
	TESTQ(U32(1), n)
	JZ(LabelRef(name + "_done"))
	group(0)

	Label(name + "_done")
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	for i := 0; i < mr; i++ {
		for v := 0; v < 2; v++ {
			acc, t := z(2*i+v), z(28+v)
			VPSRLQ(U8(32), acc, t)
			VPADDD(t, acc, acc)
			VPMOVQD(acc, Mem{Base: c, Disp: 32 * v})
		}
		if i+1 < mr {
			ADDQ(ldc, c)
		}
	}
	VZEROUPPER()
	RET()
}
