// Package shared holds what several generators of kernels/_gen emit alike:
// the constants of the rational GELU and the addressing of a row tile.
package shared

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The rational GELU of the assembly kernels, geluQ8F32 in
// kernels/gemm_u8s8_vnni.go (the same float32 values): phi(x) =
// max(fma(xc, P(s)/Q(s), 1/2), 0) with xc = x clamped to +-GELU8Clamp and
// s = xc^2; P has degrees 0...6, Q degrees 0...3 (Q(0) = 1).
var (
	GELU8Clamp = float32(5.39902306)
	GELU8P     = []float32{0.398943156, 0.0188730471, 0.00337341172, -1.12970756e-05, 1.0707414e-06, -1.8711102e-08, 1.324474e-10}
	GELU8Q     = []float32{1, 0.213986263, 0.019102091, 0.000794661115}
)

// RowAddr returns the address of row r of a tile whose rows are reached
// from one base per 5 rows: bases[r/5] + {0, L, 2L, 3L, 4L}[r%5] + disp
// (l is the row stride L, l3 holds 3L).
func RowAddr(bases []reg.GPPhysical, l, l3 reg.GPPhysical, r, disp int) Mem {
	b := bases[r/5]
	switch r % 5 {
	case 0:
		return Mem{Base: b, Disp: disp}
	case 1:
		return Mem{Base: b, Index: l, Scale: 1, Disp: disp}
	case 2:
		return Mem{Base: b, Index: l, Scale: 2, Disp: disp}
	case 3:
		return Mem{Base: b, Index: l3, Scale: 1, Disp: disp}
	}
	return Mem{Base: b, Index: l, Scale: 4, Disp: disp}
}

// RowBases sets the bases of a tile's mr rows for RowAddr, one per 5
// rows, from bases[0] and the row stride l: bases[g] = bases[g-1] + 5l.
func RowBases(bases []reg.GPPhysical, l reg.GPPhysical, mr int) {
	for g := 1; g*5 < mr; g++ {
		LEAQ(Mem{Base: bases[g-1], Index: l, Scale: 4}, bases[g])
		ADDQ(l, bases[g])
	}
}

// AdvanceRows moves the bases of a tile's mr rows past bytes bytes.
func AdvanceRows(bases []reg.GPPhysical, mr, bytes int) {
	for g := 0; g*5 < mr; g++ {
		ADDQ(U32(bytes), bases[g])
	}
}

// PrefetchTiles emits the prefetch into L2 of the kernel name's tile of
// C (the parameters c and ldc, in float32) and, when the parameter res is
// not nil, of the residual tile (res, ldr) its epilogue will add: rowBytes
// of each of the mr rows, reached from the bases cb (RowBases; c and res
// loaded into cb[0]) with the stride in l and 3 times it in l3. By the end
// of the k loop the tiles are there (L2, not L1, where the rows of a tile
// may alias).
func PrefetchTiles(name string, mr, rowBytes int, cb []reg.GPPhysical, l, l3 reg.GPPhysical) {
	tile := func(ld string) {
		Load(Param(ld), l)
		SHLQ(U8(2), l)
		LEAQ(Mem{Base: l, Index: l, Scale: 2}, l3)
		RowBases(cb, l, mr)
		for r := 0; r < mr; r++ {
			for line := 0; line < rowBytes; line += 64 {
				PREFETCHT1(RowAddr(cb, l, l3, r, line))
			}
		}
	}
	Load(Param("c"), cb[0])
	tile("ldc")
	Load(Param("res"), cb[0])
	TESTQ(cb[0], cb[0])
	JZ(LabelRef(name + "_nores"))
	tile("ldr")
	Label(name + "_nores")
}

// GELU8ConstsAVX2 emits the read-only table symbol of the rational GELU's
// constants for 256-bit code, each as 8 equal lanes (AVX2 has no embedded
// broadcast: an operand in memory is a whole vector): "lo", "hi" (the
// clamp), "half", "p0"... "p6", "q0"... "q3". It returns their addresses
// by name.
func GELU8ConstsAVX2(symbol string) func(name string) Mem {
	var names []string
	var vals []float32
	add := func(name string, v float32) {
		names = append(names, name)
		vals = append(vals, v)
	}
	add("lo", -GELU8Clamp)
	add("hi", GELU8Clamp)
	add("half", 0.5)
	for i, c := range GELU8P {
		add(fmt.Sprint("p", i), c)
	}
	for i, c := range GELU8Q {
		add(fmt.Sprint("q", i), c)
	}
	t := GLOBL(symbol, RODATA|NOPTR)
	for i, v := range vals {
		for lane := 0; lane < 8; lane++ {
			DATA(32*i+4*lane, U32(math.Float32bits(v)))
		}
	}
	return func(name string) Mem {
		for i, n := range names {
			if n == name {
				return t.Offset(32 * i)
			}
		}
		panic(name)
	}
}

