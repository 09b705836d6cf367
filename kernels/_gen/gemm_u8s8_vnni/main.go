// Command gemm_u8s8_vnni generates the AVX512-VNNI u8 x s8 -> s32 GEMM micro-kernels
// and the fused epilogue of package kernels (gemm_u8s8_vnni_amd64.s and its Go
// stubs):
//
//	cd kernels/_gen && go run ./gemm_u8s8_vnni -out ../gemm_u8s8_vnni_amd64.s -stubs ../gemm_u8s8_vnni_stub_amd64.go -pkg kernels
//
// Every micro-kernel computes one MR x NR tile of C = A x B^T over k (the
// whole K, or one K step of the driver) with the accumulators in registers,
// and stores it or adds it to C. B is a VNNI-4 panel of
// kernels.PackedS8: for each k-group of 4, NR columns of 4 signed bytes. Each
// k-group broadcasts 4 bytes of each A row (VPBROADCASTD) and multiplies them
// into every accumulator with VPDPBUSD. The K tail (K%4 bytes) is read with a
// zeroing byte-masked load, so A is never read past K; the N tail is computed
// in full (the panel is zero-padded) and stored under a k-mask. The
// epilogues (vnniEpilogue, vnniEpilogue3: 2 or 3 interleaved 16-column
// chunks) turn a tile of sums into f32, u8 or s8, with GELU in float32 (see
// geluF32 in gemm_u8s8_vnni.go, its step-for-step Go model). The fused
// micro-kernels (vnniU8S8E_*, full tiles only) run the same K loop and then
// the split epilogue on the accumulators in registers. -twin writes the
// plain Go twins for builds without the assembly.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"math"
	"os"
	"slices"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

// tiles are the NR panel widths and the largest MR generated for each; every
// MR from 1 up to it is generated (the smaller ones serve M tails).
var tiles = []struct{ nr, maxMR int }{
	{48, 8},
	{64, 6},
	{32, 12},
}

// fusedTiles are the full tiles (MR, NR) of the registered kernels, which
// get a micro-kernel with the epilogue fused (vnniU8S8E_<MR>x<NR>).
var fusedTiles = [][2]int{{8, 48}, {6, 64}, {12, 32}, {4, 64}}

var dstPrefetch = flag.Bool("dstprefetch", true, "fused kernels prefetch their destination tile before the K loop")

var prefetch = flag.Int("prefetch", 16, "software prefetch distance of B, in k-groups (0: none)")

var twin = flag.String("twin", "../gemm_u8s8_vnni_noasm.go", "file for the plain Go twins of the generated functions")

func main() {
	flag.Parse()
	writeTwin(*twin)
	ConstraintExpr("amd64,gc,!purego,!noasm")
	for _, t := range tiles {
		for mr := 1; mr <= t.maxMR; mr++ {
			micro(mr, t.nr)
		}
	}
	for _, t := range fusedTiles {
		microE(t[0], t[1])
	}
	for mr := 1; mr <= scoresMaxMR; mr++ {
		scores(mr)
	}
	sfence()
	epilogue("vnniEpilogue", 2, false)
	epilogue("vnniEpilogue3", 3, false)
	// The same epilogues with GELU's two polynomials each split in even and
	// odd halves (two independent Horner chains: a shorter critical path).
	epilogue("vnniEpilogueS", 2, true)
	epilogue("vnniEpilogue3S", 3, true)
	Generate()
}

// rowAddr returns the address of byte off of A's row i: rows are reached
// from three bases (rows 0, 4 and 8) with lda scaled by 1 or 2, and 3*lda.
func rowAddr(i int, bases []reg.Register, lda, lda3 reg.Register) Mem {
	base := bases[i/4]
	switch i % 4 {
	case 0:
		return Mem{Base: base}
	case 1:
		return Mem{Base: base, Index: lda, Scale: 1}
	case 2:
		return Mem{Base: base, Index: lda, Scale: 2}
	default:
		return Mem{Base: base, Index: lda3, Scale: 1}
	}
}

func micro(mr, nr int) {
	name := fmt.Sprintf("vnniU8S8_%dx%d", mr, nr)
	TEXT(name, NOSPLIT, "func(a *uint8, lda int, b *int8, k int, c *int32, ldc int, nmask uint64, add int)")
	Doc(
		fmt.Sprintf("%s computes one %dx%d tile of C = A x B^T (u8 x s8 -> s32)", name, mr, nr),
		fmt.Sprintf("over k; b is a VNNI-4 panel of NR=%d columns (PackedS8).", nr),
		"Column j of the tile is stored (added to C when add != 0) only where bit j",
		"of nmask is set:",
		"",
		fmt.Sprintf("\tfor i := 0; i < %d; i++ {", mr),
		fmt.Sprintf("\t\tfor j := 0; j < %d; j++ {", nr),
		"\t\t\tvar s int32",
		"\t\t\tfor q := 0; q < k; q++ {",
		fmt.Sprintf("\t\t\t\ts += int32(a[i*lda+q]) * int32(b[(q/4)*%d*4+j*4+q%%4])", nr),
		"\t\t\t}",
		"\t\t\tif nmask>>j&1 != 0 {",
		"\t\t\t\tif add&1 != 0 {",
		"\t\t\t\t\ts += c[i*ldc+j]",
		"\t\t\t\t}",
		"\t\t\t\tc[i*ldc+j] = s",
		"\t\t\t}",
		"\t\t}",
		"\t}",
		"",
		"With add&2 set, the tile is written with non-temporal stores (full nmask",
		"and 64-byte aligned rows required; call vnniSfence before reading C).",
	)
	Pragma("noescape")
	acc := microLoop(name, mr, nr, nil)
	microStore(name, mr, nr, acc)
}

