package shared

import (
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
