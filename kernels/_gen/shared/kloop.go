package shared

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// KLoop emits the k loop of the float micro-kernels (FP32 AVX-512 and
// AVX2, BF16) over the kc steps counted down in kc: blocks of unroll steps
// (step(u) emits step u of a block, advance(u) moves the operand pointers
// past u steps), then the rest one step at a time, ending at the label
// name+"_store", which the caller places after it. With pf set (a register
// holding the address of the slab to prefetch, or 0 for none), the blocks
// run in a second loop while pf is not 0, each prefetching pfLines cache
// lines from pf and moving it past them.
func KLoop(name string, kc reg.GPPhysical, unroll int, step, advance func(u int), pf reg.GPPhysical, pfLines int) {
	CMPQ(kc, U8(unroll))
	JL(LabelRef(name + "_tail"))
	if pf != nil {
		TESTQ(pf, pf)
		JZ(LabelRef(name + "_main"))
		Label(name + "_mainpf")
		for u := 0; u < unroll; u++ {
			step(u)
			if u < pfLines {
				PREFETCHT1(Mem{Base: pf, Disp: 64 * u})
			}
		}
		advance(unroll)
		ADDQ(U32(64*pfLines), pf)
		SUBQ(U8(unroll), kc)
		CMPQ(kc, U8(unroll))
		JGE(LabelRef(name + "_mainpf"))
		JMP(LabelRef(name + "_tail"))
	}
	Label(name + "_main")
	for u := 0; u < unroll; u++ {
		step(u)
	}
	advance(unroll)
	SUBQ(U8(unroll), kc)
	CMPQ(kc, U8(unroll))
	JGE(LabelRef(name + "_main"))
	Label(name + "_tail")
	TESTQ(kc, kc)
	JZ(LabelRef(name + "_store"))
	Label(name + "_tailloop")
	step(0)
	advance(1)
	DECQ(kc)
	JNZ(LabelRef(name + "_tailloop"))
}

// F32Kernel starts the FP32 micro-kernel name of an mr x nr tile, of the
// Go signature of every FP32 tile kernel (kc, a, lda, b, c, ldc, mask,
// accum, pf, res, ldr), with the doc comment of the loop it computes and
// then doc (whose pointers do not escape with noescape), and loads kc into
// RCX, a into RSI, lda (scaled to bytes) into RDX, 3*lda into R8 and b
// into RDI, which it returns: kc, a, l, l3, b.
func F32Kernel(name string, mr, nr int, noescape bool, doc ...string) (kc, a, l, l3, b reg.GPPhysical) {
	TEXT(name, NOSPLIT, "func(kc int, a *float32, lda int, b *float32, c *float32, ldc int, mask uint64, accum int, pf *float32, res *float32, ldr int)")
	if noescape {
		Pragma("noescape")
	}
	Doc(append([]string{
		fmt.Sprintf("%s computes a %dx%d tile: for i < %d, j < %d with mask bit j set,", name, mr, nr, mr, nr),
		"",
		fmt.Sprintf("\tacc := sum_{p < kc} a[i*lda+p] * b[p*%d+j]  (float32 FMAs, p in order)", nr),
		"\tc[i*ldc+j] = acc, or c[i*ldc+j] + acc when accum != 0",
		"",
	}, doc...)...)
	kc, a, l, l3, b = reg.RCX, reg.RSI, reg.RDX, reg.R8, reg.RDI
	Load(Param("kc"), kc)
	Load(Param("a"), a)
	Load(Param("lda"), l)
	Load(Param("b"), b)
	SHLQ(U8(2), l)
	LEAQ(Mem{Base: l, Index: l, Scale: 2}, l3)
	return kc, a, l, l3, b
}