// microLoop generates the accumulation of an mr x nr tile over k (the
// arguments a, lda, b, k) and returns the accumulators, ending at the label
// name_store.
func microLoop(name string, mr, nr int, mid func()) [][]reg.VecVirtual {
	nv := nr / 16
	a := Load(Param("a"), GP64())
	lda := Load(Param("lda"), GP64())
	b := Load(Param("b"), GP64())
	k := Load(Param("k"), reg.RCX)
	lda3 := GP64()
	LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, lda3)
	bases := []reg.Register{a}
	for r := 4; r < mr; r += 4 {
		nb := GP64()
		LEAQ(Mem{Base: bases[len(bases)-1], Index: lda, Scale: 4}, nb)
		bases = append(bases, nb)
	}

	acc := shared.ZeroAccs(mr, nv, ZMM, func(z reg.VecVirtual) { VPXORD(z, z, z) })
	bz := make([]reg.VecVirtual, nv)
	for v := range bz {
		bz[v] = ZMM()
	}
	bc := []reg.VecVirtual{ZMM(), ZMM()}

	groups := GP64()
	MOVQ(k, groups)
	SHRQ(U8(2), groups)
	var rest reg.GPVirtual
	if mid != nil {
		// The loop runs 3/4 of the groups, then mid, then the rest.
		rest = GP64()
		MOVQ(groups, rest)
		SHRQ(U8(2), rest)
		SUBQ(rest, groups)
	}
	if mid != nil {
		TESTQ(groups, groups)
		JZ(LabelRef(name + "_mid"))
	} else {
		JZ(LabelRef(name + "_tail")) // the flags of SHRQ
	}

	Label(name + "_loop")
	kGroup(b, bases, lda, lda3, bz, bc, acc, *prefetch)
	DECQ(groups)
	JNZ(LabelRef(name + "_loop"))

	if mid != nil {
		// After the second pass rest is -1: on to the tail. mid runs once.
		CMPQ(rest, I8(-1))
		JE(LabelRef(name + "_tail"))
		Label(name + "_mid")
		mid()
		MOVQ(rest, groups)
		MOVQ(I32(-1), rest)
		TESTQ(groups, groups)
		JNZ(LabelRef(name + "_loop"))
	}

	Label(name + "_tail")
	ANDQ(U8(3), k)
	JZ(LabelRef(name + "_store"))
	{
		m := GP64()
		MOVQ(U32(1), m)
		SHLQ(reg.CL, m)
		DECQ(m)
		km := K()
		KMOVQ(m, km)
		for v := 0; v < nv; v++ {
			VMOVDQU64(Mem{Base: b, Disp: 64 * v}, bz[v])
		}
		x := XMM()
		for i := 0; i < mr; i++ {
			t := bc[i%2]
			VMOVDQU8_Z(rowAddr(i, bases, lda, lda3), km, x)
			VPBROADCASTD(x, t)
			for v := 0; v < nv; v++ {
				VPDPBUSD(bz[v], t, acc[i][v])
			}
		}
	}

	Label(name + "_store")
	return acc
}

// kGroup emits one k-group of 4 of a K loop: the group's B vectors of the
// panel at b into bz (with a software prefetch pf groups ahead, 0: none),
// each A row's 4 bytes broadcast (bc, alternating) and multiplied into its
// accumulators, then A's row bases and b advanced.
func kGroup(b reg.Register, bases []reg.Register, lda, lda3 reg.Register, bz, bc []reg.VecVirtual, acc [][]reg.VecVirtual, pf int) {
	nv := len(bz)
	nr := 16 * nv
	for v := 0; v < nv; v++ {
		VMOVDQU64(Mem{Base: b, Disp: 64 * v}, bz[v])
	}
	if pf > 0 {
		for v := 0; v < nv; v++ {
			PREFETCHT0(Mem{Base: b, Disp: 64*v + pf*nr*4})
		}
	}
	for i := range acc {
		t := bc[i%2]
		VPBROADCASTD(rowAddr(i, bases, lda, lda3), t)
		for v := 0; v < nv; v++ {
			VPDPBUSD(bz[v], t, acc[i][v])
		}
	}
	for _, r := range bases {
		ADDQ(U8(4), r)
	}
	ADDQ(U32(nr*4), b)
}

// microStore stores the accumulators of micro (arguments c, ldc, nmask, add).
func microStore(name string, mr, nr int, acc [][]reg.VecVirtual) {
	nv := nr / 16
	c := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	nm := Load(Param("nmask"), GP64())
	masks := make([]reg.OpmaskVirtual, nv)
	for v := range masks {
		masks[v] = K()
		if v == 0 {
			KMOVQ(nm, masks[v])
		} else {
			KSHIFTRQ(U8(16), masks[v-1], masks[v])
		}
	}
	add := GP64()
	Load(Param("add"), add)
	// add&2: non-temporal stores of whole 64-byte lines (the caller
	// guarantees a full nmask and 64-byte aligned rows, and fences with
	// vnniSfence before the results are read); add&1 adds C first, in
	// either form.
	TESTQ(U32(2), add)
	JNZ(LabelRef(name + "_nt"))
	store := func(nt, addC bool) {
		tile(mr, nv, c, ldc, func(i, v int) {
			y, m := acc[i][v], Mem{Base: c, Disp: 64 * v}
			switch {
			case nt && addC:
				VPADDD(m, y, y)
			case addC:
				VPADDD_Z(m, y, masks[v], y)
			}
			if nt {
				VMOVNTDQ(y, m)
			} else {
				VMOVDQU32(y, masks[v], m)
			}
		})
		ret()
	}
	for _, nt := range []bool{false, true} {
		put := name + "_put"
		if nt {
			Label(name + "_nt")
			put = name + "_ntput"
		}
		TESTQ(U32(1), add)
		JZ(LabelRef(put))
		store(nt, true)
		Label(put)
		store(nt, false)
	}
}

// tile emits f(i, v) for each vector v < nv of each row i < mr of a tile,
// the row pointer p moved on by stride between rows (shared.Rows).
func tile(mr, nv int, p reg.Register, stride Op, f func(i, v int)) {
	shared.Rows(mr, p, stride, func(i int) {
		for v := range nv {
			f(i, v)
		}
	})
}

// ret ends a routine: VZEROUPPER (the upper halves are dirty) and RET.
func ret() {
	VZEROUPPER()
	RET()
}

// sfence orders the non-temporal stores of the micro-kernels (add&2)
// before any later store.
func sfence() {
	TEXT("vnniSfence", NOSPLIT, "func()")
	Doc("vnniSfence orders the micro-kernels' non-temporal stores (SFENCE).")
	SFENCE()
	RET()
}

// Epilogue flags (mirrored in gemm_u8s8_vnni.go): shared's.
const (
	flagGELU   = shared.EpGELU
	flagU8     = shared.EpU8
	flagS8     = shared.EpS8
	flagReLU   = shared.EpReLU
	flagGELU8  = shared.EpGELU8
	flagPFLate = shared.EpPFLate
)

// geluConsts are broadcast from memory: the erfc polynomial of Numerical
// Recipes' erfcc (relative error < 1.2e-7), then exp's Taylor coefficients.
var geluConsts = append([]float32{
	// 0: erfc polynomial in t, highest degree first.
	0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
	-0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223,
	// 10: exp(f)/2 Taylor, degree 7 down to 0 (the 1/2 of GELU folded in).
	0.5 / 5040, 0.5 / 720, 0.5 / 120, 0.5 / 24, 0.5 / 6, 0.25, 0.5, 0.5,
	// 18: 1/(2 sqrt2), 20 (clamp of |x|), 0.5, -0.5, 1, log2(e), -ln2hi, -ln2lo
	float32(0.5 / math.Sqrt2), 20, 0.5, -0.5, 1, float32(math.Log2E), -0.693145751953125, -1.428606765330187045e-06,
	// 26: |x| mask, sign mask
	math.Float32frombits(0x7fffffff), math.Float32frombits(0x80000000),
	// 28: gelu8's clamp of x (geluQ8Clamp, about 5.4), and 0 (the floor of phi)
	-shared.GELU8Clamp, shared.GELU8Clamp, 0,
	// 31: gelu8's numerator P(s), s = x^2, degree 0 ... 6 (geluQ8P); 38: its
	// denominator Q(s), degree 1 ... 3, Q(0) = 1 (geluQ8Q)
}, append(slices.Clone(shared.GELU8P), shared.GELU8Q[1:]...)...)

