package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// nonVNNIU8S8Kernels are the exact u8 x s8 kernels for CPUs without VNNI:
// the registered AVX2 and AVX-512 ones, and the drivers over the Go twins
// in builds without assembly (AVX2DriverKernels).
func nonVNNIU8S8Kernels() []*Kernel {
	var ks []*Kernel
	for _, k := range U8S8Kernels() {
		if k.ISA == cpu.ISAAVX2 || k.ISA == cpu.ISAAVX512 {
			ks = append(ks, k)
		}
	}
	if !vnniAsm {
		ks = append(ks, AVX2DriverKernels()...)
	}
	return ks
}

// TestNonVNNIExactWhereVPMADDUBSWSaturates feeds every AVX2 and AVX-512
// u8 x s8 kernel without VNNI operands on which VPMADDUBSW's int16 pair
// sums saturate (255*127 + 255*127 = 64770 > 32767; 255*-128 twice), and
// full-range mixes (0/255 activations, -128/127 weights): the sums must be
// exact, for every row count 1...MR+1, N not a multiple of 16 and K not a
// multiple of 4.
func TestNonVNNIExactWhereVPMADDUBSWSaturates(t *testing.T) {
	ks := nonVNNIU8S8Kernels()
	if len(ks) == 0 {
		t.Skip("TestNonVNNIExactWhereVPMADDUBSWSaturates: no AVX2 or AVX-512 u8 x s8 kernel in this build")
	}
	r := rand.New(rand.NewPCG(31, 32))
	fills := []struct {
		name string
		a    func(i int) uint8
		b    func(i int) int8
	}{
		{"255x127", func(int) uint8 { return 255 }, func(int) int8 { return 127 }},
		{"255x-128", func(int) uint8 { return 255 }, func(int) int8 { return -128 }},
		{"0/255x-128/127", func(int) uint8 { return uint8(r.IntN(2) * 255) }, func(int) int8 { return int8(-128 + r.IntN(2)*255) }},
		{"random", func(int) uint8 { return uint8(r.UintN(256)) }, func(int) int8 { return int8(r.UintN(256)) }},
	}
	for _, k := range ks {
		t.Run(k.Name, func(t *testing.T) {
			if !k.Available(cpu.X86) {
				t.Skipf("TestNonVNNIExactWhereVPMADDUBSWSaturates/%s: this CPU lacks %s (or it is disabled): %s", k.Name, k.ISA, cpu.X86)
			}
			for _, f := range fills {
				for m := 1; m <= k.MR+1; m++ {
					for _, n := range []int{1, 16, 17, 31, 33} {
						for _, kk := range []int{1, 3, 4, 6, 67, 260} {
							name := fmt.Sprintf("%s m=%d n=%d k=%d", f.name, m, n, kk)
							lda := kk + 3
							a := make([]uint8, m*lda)
							for i := range a {
								a[i] = f.a(i)
							}
							b := make([]int8, n*kk)
							for i := range b {
								b[i] = f.b(i)
							}
							want := make([]int32, m*n)
							if err := GemmU8S8S32Ref(m, n, kk, a, lda, b, kk, want, n); err != nil {
								t.Fatal(err)
							}
							p, err := PackS8(n, kk, b, kk, k.NR)
							if err != nil {
								t.Fatal(err)
							}
							got := make([]int32, m*n)
							g := &GEMMU8S8{M: m, N: n, K: kk, A: a, Lda: lda, B: p, Out: Out{S32: got, Ldc: n}, Threads: 1 + m%2}
							if err := k.RunU8S8(g); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							for i := range want {
								if got[i] != want[i] {
									t.Fatalf("%s: [%d][%d] = %d, want %d", name, i/n, i%n, got[i], want[i])
								}
							}
						}
					}
				}
			}
		})
	}
}
