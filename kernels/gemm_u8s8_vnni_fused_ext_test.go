package kernels_test

import (
	"testing"

	"github.com/int8bert/int8bert/kernels"
	"github.com/int8bert/int8bert/kernels/kernelstest"
)

// TestVNNIFusedGoTwins runs the suite on the VNNI driver's fused path over
// the Go twins of the micro-kernels, on every build and CPU. The twins are
// one Go function for every tile: -short (the race run, where they are
// slowest) takes the first tile, the full run every tile.
func TestVNNIFusedGoTwins(t *testing.T) {
	ks := kernels.VNNIFusedGoTwinKernels()
	if testing.Short() {
		ks = ks[:1]
	}
	for _, k := range ks {
		t.Run(k.Name, func(t *testing.T) { kernelstest.GEMM(t, k) })
	}
}