const (
	cExp      = 10
	cHalfRt2  = 18 // 1/(2 sqrt2)
	cAbsMask  = 26
	cSignMask = 27
	cClamp    = 19
	cHalf     = 20
	cMHalf    = 21
	cOne      = 22
	cLog2E    = 23
	cMLn2Hi   = 24
	cMLn2Lo   = 25
	cQ8Lo     = 28 // gelu8: -clamp
	cQ8Hi     = 29 // gelu8: clamp
	cZero     = 30
	cQ8P      = 31 // gelu8: P(s), degree 0 first (7)
	cQ8Q      = 38 // gelu8: Q(s), degree 1 first (3)
)

var consts Mem

// defineConsts defines vnniGELUConsts (once) in consts.
func defineConsts() {
	if consts.Symbol.Name == "" {
		consts = GLOBL("vnniGELUConsts", RODATA|NOPTR)
		for i, c := range geluConsts {
			DATA(4*i, U32(math.Float32bits(c)))
		}
	}
}

// epilogue generates the tile epilogue under name, interleaving U chunks of
// 16 columns (U = 2 suits tiles of 32 and 64 columns, U = 3 those of 48).
func epilogue(name string, U int, split bool) {
	defineConsts()
	cm := func(i int) Mem { return consts.Offset(4 * i) }
	lbl := func(l string) string { return name + "_" + l }

	TEXT(name, NOSPLIT, "func(dst *byte, ldd int, acc *int32, ldacc int, rows int, n int, colSum *int32, zp int32, rowScale *float32, scale float32, colScale *float32, bias *float32, res *float32, ldres int, flags int, invOut float32, outZP float32, lo float32, hi float32)")
	Doc(
		name+" applies the fused epilogue to a rows x n tile of int32",
		"accumulators in float32 and stores it in dst (row strides in elements; nil",
		"pointers skip their step; flags: 1 GELU, 16 GELU for 8-bit outputs, 8 ReLU,",
		"2 store u8, 4 store s8, else",
		"store f32; a nil rowScale means scale for every row):",
		"",
		"\tfor i := 0; i < rows; i++ {",
		"\t\tfor j := 0; j < n; j++ {",
		"\t\t\tv := acc[i*ldacc+j]",
		"\t\t\tif colSum != nil { v -= zp * colSum[j] }",
		"\t\t\ts := scale",
		"\t\t\tif rowScale != nil { s = rowScale[i] }",
		"\t\t\ty := float32(v) * s",
		"\t\t\tif colScale != nil { y *= colScale[j] }",
		"\t\t\tif bias != nil { y += bias[j] }",
		"\t\t\tif flags&16 != 0 { y = geluQ8F32(y) } else if flags&1 != 0 { y = geluF32(y) }",
		"\t\t\tif flags&8 != 0 { y = max(y, 0) }",
		"\t\t\tif res != nil { y += res[i*ldres+j] }",
		"\t\t\tif flags&6 != 0 { // u8 or s8",
		"\t\t\t\tq := y*invOut + outZP // NaN -> outZP",
		"\t\t\t\tdst[i*ldd+j] = byte(roundHalfEven(min(max(q, lo), hi)))",
		"\t\t\t} else {",
		"\t\t\t\tdst[i*ldd+j] = y // float32",
		"\t\t\t}",
		"\t\t}",
		"\t}",
	)
	Pragma("noescape")

	dst := Load(Param("dst"), GP64())
	acc := Load(Param("acc"), GP64())
	rows := Load(Param("rows"), GP64())
	colSum := Load(Param("colSum"), GP64())
	rowScale := Load(Param("rowScale"), GP64())
	colScale := Load(Param("colScale"), GP64())
	bias := Load(Param("bias"), GP64())
	res := Load(Param("res"), GP64())
	flags := shared.Addr(Param("flags"))

	zpv := ZMM()
	zp := Load(Param("zp"), GP32())
	VPBROADCASTD(zp, zpv)
	bcastF := func(name string) reg.VecVirtual {
		z := ZMM()
		VBROADCASTSS(shared.Addr(Param(name)), z)
		return z
	}
	scale := bcastF("scale")
	invOut := bcastF("invOut")
	outZP := bcastF("outZP")
	lo := bcastF("lo")
	hi := bcastF("hi")
	outZPi := ZMM()
	VCVTPS2DQ(outZP, outZPi)

	kms := make([]reg.OpmaskVirtual, U)
	ys := make([]reg.VecVirtual, U)
	t0s := make([]reg.VecVirtual, U)
	for u := range U {
		kms[u], ys[u], t0s[u] = K(), ZMM(), ZMM()
	}
	j := GP64()

	Label(lbl("epi_row"))
	CMPQ(rows, U8(0))
	JLE(LabelRef(lbl("epi_done")))
	TESTQ(rowScale, rowScale)
	JZ(LabelRef(lbl("epi_rowscaled")))
	VBROADCASTSS(Mem{Base: rowScale}, scale)
	ADDQ(U8(4), rowScale)
	Label(lbl("epi_rowscaled"))
	XORQ(j, j)

	// Each iteration handles U chunks of 16 columns, interleaved for
	// instruction-level parallelism; chunk u's mask covers what is left of
	// its 16 columns (possibly none: masked lanes neither load nor store).
	Label(lbl("epi_loop"))
	{
		rem := GP64()
		MOVQ(shared.Addr(Param("n")), rem)
		SUBQ(j, rem)
		JLE(LabelRef(lbl("epi_rowdone")))
		m := GP64()
		for u := range U {
			MOVQ(rem, reg.RCX)
			if u > 0 {
				TESTQ(reg.RCX, reg.RCX)
				JG(LabelRef(lbl(fmt.Sprintf("epi_pos%d", u))))
				XORQ(reg.RCX, reg.RCX)
				Label(lbl(fmt.Sprintf("epi_pos%d", u)))
			}
			CMPQ(reg.RCX, U8(16))
			JLE(LabelRef(lbl(fmt.Sprintf("epi_mask%d", u))))
			MOVQ(U32(16), reg.RCX)
			Label(lbl(fmt.Sprintf("epi_mask%d", u)))
			MOVQ(U32(1), m)
			SHLQ(reg.CL, m)
			DECQ(m)
			KMOVQ(m, kms[u])
			if u < U-1 {
				SUBQ(U8(16), rem)
			}
		}
	}
	el := func(base reg.Register, u int) Mem { return Mem{Base: base, Index: j, Scale: 4, Disp: 64 * u} }
	for u := range U {
		VMOVDQU32_Z(el(acc, u), kms[u], ys[u])
	}
	// ifSet emits body when the pointer p is not nil (label none after it);
	// byCol is ys[u] op= the vector of chunk u at p (lanes past n zeroed).
	ifSet := func(p reg.Register, none string, body func()) {
		TESTQ(p, p)
		JZ(LabelRef(lbl(none)))
		body()
		Label(lbl(none))
	}
	byCol := func(op func(m, y, k, dst Op), p reg.Register) func() {
		return func() {
			for u := range U {
				op(el(p, u), ys[u], kms[u], ys[u])
			}
		}
	}
	ifSet(colSum, "epi_nocomp", func() {
		for u := range U {
			VMOVDQU32_Z(el(colSum, u), kms[u], t0s[u])
			VPMULLD(zpv, t0s[u], t0s[u])
			VPSUBD(t0s[u], ys[u], ys[u])
		}
	})
	for u := range U {
		VCVTDQ2PS(ys[u], ys[u])
		VMULPS(scale, ys[u], ys[u])
	}
	ifSet(colScale, "epi_nocolscale", byCol(VMULPS_Z, colScale))
	ifSet(bias, "epi_nobias", byCol(VADDPS_Z, bias))
	geluByFlag(flags, lbl("epi_"), func() { gelu8(ys, cm) }, func() { gelu(ys, cm, split) })
	TESTQ(U32(flagReLU), flags)
	JZ(LabelRef(lbl("epi_norelu")))
	for u := range U {
		VXORPS(t0s[u], t0s[u], t0s[u])
		VMAXPS(t0s[u], ys[u], ys[u])
	}
	Label(lbl("epi_norelu"))
	ifSet(res, "epi_nores", byCol(VADDPS_Z, res))

	TESTQ(U32(flagU8|flagS8), flags)
	JNZ(LabelRef(lbl("epi_quant")))
	for u := range U {
		VMOVUPS(ys[u], kms[u], el(dst, u))
	}
	JMP(LabelRef(lbl("epi_next")))

	Label(lbl("epi_quant"))
	nan := K()
	for u := range U {
		quantize(ys[u], t0s[u], invOut, outZP, lo, hi, outZPi, nan)
	}
	bm := func(u int) Mem { return Mem{Base: dst, Index: j, Scale: 1, Disp: 16 * u} }
	TESTQ(U32(flagU8), flags)
	JZ(LabelRef(lbl("epi_s8")))
	for u := range U {
		VPMOVUSDB(t0s[u], kms[u], bm(u))
	}
	JMP(LabelRef(lbl("epi_next")))
	Label(lbl("epi_s8"))
	for u := range U {
		VPMOVSDB(t0s[u], kms[u], bm(u))
	}

	Label(lbl("epi_next"))
	ADDQ(U8(16*U), j)
	JMP(LabelRef(lbl("epi_loop")))

	Label(lbl("epi_rowdone"))
	stride := func(p reg.Register, ld string, shift int) {
		t := GP64()
		MOVQ(shared.Addr(Param(ld)), t)
		if shift > 0 {
			SHLQ(U8(shift), t)
		}
		ADDQ(t, p)
	}
	stride(acc, "ldacc", 2)
	TESTQ(res, res)
	JZ(LabelRef(lbl("epi_nextrow")))
	stride(res, "ldres", 2)
	Label(lbl("epi_nextrow"))
	{
		t := GP64()
		MOVQ(shared.Addr(Param("ldd")), t)
		TESTQ(U32(flagU8|flagS8), flags)
		JNZ(LabelRef(lbl("epi_bytes")))
		SHLQ(U8(2), t)
		Label(lbl("epi_bytes"))
		ADDQ(t, dst)
	}
	DECQ(rows)
	JMP(LabelRef(lbl("epi_row")))

	Label(lbl("epi_done"))
	ret()
}

