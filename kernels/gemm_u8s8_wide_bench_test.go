package kernels

import (
	"fmt"
	"testing"

	"github.com/int8bert/int8bert/cpu"
)

// BenchmarkWideMicro calls the full-size int16 micro-kernels on one 16-
// column tile with A and B in L1 (k=256) and with B from L2 (k=3072): the
// ceiling of runAVX2WideU8S8 and runAVX512WideU8S8. Compare GOP/s with
// the VPMADDWD peaks of bench gemm (ymm, zmm).
func BenchmarkWideMicro(b *testing.B) {
	for _, c := range []struct {
		name string
		mr   int
		ok   bool
		run  func(a *int16, kp int, w *int16, c *int32)
	}{
		{"gemmAVX2w_6x16", 6, cpu.X86.AVX2, func(a *int16, kp int, w *int16, c *int32) {
			gemmAVX2w_6x8(a, kp, w, kp/4, c, 16)
			gemmAVX2w_6x8(a, kp, w, kp/4, c, 16)
		}},
		{fmt.Sprintf("gemmAVX512w_%dx16", avx512WideRows), avx512WideRows, cpu.X86.AVX512F && cpu.X86.AVX512BW, func(a *int16, kp int, w *int16, c *int32) {
			avx512WideMicros[avx512WideRows](a, kp, w, kp/4, c, 16)
		}},
	} {
		for _, k := range []int{256, 3072} {
			b.Run(fmt.Sprintf("%s/k=%d", c.name, k), func(b *testing.B) {
				if !c.ok && vnniAsm {
					b.Skipf("BenchmarkWideMicro/%s: this CPU lacks it (or it is disabled): %s", c.name, cpu.X86)
				}
				a := make([]int16, c.mr*k)
				w := make([]int16, 16*k)
				out := make([]int32, avx512WideRows*16)
				for b.Loop() {
					c.run(&a[0], k, &w[0], &out[0])
				}
				b.ReportMetric(2*float64(c.mr*16*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
			})
		}
	}
}
