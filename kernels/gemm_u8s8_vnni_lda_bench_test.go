package kernels

import (
	"fmt"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// BenchmarkVNNILda times BERT-large's FFN down-projection (M=256 N=1024
// K=4096, bias + residual -> f32, as the encoder runs it) on each VNNI tile
// with A's rows at stride lda=K (4096 bytes: the rows of a tile fall in the
// same L1 sets) and at a padded stride lda=K+64. Fresh operands per
// sub-benchmark; run the binary several times, since the aliasing's cost
// changes from process to process:
//
//	taskset -c 1 go test -run '^$' -bench 'VNNILda' -benchtime 200x ./kernels
func BenchmarkVNNILda(b *testing.B) {
	if !vnniAvailable(cpu.X86) {
		b.Skipf("the VNNI assembly is not available here (asm build %v): %s", vnniAsm, cpu.X86)
	}
	const m, k, n = 256, 4096, 1024
	for _, t := range vnniTiles {
		mr, nr := t[0], t[1]
		kn := newVNNIKernel(mr, nr)
		for _, pad := range []int{0, 64} {
			b.Run(fmt.Sprintf("k=%dx%d/lda=%d", mr, nr, k+pad), func(b *testing.B) {
				a0, p, cs, bias := vnniBenchOperands(b, m, k, n, nr)
				lda := k + pad
				a := make([]uint8, (m-1)*lda+k)
				for i := 0; i < m; i++ {
					copy(a[i*lda:i*lda+k], a0[i*k:(i+1)*k])
				}
				ep := &Epilogue{ZeroPoint: 128, ColSum: p.ColSum, ActScale: 1.0 / 128, ColScale: cs, Bias: bias,
					Residual: make([]float32, m*n)}
				out := Out{F32: make([]float32, m*n), Ldc: n}
				benchVNNIRun(b, kn, &GEMMU8S8{M: m, N: n, K: k, A: a, Lda: lda, B: p, Ep: ep, Out: out, Threads: 1})
			})
		}
	}
}
