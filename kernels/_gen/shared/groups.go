package shared

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The frame of the u8 x s8 micro-kernels over groups of 4 k without
// AVX512-VNNI (gemm_u8s8_avx2, gemm_u8s8_avxvnni): an mr x nr tile of
// int32 sums, A by rows, B a panel of groups of 4 k. Rows, the walk over
// a tile's rows, serves gemm_u8s8_vnni's tiles too.

// GroupKernel starts the micro-kernel name of Go signature sig (a, lda, b,
// kgroups, c, ldc) for an mr x nr tile, its doc comment the loop it
// computes and then doc, and loads a, lda, b and kgroups (n).
func GroupKernel(name, sig string, mr, nr int, doc ...string) (a, lda, b, n reg.Register) {
	TEXT(name, NOSPLIT, sig)
	Doc(append([]string{
		fmt.Sprintf("%s computes, for i < %d and j < %d,", name, mr, nr),
		"",
		"\tc[i*ldc+j] = sum over g < kgroups, t < 4 of a[i*lda+4g+t] * b[64g+4j+t]",
		"",
	}, doc...)...)
	a = Load(Param("a"), GP64())
	lda = Load(Param("lda"), GP64())
	b = Load(Param("b"), GP64())
	n = Load(Param("kgroups"), GP64())
	return a, lda, b, n
}

// RowPtrs returns the addresses of mr rows of A lda bytes apart from a:
// a and mr-1 new registers.
func RowPtrs(a, lda reg.Register, mr int) []reg.Register {
	rows := []reg.Register{a}
	for i := 1; i < mr; i++ {
		r := GP64()
		LEAQ(Mem{Base: rows[i-1], Index: lda, Scale: 1}, r)
		rows = append(rows, r)
	}
	return rows
}

// GroupPairs emits the k loop over n groups, two a loop iteration at
// label name+"_loop" (group(0), group(1), then advance past them), then
// the odd one (group(0) at name+"_odd"); label name+"_done" follows.
func GroupPairs(name string, n reg.Register, group func(g int), advance func()) {
	pairs := GP64()
	MOVQ(n, pairs)
	SHRQ(U8(1), pairs)
	JZ(LabelRef(name + "_odd"))
	Label(name + "_loop")
	group(0)
	group(1)
	advance()
	DECQ(pairs)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_odd")
	TESTQ(U32(1), n)
	JZ(LabelRef(name + "_done"))
	group(0)
	Label(name + "_done")
}

// StoreRows emits the stores of the tile's mr rows: ldc (in int32) scaled
// to bytes, then row(i) storing row i at c, c moved ldc on between rows,
// and the routine's return.
func StoreRows(c, ldc reg.Register, mr int, row func(i int)) {
	SHLQ(U8(2), ldc)
	Rows(mr, c, ldc, row)
	VZEROUPPER()
	RET()
}

// Rows emits row(i) for the mr rows of a tile, the row pointer p moved on
// by stride (a register or a memory operand) between rows.
func Rows(mr int, p reg.Register, stride Op, row func(i int)) {
	for i := range mr {
		row(i)
		if i < mr-1 {
			ADDQ(stride, p)
		}
	}
}

// LoadC loads the parameters c and ldc, for StoreRows.
func LoadC() (c, ldc reg.Register) {
	c = Load(Param("c"), GP64())
	ldc = Load(Param("ldc"), GP64())
	return c, ldc
}