// quantize sets q to the int32 of an epilogue's 8-bit output of y: q =
// y*invOut + outZP (computed in y), outZPi where that is NaN, else
// clamped to [lo, hi] and rounded half to even (VCVTPS2DQ under the
// default MXCSR); nan is a mask register for the NaN lanes.
func quantize(y, q, invOut, outZP, lo, hi, outZPi reg.VecVirtual, nan reg.Register) {
	VMULPS(invOut, y, y)
	VADDPS(outZP, y, y)
	VCMPPS(U8(3), y, y, nan) // unordered: NaN
	VMAXPS(lo, y, y)
	VMINPS(hi, y, y)
	VCVTPS2DQ(y, q)
	VMOVDQA32(outZPi, nan, q)
}

// geluByFlag emits an epilogue's GELU step: g8 (the rational GELU) when
// flags has flagGELU8, else g (the erfc form) when it has flagGELU; its
// labels are at+"nogelu8" and at+"nogelu".
func geluByFlag(flags Op, at string, g8, g func()) {
	TESTQ(U32(flagGELU8), flags)
	JZ(LabelRef(at + "nogelu8"))
	g8()
	JMP(LabelRef(at + "nogelu"))
	Label(at + "nogelu8")
	TESTQ(U32(flagGELU), flags)
	JZ(LabelRef(at + "nogelu"))
	g()
	Label(at + "nogelu")
}

