package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/int8bert/int8bert/cpu"
)

// TestAVX2EpilogueExact compares avx2Epilogue16 (the assembly where it is
// built, else its twin) with vnniEpilogueGo bit for bit, on tiles of 1-3
// rows under every flag and operand combination, with sums that make
// NaN, infinities and out-of-range requantized values.
func TestAVX2EpilogueExact(t *testing.T) {
	if vnniAsm && !(cpu.X86.AVX2 && cpu.X86.FMA) {
		t.Skipf("this CPU lacks AVX2 or FMA3 (or they are disabled): %s", cpu.X86)
	}
	r := rand.New(rand.NewPCG(21, 22))
	const ldd, ldres = 40, 24
	for it := 0; it < 3000; it++ {
		rows := 1 + r.IntN(3)
		flags := []int{0, vnniGELU8, vnniReLU, vnniU8, vnniS8, vnniU8 | vnniGELU8, vnniS8 | vnniReLU}[r.IntN(7)]
		acc := make([]int32, 3*16)
		for i := range acc {
			switch r.IntN(8) {
			case 0:
				acc[i] = int32(r.Uint32())
			case 1:
				acc[i] = 0
			default:
				acc[i] = int32(r.IntN(1<<16) - 1<<15)
			}
		}
		f32s := func(n int, scale float64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(r.NormFloat64() * scale)
				if r.IntN(50) == 0 {
					v[i] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0}[r.IntN(4)]
				}
			}
			return v
		}
		a := vnniEpArgs{flags: flags, zp: int32(r.IntN(256)), scale: float32(r.Float64() * 1e-3), invOut: float32(1 / (0.01 + r.Float64())),
			outZP: float32(r.IntN(40)), lo: 0, hi: 255}
		if flags&vnniS8 != 0 {
			a.lo, a.hi, a.outZP = -128, 127, float32(r.IntN(20)-10)
		}
		a.outZPi = int32(a.outZP)
		colSum := make([]int32, 16)
		for i := range colSum {
			colSum[i] = int32(r.IntN(1<<12) - 1<<11)
		}
		rowScale := f32s(3, 1e-3)
		colScale, bias := f32s(16, 1), f32s(16, 1)
		res := f32s(rows*ldres, 1)
		if r.IntN(2) == 0 {
			a.colSum = &colSum[0]
		}
		if r.IntN(2) == 0 {
			a.rowScale = &rowScale[0]
		}
		if r.IntN(2) == 0 {
			a.colScale = &colScale[0]
		}
		if r.IntN(2) == 0 {
			a.bias = &bias[0]
		}
		if r.IntN(2) == 0 {
			a.res, a.ldres = &res[0], 4*ldres
		}
		esz := 4
		if flags&(vnniU8|vnniS8) != 0 {
			esz = 1
		}
		got, want := make([]byte, 4*rows*ldd), make([]byte, 4*rows*ldd)
		for i := range got {
			got[i], want[i] = 0xA5, 0xA5
		}
		a.dst, a.ldd = unsafe.Pointer(&got[0]), esz*ldd
		avx2Epilogue16(&acc[0], rows, (*byte)(unsafe.Pointer(&a)))
		vnniEpilogueGo(&want[0], ldd, &acc[0], 16, rows, 16, a.colSum, a.zp, a.rowScale, a.scale, a.colScale, a.bias, a.res, ldres, flags, a.invOut, a.outZP, a.lo, a.hi)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("it %d rows=%d flags=%d: byte %d (row %d) = %#x, want %#x", it, rows, flags, i, i/(esz*ldd), got[i], want[i])
			}
		}
	}
}
