package kernels_test

import (
	"testing"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/kernels/kernelstest"
)

// TestVNNIFusedGoTwins runs the suite on the VNNI driver's fused path over
// the Go twins of the micro-kernels, on every build and CPU.
func TestVNNIFusedGoTwins(t *testing.T) {
	for _, k := range kernels.VNNIFusedGoTwinKernels() {
		t.Run(k.Name, func(t *testing.T) { kernelstest.GEMM(t, k) })
	}
}