// gelu replaces each x by 0.5*x*erfc(-x/sqrt2) (geluF32 in gemm_u8s8_vnni.go is
// the exact Go model of the split form), with erfc(z) for z =
// |x|/sqrt2 from Numerical Recipes' erfcc: t*exp(-z^2 + P(t)), t =
// 1/(1+z/2). z^2 is kept exact as hi+lo (x*x and its FMA residual, halved),
// and exp is range-reduced on the exact part, so the result stays within
// ~4e-7 relative (Horner) or ~6e-7 (split: each polynomial as E(u^2) +
// u*O(u^2), two independent chains: a shorter critical path).
// The registers are processed step by step together, for instruction-level
// parallelism.
func gelu(xs []reg.VecVirtual, cm func(int) Mem, split bool) {
	type regs struct{ x, ax, t, p, hi, lo, s, n reg.VecVirtual }
	rs := make([]regs, len(xs))
	for i, x := range xs {
		rs[i] = regs{x, ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM(), ZMM()}
	}
	each := func(f func(r regs)) {
		for _, r := range rs {
			f(r)
		}
	}
	// ax = min(|x|, 20)
	each(func(r regs) { VANDPS_BCST(cm(cAbsMask), r.x, r.ax) })
	each(func(r regs) { VMINPS_BCST(cm(cClamp), r.ax, r.ax) })
	// t = 1/(1 + 0.5*ax/sqrt2)
	each(func(r regs) { VBROADCASTSS(cm(cHalfRt2), r.t) })
	each(func(r regs) { VFMADD213PS_BCST(cm(cOne), r.ax, r.t) }) // t = ax/(2 sqrt2) + 1
	each(func(r regs) { VBROADCASTSS(cm(cOne), r.p) })
	each(func(r regs) { VDIVPS(r.t, r.p, r.t) })
	// hi = ax*ax, lo = fma(ax, ax, -hi) (independent of t: interleaves with it)
	each(func(r regs) { VMULPS(r.ax, r.ax, r.hi) })
	each(func(r regs) { VMOVAPS(r.ax, r.lo) })
	each(func(r regs) { VFMSUB213PS(r.hi, r.ax, r.lo) })       // lo = ax*ax - hi
	each(func(r regs) { VMULPS_BCST(cm(cMHalf), r.hi, r.hi) }) // hi = a = -ax*ax/2
	// p = P(t)
	if split {
		// P(t) = E(t^2) + t*O(t^2): coefficient i (degree 9-i) goes to O
		// for odd degrees (i even), to E for even degrees; s = t^2, n = O.
		each(func(r regs) { VMULPS(r.t, r.t, r.s) })
		each(func(r regs) { VBROADCASTSS(cm(0), r.n) }) // O: degree 9
		each(func(r regs) { VBROADCASTSS(cm(1), r.p) }) // E: degree 8
		for i := 2; i < 10; i += 2 {
			each(func(r regs) { VFMADD213PS_BCST(cm(i), r.s, r.n) })
			each(func(r regs) { VFMADD213PS_BCST(cm(i+1), r.s, r.p) })
		}
		each(func(r regs) { VFMADD231PS(r.n, r.t, r.p) }) // p = E + t*O
	} else {
		each(func(r regs) { VBROADCASTSS(cm(0), r.p) })
		for i := 1; i < 10; i++ {
			each(func(r regs) { VFMADD213PS_BCST(cm(i), r.t, r.p) })
		}
	}
	// lo = b = p - lo/2; n = round((a+b)*log2e)
	each(func(r regs) { VFMADD132PS_BCST(cm(cMHalf), r.p, r.lo) })
	each(func(r regs) { VADDPS(r.lo, r.hi, r.s) })
	each(func(r regs) { VMULPS_BCST(cm(cLog2E), r.s, r.s) })
	each(func(r regs) { VRNDSCALEPS(U8(0), r.s, r.n) })
	// f = a - n*ln2hi - n*ln2lo + b
	each(func(r regs) { VMOVAPS(r.hi, r.s) })
	each(func(r regs) { VFMADD231PS_BCST(cm(cMLn2Hi), r.n, r.s) })
	each(func(r regs) { VFMADD231PS_BCST(cm(cMLn2Lo), r.n, r.s) })
	each(func(r regs) { VADDPS(r.lo, r.s, r.s) })
	// p = exp(f) by Taylor, times 2^n
	if split {
		// exp(f)/2 = E(f^2) + f*O(f^2) (odd degrees: cExp+0, +2, ...;
		// even: cExp+1, +3, ...), with hi = f^2 and lo = O (both free now).
		each(func(r regs) { VMULPS(r.s, r.s, r.hi) })
		each(func(r regs) { VBROADCASTSS(cm(cExp), r.lo) })
		each(func(r regs) { VBROADCASTSS(cm(cExp+1), r.p) })
		for i := cExp + 2; i < cExp+8; i += 2 {
			each(func(r regs) { VFMADD213PS_BCST(cm(i), r.hi, r.lo) })
			each(func(r regs) { VFMADD213PS_BCST(cm(i+1), r.hi, r.p) })
		}
		each(func(r regs) { VFMADD231PS(r.lo, r.s, r.p) }) // p = E + f*O
	} else {
		each(func(r regs) { VBROADCASTSS(cm(cExp), r.p) })
		for i := cExp + 1; i < cExp+8; i++ {
			each(func(r regs) { VFMADD213PS_BCST(cm(i), r.s, r.p) })
		}
	}
	each(func(r regs) { VSCALEFPS(r.n, r.p, r.p) })
	// h = t*exp(...)/2 = erfc(ax/sqrt2)/2; sign bit of x set: x*h, else x - x*h
	each(func(r regs) { VMULPS(r.t, r.p, r.p) })
	each(func(r regs) { VMULPS(r.p, r.x, r.p) })
	neg := K()
	each(func(r regs) {
		VPTESTMD_BCST(cm(cSignMask), r.x, neg)
		VSUBPS(r.p, r.x, r.x)
		VMOVAPS(r.p, neg, r.x)
	})
}

// gelu8 replaces each x by the GELU of 8-bit outputs, geluQ8F32 in
// gemm_u8s8_vnni.go (its exact Go model): x*max(fma(xc, P(s)/Q(s), 1/2), 0)
// with xc = x clamped to about [-5.4, 5.4] (geluQ8Clamp), s = xc^2, erf(x/sqrt2)/2 as the
// rational xc*P(s)/Q(s) (degrees 6 and 3, two independent Horner chains)
// and one VDIVPS (correctly rounded, so the Go twin matches it bit for
// bit). Absolute error below 3e-7*max(1, |x|), in 16 instructions against
// the ~40 of gelu. A NaN x stays NaN: the clamp makes xc finite, but the
// last product is by x itself.
func gelu8(xs []reg.VecVirtual, cm func(int) Mem) {
	type regs struct{ x, xc, s, p, q reg.VecVirtual }
	rs := make([]regs, len(xs))
	for i, x := range xs {
		rs[i] = regs{x, ZMM(), ZMM(), ZMM(), ZMM()}
	}
	each := func(f func(r regs)) {
		for _, r := range rs {
			f(r)
		}
	}
	each(func(r regs) { VMAXPS_BCST(cm(cQ8Lo), r.x, r.xc) })
	each(func(r regs) { VMINPS_BCST(cm(cQ8Hi), r.xc, r.xc) })
	each(func(r regs) { VMULPS(r.xc, r.xc, r.s) })
	each(func(r regs) { VBROADCASTSS(cm(cQ8P+6), r.p) })
	each(func(r regs) { VBROADCASTSS(cm(cQ8Q+2), r.q) })
	// p = P(s) (degree 6) and q = Q(s) (degree 3), interleaved.
	for k := 5; k >= 0; k-- {
		each(func(r regs) { VFMADD213PS_BCST(cm(cQ8P+k), r.s, r.p) })
		if k >= 3 {
			qk := cOne // Q(0) = 1
			if k > 3 {
				qk = cQ8Q + k - 4
			}
			each(func(r regs) { VFMADD213PS_BCST(cm(qk), r.s, r.q) })
		}
	}
	each(func(r regs) { VDIVPS(r.q, r.p, r.p) })                  // r = P/Q
	each(func(r regs) { VFMADD213PS_BCST(cm(cHalf), r.xc, r.p) }) // phi = xc*r + 1/2
	each(func(r regs) { VMAXPS_BCST(cm(cZero), r.p, r.p) })       // phi >= 0
	each(func(r regs) { VMULPS(r.p, r.x, r.x) })                  // x*phi
}

