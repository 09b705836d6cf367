// Command eltwise_avx2 generates kernels/eltwise_avx2_amd64.s: the AVX2 + FMA3
// row passes of the scaled softmax (attention's), LayerNorm and the u8
// quantization, for CPUs without AVX-512. Each works on whole groups of
// floats (8, 16 or 32) and keeps its lane accumulators (for 16 lanes two
// ymm registers, lanes 0-7 and 8-15) exactly as the Go twins
// (eltMaxMaskScaleGeneric, eltExpSumGeneric, ...) keep acc[j%16]; the
// caller adds the tail and reduces the lanes in Go, so the results are
// those of the twins bit for bit.
//
// Run from kernels/_gen:
//
//	go run ./eltwise_avx2 -out ../eltwise_avx2_amd64.s -stubs ../eltwise_avx2_stub_amd64.go -pkg kernels
//
// main.go holds the constant table, the order of the routines in the output
// and the helpers they share: the frame of a routine, the loops over groups
// and the lane accumulators. Each kernel group has its file, as in
// eltwise_avx512: softmax.go, quant.go, layernorm.go and attn.go (INT8
// attention's u8 softmax and s8 packing). A variant is its
// base's generator called with a parameter, not a copy: eltNormQA is
// norm(true), and the loops with and without an optional slice (the mask
// of eltMaxMaskScaleA, the pre of eltAbsMaxA) are one body of a flag
// (groupsOpt).
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/int8bert/int8bert/kernels/_gen/shared"
)

// Constants of eltExp (eltwise_generic.go), each as 8 equal lanes.
var (
	expMin = float32(-104)
	log2e  = float32(1.44269504088896341)
	ln2Hi  = float32(0.693359375)
	ln2Lo  = float32(-2.12194440e-4)
	expP   = []float32{1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1}
	nMax   = float32(128) // the largest 2^n the two-step scaling takes
)

var cnames []string
var ctab Mem

func defineConsts() {
	var vals []uint32
	add := func(name string, bits uint32) {
		cnames = append(cnames, name)
		vals = append(vals, bits)
	}
	f := math.Float32bits
	add("min", f(expMin))
	add("log2e", f(log2e))
	add("ln2hi", f(ln2Hi))
	add("ln2lo", f(ln2Lo))
	for i, c := range expP {
		add("p"+string(rune('0'+i)), f(c))
	}
	add("one", f(1))
	add("nmax", f(nMax))
	add("bias", 127)
	add("absmask", 0x7fffffff)
	add("qlo", f(-128))
	add("qhi", f(127))
	add("i128", 128)
	add("zero", 0)
	add("u8hi", f(255))
	attnConsts(add)
	// VPERMD indices that put the dwords of two VPACKSSDW + VPACKUSWB
	// rounds back in element order (see pack32).
	ctab = GLOBL("eltAVX2Const", RODATA|NOPTR)
	nb := len(cnames) // broadcast constants; the permutation follows
	for i, v := range vals[:nb] {
		for lane := 0; lane < 8; lane++ {
			DATA(32*i+4*lane, U32(v))
		}
	}
	for lane, idx := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(32*nb+4*lane, U32(idx))
	}
	cnames = append(cnames, "perm")
}

func cst(name string) Mem {
	for i, n := range cnames {
		if n == name {
			return ctab.Offset(32 * i)
		}
	}
	panic(name)
}

func main() {
	ConstraintExpr("amd64,gc,!purego,!noasm")
	defineConsts()
	maxMaskScale()
	expSum()
	scale()
	absMax()
	quantRow()
	addSum()
	sum()
	sumSqDev()
	norm(false)
	norm(true)
	quantRows(false)
	maxLanes4()
	maxLanes4Reduce()
	maxReduce1()
	transpose16()
	expQuantU8()
	quantRows(true)
	Generate()
}

// The frame of a routine: its start, arguments and return.

// kernel starts the routine name of Go signature sig, whose pointers do
// not escape, with its doc comment (the loop it computes).
func kernel(name, sig string, doc ...string) {
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(doc...)
}

// arg loads the pointer or integer parameter name.
func arg(name string) reg.Register { return Load(Param(name), GP64()) }

// scalar broadcasts the float32 parameter name into a new YMM register,
// reading it from the stack with the VEX VBROADCASTSS (see shared.Addr).
func scalar(name string) reg.VecVirtual {
	y := YMM()
	VBROADCASTSS(shared.Addr(Param(name)), y)
	return y
}

// ret ends a routine: VZEROUPPER (the upper halves are dirty) and RET.
func ret() {
	VZEROUPPER()
	RET()
}

// Loops over groups. The count n of groups is counted down; each body
// moves its own pointers past the group (advance).

// advance moves each pointer of ps past bytes bytes.
func advance(bytes int, ps ...reg.Register) {
	for _, p := range ps {
		ADDQ(U8(bytes), p)
	}
}

// loop emits body at label name, then n -= 1 and back to name while n is
// not 0 (n > 0 on entry).
func loop(name string, n reg.Register, body func()) {
	Label(name)
	body()
	DECQ(n)
	JNZ(LabelRef(name))
}

// groups emits the loop of body over n groups at label id+"_loop",
// skipped when n is 0; label id+"_done" follows it.
func groups(id string, n reg.Register, body func()) {
	TESTQ(n, n)
	JZ(LabelRef(id + "_done"))
	loop(id+"_loop", n, body)
	Label(id + "_done")
}

// groupsOpt emits the loops of body over n groups for an optional
// pointer opt: body(true) at label id+"_"+with when opt is not nil,
// body(false) at id+"_"+none when it is; label id+"_done" follows them.
func groupsOpt(id, with, none string, n, opt reg.Register, body func(with bool)) {
	done := id + "_done"
	TESTQ(n, n)
	JZ(LabelRef(done))
	TESTQ(opt, opt)
	JZ(LabelRef(id + "_" + none))
	loop(id+"_"+with, n, func() { body(true) })
	JMP(LabelRef(done))
	loop(id+"_"+none, n, func() { body(false) })
	Label(done)
}

// The 16 lane accumulators of a group of 16 floats: acc[0] holds lanes
// 0-7, acc[1] lanes 8-15, h = 0, 1 the half of the group (32*h its byte
// offset).

// withLanes loads the 16 lane accumulators at accp, emits loops(acc),
// stores them back and returns.
func withLanes(accp reg.Register, loops func(acc []reg.VecVirtual)) {
	acc := []reg.VecVirtual{YMM(), YMM()}
	VMOVUPS(Mem{Base: accp}, acc[0])
	VMOVUPS(Mem{Base: accp, Disp: 32}, acc[1])
	loops(acc)
	VMOVUPS(acc[0], Mem{Base: accp})
	VMOVUPS(acc[1], Mem{Base: accp, Disp: 32})
	ret()
}

// halves emits half(h, acc[h]) for the two halves of a group.
func halves(acc []reg.VecVirtual, half func(h int, acc reg.VecVirtual)) {
	for h := 0; h < 2; h++ {
		half(h, acc[h])
	}
}

// laneLoop emits the routine's loop over n groups of 16 floats (label
// id) with the lane accumulators at accp: half for each half of a group,
// then the pointers ps advance past it.
func laneLoop(id string, n, accp reg.Register, half func(h int, acc reg.VecVirtual), ps ...reg.Register) {
	withLanes(accp, func(acc []reg.VecVirtual) {
		groups(id, n, func() {
			halves(acc, half)
			advance(64, ps...)
		})
	})
}