// GELU8AVX2 replaces each x of xs (at most 3) by geluQ8F32(x), the same
// float32 steps as gelu8 of _gen/gemm_u8s8_vnni, in 256-bit registers; the l-th x
// uses Y(2+4l)...Y(5+4l) as temporaries. It needs AVX2 and FMA3.
func GELU8AVX2(xs []reg.VecPhysical, cst func(string) Mem) {
	type regs struct{ x, xc, s, p, q reg.VecPhysical }
	var L []regs
	for l, x := range xs {
		b := 2 + 4*l
		L = append(L, regs{x, Ymm(b), Ymm(b + 1), Ymm(b + 2), Ymm(b + 3)})
	}
	each := func(f func(r regs)) {
		for _, r := range L {
			f(r)
		}
	}
	// xc = min(max(x, -clamp), clamp): VMAXPS/VMINPS return the second
	// (memory) operand for a NaN x, so xc is finite, as in gelu8 of vnni.
	each(func(r regs) { VMAXPS(cst("lo"), r.x, r.xc) })
	each(func(r regs) { VMINPS(cst("hi"), r.xc, r.xc) })
	each(func(r regs) { VMULPS(r.xc, r.xc, r.s) })
	each(func(r regs) { VMOVUPS(cst("p6"), r.p) })
	each(func(r regs) { VMOVUPS(cst("q3"), r.q) })
	for k := 5; k >= 0; k-- {
		each(func(r regs) { VFMADD213PS(cst(fmt.Sprint("p", k)), r.s, r.p) })
		if k >= 3 {
			each(func(r regs) { VFMADD213PS(cst(fmt.Sprint("q", k-3)), r.s, r.q) })
		}
	}
	each(func(r regs) { VDIVPS(r.q, r.p, r.p) })               // P/Q
	each(func(r regs) { VFMADD213PS(cst("half"), r.xc, r.p) }) // xc*P/Q + 1/2
	each(func(r regs) { VXORPS(r.q, r.q, r.q) })
	each(func(r regs) { VMAXPS(r.q, r.p, r.p) }) // phi >= 0 (a NaN phi gives 0)
	each(func(r regs) { VMULPS(r.p, r.x, r.x) })
}

// Epilogue flags of the u8 x s8 kernels (vnniGELU ... in gemm_u8s8_vnni.go).
const (
	EpGELU = 1
	EpU8   = 2
	EpS8   = 4
	EpReLU = 8
	// EpGELU8: the rational GELU (GELU8AVX2, gelu8 of _gen/gemm_u8s8_vnni); wins
	// over EpGELU.
	EpGELU8 = 16
	// EpPFLate: fused VNNI kernels prefetch those tiles after 3/4 of the K
	// loop instead of before it.
	EpPFLate = 128
)

// Offsets in vnniEpArgs (gemm_u8s8_vnni.go), the operands of one tile's fused
// epilogue.
const (
	EpDst      = 0  // dst: C[i][j] (f32, u8 or s8)
	EpLdd      = 8  // ldd: row stride of dst in bytes
	EpColSum   = 16 // colSum: ColSum[j] (nil: no compensation)
	EpColScale = 24 // colScale: ColScale[j] (nil: none)
	EpBias     = 32 // bias: Bias[j] (nil: none)
	EpRowScale = 40 // rowScale: RowScale[i] (nil: scale for every row)
	EpRes      = 48 // res: Residual[i][j] (nil: none)
	EpLdres    = 56 // ldres: row stride of res in bytes
	EpFlags    = 64 // flags: as vnniEpilogue's
	EpZP       = 72 // zp (int32): the zero point of A
	EpScale    = 76 // scale (float32)
	EpInvOut   = 80 // invOut (float32)
	EpOutZP    = 84 // outZP (float32)
	EpLo       = 88 // lo (float32)
	EpHi       = 92 // hi (float32)
	EpOutZPi   = 96 // outZPi (int32): outZP as an integer
)