// writeTwin writes the plain Go twins: the same function names, built where
// the assembly is not, each calling the reference loop in gemm_u8s8_vnni.go.
func writeTwin(path string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by command: go run ./gemm_u8s8_vnni %s. DO NOT EDIT.\n\n", joinArgs())
	b.WriteString("//go:build !(amd64 && gc && !purego && !noasm)\n\npackage kernels\n\n")
	b.WriteString("const vnniAsm = false\n\n")
	for _, t := range tiles {
		for mr := 1; mr <= t.maxMR; mr++ {
			name := fmt.Sprintf("vnniU8S8_%dx%d", mr, t.nr)
			fmt.Fprintf(&b, "// %s is the Go twin of the assembly kernel: vnniMicroGo(%d, %d, ...).\n", name, mr, t.nr)
			fmt.Fprintf(&b, "func %s(a *uint8, lda int, b *int8, k int, c *int32, ldc int, nmask uint64, add int) {\n", name)
			fmt.Fprintf(&b, "\tvnniMicroGo(%d, %d, a, lda, b, k, c, ldc, nmask, add)\n}\n\n", mr, t.nr)
		}
	}
	for _, t := range fusedTiles {
		name := fmt.Sprintf("vnniU8S8E_%dx%d", t[0], t[1])
		fmt.Fprintf(&b, "// %s is the Go twin of the assembly kernel: vnniMicroEGo(%d, %d, ...).\n", name, t[0], t[1])
		fmt.Fprintf(&b, "func %s(a *uint8, lda int, b *int8, k int, ep *byte) {\n", name)
		fmt.Fprintf(&b, "\tvnniMicroEGo(%d, %d, a, lda, b, k, ep)\n}\n\n", t[0], t[1])
	}
	for mr := 1; mr <= scoresMaxMR; mr++ {
		name := fmt.Sprintf("vnniScores_%dx64", mr)
		fmt.Fprintf(&b, "// %s is the Go twin of the assembly kernel: vnniScoresGo(%d, ...).\n", name, mr)
		fmt.Fprintf(&b, "func %s(a *uint8, lda int, b *int8, k int, c *float32, ldc int, n int, colSum *int32, zp int32, rowScale *float32, colScale *float32) {\n", name)
		fmt.Fprintf(&b, "\tvnniScoresGo(%d, a, lda, b, k, c, ldc, n, colSum, zp, rowScale, colScale)\n}\n\n", mr)
	}
	b.WriteString("// vnniSfence is the Go twin of the assembly fence: nothing to order.\nfunc vnniSfence() {}\n\n")
	b.WriteString("// vnniEpilogue is the Go twin of the assembly epilogue: vnniEpilogueGo.\n")
	b.WriteString("func vnniEpilogue(dst *byte, ldd int, acc *int32, ldacc int, rows int, n int, colSum *int32, zp int32, rowScale *float32, scale float32, colScale *float32, bias *float32, res *float32, ldres int, flags int, invOut float32, outZP float32, lo float32, hi float32) {\n")
	b.WriteString("\tvnniEpilogueGo(dst, ldd, acc, ldacc, rows, n, colSum, zp, rowScale, scale, colScale, bias, res, ldres, flags, invOut, outZP, lo, hi)\n}\n\n")
	b.WriteString("// vnniEpilogue3 is the Go twin of the assembly epilogue: vnniEpilogueGo.\n")
	b.WriteString("func vnniEpilogue3(dst *byte, ldd int, acc *int32, ldacc int, rows int, n int, colSum *int32, zp int32, rowScale *float32, scale float32, colScale *float32, bias *float32, res *float32, ldres int, flags int, invOut float32, outZP float32, lo float32, hi float32) {\n")
	b.WriteString("\tvnniEpilogueGo(dst, ldd, acc, ldacc, rows, n, colSum, zp, rowScale, scale, colScale, bias, res, ldres, flags, invOut, outZP, lo, hi)\n}\n")
	for _, name := range []string{"vnniEpilogueS", "vnniEpilogue3S"} {
		fmt.Fprintf(&b, "\n// %s is the Go twin of the assembly epilogue: vnniEpilogueGo.\n", name)
		fmt.Fprintf(&b, "func %s(dst *byte, ldd int, acc *int32, ldacc int, rows int, n int, colSum *int32, zp int32, rowScale *float32, scale float32, colScale *float32, bias *float32, res *float32, ldres int, flags int, invOut float32, outZP float32, lo float32, hi float32) {\n", name)
		b.WriteString("\tvnniEpilogueGo(dst, ldd, acc, ldacc, rows, n, colSum, zp, rowScale, scale, colScale, bias, res, ldres, flags, invOut, outZP, lo, hi)\n}\n")
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, src, 0o644); err != nil {
		log.Fatal(err)
	}
}

func joinArgs() string {
	var b bytes.Buffer
	for i, a := range os.Args[1:] {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a)
	}
	return b.String()
}

// Offsets in vnniEpArgs (gemm_u8s8_vnni.go): shared's.
const (
	offDst      = shared.EpDst
	offLdd      = shared.EpLdd
	offColSum   = shared.EpColSum
	offColScale = shared.EpColScale
	offBias     = shared.EpBias
	offRowScale = shared.EpRowScale
	offRes      = shared.EpRes
	offLdres    = shared.EpLdres
	offFlags    = shared.EpFlags
	offZP       = shared.EpZP
	offScale    = shared.EpScale
	offInvOut   = shared.EpInvOut
	offOutZP    = shared.EpOutZP
	offLo       = shared.EpLo
	offHi       = shared.EpHi
	offOutZPi   = shared.EpOutZPi
)

// prefetchDst generates the prefetch of a fused kernel's destination tile
// and of its residual tile: every line its rows will be written to or read
// from, requested before the K loop so
// that the epilogue at the end finds them in cache instead of waiting on
// each miss to memory (outputs larger than L2: the loop hides the misses).
func prefetchDst(name, tag string, mr, nr int, late bool) {
	name += tag
	nv := nr / 16
	ep := Load(Param("ep"), GP64())
	d, ldd := GP64(), GP64()
	MOVQ(Mem{Base: ep, Disp: offDst}, d)
	MOVQ(Mem{Base: ep, Disp: offLdd}, ldd)
	// flagPFLate moves the prefetch from before the K loop to after 3/4
	// of it.
	TESTQ(U32(flagPFLate), Mem{Base: ep, Disp: offFlags})
	if late {
		JZ(LabelRef(name + "_pfdone"))
	} else {
		JNZ(LabelRef(name + "_pfdone"))
	}
	lines := func(i, v int) { PREFETCHT0(Mem{Base: d, Disp: 64 * v}) }
	TESTQ(U32(flagU8|flagS8), Mem{Base: ep, Disp: offFlags})
	JNZ(LabelRef(name + "_pfbytes"))
	tile(mr, nv, d, ldd, lines)
	JMP(LabelRef(name + "_pfres"))
	Label(name + "_pfbytes")
	shared.Rows(mr, d, ldd, func(i int) {
		PREFETCHT0(Mem{Base: d})
		PREFETCHT0(Mem{Base: d, Disp: nr - 1})
	})
	// The residual tile the epilogue adds, when there is one.
	Label(name + "_pfres")
	MOVQ(Mem{Base: ep, Disp: offRes}, d)
	TESTQ(d, d)
	JZ(LabelRef(name + "_pfdone"))
	MOVQ(Mem{Base: ep, Disp: offLdres}, ldd)
	tile(mr, nv, d, ldd, lines)
	Label(name + "_pfdone")
}

