package kernels

import (
	"fmt"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// BenchmarkVNNIRows times BERT-base's four linears with their encoder
// epilogues on the registered VNNI tiles at a batch-1 pass's rows (128)
// and at larger passes' (1024: 8 x 128 tokens; 4096: 32 x 128), one
// thread, so that GOP/s shows whether a large M keeps a small one's
// efficiency (the cache blocking over M). Run it pinned:
//
//	taskset -c 1 go test -run '^$' -bench VNNIRows -count 3 ./kernels
func BenchmarkVNNIRows(b *testing.B) {
	if !vnniAvailable(cpu.X86) {
		b.Skipf("the VNNI assembly is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	for _, sh := range []struct {
		name string
		k, n int
	}{
		{"QKV", 768, 2304},
		{"AttnOut", 768, 768},
		{"FFN1", 768, 3072},
		{"FFN2", 3072, 768},
	} {
		for _, tile := range vnniTiles[:3] {
			kn := newVNNIKernel(tile[0], tile[1])
			for _, m := range []int{128, 1024, 4096} {
				k, n := sh.k, sh.n
				a, p, cs, bias := vnniBenchOperands(b, m, k, n, kn.NR)
				ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias}
				out := Out{F32: make([]float32, m*n), Ldc: n}
				switch sh.name {
				case "FFN1":
					ep.Act, ep.OutScale, ep.OutZeroPoint = ActGELU, 0.03, 6
					out = Out{U8: make([]uint8, m*n), Ldc: n}
				case "AttnOut", "FFN2":
					ep.Residual = make([]float32, m*n)
				}
				b.Run(fmt.Sprintf("gemm=%s/kernel=%s/m=%d", sh.name, kn.Name, m), func(b *testing.B) {
					benchVNNIRun(b, kn, &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: k, B: p, Ep: ep, Out: out, Threads: 1})
				})
			}
		}
	}
}
