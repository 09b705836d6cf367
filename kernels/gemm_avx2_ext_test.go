package kernels_test

import (
	"testing"

	"github.com/int8bert/int8bert/cpu"
	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/kernels/kernelstest"
)

// TestAVX2Drivers runs the GEMM suite on both AVX2 drivers, over the
// assembly or, in builds without it, over the generic twins.
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