// microE generates vnniU8S8E_<mr>x<nr>: the micro-kernel over the whole k
// followed by the epilogue of vnniEpilogue3S/vnniEpilogueS (split GELU)
// applied to the accumulators in registers, each step over the whole tile
// (one branch per step and tile), one 16-column vector at a time where it
// needs temporaries (the K loop's B and broadcast registers are free then).
// Every float32 operation is the one of those epilogues, in the same order,
// so the results are the same bits.
func microE(mr, nr int) {
	nv := nr / 16
	name := fmt.Sprintf("vnniU8S8E_%dx%d", mr, nr)
	TEXT(name, NOSPLIT, "func(a *uint8, lda int, b *int8, k int, ep *byte)")
	Doc(
		fmt.Sprintf("%s computes one full %dx%d tile of A x B^T over k as", name, mr, nr),
		fmt.Sprintf("vnniU8S8_%dx%d and applies the epilogue described by ep (a", mr, nr),
		"*vnniEpArgs) to it in registers, as vnniEpilogue3S does to a stored tile:",
		"",
		"\tvar t [MR*NR]int32",
		fmt.Sprintf("\tvnniU8S8_%dx%d(a, lda, b, k, &t[0], %d, 1<<%d-1, 0)", mr, nr, nr, nr),
		fmt.Sprintf("\tvnniEpilogue3S(e.dst, e.ldd/esize, &t[0], %d, %d, %d, e.colSum, e.zp, e.rowScale, e.scale,", nr, mr, nr),
		"\t\te.colScale, e.bias, e.res, e.ldres/4, e.flags, e.invOut, e.outZP, e.lo, e.hi)",
		"",
		"(esize: 4 for f32, 1 for u8 and s8; e.outZPi = int32(e.outZP)).",
	)
	Pragma("noescape")
	var mid func()
	if *dstPrefetch {
		prefetchDst(name, "_e", mr, nr, false)
		mid = func() { prefetchDst(name, "_l", mr, nr, true) }
	}
	acc := microLoop(name, mr, nr, mid)

	defineConsts()
	cm := func(i int) Mem { return consts.Offset(4 * i) }
	ep := Load(Param("ep"), GP64())
	at := func(off int) Mem { return Mem{Base: ep, Disp: off} }
	lbl := func(l string) string { return name + "_" + l }
	all := func(f func(i, v int)) {
		for i := range mr {
			for v := range nv {
				f(i, v)
			}
		}
	}
	each := func(f func(y reg.VecVirtual)) { all(func(i, v int) { f(acc[i][v]) }) }
	// p is the pointer of the step's operand (colSum, rowScale, ...).
	p := GP64()
	// optional emits body when the operand at off in ep is not nil, loaded
	// into p (label none after it).
	optional := func(off int, none string, body func()) {
		MOVQ(at(off), p)
		TESTQ(p, p)
		JZ(LabelRef(lbl(none)))
		body()
		Label(lbl(none))
	}
	// byCol is acc op= the operand's vector v at p.
	byCol := func(op func(...Op)) func(i, v int) {
		return func(i, v int) { op(Mem{Base: p, Disp: 64 * v}, acc[i][v], acc[i][v]) }
	}
	// store stores the tile at p (rows ldd apart) by op, the vectors
	// width bytes apart (64: f32; 16: narrowed to bytes), and returns.
	store := func(op func(...Op), width int) {
		tile(mr, nv, p, at(offLdd), func(i, v int) { op(acc[i][v], Mem{Base: p, Disp: width * v}) })
		ret()
	}

	// v -= zp*colSum[j] (the products once per column, for every row).
	optional(offColSum, "nocomp", func() {
		zpv := ZMM()
		VPBROADCASTD(at(offZP), zpv)
		for v := range nv {
			t := ZMM()
			VMOVDQU32(Mem{Base: p, Disp: 64 * v}, t)
			VPMULLD(zpv, t, t)
			for i := range mr {
				VPSUBD(t, acc[i][v], acc[i][v])
			}
		}
	})
	each(func(y reg.VecVirtual) { VCVTDQ2PS(y, y) })
	// y *= rowScale[i], or scale.
	MOVQ(at(offRowScale), p)
	TESTQ(p, p)
	JZ(LabelRef(lbl("scalar")))
	for i := range mr {
		s := ZMM()
		VBROADCASTSS(Mem{Base: p, Disp: 4 * i}, s)
		for v := range nv {
			VMULPS(s, acc[i][v], acc[i][v])
		}
	}
	JMP(LabelRef(lbl("scaled")))
	Label(lbl("scalar"))
	{
		s := ZMM()
		VBROADCASTSS(at(offScale), s)
		each(func(y reg.VecVirtual) { VMULPS(s, y, y) })
	}
	Label(lbl("scaled"))
	optional(offColScale, "nocolscale", func() { all(byCol(VMULPS)) })
	optional(offBias, "nobias", func() { all(byCol(VADDPS)) })
	geluByFlag(at(offFlags), lbl(""),
		func() { each(func(y reg.VecVirtual) { gelu8([]reg.VecVirtual{y}, cm) }) },
		func() { each(func(y reg.VecVirtual) { gelu([]reg.VecVirtual{y}, cm, true) }) })
	TESTQ(U32(flagReLU), at(offFlags))
	JZ(LabelRef(lbl("norelu")))
	{
		z := ZMM()
		VXORPS(z, z, z)
		each(func(y reg.VecVirtual) { VMAXPS(z, y, y) })
	}
	Label(lbl("norelu"))
	optional(offRes, "nores", func() { tile(mr, nv, p, at(offLdres), byCol(VADDPS)) })

	MOVQ(at(offDst), p)
	TESTQ(U32(flagU8|flagS8), at(offFlags))
	JNZ(LabelRef(lbl("quant")))
	store(VMOVUPS, 64)

	Label(lbl("quant"))
	{
		bc := func(off int) reg.VecVirtual {
			z := ZMM()
			VBROADCASTSS(at(off), z)
			return z
		}
		invOut, outZP, lo, hi := bc(offInvOut), bc(offOutZP), bc(offLo), bc(offHi)
		outZPi := ZMM()
		VPBROADCASTD(at(offOutZPi), outZPi)
		nan := K()
		each(func(y reg.VecVirtual) { quantize(y, y, invOut, outZP, lo, hi, outZPi, nan) })
	}
	TESTQ(U32(flagU8), at(offFlags))
	JZ(LabelRef(lbl("s8")))
	store(VPMOVUSDB, 16)
	Label(lbl("s8"))
	store(VPMOVSDB, 16)
}

