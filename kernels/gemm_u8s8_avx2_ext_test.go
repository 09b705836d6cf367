package kernels_test

import (
	"errors"
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/kernels/kernelstest"
)

// TestAVX2Drivers runs the GEMM suite on both AVX2 drivers, over the
// assembly or, in builds without it, over the Go twins.
func TestAVX2Drivers(t *testing.T) {
	for _, k := range kernels.AVX2DriverKernels() {
		t.Run(k.Name, func(t *testing.T) {
			if !k.Available(cpu.X86) {
				t.Skipf("this CPU lacks AVX2 (or it is disabled): %s", cpu.X86)
			}
			kernelstest.GEMM(t, k)
		})
	}
}

// TestU8S8KernelsRefuseBadInput feeds every u8 x s8 kernel (the AVX2
// drivers included) weights packed for another panel width (but the
// generic kernel, which reads any) and operands too short for the shape:
// each must return ErrShape, not panic or write.
func TestU8S8KernelsRefuseBadInput(t *testing.T) {
	ks := append(kernels.U8S8Kernels(), append(kernels.AVX2DriverKernels(), kernels.AVXVNNIDriverKernel())...)
	for _, k := range ks {
		if !k.Available(cpu.X86) {
			continue
		}
		const m, n, kk = 5, 20, 12
		other := 16
		if k.NR == 16 {
			other = 32
		}
		wrong, err := kernels.PackS8(n, kk, make([]int8, n*kk), kk, other)
		if err != nil {
			t.Fatal(err)
		}
		right, err := kernels.PackS8(n, kk, make([]int8, n*kk), kk, k.NR)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			g    *kernels.GEMMU8S8
		}{
			{"panel width", &kernels.GEMMU8S8{M: m, N: n, K: kk, A: make([]uint8, m*kk), Lda: kk, B: wrong,
				Out: kernels.Out{S32: make([]int32, m*n), Ldc: n}}},
			{"short A", &kernels.GEMMU8S8{M: m, N: n, K: kk, A: make([]uint8, m*kk-1), Lda: kk, B: right,
				Out: kernels.Out{S32: make([]int32, m*n), Ldc: n}}},
			{"short C", &kernels.GEMMU8S8{M: m, N: n, K: kk, A: make([]uint8, m*kk), Lda: kk, B: right,
				Out: kernels.Out{F32: make([]float32, m*n-1), Ldc: n}}},
		} {
			if c.name == "panel width" && k.ISA == "generic" {
				continue // the generic kernel reads any packing (PackedS8.At)
			}
			if err := k.RunU8S8(c.g); !errors.Is(err, kernels.ErrShape) {
				t.Errorf("%s: %s: err = %v, want ErrShape", k.Name, c.name, err)
			}
		}
	}
}

// TestAVXVNNIDriver runs the GEMM suite (every epilogue, tails in each
// dimension, K%4 != 0, padded strides, threads) on the AVX-VNNI driver,
// over the assembly or, in builds without it, over the Go twins.
func TestAVXVNNIDriver(t *testing.T) {
	k := kernels.AVXVNNIDriverKernel()
	if !k.Available(cpu.X86) {
		t.Skipf("this CPU has no AVX-VNNI (or AVX2), or it is disabled: %s", cpu.X86)
	}
	kernelstest.GEMM(t, k)
}
