// Command avx2 generates the AVX2 u8 x s8 -> s32 GEMM micro-kernels of
// package kernels (gemm_avx2_amd64.s and its stubs).
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
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64,gc,!purego,!noasm")
	for _, mr := range []int{1, 2} {
		kernel(mr)
	}
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
	t := GP32()

	Label(name + "_loop")
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	for v := 0; v < 4; v++ {
		VPMOVSXBW(Mem{Base: b, Disp: 16 * v}, w[v])
	}
	for i, r := range rows {
		MOVL(Mem{Base: r}, t)
		MOVD(t, x)
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