// scoresMaxMR is the largest MR of the scores kernels (vnniScores_<mr>x64);
// every MR from 1 up to it is generated (the smaller ones serve M tails).
const scoresMaxMR = 6

// scores generates vnniScores_<mr>x64: mr rows of INT8 attention's Q Kᵀ
// over every 64-key panel of b in one call (docs/DESIGN.md section 3.10):
// for each panel the K loop of vnniU8S8_<mr>x64 (k a multiple of 4) and
// the scores epilogue of vnniEpilogue on the accumulators, in its order
// (acc - zp*colsum, to f32, times the row's scale unless there is none,
// times the key's; the subtraction as the accumulators' start), each
// panel's columns past n masked. The per-tile Go call, flag tests and
// destination prefetches of the fused kernels are what it saves.
func scores(mr int) {
	const nr, nv = 64, 4
	name := fmt.Sprintf("vnniScores_%dx64", mr)
	TEXT(name, NOSPLIT, "func(a *uint8, lda int, b *int8, k int, c *float32, ldc int, n int, colSum *int32, zp int32, rowScale *float32, colScale *float32)")
	Doc(
		fmt.Sprintf("%s computes rows 0 <= i < %d, columns 0 <= j < n of the scores", name, mr),
		"",
		"\tc[i*ldc+j] = float32(float32(acc[i][j] - zp*colSum[j]) * rowScale[i]) * colScale[j]",
		"",
		"(rowScale nil: without its factor)",
		"with acc = A x Bᵀ (u8 x s8 -> s32) over k (a multiple of 4) and b the",
		"VNNI-4 panels of 64 columns (PackedS8, Kp = k), the last one's columns",
		"from n on left alone: vnniU8S8E_6x64's epilogue, bit for bit, over",
		"every panel in one call. Its Go twin is vnniScoresGo.")
	lda := Load(Param("lda"), GP64())
	lda3 := GP64()
	LEAQ(Mem{Base: lda, Index: lda, Scale: 2}, lda3)
	bp := Load(Param("b"), GP64())
	c := Load(Param("c"), GP64())
	n := Load(Param("n"), GP64())
	cs := Load(Param("colSum"), GP64())
	ks := Load(Param("colScale"), GP64())
	acc := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, nv)
		for v := range acc[i] {
			acc[i][v] = ZMM()
		}
	}
	bz := make([]reg.VecVirtual, nv)
	for v := range bz {
		bz[v] = ZMM()
	}
	bc := []reg.VecVirtual{ZMM(), ZMM()}
	masks := make([]reg.OpmaskVirtual, nv)
	for v := range masks {
		masks[v] = K()
	}

	Label(name + "_panel")
	a := Load(Param("a"), GP64())
	bases := []reg.Register{a}
	if mr > 4 {
		a4 := GP64()
		LEAQ(Mem{Base: a, Index: lda, Scale: 4}, a4)
		bases = append(bases, a4)
	}
	// The panel's column mask: all 64, or the n left.
	m := GP64()
	MOVQ(I64(-1), m)
	CMPQ(n, U8(nr))
	JAE(LabelRef(name + "_full"))
	MOVQ(n, reg.RCX)
	MOVQ(U32(1), m)
	SHLQ(reg.CL, m)
	DECQ(m)
	Label(name + "_full")
	KMOVQ(m, masks[0])
	for v := 1; v < nv; v++ {
		KSHIFTRQ(U8(16), masks[v-1], masks[v])
	}
	// The accumulators start at -zp*colSum: the sums then come out as
	// acc - zp*colSum, the same int32 (wrapping addition is associative)
	// without the epilogue's mr*4 subtractions (the B registers are free
	// until the loop).
	zp, zero := bc[0], bc[1]
	VPBROADCASTD(Load(Param("zp"), GP32()), zp)
	VPXORD(zero, zero, zero)
	for v := 0; v < nv; v++ {
		VMOVDQU32_Z(Mem{Base: cs, Disp: 64 * v}, masks[v], bz[v])
		VPMULLD(zp, bz[v], bz[v])
		VPSUBD(bz[v], zero, bz[v])
		for i := 0; i < mr; i++ {
			VMOVDQA32(bz[v], acc[i][v])
		}
	}
	b := GP64()
	MOVQ(bp, b)
	groups := Load(Param("k"), GP64())
	SHRQ(U8(2), groups)
	JZ(LabelRef(name + "_epi"))
	Label(name + "_loop")
	kGroup(b, bases, lda, lda3, bz, bc, acc, 0)
	DECQ(groups)
	JNZ(LabelRef(name + "_loop"))

	Label(name + "_epi")
	// To f32, times the row's scale, times the key's.
	for i := 0; i < mr; i++ {
		for v := 0; v < nv; v++ {
			VCVTDQ2PS(acc[i][v], acc[i][v])
		}
	}
	// No row scale (rowScale nil): INT8 attention folds Q's into the
	// softmax's exponent (docs/DESIGN.md section 3.10).
	rs := Load(Param("rowScale"), GP64())
	TESTQ(rs, rs)
	JZ(LabelRef(name + "_cols"))
	for i := 0; i < mr; i++ {
		t := bc[i%2]
		VBROADCASTSS(Mem{Base: rs, Disp: 4 * i}, t)
		for v := 0; v < nv; v++ {
			VMULPS(t, acc[i][v], acc[i][v])
		}
	}
	Label(name + "_cols")
	for v := 0; v < nv; v++ {
		VMOVUPS_Z(Mem{Base: ks, Disp: 64 * v}, masks[v], bz[v])
		for i := 0; i < mr; i++ {
			VMULPS(bz[v], acc[i][v], acc[i][v])
		}
	}
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	d := GP64()
	MOVQ(c, d)
	tile(mr, nv, d, ldc, func(i, v int) { VMOVUPS(acc[i][v], masks[v], Mem{Base: d, Disp: 64 * v}) })
	// The next panel, while columns are left.
	ADDQ(U32(4*nr), c)
	ADDQ(U32(4*nr), cs)
	ADDQ(U32(4*nr), ks)
	pk := Load(Param("k"), GP64())
	SHLQ(U8(6), pk) // 64 columns of k bytes
	ADDQ(pk, bp)
	SUBQ(U8(nr), n)
	JG(LabelRef(name + "_panel"))
	ret()
}
