package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// skipNoAVXVNNI skips a test of the AVX-VNNI assembly where this CPU (after
// INT8BERT_CPU_DISABLE) cannot run it; the Go twins run everywhere.
func skipNoAVXVNNI(t *testing.T) {
	t.Helper()
	if vnniAsm && !(cpu.X86.AVX2 && cpu.X86.AVXVNNI) {
		t.Skipf("this CPU has no AVX-VNNI (or AVX2), or it is disabled: %s", cpu.X86)
	}
}

// TestAVXVNNIMicroExact runs every gemmAVXVNNI_<MR>x16 (the assembly where
// it is built, else its twin) against the plain sum on full-range data
// (0 and 255, -128 and 127 included, and all-extreme blocks where a
// saturating int16 step would fail), for odd and even group counts, small
// and large, and checks that nothing beyond the tile's 16 columns or its
// rows is written.
func TestAVXVNNIMicroExact(t *testing.T) {
	skipNoAVXVNNI(t)
	r := rand.New(rand.NewPCG(31, 32))
	for mr := 1; mr <= 6; mr++ {
		for _, groups := range []int{1, 2, 3, 7, 64, 193, 1024} {
			for _, fill := range []string{"random", "extreme"} {
				t.Run(fmt.Sprintf("%dx16/g%d/%s", mr, groups, fill), func(t *testing.T) {
					lda, ldc := 4*groups+3, 21
					a := make([]uint8, mr*lda)
					b := make([]int8, 64*groups)
					for i := range a {
						a[i] = []uint8{0, 255, uint8(r.IntN(256))}[r.IntN(3)]
						if fill == "extreme" {
							a[i] = 255
						}
					}
					for i := range b {
						b[i] = []int8{-128, 127, int8(r.IntN(256) - 128)}[r.IntN(3)]
						if fill == "extreme" {
							b[i] = -128
						}
					}
					const sentinel = int32(-0x5a5a5a5b)
					c := make([]int32, mr*ldc)
					for i := range c {
						c[i] = sentinel
					}
					avxvnniMicros[mr](&a[0], lda, &b[0], groups, &c[0], ldc)
					for i := 0; i < mr; i++ {
						for j := 0; j < ldc; j++ {
							got := c[i*ldc+j]
							if j >= 16 {
								if got != sentinel {
									t.Fatalf("row %d col %d (outside the tile) written: %d", i, j, got)
								}
								continue
							}
							var want int64
							for q := 0; q < 4*groups; q++ {
								want += int64(a[i*lda+q]) * int64(b[(q/4)*64+j*4+q%4])
							}
							if int64(got) != want {
								t.Fatalf("c[%d][%d] = %d, want %d", i, j, got, want)
							}
						}
					}
				})
			}
		}
	}
}

// TestAVXVNNIDriverFullRange runs the registered AVX-VNNI kernel on
// full-range operands at every row count 1 ... 6 (and beyond, so that edge
// tiles of each height occur), N not a multiple of 16 and K not a multiple
// of 4, against GemmU8S8S32Ref, on one and two threads.
func TestAVXVNNIDriverFullRange(t *testing.T) {
	var k *Kernel
	for _, c := range U8S8Kernels() {
		if c.ISA == cpu.ISAAVXVNNI {
			k = c
		}
	}
	if k == nil {
		t.Skip("no AVX-VNNI kernel in this build (noasm, purego or not amd64)")
	}
	if k.Available(cpu.Features{AVX2: true, AVX512F: true, AVX512BW: true, AVX512VL: true, AVX512VNNI: true}) {
		t.Error("the AVX-VNNI kernel claims to run on a CPU without AVX-VNNI")
	}
	if !k.Available(cpu.X86) {
		t.Skipf("this CPU has no AVX-VNNI (or AVX2), or it is disabled: %s", cpu.X86)
	}
	r := rand.New(rand.NewPCG(41, 42))
	var shapes [][3]int
	for m := 1; m <= 13; m++ {
		shapes = append(shapes, [3]int{m, 17, 5}, [3]int{m, 16, 8})
	}
	shapes = append(shapes, [3]int{6, 33, 1}, [3]int{5, 31, 2}, [3]int{4, 1, 3}, [3]int{7, 47, 259},
		[3]int{12, 40, 1027}, [3]int{3, 20, 4097})
	for _, s := range shapes {
		m, n, kk := s[0], s[1], s[2]
		a := make([]uint8, m*(kk+1))
		for i := range a {
			a[i] = []uint8{0, 255, 255, uint8(r.IntN(256))}[r.IntN(4)]
		}
		b := make([]int8, n*kk)
		for i := range b {
			b[i] = []int8{-128, 127, -128, int8(r.IntN(256) - 128)}[r.IntN(4)]
		}
		want := make([]int32, m*n)
		if err := GemmU8S8S32Ref(m, n, kk, a, kk+1, b, kk, want, n); err != nil {
			t.Fatal(err)
		}
		p, err := PackS8(n, kk, b, kk, 16)
		if err != nil {
			t.Fatal(err)
		}
		for _, threads := range []int{1, 2} {
			got := make([]int32, m*n)
			g := &GEMMU8S8{M: m, N: n, K: kk, A: a, Lda: kk + 1, B: p, Out: Out{S32: got, Ldc: n}, Threads: threads}
			if err := k.RunU8S8(g); err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%v threads=%d: [%d] = %d, want %d", s, threads, i, got[i], want[i])
				}
			}
		}
	}
}
