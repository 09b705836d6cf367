// Command gemm_u8s8_avxvnni generates the AVX-VNNI u8 x s8 -> s32 GEMM
// micro-kernels of package kernels (gemm_u8s8_avxvnni_amd64.s and its
// stubs): the VEX-encoded VPDPBUSD on ymm registers (Alder Lake, Sierra
// Forest, Zen 5 and later), for CPUs that have it without AVX512-VNNI, or
// with AVX-512 turned off.
//
// VPDPBUSD multiplies u8 by s8 and adds the four products of a dword into
// an int32 accumulator without intermediate saturation, so the kernels are
// exact on full-range data like the widening AVX2 ones, with none of their
// widening, VPMADDWD pair sums or horizontal adds. The Go assembler spells
// only the EVEX form of VPDPBUSD, so the instruction is written as its
// bytes (shared.VPDPBUSDY), which ties the operands to physical registers:
// accumulators Y0 ... Y11, B in Y12 and Y13, the broadcast A in Y14 and
// Y15 alternately.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

func main() {
	ConstraintExpr("amd64,gc,!purego,!noasm")
	for mr := 1; mr <= 6; mr++ {
		kernel(mr)
	}
	Generate()
}

var ymm = shared.Ymm

// Register numbers: row i's accumulators are 2i and 2i+1 (columns 0-7,
// 8-15), the two B vectors 12 and 13, A's broadcast 14 or 15.
const (
	regB0 = 12
	regA0 = 14
)

// kernel emits gemmAVXVNNI_{mr}x16: an mr x 16 tile over kgroups groups of
// 4 k, two groups per loop iteration.
func kernel(mr int) {
	name := fmt.Sprintf("gemmAVXVNNI_%dx16", mr)
	a, lda, b, n := shared.GroupKernel(name, "func(a *uint8, lda int, b *int8, kgroups int, c *int32, ldc int)", mr, 16,
		"b is one 16-column panel of a PackedS8 (NR = 16). Per group of 4 k it",
		"loads the panel's two vectors, broadcasts each row's 4 bytes of A and",
		"issues two VEX VPDPBUSD per row. It needs AVX2 and AVX-VNNI.",
	)
	rows := shared.RowPtrs(a, lda, mr)
	for i := 0; i < 2*mr; i++ {
		VPXOR(ymm(i), ymm(i), ymm(i))
	}
	off := GP64()
	XORQ(off, off)
	bcast := 0
	group := func(g int) {
		VMOVDQU(Mem{Base: b, Disp: 64 * g}, ymm(regB0))
		VMOVDQU(Mem{Base: b, Disp: 64*g + 32}, ymm(regB0+1))
		for i, r := range rows {
			// Alternate the broadcast register so that a row's load
			// need not wait for the previous row's VPDPBUSDs to read it.
			x := regA0 + bcast%2
			bcast++
			VPBROADCASTD(Mem{Base: r, Index: off, Scale: 1, Disp: 4 * g}, ymm(x))
			shared.VPDPBUSDY(2*i, x, regB0)
			shared.VPDPBUSDY(2*i+1, x, regB0+1)
		}
	}
	shared.GroupPairs(name, n, group, func() {
		ADDQ(U8(8), off)
		ADDQ(U32(128), b)
	})
	c, ldc := shared.LoadC()
	shared.StoreRows(c, ldc, mr, func(i int) {
		VMOVDQU(ymm(2*i), Mem{Base: c})
		VMOVDQU(ymm(2*i+1), Mem{Base: c, Disp: 32})
	})
}
